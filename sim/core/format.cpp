#include "sim/core/format.hpp"

#include <fmt/format.h>

namespace stepsim {

std::string format_time(Time t) {
  if (t.ns >= 1'000'000'000) return fmt::format("{:.3f} s", t.seconds());
  if (t.ns >= 1'000'000) return fmt::format("{:.3f} ms", t.ms());
  if (t.ns >= 1'000) return fmt::format("{:.1f} us", t.us());
  return fmt::format("{} ns", t.ns);
}

std::string concat(std::span<const std::string_view> parts) {
  std::size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (std::string_view p : parts) out += p;
  return out;
}

std::string format_bytes(Bytes b) {
  if (b.count >= (1LL << 30)) return fmt::format("{:.2f} GiB", b.gib());
  if (b.count >= (1LL << 20)) return fmt::format("{:.1f} MiB", b.mib());
  if (b.count >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b.count) / 1024.0);
  return fmt::format("{} B", b.count);
}

}  // namespace stepsim
