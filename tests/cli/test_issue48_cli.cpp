// Issue 48 (a demanding newcomer's report on 97d6b31): the names and defaults a user of the
// frameworks expects, and the scope table the errors point to.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

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

TEST_CASE("Each input stepsim does not model is refused with an error naming the README's table (issue 48 item 10)", "[cli][issue48]") {
  // The table exists under the anchor the errors name.
  std::ifstream readme(kSrc + "/README.md");
  std::stringstream text;
  text << readme.rdbuf();
  REQUIRE(text.str().find("\n## What is not modelled\n") != std::string::npos);
  const fs::path dir = scratch_dir("not-modelled");
  const std::string table = "README.md#what-is-not-modelled";
  const std::string fsdp2 = kSrc + "/configs/examples/llama3-8b-fsdp2-8xh100.json";
  // Tensor / pipeline parallelism: another framework, a mesh dimension, DeepSpeed's keys.
  expect_input_error("simulate " + fsdp2 + " --set strategy.framework=megatron", {"/strategy/framework", table});
  expect_input_error("simulate " + fsdp2 + " --set 'strategy.mesh={\"replicate\":1,\"shard\":4,\"tp\":2}'", {"/strategy/mesh/tp", table});
  auto ds = [&](const std::string& name, const std::string& body) {
    write_text(dir / (name + ".ds.json"), body);
    return write_text(dir / (name + ".json"), R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "micro_batch": 1},
      "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"deepspeed_config": ")" + name + R"(.ds.json"}})");
  };
  expect_input_error("simulate " + ds("tp", R"({"zero_optimization": {"stage": 1}, "tensor_parallel": {"autotp_size": 2}})"),
                     {"/tensor_parallel", table});
  // Offload, ZeRO++, MiCS.
  expect_input_error("simulate " + ds("off", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})"),
                     {"/zero_optimization/offload_param", table});
  expect_input_error("simulate " + ds("zpp", R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})"),
                     {"/zero_optimization/zero_quantized_weights", table});
  // Mixture of experts, sliding windows, a head dimension of its own.
  write_text(dir / "mixtral.json", R"({"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_local_experts": 8, "vocab_size": 32000, "intermediate_size": 14336})");
  write_text(dir / "mistral.json", R"({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 32000, "intermediate_size": 14336, "sliding_window": 4096})");
  auto hf = [&](const std::string& name, const std::string& config) {
    return write_text(dir / (name + ".exp.json"), R"({"workload": {"model": {"hf_config": ")" + config + R"("}, "seq_len": 8192, "micro_batch": 1},
      "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"framework": "fsdp2"}})");
  };
  expect_input_error("simulate " + hf("moe", "mixtral.json"), {"mixtral.json", "/model_type", table});
  expect_input_error("simulate " + hf("swa", "mistral.json"), {"mistral.json", "/sliding_window", table});
  // LoRA: no key reads it; a key that names it says where the list is.
  expect_input_error("simulate " + fsdp2 + " --set workload.lora_r=16", {"/workload/lora_r", table});
  // Muon and Adafactor on sharded parameters; Adafactor's foreach path.
  expect_input_error("simulate " + fsdp2 + " --set training.optimizer=muon", {"/training/optimizer", table});
  expect_input_error("simulate " + fsdp2 + " --set training.optimizer=adafactor", {"/training/optimizer", table});
  const std::string ddp = kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json";
  expect_input_error("simulate " + ddp + " --set training.optimizer=adafactor --set training.optimizer_impl=foreach",
                     {"/training/optimizer_impl", table});
  // bitsandbytes' AdamW8bit over sharded parameters.
  expect_input_error("simulate " + fsdp2 + " --set training.optimizer=adamw8bit", {"/training/optimizer", table});
}
