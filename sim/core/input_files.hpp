#pragma once
// The files this process has read as input (configs, includes, profiles, logs, traces, CSVs).
// The CLI refuses an output path that names one of them (compared by file identity), so a run
// can never overwrite what it reads.

#include <filesystem>
#include <optional>
#include <vector>

namespace stepsim {

// Records `file` as an input of this process (thread-safe; duplicates are harmless).
void note_input_file(const std::filesystem::path& file);

// Every file recorded so far.
std::vector<std::filesystem::path> input_files();

// The recorded input that is the same file as `file` (std::filesystem::equivalent: same
// device and inode, so a different spelling, a symlink or a hard link is caught), if any.
std::optional<std::filesystem::path> input_file_equivalent_to(const std::filesystem::path& file);

}  // namespace stepsim
