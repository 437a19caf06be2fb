#include "sim/core/input_files.hpp"

#include <mutex>
#include <system_error>

namespace stepsim {

namespace fs = std::filesystem;

namespace {
std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::vector<fs::path>& files() {
  static std::vector<fs::path> v;
  return v;
}
}  // namespace

void note_input_file(const fs::path& file) {
  std::lock_guard lock(mu());
  for (const auto& f : files())
    if (f == file) return;
  files().push_back(file);
}

std::vector<fs::path> input_files() {
  std::lock_guard lock(mu());
  return files();
}

std::optional<fs::path> input_file_equivalent_to(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;  // a new file cannot be an input
  for (const auto& in : input_files()) {
    std::error_code e2;
    if (fs::equivalent(file, in, e2) && !e2) return in;
  }
  return std::nullopt;
}

}  // namespace stepsim
