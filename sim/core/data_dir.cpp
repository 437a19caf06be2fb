#include "sim/core/data_dir.hpp"

#include <cstdlib>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace stepsim {

namespace fs = std::filesystem;

namespace {

struct DataDirs {
  std::mutex mu;
  fs::path option, fallback;
};

DataDirs& dirs() {
  static DataDirs d;
  return d;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return !p.empty() && fs::is_directory(p, ec);
}

}  // namespace

void set_data_dir(const fs::path& dir) {
  if (!dir.empty() && !is_dir(dir))
    throw InputError(fmt::format("--data-dir: \"{}\": expected a directory (laid out as the repository: configs/, "
                                 "validation/, data/)",
                                 dir.string()));
  std::lock_guard lock(dirs().mu);
  dirs().option = dir;
}

void set_default_data_dir(const fs::path& dir) {
  std::lock_guard lock(dirs().mu);
  dirs().fallback = dir;
}

std::optional<fs::path> data_dir() {
  std::lock_guard lock(dirs().mu);
  if (!dirs().option.empty()) return dirs().option;
  if (const char* env = std::getenv("STEPSIM_DATA_DIR"); env && *env) return fs::path(env);
  if (is_dir(dirs().fallback)) return dirs().fallback;
  return std::nullopt;
}

std::string data_dir_origin() {
  std::lock_guard lock(dirs().mu);
  if (!dirs().option.empty()) return "--data-dir";
  if (const char* env = std::getenv("STEPSIM_DATA_DIR"); env && *env) return "STEPSIM_DATA_DIR";
  if (is_dir(dirs().fallback)) return "installed default";
  return "none";
}

fs::path resolve_input_path(const fs::path& name) {
  std::error_code ec;
  if (name.empty() || name.is_absolute() || fs::exists(name, ec)) return name;
  if (auto dir = data_dir()) {
    fs::path shipped = *dir / name;
    if (fs::exists(shipped, ec)) return shipped.lexically_normal();
  }
  return name;
}

}  // namespace stepsim
