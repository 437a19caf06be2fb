#pragma once
// Profiles loaded once per file and shared: a sweep builds thousands of experiments from one
// base, and parsing a fitted profile (a ~170 KB JSON with a measured GEMM table) costs ~4 ms,
// several times the simulation itself. Thread-safe; a file changed on disk is re-read.

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sim/hardware/profile.hpp"

namespace stepsim {

class ProfileCache {
 public:
  std::shared_ptr<const HardwareProfile> load(const std::filesystem::path& file);

 private:
  struct Entry {
    std::filesystem::file_time_type mtime;
    std::shared_ptr<const HardwareProfile> profile;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> by_path_;
};

}  // namespace stepsim
