#pragma once
// Profiles loaded once per file and shared: a sweep builds thousands of experiments from one
// base, and parsing a fitted profile (a ~170 KB JSON with a measured GEMM table) costs ~4 ms,
// several times the simulation itself. Thread-safe; a file changed on disk is re-read.

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sim/hardware/profile.hpp"

namespace stepsim {

class ProfileCache {
 public:
  std::shared_ptr<const HardwareProfile> load(const std::filesystem::path& file);
  // A profile written inline in an experiment (an object, its includes merged), parsed by
  // `parse` once per distinct `key` (the object's JSON text and the file it is read from) and
  // shared: a sweep whose base writes its profile inline parsed it at every point, more than the
  // point's simulation (issue 49). At most kInlineCapacity are kept; past that each is parsed
  // and not kept. An object that fails to parse is never kept (its error is raised each time).
  std::shared_ptr<const HardwareProfile> inline_profile(const std::string& key, const std::function<HardwareProfile()>& parse);

 private:
  static constexpr std::size_t kInlineCapacity = 64;
  std::map<std::string, std::shared_ptr<const HardwareProfile>> inline_;
  struct Entry {
    std::filesystem::file_time_type mtime;
    std::shared_ptr<const HardwareProfile> profile;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> by_path_;
};

}  // namespace stepsim
