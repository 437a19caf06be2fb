#include "sim/explore/noise.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "sim/core/data_dir.hpp"

namespace stepsim {

namespace fs = std::filesystem;

std::string gpu_class(const std::string& profile) {
  const std::string name = fs::path(profile).filename().string();
  if (name.size() < 2 || !std::isalpha(static_cast<unsigned char>(name[0])) || !std::isdigit(static_cast<unsigned char>(name[1])))
    return "";
  return std::string(1, static_cast<char>(std::tolower(static_cast<unsigned char>(name[0]))));
}

namespace {

std::optional<nlohmann::json> read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The cluster profile and framework of a case's experiment, following one "include".
std::pair<std::string, std::string> case_shape(const nlohmann::json& exp, const fs::path& dir) {
  nlohmann::json e = exp;
  if (e.is_object() && e.contains("include") && e["include"].is_string()) {
    if (auto inc = read_json(dir / e["include"].get<std::string>()); inc && inc->is_object()) {
      for (auto it = e.begin(); it != e.end(); ++it) (*inc)[it.key()] = it.value();
      e = *inc;
    }
  }
  std::string profile, framework;
  if (e.is_object() && e.contains("cluster") && e["cluster"].is_object()) profile = e["cluster"].value("profile", "");
  if (e.is_object() && e.contains("strategy") && e["strategy"].is_object()) framework = e["strategy"].value("framework", "");
  return {profile, framework};
}

}  // namespace

nlohmann::json scale_fidelity_json(const ScaleFidelity& f) {
  auto round2 = [](double v) { return std::round(v * 100) / 100; };
  return {{"gpu_pairs", f.pairs},
          {"gpus", {f.min_gpus, f.max_gpus}},
          {"measured_pct_per_doubling", round2(f.measured_pct)},
          {"predicted_pct_per_doubling", round2(f.predicted_pct)},
          {"gap_points_per_doubling", round2(f.gap_points)}};
}

std::optional<ScaleFidelity> scale_fidelity_from_json(const nlohmann::json& s) {
  const char* numbers[] = {"measured_pct_per_doubling", "predicted_pct_per_doubling", "gap_points_per_doubling"};
  bool ok = s.is_object() && s.contains("gpu_pairs") && s["gpu_pairs"].is_number_integer() && s.contains("gpus") &&
            s["gpus"].is_array() && s["gpus"].size() == 2 && s["gpus"][0].is_number_integer() && s["gpus"][1].is_number_integer();
  for (const char* k : numbers) ok = ok && s.contains(k) && s[k].is_number();
  if (!ok) return std::nullopt;
  return ScaleFidelity{s["gpu_pairs"].get<int>(), s["gpus"][0].get<int>(), s["gpus"][1].get<int>(),
                       s[numbers[0]].get<double>(), s[numbers[1]].get<double>(), s[numbers[2]].get<double>()};
}

std::optional<ScaleFidelity> scale_fidelity() {
  const auto baseline = read_json(resolve_input_path("validation/suite.json").parent_path() / "baseline.json");
  if (!baseline || !baseline->is_object() || !baseline->contains("scale")) return std::nullopt;
  return scale_fidelity_from_json((*baseline)["scale"]);  // `validate --baseline` refuses a bad one, naming it
}

NoiseFloor noise_floor(const std::string& profile, const std::string& framework) {
  NoiseFloor out;
  const std::string gpu = gpu_class(profile);
  if (gpu.empty()) return out;  // a toy or unnamed profile: no real run is close to it
  const fs::path suite_path = resolve_input_path("validation/suite.json");
  const auto suite = read_json(suite_path);
  const auto baseline = read_json(suite_path.parent_path() / "baseline.json");
  if (!suite || !baseline || !suite->contains("case_files") || !baseline->contains("summaries")) return out;
  std::map<std::string, double> error;  // source -> step-time median |error| of its test rows, %
  for (const auto& s : (*baseline)["summaries"])
    if (s.is_object() && s.value("metric", "") == "step_time" && s.value("split", "test") == "test" && s.contains("median_abs") &&
        s["median_abs"].is_number())
      error[s.value("source", "")] = s["median_abs"].get<double>();
  std::map<std::string, int> score;
  for (const auto& f : (*suite)["case_files"]) {
    if (!f.is_string()) continue;
    const fs::path file = suite_path.parent_path() / f.get<std::string>();
    const auto cases = read_json(file);
    if (!cases || !cases->contains("source") || !cases->contains("cases")) continue;
    const std::string source = (*cases)["source"].get<std::string>();
    if (!error.count(source)) continue;
    int best = 0;
    for (const auto& c : (*cases)["cases"]) {
      if (!c.is_object() || !c.contains("experiment")) continue;
      auto [p, fw] = case_shape(c["experiment"], file.parent_path());
      best = std::max(best, (gpu_class(p) == gpu ? 2 : 0) + (fw == framework ? 1 : 0));
    }
    score[source] = best;
  }
  int top = 0;
  for (const auto& [s, v] : score) top = std::max(top, v);
  if (top == 0) {
    if (error.count("all")) {
      out.pct = error["all"];
      out.sources = {"all"};
      out.closeness = "no source on the same GPU class or framework: the whole suite";
    }
    return out;
  }
  for (const auto& [s, v] : score)
    if (v == top) {
      out.sources.push_back(s);
      out.pct = std::max(out.pct, error[s]);
    }
  out.closeness = top == 3 ? "same GPU class and framework" : top == 2 ? "same GPU class" : "same framework";
  return out;
}

}  // namespace stepsim
