// The shipped validation suite is built only from real data in ../shared/data, and its
// published numbers are the source's own: every llm-foundry case against its CSV row.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "sim/strategies/load_experiment.hpp"
#include "validate/validate.hpp"

using namespace stepsim;

namespace {
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kData = STEPSIM_SHARED_DATA;

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
    if (c.trace) CHECK(c.trace->string().find("shared/data/traces/") != std::string::npos);
  }
  CHECK(per_source["li-plus"] == 4);
  CHECK(per_source["llm-foundry-a100"] == 164);
  CHECK(per_source["torchtitan-pr165"] == 4);
}

TEST_CASE("validation suite: every llm-foundry case carries its CSV row's throughput, batch and knobs", "[validate][data]") {
  validate::Suite suite = validate::load_suite(kSrc + "/validation/suite.json");
  std::ifstream csv(kData + "/published/llm-foundry-a100/throughput_a100.csv");
  REQUIRE(csv);
  std::string line;
  std::getline(csv, line);  // header
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line))
    if (!line.empty()) rows.push_back(split(line));
  REQUIRE(rows.size() == 164);
  std::size_t i = 0;
  for (const auto& c : suite.cases) {
    if (c.source != "llm-foundry-a100") continue;
    REQUIRE(i < rows.size());
    const auto& r = rows[i++];
    INFO(c.name);
    const auto& doc = suite.docs[c.doc].doc.at(nlohmann::json::json_pointer(c.json_path));
    const auto& e = doc["experiment"];
    CHECK(e["workload"]["preset"] == "mpt-" + r[1]);
    CHECK(e["workload"]["seq_len"] == std::stoll(r[2]));
    CHECK(e["cluster"]["nodes"].get<int>() * e["cluster"]["gpus_per_node"].get<int>() == std::stoi(r[3]));
    CHECK(e["workload"]["micro_batch"] == std::stoll(r[7]));
    CHECK(e["training"]["grad_accum"] == std::stoll(r[8]));
    CHECK(e["workload"]["activation_checkpointing"] == (r[17] == "True" ? "full" : "none"));
    CHECK(e["strategy"]["sharding"] == (r[16] == "FULL_SHARD" ? "full_shard" : "shard_grad_op"));
    CHECK(e["strategy"]["mixed_precision"]["reduce"] == (r[15] == "PURE" ? "bf16" : "fp32"));
    CHECK(e["cluster"]["profile"] == (r[4] == "a100_80gb" ? "configs/hardware/a100-sxm-8x.json"
                                                          : "configs/hardware/a100-sxm4-40gb-8x.json"));
    REQUIRE(c.published);
    CHECK(*c.published->tokens_per_s == std::stod(r[11]));
    CHECK(*c.published->global_batch_tokens == std::stod(r[13]));
    // The model the case builds has the row's parameter count (the preset is MPT as run).
    Experiment ex = experiment_from_json(e, suite.docs[c.doc].sources, nullptr, c.json_path + "/experiment");
    CHECK(ex.workload.numel() == std::stoll(r[19]));
  }
  CHECK(i == rows.size());
}
