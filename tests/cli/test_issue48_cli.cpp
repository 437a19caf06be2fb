// Issue 48 (a demanding newcomer's report on 97d6b31): the names and defaults a user of the
// frameworks expects, and the scope table the errors point to.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;
using stepsim::test::scratch_dir;
using stepsim::test::write_text;
namespace fs = std::filesystem;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kRepro = kSrc + "/tests/data/repro/";
const std::string kFsdp1 = kSrc + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json";

nlohmann::json simulate_json(const std::string& args) {
  std::string out;
  const int rc = run_capture(kBin + " simulate " + args + " --json", out);
  INFO(args << "\n" << out);
  REQUIRE(rc == 0);
  return nlohmann::json::parse(out);
}

// Runs `args`; expects exit 2 and one line holding every needle.
void expect_input_error(const std::string& args, std::initializer_list<std::string> needles) {
  std::string out;
  const int rc = run_capture(kBin + " " + args, out);
  INFO(args << "\n" << out);
  CHECK(rc == 2);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  for (const auto& n : needles) CHECK(out.find(n) != std::string::npos);
}
}  // namespace

TEST_CASE("A real HF config.json with a real HF-Trainer ZeRO-3 config resolves every \"auto\" as the Trainer does (issue 48 item 6)",
          "[cli][issue48]") {
  // hf-llama31-8b.config.json: hidden_size 4096; ds-hf-zero3-auto.ds_config.json: stage 3 with
  // the three hidden-size keys, the batch keys and the precision "auto" (tests/data/repro/SOURCES.txt).
  const auto j = simulate_json(kRepro + "r05-hfconfig-plus-ds-auto.json");
  const auto& s = j["strategy"];
  CHECK(s["stage"] == 3);
  CHECK(s["reduce_bucket_size"] == 4096LL * 4096);                       // hidden^2
  CHECK(s["stage3_prefetch_bucket_size"] == 15099494);                   // int(0.9 x 4096^2 = 15099494.4)
  CHECK(s["stage3_param_persistence_threshold"] == 10 * 4096);           // 10 x hidden
  CHECK(j["workload"]["training_loop"] == "hf_trainer");                 // "auto" is the Trainer's
  CHECK(j["experiment"]["workload"]["micro_batch"] == 1);                  // "auto": the experiment's micro_batch
}

TEST_CASE("A config.json model under DeepSpeed or an HF loop is the transformers implementation; a stated one wins (issue 48 item 5)",
          "[cli][issue48]") {
  CHECK(simulate_json(kRepro + "r05-hfconfig-plus-ds-auto.json")["workload"]["implementation"] == "hf");
  CHECK(simulate_json(kRepro + "r05-hfconfig-plus-ds-auto.json --set workload.implementation=torchtitan")["workload"]["implementation"] ==
        "torchtitan");
  // The same config.json under FSDP2 with an HF script's loop, and with no loop stated (torchtitan's default).
  const std::string fsdp2 = kSrc + "/configs/examples/llama3-8b-hfconfig-fsdp2-8xh100.json";
  CHECK(simulate_json(fsdp2 + " --set workload.training_loop=hf_trainer")["workload"]["implementation"] == "hf");
  CHECK(simulate_json(fsdp2)["workload"]["implementation"] == "torchtitan");
}

TEST_CASE("FSDP1 mixed_precision takes PyTorch's MixedPrecision names, the old ones as aliases (issue 48 item 5)", "[cli][issue48]") {
  const auto pytorch = simulate_json(kFsdp1 + " --set 'strategy.mixed_precision={\"param_dtype\":\"bf16\",\"reduce_dtype\":\"fp32\",\"buffer_dtype\":\"bf16\"}'");
  CHECK(pytorch["strategy"]["param_dtype"] == "bf16");
  CHECK(pytorch["strategy"]["reduce_dtype"] == "fp32");
  CHECK(pytorch["strategy"]["mixed_precision"]["param_dtype"] == "bf16");
  const auto alias = simulate_json(kFsdp1 + " --set 'strategy.mixed_precision={\"param\":\"bf16\",\"reduce\":\"fp32\"}'");
  CHECK(alias["strategy"] == pytorch["strategy"]);
  CHECK(alias["metrics"]["step_time_ns"] == pytorch["metrics"]["step_time_ns"]);
  expect_input_error("simulate " + kFsdp1 + " --set 'strategy.mixed_precision={\"param_dtype\":\"bf16\",\"param\":\"fp32\"}'",
                     {"/strategy/mixed_precision/param", "either param_dtype or its alias param"});
}

TEST_CASE("explain puts what would move the step first: knob moves, then hardware what-ifs; repeated reasons grouped (issue 48 item 8)",
          "[cli][issue48]") {
  std::string out;
  REQUIRE(run_capture(kBin + " explain " + kFsdp1, out) == 0);
  INFO(out);
  const auto move = out.find("what would move the step"), knob = out.find("strategy.sharding: \"full_shard\" -> \"hybrid_shard\""),
             hw = out.find("2x link bandwidth"), path = out.find("critical path,");
  REQUIRE(move != std::string::npos);
  REQUIRE(knob != std::string::npos);
  REQUIRE(hw != std::string::npos);
  CHECK(move < knob);
  CHECK(knob < hw);
  CHECK(hw < path);
  const auto j = nlohmann::json::parse([&] {
    std::string o;
    run_capture(kBin + " explain " + kFsdp1 + " --json", o);
    return o;
  }());
  REQUIRE(!j["knob_moves"].empty());
  CHECK(j["knob_moves"][0]["speedup"].get<double>() > 1);
}
