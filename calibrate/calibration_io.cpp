#include "calibrate/calibration_io.hpp"

#include <fmt/format.h>

#include "calibrate/text_util.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"

namespace stepsim::calib {

using Json = nlohmann::json;

Json calibration_to_json(const CalibrationData& data) {
  Json colls = Json::array();
  for (const auto& s : data.collectives) {
    Json pts = Json::array();
    for (const auto& p : s.samples) pts.push_back(Json::array({p.bytes.count, p.time.us()}));
    colls.push_back({{"kind", to_string(s.kind)}, {"ranks", s.ranks}, {"nodes", s.nodes}, {"label", s.label}, {"points", pts}});
  }
  Json gemm = Json::array();
  for (const auto& g : data.gemm)
    gemm.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"batch", g.shape.batch},
                    {"dtype", to_string(g.shape.dtype)}, {"tflops", g.rate.tflops()}, {"spread_pct", g.spread_pct}});
  Json out{{"format", "stepsim-calibration-1"}, {"device", data.device}, {"collectives", colls}, {"gemm", gemm}};
  if (!data.timing.empty()) out["timing"] = data.timing;
  if (data.contention)
    out["contention"] = {{"gemm_alone_us", data.contention->gemm_alone.us()},
                         {"gemm_concurrent_us", data.contention->gemm_concurrent.us()},
                         {"comm_alone_us", data.contention->comm_alone.us()},
                         {"comm_concurrent_us", data.contention->comm_concurrent.us()}};
  return out;
}

namespace {
[[noreturn]] void bad(const std::string& source, const std::string& path, const Json& v, const std::string& what) {
  throw InputError(fmt::format("{}: {}: {}: expected {}", source, path, v.dump().substr(0, 80), what));
}
double num(const Json& o, const char* key, const std::string& source, const std::string& path, bool positive) {
  if (!o.contains(key)) bad(source, path + "/" + key, Json(), "a number (missing)");
  const Json& v = o.at(key);
  if (!v.is_number() || (positive && v.get<double>() <= 0)) bad(source, path + "/" + key, v, positive ? "a positive number" : "a number");
  return v.get<double>();
}

// One entry of "collectives" at `path`: kind, ranks, nodes and [bytes, time_us] points.
CollectiveSeries series_from_json(const Json& c, const std::string& source, const std::string& path) {
  CollectiveSeries s;
  s.source = source;
  s.label = c.value("label", "");
  try {
    s.kind = parse_collective_kind(c.value("kind", ""));
  } catch (const std::exception&) {
    bad(source, path + "/kind", c.value("kind", Json()), "a collective name such as all_reduce");
  }
  s.ranks = static_cast<int>(num(c, "ranks", source, path, true));
  s.nodes = static_cast<int>(num(c, "nodes", source, path, true));
  const Json& pts = c.value("points", Json::array());
  for (std::size_t j = 0; j < pts.size(); ++j) {
    const Json& p = pts[j];
    if (!p.is_array() || p.size() < 2 || !p[0].is_number() || !p[1].is_number() || p[0].get<double>() <= 0 ||
        p[1].get<double>() <= 0)
      bad(source, fmt::format("{}/points/{}", path, j), p, "[bytes, time_us] of positive numbers");
    s.samples.push_back({Bytes{p[0].get<std::int64_t>()}, Time::from_us(p[1].get<double>()), false, 0});
  }
  return s;
}

// One entry of "gemm" at `path`: the shape, its dtype and the measured rate.
GemmSample gemm_from_json(const Json& g, const std::string& source, const std::string& path) {
  GemmSample s;
  s.shape.m = static_cast<std::int64_t>(num(g, "m", source, path, true));
  s.shape.n = static_cast<std::int64_t>(num(g, "n", source, path, true));
  s.shape.k = static_cast<std::int64_t>(num(g, "k", source, path, true));
  s.shape.batch = static_cast<std::int64_t>(num(g, "batch", source, path, true));
  try {
    s.shape.dtype = parse_dtype(g.value("dtype", ""));
  } catch (const std::exception&) {
    bad(source, path + "/dtype", g.value("dtype", Json()), "a dtype (fp32, tf32, bf16, fp16, fp8)");
  }
  s.rate = FlopRate::from_tflops(num(g, "tflops", source, path, true));
  s.spread_pct = g.value("spread_pct", -1.0);
  s.source = source;
  return s;
}

// "contention" at `path`: a GEMM and a collective, each alone and concurrent.
ContentionSample contention_from_json(const Json& c, const std::string& source, const std::string& path) {
  ContentionSample s;
  s.gemm_alone = Time::from_us(num(c, "gemm_alone_us", source, path, true));
  s.gemm_concurrent = Time::from_us(num(c, "gemm_concurrent_us", source, path, true));
  s.comm_alone = Time::from_us(num(c, "comm_alone_us", source, path, true));
  s.comm_concurrent = Time::from_us(num(c, "comm_concurrent_us", source, path, true));
  s.source = source;
  return s;
}

}  // namespace

CalibrationData calibration_from_json(const Json& doc, const std::string& source) {
  const Json* cal = &doc;
  std::string base = "";
  if (doc.contains("provenance") && doc["provenance"].is_object() && doc["provenance"].contains("calibration")) {
    cal = &doc["provenance"]["calibration"];
    base = "/provenance/calibration";
  }
  if (!cal->is_object() || cal->value("format", "") != "stepsim-calibration-1")
    bad(source, base + "/format", cal->is_object() ? cal->value("format", Json()) : *cal,
        "\"stepsim-calibration-1\" (a file written by stepsim calibrate)");
  CalibrationData d;
  if (cal->contains("device")) d.device = cal->at("device");
  if (cal->contains("timing")) {
    if (!cal->at("timing").is_object()) bad(source, base + "/timing", cal->at("timing"), "an object");
    d.timing = cal->at("timing");
  }
  if (cal->contains("collectives")) {
    const Json& arr = cal->at("collectives");
    for (std::size_t i = 0; i < arr.size(); ++i)
      d.collectives.push_back(series_from_json(arr[i], source, fmt::format("{}/collectives/{}", base, i)));
  }
  if (cal->contains("gemm")) {
    const Json& arr = cal->at("gemm");
    for (std::size_t i = 0; i < arr.size(); ++i) d.gemm.push_back(gemm_from_json(arr[i], source, fmt::format("{}/gemm/{}", base, i)));
  }
  if (cal->contains("contention")) d.contention = contention_from_json(cal->at("contention"), source, base + "/contention");
  return d;
}

CalibrationData import_calibration(const std::filesystem::path& file) {
  std::string text = read_text_file(file);
  // The one bounded parse of every JSON input (depth, size, duplicate keys: docs/limits.md).
  const Json doc = parse_json_text(text, file.string());
  return calibration_from_json(doc, file.string());
}

}  // namespace stepsim::calib
