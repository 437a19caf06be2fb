#include "sim/exec/timeline.hpp"

#include <fmt/format.h>

namespace stepsim {

std::string host_label(const Timeline& t, const HostInterval& h) {
  using L = HostInterval::Label;
  // A stream's name, or "#" and its index when the program did not declare it (describe()).
  auto stream = [&](std::int64_t s) {
    const auto i = static_cast<std::size_t>(s);
    return i < t.streams.size() ? std::string(t.streams[i].name) : fmt::format("#{}", s);
  };
  const std::int64_t high = static_cast<std::int64_t>(static_cast<std::uint64_t>(h.arg) >> 32);
  const std::int64_t low = h.arg & 0xffffffff;
  switch (h.label) {
    case L::Text: return std::string(h.name);
    case L::Launch: return fmt::format("launch {}", h.name.view());
    case L::Collective: return fmt::format("issue {}", h.name.view());
    case L::Record: return fmt::format("Record event {} on {}", high, stream(low));
    case L::Wait: return fmt::format("Wait {} on event {}", stream(low), high);
    case L::HostSyncEvent: return fmt::format("HostSync on event {} ({})", h.arg, h.name.view());
    case L::HostSyncStream: return fmt::format("HostSync on stream {} ({})", stream(h.arg), h.name.view());
    case L::Alloc: return fmt::format("Alloc '{}' {} B", h.name.view(), h.arg);
    case L::Free: return fmt::format("Free '{}'", h.name.view());
    case L::FreeUnnamed: return fmt::format("Free '{}'", h.arg);
    case L::Mark: return fmt::format("Mark '{}'", h.name.view());
  }
  return std::string(h.name);
}

}  // namespace stepsim
