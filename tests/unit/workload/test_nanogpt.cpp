// The family nanogpt (implementation modded_nanogpt): KellerJordan/modded-nanogpt's GPT of
// October 2024 as its records run it, the whole model one torch.compile graph, fp32 parameters
// under bf16 autocast (sim/workload/transformer.cpp, namespace nanogpt), and its two Muons
// (training.muon_impl, sim/strategies/common.hpp launch_modded_muon_step).
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using Json = nlohmann::json;

namespace {

// The 2024-10-17 record's run: 8 H100s, 64 x 1024 tokens a GPU, DDP, Muon.
Json record(const Json& training = Json::object(), const Json& workload = Json::object()) {
  Json doc = {{"workload", {{"preset", "nanogpt-124m"}, {"seq_len", 1024}, {"micro_batch", 64}, {"dtype", "bf16"}}},
              {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", {{"framework", "ddp"}}},
              {"training", {{"optimizer", "muon"}, {"muon_impl", "modded_nanogpt_distributed"}, {"torch_version", "2.4.1"}}}};
  doc["training"].update(training);
  doc["workload"].update(workload);
  return doc;
}

std::string error_of(const Json& doc) { return test::experiment_error_of(doc); }

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

TEST_CASE("nanogpt-124m is modded-nanogpt's GPT: 123,568,128 parameters, the lm_head tied to the embedding, six "
          "bias-free matrices a block and no norm weights",
          "[workload][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Workload& w = *e.workload;
  CHECK(w.numel() == 123'568'128);  // 12 x (4 x 768^2 + 2 x 768 x 3072) + 50304 x 768
  REQUIRE(w.layers.size() == 15);    // embed, 12 blocks, norm, head
  CHECK(w.layers.front().param_count() == 1);
  CHECK(w.layers.back().param_count() == 0);  // tied
  for (std::size_t i = 1; i <= 12; ++i) {
    CHECK(w.layers[i].param_count() == 6);
    for (const Param* p : w.layers[i].params()) CHECK(muon_matrix(w.layers[i], *p));
  }
  REQUIRE(w.options);
  CHECK(w.options->compile);
  CHECK(to_string(w.options->training_loop()) == "modded_nanogpt");
  CHECK_FALSE(w.options->loop_keeps_output.value_or(true));
}

TEST_CASE("nanogpt's block under whole-model compile: one generated kernel between GEMMs, the residual stream in "
          "fp32, the pointwise work recomputed in backward",
          "[workload][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Layer& b = e.workload->layers.at(1);
  const std::int64_t T = 64 * 1024, n = T * 768;
  std::map<KernelClass, int> fwd;
  int gemms_bwd = 0;
  for (const Module& m : b.modules) {
    for (const Op& op : m.forward) {
      fwd[op.cls] += op.kernels;
      CHECK(op.kernels == 1);
    }
    for (const Op& op : m.backward) gemms_bwd += op.cls == KernelClass::Gemm;
  }
  CHECK(fwd[KernelClass::Gemm] == 6);       // c_q, c_k, c_v, c_proj, c_fc, c_proj
  CHECK(fwd[KernelClass::Attention] == 1);
  CHECK(gemms_bwd == 12);                    // input and weight gradient of each
  // x + attn(F.rms_norm(x)): an fp32 stream plus a bf16 branch in, fp32 out.
  const Op& add = b.modules.at(6).forward.back();
  CHECK(add.name == "residual_add");
  CHECK(add.read == Bytes{n * 6});
  CHECK(add.written == Bytes{n * 4});
  for (const Module& m : b.modules)
    for (const Op& op : m.forward) CHECK(b.forward_dispatch == HostDispatch::Launch);
}

TEST_CASE("nanogpt's loss is compiled with the model: the bf16 logits read once forward and once backward, no fp32 "
          "copy",
          "[workload][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Layer& head = e.workload->layers.back();
  const std::int64_t TV = 64LL * 1024 * 50304;
  const Module& loss = head.modules.at(1);
  REQUIRE(loss.forward.size() == 2);
  CHECK(loss.forward[0].read.count >= TV * 2);
  CHECK(loss.forward[0].read.count < TV * 4);  // no fp32 logits
  REQUIRE(loss.backward.size() == 1);
  CHECK(loss.backward[0].written == Bytes{TV * 2});
}

TEST_CASE("modded-nanogpt's Muon: every matrix on every rank (2024-10-14), or this rank's share and one bf16 "
          "all_reduce of every update (2024-10-17)",
          "[muon][ddp][nanogpt]") {
  const auto count = [](const Experiment& e) {
    const Program p = e.strategy->build(e);
    std::map<std::string, int> out;
    for (const Instruction& i : p.instructions) {
      if (const auto* l = std::get_if<Launch>(&i)) {
        const std::string_view name = l->kernel.name;
        if (starts_with(name, "optimizer.step muon Newton-Schulz A = X @ X.T")) ++out["A = X @ X.T"];
        if (starts_with(name, "optimizer.step muon add_ (param)")) ++out["add_ (param)"];
      } else if (const auto* c = std::get_if<Collective>(&i)) {
        if (std::string_view(c->name).find("updates_flat") != std::string_view::npos) {
          ++out["all_reduce"];
          CHECK(c->bytes == Bytes{2 * 12 * (4 * 768 * 768 + 2 * 768 * 3072)});
          CHECK(c->dtype == Dtype::BF16);
        }
      }
    }
    CHECK(p.instructions.size() <= e.strategy->instruction_estimate(e));
    return out;
  };
  const Experiment every = test::experiment_from_doc(record({{"muon_impl", "modded_nanogpt"}}));
  const Experiment distributed = test::experiment_from_doc(record());
  CHECK(count(every) == std::map<std::string, int>{{"A = X @ X.T", 72 * 5}, {"add_ (param)", 72}});
  // Rank 0 of 8 orthogonalizes matrices 0, 8, ..., 64: 9 of 72; every rank applies all 72.
  CHECK(count(distributed) == std::map<std::string, int>{{"A = X @ X.T", 9 * 5}, {"add_ (param)", 72}, {"all_reduce", 1}});
  const SimulationResult re = run_experiment(every), rd = run_experiment(distributed);
  CHECK(rd.metrics.optimizer < re.metrics.optimizer);
}

TEST_CASE("nanogpt and modded_nanogpt go together, compiled and without checkpointing; muon_impl needs muon", "[config][nanogpt]") {
  CHECK_THAT(error_of(record(Json::object(), {{"implementation", "torchtitan"}})),
             Catch::Contains("/workload/implementation") && Catch::Contains("modded_nanogpt for the family nanogpt"));
  Json llama = record();
  llama["workload"]["preset"] = "llama3-8b";
  llama["workload"]["implementation"] = "modded_nanogpt";
  llama["training"] = {{"optimizer", "adamw"}};
  CHECK_THAT(error_of(llama), Catch::Contains("/workload/implementation") && Catch::Contains("for the family llama"));
  CHECK_THAT(error_of(record(Json::object(), {{"compile", false}})), Catch::Contains("/workload/compile") && Catch::Contains("true with modded_nanogpt"));
  CHECK_THAT(error_of(record(Json::object(), {{"activation_checkpointing", "full"}})),
             Catch::Contains("/workload/activation_checkpointing") && Catch::Contains("none with modded_nanogpt"));
  CHECK_THAT(error_of(record({{"optimizer", "adamw"}})), Catch::Contains("/training/muon_impl") && Catch::Contains("unless the optimizer is muon"));
  CHECK_THAT(error_of(record({{"muon_impl", "torch"}})), Catch::Contains("/training/optimizer") && Catch::Contains("PyTorch 2.9"));
  CHECK_THAT(error_of(record({{"muon_impl", "keller"}})), Catch::Contains("/training/muon_impl") && Catch::Contains("modded_nanogpt_distributed"));
  CHECK(error_of(record()).empty());
}
