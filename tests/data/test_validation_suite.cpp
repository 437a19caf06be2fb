// The shipped validation suite is built only from real data (data/, and published tables
// transcribed under data/published, each with its sources), and its published numbers are the
// source's own: every llm-foundry case against its CSV row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/strategies/load_experiment.hpp"
#include "validate/validate.hpp"

using namespace stepsim;

namespace {
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kData = STEPSIM_TEST_DATA;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) out.push_back(cell);
  return out;
}
}  // namespace

TEST_CASE("validation suite: the li-plus, llm-foundry and torchtitan cases are there, each with its source", "[validate][data]") {
  validate::Suite suite = validate::load_suite(kSrc + "/validation/suite.json");
  std::map<std::string, int> per_source;
  for (const auto& c : suite.cases) {
    ++per_source[c.source];
    CHECK_FALSE(c.provenance.repository.empty());
    CHECK_FALSE(c.provenance.commit.empty());
    CHECK_FALSE(c.provenance.path.empty());
    // Every trace is the repository's own copy (data/), never a file beside the checkout.
    if (c.trace) CHECK(c.trace->lexically_normal().string().rfind(std::string(STEPSIM_SOURCE_DIR) + "/data/traces/", 0) == 0);
  }
  CHECK(per_source["li-plus"] == 4);
  CHECK(per_source["llm-foundry-a100"] == 164);
  CHECK(per_source["llm-foundry-h100"] == 52);
  CHECK(per_source["torchtitan-h100-202412"] == 4);
  CHECK(per_source["torchtitan-pr165"] == 8);
}

namespace {

// One llm-foundry table: its cases against its CSV, cell by cell (by column name: the H100 table
// has one column more).
void check_llm_foundry_table(const validate::Suite& suite, const std::string& source, const std::string& csv_path,
                             std::size_t expected_rows) {
  std::ifstream csv(csv_path);
  REQUIRE(csv);
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> header = split(line);
  auto col = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<std::size_t>(it - header.begin());
  };
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line))
    if (!line.empty()) rows.push_back(split(line));
  REQUIRE(rows.size() == expected_rows);
  const std::map<std::string, std::string> profiles{{"a100_80gb", "configs/hardware/a100-sxm-8x.json"},
                                                    {"a100_40gb", "configs/hardware/a100-sxm4-40gb-8x.json"},
                                                    {"h100_80gb", "configs/hardware/h100-sxm-8x.json"}};
  std::size_t i = 0;
  for (const auto& c : suite.cases) {
    if (c.source != source) continue;
    REQUIRE(i < rows.size());
    const auto& r = rows[i++];
    INFO(c.name);
    const auto& doc = suite.docs[c.doc].doc.at(nlohmann::json::json_pointer(c.json_path));
    const auto& e = doc["experiment"];
    CHECK(e["workload"]["preset"] == "mpt-" + r[col("Model")]);
    CHECK(e["workload"]["seq_len"] == std::stoll(r[col("SeqLen (T)")]));
    CHECK(e["cluster"]["nodes"].get<int>() * e["cluster"]["gpus_per_node"].get<int>() == std::stoi(r[col("# GPUs")]));
    CHECK(e["workload"]["micro_batch"] == std::stoll(r[col("MicroBatchSize")]));
    CHECK(e["training"]["grad_accum"] == std::stoll(r[col("GradAccum")]));
    CHECK(e["workload"]["activation_checkpointing"] == (r[col("Activation Checkpointing")] == "True" ? "full" : "none"));
    CHECK(e["strategy"]["sharding"] == (r[col("Sharding Strategy")] == "FULL_SHARD" ? "full_shard" : "shard_grad_op"));
    CHECK(e["strategy"]["mixed_precision"]["reduce"] == (r[col("MP Mode")] == "PURE" ? "bf16" : "fp32"));
    CHECK(e["cluster"]["profile"] == profiles.at(r[col("GPU")]));
    REQUIRE(c.published);
    CHECK(*c.published->tokens_per_s == std::stod(r[col("Throughput (T/s)")]));
    CHECK(*c.published->global_batch_tokens == std::stod(r[col("GlobalBatchSize (T)")]));
    // The model the case builds has the row's parameter count (the preset is MPT as run).
    Experiment ex = experiment_from_json(e, suite.docs[c.doc].sources, nullptr, c.json_path + "/experiment");
    CHECK(ex.workload->numel() == std::stoll(r[col("NumParams")]));
  }
  CHECK(i == rows.size());
}

}  // namespace

TEST_CASE("validation suite: every llm-foundry case carries its CSV row's throughput, batch and knobs", "[validate][data]") {
  validate::Suite suite = validate::load_suite(kSrc + "/validation/suite.json");
  check_llm_foundry_table(suite, "llm-foundry-a100", kData + "/published/llm-foundry-a100/throughput_a100.csv", 164);
  check_llm_foundry_table(suite, "llm-foundry-h100", kSrc + "/data/published/llm-foundry-h100/throughput_h100.csv", 52);
}

TEST_CASE("validation suite: the torchtitan 2024-12 cases carry the transcribed table's numbers", "[validate][data]") {
  // data/published/torchtitan-llama3-h100-202412/README.md, Tables 1 and 3 (TPS/GPU, Memory).
  std::ifstream in(kSrc + "/data/published/torchtitan-llama3-h100-202412/README.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string t = text.str();
  const std::map<std::string, std::pair<double, double>> rows{
      {"torchtitan-2412-8b-fsdp-8gpu", {5762, 82.4}},
      {"torchtitan-2412-8b-fsdp-compile-8gpu", {6667, 77.0}},
      {"torchtitan-2412-8b-fsdp-128gpu", {5605, 67.0}},
      {"torchtitan-2412-8b-fsdp-compile-128gpu", {6514, 62.0}}};
  CHECK(t.find("| FSDP | 5,762 | 82.4 |") != std::string::npos);
  CHECK(t.find("| FSDP + torch.compile | 6,667 | 77.0 |") != std::string::npos);
  CHECK(t.find("| FSDP | 5,605 | 67.0 |") != std::string::npos);
  CHECK(t.find("| FSDP + torch.compile | 6,514 | 62.0 |") != std::string::npos);
  validate::Suite suite = validate::load_suite(kSrc + "/validation/suite.json");
  int seen = 0;
  for (const auto& c : suite.cases) {
    if (c.source != "torchtitan-h100-202412") continue;
    INFO(c.name);
    REQUIRE(rows.count(c.name));
    REQUIRE(c.published);
    REQUIRE(c.published->tokens_per_s_per_gpu_lo);
    CHECK(*c.published->tokens_per_s_per_gpu_lo == rows.at(c.name).first);
    CHECK(*c.published->tokens_per_s_per_gpu_hi == rows.at(c.name).first);
    REQUIRE(c.published->peak_reserved_gib);
    CHECK(*c.published->peak_reserved_gib == rows.at(c.name).second);
    ++seen;
  }
  CHECK(seen == 4);
}

TEST_CASE("torchtitan PR #165's torch.compile cases carry the PR's own numbers", "[validate][data]") {
  // Each compile row of data/published/torchtitan-pr165/README.md:
  // "| FSDP2 AC, buffer reuse enabled  | 28.90 GiB (30.40%) peak reserved | 7200-7500 WPS | 33% MFU |".
  std::ifstream readme(kData + "/published/torchtitan-pr165/README.md");
  REQUIRE(readme);
  std::map<std::string, std::smatch> rows;
  std::vector<std::string> lines;
  for (std::string line; std::getline(readme, line);) lines.push_back(line);
  const std::regex row(R"(^\| (FSDP2 [^|]*?) +\| ([0-9.]+) GiB \([0-9.]+%\) peak reserved \| ([0-9]+)(?:-([0-9]+))? WPS)");
  std::ifstream f(kSrc + "/validation/cases/torchtitan-pr165.json");
  const nlohmann::json doc = nlohmann::json::parse(f);
  int compiled = 0;
  for (const auto& c : doc["cases"]) {
    const std::string label = c["provenance"]["row"].get<std::string>();
    if (label.rfind("torch.compile: ", 0) != 0) continue;
    ++compiled;
    const std::string want = label.substr(15);
    bool found = false;
    for (const std::string& line : lines) {
      std::smatch m;
      if (!std::regex_search(line, m, row) || m[1].str() != want) continue;
      found = true;
      const auto& pub = c["measured"]["published"];
      CHECK(pub["peak_reserved_GiB"].get<double>() == Approx(std::stod(m[2].str())));
      const nlohmann::json& wps = pub["tokens_per_s_per_gpu"];
      const double lo = std::stod(m[3].str()), hi = m[4].matched ? std::stod(m[4].str()) : lo;
      CHECK((wps.is_array() ? wps[0].get<double>() : wps.get<double>()) == lo);
      CHECK((wps.is_array() ? wps[1].get<double>() : wps.get<double>()) == hi);
      CHECK(c["experiment"]["workload"]["compile"].get<bool>());
    }
    CHECK(found);
  }
  CHECK(compiled == 4);
}

// The shipped full_load_MHz values say they are `stepsim fit --suite`'s on the calibration split
// (the profiles' sources, docs/workload-ops.md). A model change that moves the fit rows moves that
// fit; this holds the shipped values to it, so the profiles never carry a stale fit (e2c10e4's two
// had drifted 9 and 2 MHz when 79a1636 refitted them). Refit with `stepsim fit --suite validation/suite.json --base
// PROFILE` and copy full_load_MHz.
TEST_CASE("validation suite: each shipped power-limited clock is fit --suite's value on the fit split", "[validate][data]") {
  const validate::Suite suite = validate::load_suite(kSrc + "/validation/suite.json");
  for (const char* file : {"h100-sxm-8x.json", "h100-sxm-96gb.json"}) {
    INFO(file);
    const HardwareProfile p = load_profile(kSrc + "/configs/hardware/" + file);
    REQUIRE(p.compute.clock.boost_mhz > 0);
    const validate::ClockFit f = validate::fit_clock(suite, p.name, p.compute.clock);
    CHECK(f.rows >= 3);
    CHECK(std::fabs(f.full_load_mhz - p.compute.clock.full_load_mhz) <= 2.0);
    CHECK(std::fabs(f.median_error_before) < 0.5);
  }
}
