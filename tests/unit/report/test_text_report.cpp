// The text report's header: every resolved training default beside the strategy and workload.
#include <catch2/catch.hpp>

#include <sstream>

#include "sim/analysis/run.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/common.hpp"
#include "test_support.hpp"

using namespace stepsim;

TEST_CASE("The text report prints a training line with every resolved training default", "[report]") {
  nlohmann::json doc = {
      {"workload", {{"toy", {{"layers", 2}, {"forward_ms", 1}, {"backward_ms", 2}, {"params_per_layer", 1000}}}, {"dtype", "fp32"}}},
      {"cluster", {{"profile", "configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
      {"strategy", {{"framework", "ddp"}}},
      {"training", {{"grad_accum", 2}}}};
  Experiment e = stepsim::test::experiment_from_doc(doc);
  std::ostringstream out;
  write_text_report(out, e, run_experiment(e));
  // no_sync defaults to true (DDP's no_sync() context over the accumulation), AdamW's foreach
  // path for a toy loop is fused (loop_optimizer_impl), no clipping, PyTorch 2.9's allocator.
  CHECK_THAT(out.str(), Catch::Contains("  training: {\"allocator\":{\"expandable_segments\":false,\"max_split_size_mb\":null},"
                                        "\"clip_grad_norm\":null,\"grad_accum\":2,\"master_dtype\":\"fp32\",\"no_sync\":true,"
                                        "\"optimizer\":\"adamw\",\"optimizer_impl\":\"fused\",\"torch_version\":\"2.9.0\"}"));
}

TEST_CASE("Megatron's and torchtitan's selective checkpointing each have a name of their own", "[report][config]") {
  auto with = [](const std::string& ac) {
    nlohmann::json doc = {{"workload", {{"preset", "llama3-8b"}, {"seq_len", 1024}, {"activation_checkpointing", ac}}},
                          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                          {"strategy", {{"framework", "fsdp2"}}}};
    return stepsim::test::experiment_from_doc(doc).workload->options->checkpointing;
  };
  CHECK(with("megatron_selective") == Checkpointing::Selective);
  CHECK(with("selective") == Checkpointing::Selective);
  CHECK(with("torchtitan_selective_op") == Checkpointing::OpSac);
  CHECK(with("op_sac") == Checkpointing::OpSac);
}
