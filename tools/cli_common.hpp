#pragma once
// Helpers shared by the subcommands: option parsing with Boost.Program_options that turns
// its errors into InputError (exit 2), and `--help` text.

#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "tools/commands.hpp"

namespace stepsim::cli {

namespace po = boost::program_options;

// Parses `args` against `visible` (+ positional names); returns false if --help was given
// (after printing `usage` and the options). Throws InputError on a bad flag.
bool parse_args(const Args& args, const std::string& usage, po::options_description& visible,
                const po::positional_options_description& positional, po::variables_map& vm);

// Opens `file` for writing; InputError "FILE: cannot write the WHAT" when it cannot.
std::ofstream open_output(const std::string& file, const std::string& what, std::ios::openmode mode = std::ios::out);

// Writes `text` to `file`, or to stdout when `file` is empty; "wrote FILE" goes to `log`.
void write_output(const std::string& text, const std::string& file, const std::string& what, std::ostream& log);

// Runs a subcommand body with the CLI's error mapping: InputError -> "error: ..." and exit 2,
// DeadlockError -> exit 1, any other exception -> "internal error: ..." and exit 1.
int run_guarded(const std::function<int()>& body);

// The GPU half of `calibrate` and `live` is a second executable, `stepsim-gpu`, next to this
// one: only it links CUDA, cuBLASLt, NCCL and MPI, so every other subcommand starts without
// loading them (~0.1 s and ~200 MB of resident shared-library pages). After the caller has
// validated its arguments, this replaces the process with `stepsim-gpu <command> <args>`
// (execv: same PID and environment, so mpirun/srun launches are unaffected). Returns 2 with a
// one-line message when this build has no stepsim-gpu (configured without the CUDA Toolkit).
// STEPSIM_GPU_BINARY, when set, names the executable instead (the emulated-GPU tests use it).
int exec_gpu_binary(const std::string& command, const Args& args);

}  // namespace stepsim::cli
