#include "sim/hardware/profile_cache.hpp"

namespace stepsim {

std::shared_ptr<const HardwareProfile> ProfileCache::load(const std::filesystem::path& file) {
  std::string key = std::filesystem::weakly_canonical(file).string();
  auto mtime = std::filesystem::last_write_time(file);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_path_.find(key);
    if (it != by_path_.end() && it->second.mtime == mtime) return it->second.profile;
  }
  // Parse outside the lock; two threads may parse the same file once each, harmlessly.
  auto profile = load_shared_profile(file);
  std::lock_guard<std::mutex> lock(mutex_);
  by_path_[key] = Entry{mtime, profile};
  return profile;
}

std::shared_ptr<const HardwareProfile> ProfileCache::inline_profile(const std::string& key,
                                                                  const std::function<HardwareProfile()>& parse) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = inline_.find(key); it != inline_.end()) return it->second;
  }
  auto profile = std::make_shared<const HardwareProfile>(parse());  // outside the lock, as load()
  std::lock_guard<std::mutex> lock(mutex_);
  if (inline_.size() < kInlineCapacity) inline_.emplace(key, profile);
  return profile;
}

}  // namespace stepsim
