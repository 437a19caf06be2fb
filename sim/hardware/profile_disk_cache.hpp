#pragma once
// Parsed hardware profiles kept on disk between processes (issue 49 item 3). Loading the
// measured H100 profile (133 KB of JSON with a 759-entry GEMM table) was 54-69 % of the
// instructions of one `stepsim simulate` process: reading the text, walking includes and
// reading each number through its declared key. A cache entry holds the HardwareProfile in a
// compact binary form, keyed by the profile's file name as given and checked against the
// content of every file it was read from:
//   - the profile file and each include (recursively): size and a 64-bit content hash;
//   - each include's name still resolves to the same file (resolve_config_path: the including
//     file's folder, the working directory, the data directory);
//   - the entry's own format version, the build's struct layout, and a hash of its payload.
// Anything that does not match, or an entry cut short or corrupt, is a miss: the profile is
// parsed from its JSON as before (and the entry rewritten). A profile that does not parse
// is never cached, so its error is the same whether or not a cache exists.
//
// Where: $STEPSIM_CACHE_DIR; else $XDG_CACHE_HOME/stepsim; else $HOME/.cache/stepsim.
// STEPSIM_CACHE_DIR set to an empty string turns the cache off. Entries are written to a
// temporary file and renamed into place, so concurrent processes (ctest -j, sweeps) never read
// a half-written entry; a folder that cannot be written only costs the parse.

#include <filesystem>
#include <optional>
#include <string>

#include "sim/core/json_reader.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim {

// The cache folder, or none (turned off, or no HOME).
std::optional<std::filesystem::path> profile_cache_dir();

// The compact form of a profile and back (exposed for tests). decode returns nothing for bytes
// that are not a whole, intact encoding of this build's HardwareProfile.
std::string encode_profile(const HardwareProfile& p);
std::optional<HardwareProfile> decode_profile(std::string_view bytes);

// The profile in `file` from the cache entry in `dir`, if the entry matches the files (and
// notes each file as an input, as parsing would); nothing otherwise.
// With `read`, the files it was read from (the profile, then its includes) are appended.
std::optional<HardwareProfile> read_cached_profile(const std::filesystem::path& dir, const std::filesystem::path& file,
                                                   std::vector<std::filesystem::path>* read = nullptr);
// Writes the entry for `p`, parsed from `file` with `sources` (its includes). Best effort:
// returns false, and leaves no partial entry, when the folder cannot be written or a file
// changed while it was parsed.
bool write_cached_profile(const std::filesystem::path& dir, const std::filesystem::path& file, const SourceMap& sources,
                          const HardwareProfile& p, std::uint64_t parsed_hash, std::uint64_t parsed_size);

// The whole content of a regular file, or nothing (missing, not a regular file, unreadable).
std::optional<std::string> read_regular_file(const std::filesystem::path& file);

// The 64-bit hash the cache keys contents by (change detection, not cryptographic).
std::uint64_t content_hash(std::string_view bytes);

}  // namespace stepsim
