#include "tools/cli_common.hpp"

#include <fcntl.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <mutex>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_files.hpp"

namespace stepsim::cli {

namespace {

bool is_positional(const po::positional_options_description& positional, const std::string& name) {
  const unsigned n = positional.max_total_count();
  // max_total_count() is UINT_MAX for a trailing "-1" (any number): its name repeats.
  for (unsigned i = 0; i < n && i < 64; ++i)
    if (positional.name_for_position(i) == name) return true;
  return false;
}

// The option name boost reports ("--experiment", "experiment", "-j") without dashes.
std::string bare(std::string name) {
  while (!name.empty() && name.front() == '-') name.erase(0, 1);
  return name;
}

// What the user calls a positional argument: its description ("experiment JSON"), never the
// internal option name it is stored under.
std::string argument_words(const po::options_description& visible, const std::string& name) {
  const po::option_description* d = visible.find_nothrow(name, false);
  return d && !d->description().empty() ? d->description() : name;
}

// ---- outputs claimed by this run ----

struct Claim {
  std::filesystem::path path;  // absolute, normalized
  std::string file, what;
};

std::mutex& claims_mu() {
  static std::mutex m;
  return m;
}
std::vector<Claim>& claims() {
  static std::vector<Claim> v;
  return v;
}

// Refuses `file` when another output of this run names the same file; else records it.
void claim_output(const std::string& file, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Devices and pipes (/dev/null, /dev/stdout) take any number of writers: not claimed.
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec)) return;
  fs::path abs = fs::weakly_canonical(fs::absolute(file, ec), ec);
  if (ec) abs = fs::absolute(file).lexically_normal();
  std::lock_guard lock(claims_mu());
  for (const Claim& c : claims()) {
    std::error_code e2;
    if (c.path == abs || (fs::exists(c.path, e2) && fs::exists(abs, e2) && fs::equivalent(c.path, abs, e2) && !e2))
      throw InputError(fmt::format("{}: is also the {} of this run ({}): expected a different file for the {}", file, c.what,
                                   c.file, what));
  }
  claims().push_back({abs, file, what});
}

// ---- temporaries removed on a signal ----
// A fixed table the handler can read without locks or allocation (async-signal-safe: it only
// reads the slots and calls unlink, signal and raise).
constexpr int kTempSlots = 64;
constexpr std::size_t kTempPathMax = 4096;
char g_temp_paths[kTempSlots][kTempPathMax];
char g_temp_keep[kTempSlots][kTempPathMax];     // "": remove; else rename to this path
char g_temp_message[kTempSlots][kTempPathMax];  // written to stderr when kept
std::atomic<bool> g_temp_used[kTempSlots];
std::mutex& temp_slots_mu() {
  static std::mutex m;
  return m;
}

int register_temporary(const std::string& path) {
  if (path.size() >= kTempPathMax) return -1;
  std::lock_guard lock(temp_slots_mu());
  for (int i = 0; i < kTempSlots; ++i)
    if (!g_temp_used[i].load()) {
      std::memcpy(g_temp_paths[i], path.c_str(), path.size() + 1);
      g_temp_keep[i][0] = '\0';
      g_temp_message[i][0] = '\0';
      g_temp_used[i].store(true);
      return i;
    }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_temp_used[slot].store(false);
}

extern "C" void remove_temporaries_and_die(int sig) {
  for (int i = 0; i < kTempSlots; ++i) {
    if (!g_temp_used[i].load()) continue;
    if (g_temp_keep[i][0] != '\0' && ::rename(g_temp_paths[i], g_temp_keep[i]) == 0) {
      const ssize_t ignored = ::write(STDERR_FILENO, g_temp_message[i], std::strlen(g_temp_message[i]));
      (void)ignored;
    } else {
      ::unlink(g_temp_paths[i]);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void reset_output_claims() {
  std::lock_guard lock(claims_mu());
  claims().clear();
}

void remove_temporaries_on_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A signal the caller ignores (nohup: SIGHUP) stays ignored.
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_temporaries_and_die;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

void check_stdout() {
  errno = 0;
  std::cout.flush();
  int err = errno;
  const bool flushed = std::fflush(stdout) == 0;
  if (err == 0) err = errno;
  if (!flushed || !std::cout || std::ferror(stdout)) {
    std::clearerr(stdout);
    std::cout.clear();
    throw InputError(fmt::format("cannot write the standard output ({})", err ? std::strerror(err) : "write error"));
  }
}

std::size_t top_rows(int top) {
  if (top < 0 || top > 1000000) throw InputError(fmt::format("--top {}: expected a count from 0 to 1000000", top));
  return static_cast<std::size_t>(top);
}

std::int64_t integer_option(const std::string& name, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value < lo || value > hi) throw InputError(fmt::format("--{} {}: expected an integer from {} to {}", name, value, lo, hi));
  return value;
}

bool parse_args(const Args& args, const std::string& usage, po::options_description& visible,
                const po::positional_options_description& positional, po::variables_map& vm) {
  visible.add_options()("help,h", "show this help");
  // The first line of the usage ("usage: stepsim simulate EXP.json ...") names the arguments.
  const std::string usage_line = usage.substr(0, usage.find('\n'));
  try {
    po::store(po::command_line_parser(args).options(visible).positional(positional).run(), vm);
    if (vm.count("help")) {
      // Positional arguments are shown by the usage line, not as --options they are stored under.
      // (boost keeps the caption private: "usage: stepsim simulate ..." gives "simulate options".)
      std::istringstream words(usage_line);
      std::string usage_word, program, command;
      words >> usage_word >> program >> command;
      po::options_description shown(command.empty() ? std::string("options") : command + " options");
      for (const auto& o : visible.options())
        if (!is_positional(positional, o->long_name())) shown.add(o);
      std::cout << usage << "\n\n" << shown << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::required_option& e) {
    const std::string name = bare(e.get_option_name());
    if (is_positional(positional, name))
      throw InputError(fmt::format("missing argument: expected the {} ({})", argument_words(visible, name), usage_line));
    throw InputError(fmt::format("missing option --{}: expected {} ({})", name, argument_words(visible, name), usage_line));
  } catch (const po::too_many_positional_options_error&) {
    throw InputError(fmt::format("too many arguments ({})", usage_line));
  } catch (const po::error_with_option_name& e) {
    // Errors about a positional argument name it by what it is, not by its internal option.
    const std::string name = bare(e.get_option_name());
    std::string what = e.what();
    if (!name.empty() && is_positional(positional, name))
      for (const std::string& form : {"'--" + name + "'", "'" + name + "'", "--" + name})
        for (std::size_t at = what.find(form); at != std::string::npos; at = what.find(form))
          what.replace(at, form.size(), "the " + argument_words(visible, name));
    throw InputError(what + " (see --help)");
  } catch (const po::error& e) {
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  return true;
}

void check_not_an_input(const std::string& file, const std::string& what) {
  if (auto in = input_file_equivalent_to(file))
    throw InputError(fmt::format("{}: is an input of this run ({}): expected a different file for the {}", file,
                                 in->string(), what));
}

OutputFile::OutputFile(std::string file, std::string what, std::ios::openmode mode)
    : file_(std::move(file)), what_(std::move(what)) {
  namespace fs = std::filesystem;
  check_not_an_input(file_, what_);
  claim_output(file_, what_);
  std::error_code ec;
  if (fs::is_directory(file_, ec)) throw InputError(fmt::format("{}: is a directory: expected a file for the {}", file_, what_));
  // A device or pipe (/dev/stdout, a FIFO) cannot be replaced by a rename: written directly.
  if (fs::exists(file_, ec) && !fs::is_regular_file(file_, ec)) {
    out_.open(file_, mode | std::ios::out);
    if (!out_) throw InputError(fmt::format("{}: cannot write the {}", file_, what_));
    return;
  }
  // A fresh name beside the target (O_EXCL): permissions follow the umask like a plain open.
  static std::atomic<unsigned> counter{0};
  const fs::path target(file_);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  int err = 0;
  for (int attempt = 0; attempt < 100 && temp_.empty(); ++attempt) {
    std::string name = fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(), counter++);
    std::string candidate = (dir / name).string();
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      temp_ = candidate;
      temp_slot_ = register_temporary(temp_);
    } else if ((err = errno) != EEXIST) {
      break;
    }
  }
  if (temp_.empty()) throw InputError(fmt::format("{}: cannot write the {} ({})", file_, what_, std::strerror(err)));
  out_.open(temp_, mode | std::ios::out | std::ios::trunc);
  if (!out_) {
    discard();
    throw InputError(fmt::format("{}: cannot write the {}", file_, what_));
  }
}

void OutputFile::keep_on_signal_as(const std::string& partial) {
  const std::string message =
      fmt::format("\nstepsim: interrupted: the rows written so far are in {} (the same command with --resume continues)\n",
                  partial);
  if (temp_slot_ < 0 || partial.size() >= kTempPathMax || message.size() >= kTempPathMax) return;
  g_temp_used[temp_slot_].store(false);  // the handler reads a slot only while it is in use
  std::memcpy(g_temp_keep[temp_slot_], partial.c_str(), partial.size() + 1);
  std::memcpy(g_temp_message[temp_slot_], message.c_str(), message.size() + 1);
  g_temp_used[temp_slot_].store(true);
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : file_(std::move(o.file_)), what_(std::move(o.what_)), temp_(std::move(o.temp_)), out_(std::move(o.out_)),
      temp_slot_(o.temp_slot_) {
  o.temp_.clear();
  o.temp_slot_ = -1;
}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    discard();
    file_ = std::move(o.file_);
    what_ = std::move(o.what_);
    temp_ = std::move(o.temp_);
    out_ = std::move(o.out_);
    temp_slot_ = o.temp_slot_;
    o.temp_.clear();
    o.temp_slot_ = -1;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
  if (out_.is_open()) out_.close();
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  unregister_temporary(temp_slot_);
  temp_slot_ = -1;
}

void OutputFile::commit() {
  if (temp_.empty()) {  // written directly (a device or pipe), or already committed
    if (out_.is_open()) {
      out_.flush();
      const bool ok = static_cast<bool>(out_);
      out_.close();
      if (!ok) throw InputError(fmt::format("{}: cannot write the {}", file_, what_));
    }
    return;
  }
  out_.flush();
  const bool written = static_cast<bool>(out_);
  out_.close();
  int err = EIO;
  if (written && !out_.fail()) {
    if (::rename(temp_.c_str(), file_.c_str()) == 0) {
      temp_.clear();
      unregister_temporary(temp_slot_);
      temp_slot_ = -1;
      return;
    }
    err = errno;
  }
  discard();
  throw InputError(fmt::format("{}: cannot write the {} ({})", file_, what_, std::strerror(err)));
}

OutputFile open_output(const std::string& file, const std::string& what, std::ios::openmode mode) {
  return OutputFile(file, what, mode);
}

void write_output(const std::string& text, const std::string& file, const std::string& what, std::ostream& log) {
  if (file.empty()) {
    std::cout << text;
    return;
  }
  OutputFile out = open_output(file, what);
  out << text;
  out.commit();
  log << "wrote " << file << "\n";
}

int run_guarded(const std::function<int()>& body) {
  try {
    const int code = body();
    check_stdout();  // a printed result that never arrived is a failure, whatever the body said
    return code;
  } catch (const InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const DeadlockError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
}

int exec_gpu_binary(const std::string& command, const Args& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = executable_path();
  if (self.empty()) ec = std::make_error_code(std::errc::no_such_file_or_directory);
  fs::path gpu = self.parent_path() / "stepsim-gpu";
  // An install that keeps it elsewhere (and the emulated-GPU tests) name it explicitly.
  if (const char* env = std::getenv("STEPSIM_GPU_BINARY"); env && *env) gpu = env;
  if (ec || !fs::exists(gpu, ec)) {
    std::cerr << fmt::format("no CUDA device present: {} needs a GPU (this stepsim was built without CUDA: {} does "
                             "not exist)\n",
                             command, gpu.string());
    return 2;
  }
  std::vector<std::string> owned;
  owned.reserve(args.size() + 2);
  owned.push_back(gpu.string());
  if (data_dir_origin() == "--data-dir") {  // taken off the line by take_data_dir_option: pass it on
    owned.push_back("--data-dir");
    owned.push_back(data_dir()->string());
  }
  owned.push_back(command);
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  ::execv(argv[0], argv.data());
  // Only reached when exec failed.
  throw std::runtime_error(fmt::format("cannot run {}: {}", gpu.string(), std::strerror(errno)));
}

std::filesystem::path executable_path() {
  namespace fs = std::filesystem;
#if defined(__APPLE__)
  char buf[4096];
  std::uint32_t size = sizeof buf;
  if (_NSGetExecutablePath(buf, &size) != 0) return {};
  std::error_code ec;
  fs::path p = fs::canonical(buf, ec);
  return ec ? fs::path(buf) : p;
#else
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p;
#endif
}

Args take_data_dir_option(const Args& args) {
  namespace fs = std::filesystem;
  if (fs::path exe = executable_path(); !exe.empty()) set_default_data_dir((exe.parent_path() / STEPSIM_DATA_FROM_BIN).lexically_normal());
  Args rest;
  rest.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--data-dir") {
      if (i + 1 >= args.size()) throw InputError("--data-dir: expected a directory after it");
      set_data_dir(args[++i]);
    } else if (a.rfind("--data-dir=", 0) == 0) {
      set_data_dir(a.substr(11));
    } else {
      rest.push_back(a);
    }
  }
  return rest;
}

}  // namespace stepsim::cli
