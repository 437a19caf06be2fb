#include "tools/cli_common.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace stepsim::cli {

bool parse_args(const Args& args, const std::string& usage, po::options_description& visible,
                const po::positional_options_description& positional, po::variables_map& vm) {
  visible.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(visible).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << visible << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  return true;
}

std::ofstream open_output(const std::string& file, const std::string& what, std::ios::openmode mode) {
  std::ofstream out(file, mode);
  if (!out) throw InputError(file + ": cannot write the " + what);
  return out;
}

void write_output(const std::string& text, const std::string& file, const std::string& what, std::ostream& log) {
  if (file.empty()) {
    std::cout << text;
    return;
  }
  open_output(file, what) << text;
  log << "wrote " << file << "\n";
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
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
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
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

}  // namespace stepsim::cli
