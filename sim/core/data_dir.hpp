#pragma once
// The data directory: where a stepsim that is not run from its repository finds the files it
// ships. It is laid out as the repository's root is (configs/ for profiles, models and examples,
// validation/ for the suite, data/ for the ground truth the suite reads), so the repository
// itself is one, and `cmake --install` makes one at <prefix>/share/stepsim.
//
// Which directory, first that is set: the CLI's --data-dir (set_data_dir), $STEPSIM_DATA_DIR,
// then the default the executable derives from where it is installed (set_default_data_dir).
// A relative name in a config resolves against the file that names it, then the working
// directory, then this directory (resolve_config_path); a name on the command line against the
// working directory, then this directory (resolve_input_path). Nothing is read from the tree the
// binary was built from.

#include <filesystem>
#include <optional>
#include <string>

namespace stepsim {

// The option's value (empty: unset). Throws InputError when it is not a directory.
void set_data_dir(const std::filesystem::path& dir);
// Where the executable expects its installed files (empty: none); used when neither the option
// nor the environment names a directory.
void set_default_data_dir(const std::filesystem::path& dir);

// The directory in force, if any (the option, $STEPSIM_DATA_DIR, or an existing default).
std::optional<std::filesystem::path> data_dir();

// A command-line file name: as given when it exists (or is absolute), else the data
// directory's file of that name when that exists, else as given (so its error names it).
std::filesystem::path resolve_input_path(const std::filesystem::path& name);

// Where the data directory's value came from, for messages: "--data-dir", "STEPSIM_DATA_DIR",
// "installed default", or "none".
std::string data_dir_origin();

}  // namespace stepsim
