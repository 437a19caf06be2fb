#include "sim/core/format.hpp"

#include <cctype>

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

std::vector<std::pair<std::size_t, std::size_t>> unit_number_runs(std::string_view name) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t k = 1; k < name.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(name[k])) || (name[k - 1] != '.' && name[k - 1] != ' ')) continue;
    std::size_t e = k;
    while (e < name.size() && std::isdigit(static_cast<unsigned char>(name[e]))) ++e;
    if (e - k <= 9 && (runs.empty() || name.substr(k, e - k) == name.substr(runs[0].first, runs[0].second - runs[0].first)))
      runs.emplace_back(k, e);
    k = e;
  }
  return runs;
}

std::string fold_unit_number(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  std::size_t at = 0;
  for (const auto& [b, e] : unit_number_runs(name)) {
    out.append(name.substr(at, b - at));
    out += '#';
    at = e;
  }
  out.append(name.substr(at));
  return out;
}

}  // namespace stepsim
