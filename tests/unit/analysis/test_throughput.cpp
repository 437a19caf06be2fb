// Throughput and MFU/HFU follow llm-foundry's convention: its own published MFU comes out of
// its own published throughput.
#include <catch2/catch.hpp>

#include "sim/analysis/throughput.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;

TEST_CASE("MFU and HFU reproduce llm-foundry's published numbers from its published throughput", "[throughput]") {
  // throughput_a100.csv row 1: MPT-70B, seq 2048, 64 A100-80GB, micro-batch 8 x accumulation 4,
  // AC on; 26274 tokens/s; MFU 53.33 %, HFU 71.1 %. Global batch 4,194,304 tokens: step 159.64 s.
  nlohmann::json doc = {
      {"workload", {{"preset", "mpt-70b"}, {"seq_len", 2048}, {"micro_batch", 8}, {"activation_checkpointing", "full"}}},
      {"cluster", {{"profile", std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm-8x.json"}, {"nodes", 8}, {"gpus_per_node", 8}}},
      {"strategy", {{"framework", "fsdp1"}}},
      {"training", {{"grad_accum", 4}}}};
  Experiment e = test::experiment_from_doc(doc);
  Throughput t = throughput(e, Time::from_ms(4194304.0 / 26274.0 * 1000.0));
  CHECK(t.tokens_per_step == 4194304.0);
  CHECK(t.tokens_per_s == Approx(26274.0));
  CHECK(t.tokens_per_s_per_gpu == Approx(26274.0 / 64));
  CHECK(t.samples_per_s == Approx(26274.0 / 2048));
  // Per token 6 x 64.862e9 parameters + 12 x 80 layers x 8192 x 2048 = 405.3 GFLOP; x 410.5
  // tokens/s per GPU / 312 TFLOP/s = 53.3 %; full checkpointing re-runs the forward: x 4/3.
  CHECK(t.mfu_pct == Approx(53.33).margin(0.05));
  CHECK(t.hfu_pct == Approx(71.1).margin(0.1));
  // A toy workload has tokens but no FLOPs.
  Experiment toy = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json");
  Throughput tt = throughput(toy, Time::from_ms(56));
  CHECK(tt.tokens_per_s > 0);
  CHECK(tt.mfu_pct == 0);
}
