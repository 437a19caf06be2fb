#include "calibrate/importers/galvatron_hardware.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"

namespace stepsim::calib {

namespace {

const std::regex& key_re() {
  static const std::regex re(R"(^(allreduce|all2all)_size_(\d+)_(\d+)MB_time$)");
  return re;
}

// A decimal integer within [lo, hi], or nothing (too long for its type, or out of range).
template <class T>
std::optional<T> bounded(const std::string& digits, T lo, T hi) {
  T v{};
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// GPUs per node from Galvatron's file name (`..._<G>gpus_per_node.json`); 0 when absent.
int gpus_per_node_of(const std::string& source) {
  static const std::regex re(R"((\d+)gpus_per_node)");
  std::smatch m;
  return std::regex_search(source, m, re) ? bounded(m[1].str(), 1, 1000000).value_or(0) : 0;
}

}  // namespace

bool is_galvatron_sp_time(const std::string& text) {
  static const std::regex probe(R"(^\s*\{[^}]*"(allreduce|all2all)_size_\d+_\d+MB_time"\s*:)");
  return std::regex_search(text, probe);
}

std::vector<CollectiveSeries> parse_galvatron_sp_time(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);  // bounded: docs/limits.md
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object of Galvatron timings", source));
  const int gpn = gpus_per_node_of(source);
  std::map<std::pair<CollectiveKind, int>, CollectiveSeries> series;
  for (const auto& [key, value] : j.items()) {
    std::smatch m;
    if (!std::regex_match(key, m, key_re()))
      throw InputError(fmt::format("{}: /{}: not a Galvatron timing key (expected allreduce_size_<n>_<m>MB_time or "
                                   "all2all_size_<n>_<m>MB_time)",
                                   source, key));
    if (!value.is_number() || !(value.get<double>() > 0))
      throw InputError(fmt::format("{}: /{}: {}: expected a positive time in milliseconds", source, key, value.dump()));
    CollectiveKind kind = m[1].str() == "allreduce" ? CollectiveKind::AllReduce : CollectiveKind::AllToAll;
    const auto ranks_of = bounded(m[2].str(), 1, 1000000);
    const auto mib_of = bounded<long long>(m[3].str(), 1, 1LL << 24);
    if (!ranks_of || !mib_of)
      throw InputError(fmt::format("{}: /{}: expected a group of 1 to 1,000,000 ranks and a size of 1 MB to 16 TB", source, key));
    const int ranks = *ranks_of;
    const long long mib = *mib_of;
    auto& s = series[{kind, ranks}];
    if (s.samples.empty()) {
      s.source = source;
      s.label = fmt::format("Galvatron sp_time, {} ranks", ranks);
      s.kind = kind;
      s.ranks = ranks;
      s.nodes = gpn > 0 ? (ranks + gpn - 1) / gpn : 1;
    }
    // Galvatron keeps the out-of-place column (datas[5]) only.
    s.samples.push_back({Bytes{mib << 20}, Time::from_us(value.get<double>() * 1000.0), false, 0});
  }
  if (series.empty()) throw InputError(fmt::format("{}: no Galvatron timing keys found", source));
  std::vector<CollectiveSeries> out;
  for (auto& [k, s] : series) {
    std::sort(s.samples.begin(), s.samples.end(), [](const auto& a, const auto& b) { return a.bytes.count < b.bytes.count; });
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stepsim::calib
