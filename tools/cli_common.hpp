#pragma once
// Helpers shared by the subcommands: option parsing with Boost.Program_options that turns
// its errors into InputError (exit 2), and `--help` text.

#include <cstdint>
#include <filesystem>
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

// A `--top` row count: 0 to 1,000,000, else InputError naming the value.
std::size_t top_rows(int top);

// An integer option in [lo, hi], else InputError "--NAME V: expected an integer from LO to HI".
// Count options are read as signed integers and checked here: an unsigned option would take
// "-1" as 2^64-1.
std::int64_t integer_option(const std::string& name, std::int64_t value, std::int64_t lo, std::int64_t hi);

// An output file written in full or not at all: the text goes to a temporary file beside it
// (same directory, so the rename is atomic), and commit() renames it into place. Destroyed
// without commit() (an error, an exception), it removes the temporary and leaves `file` as it
// was. So a failed run never leaves a half-written, truncated or emptied file.
class OutputFile {
 public:
  OutputFile() = default;
  // Refuses (InputError) a `file` that is one of this process's inputs (by file identity:
  // note_input_file), a directory, or a place no file can be created.
  OutputFile(std::string file, std::string what, std::ios::openmode mode = std::ios::out);
  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  bool is_open() const { return out_.is_open(); }
  std::ostream& stream() { return out_; }
  template <class T>
  OutputFile& operator<<(const T& v) & {
    out_ << v;
    return *this;
  }
  // `open_output(f, w) << text` would write a temporary that is never committed (so never
  // appears): refused at compile time; name the OutputFile and commit() it.
  template <class T>
  OutputFile& operator<<(const T& v) && = delete;
  const std::string& file() const { return file_; }
  // On SIGINT/SIGTERM/SIGHUP, rename the temporary to `partial` (and say so on stderr) instead
  // of removing it: what a sweep wrote so far, for `sweep --resume`.
  void keep_on_signal_as(const std::string& partial);
  // Flushes, closes and renames into place; InputError "FILE: cannot write the WHAT" on failure.
  void commit();

 private:
  void discard() noexcept;
  std::string file_, what_, temp_;
  std::ofstream out_;
  int temp_slot_ = -1;  // the temporary's slot in the table a signal handler removes (-1: none)
};

// The outputs of one run are compared with each other as they are opened (OutputFile's
// constructor claims its file): a second output naming the same file (another spelling, a
// symlink, a hard link) is refused before anything is written. run() starts each command with
// no claims.
void reset_output_claims();

// While an OutputFile's temporary exists, SIGINT, SIGTERM and SIGHUP remove it before the
// process dies of the signal (installed by run(); idempotent).
void remove_temporaries_on_signal();

// Flushes stdout; InputError "cannot write the standard output (REASON)" when a write failed
// (a full disk, /dev/full, a closed pipe): a run whose printed result was lost is not exit 0.
void check_stdout();

// Opens `file` for writing as an OutputFile (see above); the caller commit()s it.
OutputFile open_output(const std::string& file, const std::string& what, std::ios::openmode mode = std::ios::out);

// Refuses (InputError) an output `file` that is one of this process's inputs.
void check_not_an_input(const std::string& file, const std::string& what);

// Writes `text` to `file` (through OutputFile), or to stdout when `file` is empty; "wrote
// FILE" goes to `log`.
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

// This process's executable (empty when the OS does not say).
std::filesystem::path executable_path();

// Takes `--data-dir DIR` (or `--data-dir=DIR`) out of `args`, wherever it stands, and sets it
// (sim/core/data_dir.hpp); sets the installed default first: <executable's folder>/../share/stepsim
// (GNUInstallDirs' bin and share, as the install rules place them). Returns the other arguments.
Args take_data_dir_option(const Args& args);

}  // namespace stepsim::cli
