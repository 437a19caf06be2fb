// The family nanogpt-2025 (implementation modded_nanogpt): KellerJordan/modded-nanogpt's GPT of
// 2025-10-31 as its record runs it (sim/workload/transformer.cpp, namespace nanogpt2025), and its
// optimizers NorMuon and DistAdam (training.optimizer normuon, sim/strategies/common.hpp
// launch_normuon_step), which reduce the gradients themselves.
#include <map>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using Json = nlohmann::json;

namespace {

// configs/examples/modded-nanogpt-2025-10-8xh100.json: 8 H100s, one packed sequence of 32,768
// tokens a GPU, the schedule's first windows.
Json record(const Json& training = Json::object(), const Json& workload = Json::object(), const Json& strategy = Json::object()) {
  Json doc = {{"workload", {{"preset", "nanogpt-2025-10"}, {"seq_len", 32768}, {"micro_batch", 1}, {"dtype", "bf16"}}},
              {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", {{"framework", "ddp"}, {"param_dtype", "bf16"}}},
              {"training", {{"optimizer", "normuon"}, {"torch_version", "2.10.0"}}}};
  doc["training"].update(training);
  doc["workload"].update(workload);
  doc["strategy"].update(strategy);
  return doc;
}

std::string error_of(const Json& doc) { return test::experiment_error_of(doc); }

const Module* module_of(const Layer& l, const std::string& suffix) {
  for (const Module& m : l.modules)
    if (m.name.size() >= suffix.size() && m.name.compare(m.name.size() - suffix.size(), suffix.size(), suffix) == 0) return &m;
  return nullptr;
}

}  // namespace

// Catches: a parameter missing or counted twice (the value embeddings, the untied FP8 lm_head,
// the gates, the scalars), block 0 built although the loop skips it, attention in block 7.
TEST_CASE("nanogpt-2025-10 is the record's GPT: 268,665,628 parameters in blocks 1-11, attention in all but block 7",
          "[workload][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Workload& w = *e.workload;
  const std::int64_t table = 50304 * 768, matrix = 768 * 3072;
  // embed + 3 value embeddings + lm_head; 10 qkvo_w + 11 x (c_fc, c_proj); 10 attn gates of 6 x 12,
  // the smear gate's 12, the scalars (5 x 12 + 2, padded to 64).
  CHECK(w.numel() == 5 * table + (10 + 22) * matrix + 10 * 72 + 12 + 64);
  CHECK(w.numel() == 268'665'628);
  REQUIRE(w.layers.size() == 13);  // embed, blocks 1-11, head
  CHECK(w.layers.front().kind == LayerKind::Embedding);
  CHECK(w.layers.back().kind == LayerKind::Head);
  int attention = 0, mlp = 0;
  for (std::size_t i = 1; i <= 11; ++i) {
    const Layer& b = w.layers[i];
    CHECK(b.name == "blocks." + std::to_string(i));
    const bool attends = module_of(b, ".attn.flash_attn") != nullptr;
    CHECK(attends == (i != 7));
    attention += attends;
    mlp += module_of(b, ".mlp.c_fc") != nullptr;
  }
  CHECK(attention == 10);
  CHECK(mlp == 11);
  REQUIRE(w.options);
  CHECK(w.options->window_blocks == 3);
  CHECK(w.options->attention == Attention::Flash3);
}

// Catches: windows not as bm_sizes gives them (long in blocks 4 and 11), a window priced as the
// whole packed sequence, the value embeddings read where the record reads none.
TEST_CASE("nanogpt-2025's attention is FlashAttention-3 over sliding windows, long in blocks 4 and 11, and the value "
          "embeddings enter blocks 1, 2, 9, 10 and 11",
          "[workload][nanogpt]") {
  for (int blocks : {3, 7, 13}) {
    INFO("window_blocks " << blocks);
    const Experiment e = test::experiment_from_doc(record(Json::object(), {{"window_blocks", blocks}}));
    const std::int64_t n = 32768LL * 768, shorter = blocks / 2 * 128, longer = blocks * 128;
    for (std::size_t i = 1; i <= 11; ++i) {
      if (i == 7) continue;
      const Layer& b = e.workload->layers[i];
      const Module* attn = module_of(b, ".attn.flash_attn");
      REQUIRE(attn);
      const AttentionWork& f = attn->forward.front().work.attention;
      const std::int64_t window = (i == 4 || i == 11) ? longer : shorter;
      // A tile of 128 queries spans window + 128 keys; priced as the causal kernel at twice that.
      CHECK(f.kernel == AttentionKernel::Flash3);
      CHECK(f.seq == 2 * (window + 128));
      CHECK(f.flops.count == Approx(4.0 * 32768 * (window + 128) * 768).epsilon(0.02));
      const Module* mix = module_of(b, ".attn.value_mix");
      REQUIRE(mix);
      const bool ve = i == 1 || i == 2 || i >= 9;
      CHECK((mix->forward.front().read.count > 2 * n) == ve);
    }
  }
}

// Catches: the lm_head priced as a bf16 GEMM, its gradient's e5m2 cast missing, MFU counting the
// four embedding tables as matmuls or the attention over the whole packed sequence.
TEST_CASE("nanogpt-2025's lm_head runs three FP8 GEMMs, and its MFU counts the matmuls and the windows it computes",
          "[workload][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Layer& head = e.workload->layers.back();
  int fp8 = 0;
  for (const Module& m : head.modules)
    for (const auto* ops : {&m.forward, &m.backward})
      for (const Op& op : *ops)
        for (const GemmShape& g : op.work.gemms) fp8 += g.dtype == Dtype::FP8;
  CHECK(fp8 == 3);
  const double per_token = model_flops_per_token(*e.workload);
  const double matmul = 6.0 * (50304.0 * 768 + 32 * 768 * 3072 + 10 * 72 + 12 + 64);
  CHECK(per_token > matmul);
  CHECK(per_token < matmul * 1.1);  // the windows' attention: a few % (over the sequence it would be 2x)
}

// Catches: the collectives the record's optimizers launch differing from those the trace shows
// (data/traces/modded-nanogpt, ProfilerStep#13, `stepsim analyze`'s collective table): per odd step
// 12 by DistAdam (a reduce-scatter and an all-gather of each of 5 bf16 tables of 73.69 MiB and of
// the fp32 scalars, 256 B) and 8 by NorMuon (the smear gate, 192 B, and the attention gates,
// 2.2 KiB, in bf16; two groups of 16 fp32 matrices, 144 MiB each), none by DDP's reducer.
TEST_CASE("normuon launches the record's 20 collectives of an odd step, 8 of an even one, and DDP's reducer none",
          "[ddp][nanogpt]") {
  const Experiment e = test::experiment_from_doc(record());
  const Program p = e.strategy->build(e);
  CHECK(p.instructions.size() <= e.strategy->instruction_estimate(e));
  std::map<std::tuple<CollectiveKind, std::int64_t, Dtype>, int> seen;
  for (const Instruction& i : p.instructions)
    if (const auto* c = std::get_if<Collective>(&i)) ++seen[{c->kind, c->bytes.count, c->dtype}];
  const std::int64_t table = 50304LL * 768 * 2, group = 16LL * 768 * 3072 * 4;
  std::map<std::tuple<CollectiveKind, std::int64_t, Dtype>, int> expected;
  for (CollectiveKind k : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    expected[{k, table, Dtype::BF16}] = 5;
    expected[{k, 256, Dtype::FP32}] = 1;
    expected[{k, group, Dtype::FP32}] = 2;
    expected[{k, 192, Dtype::BF16}] = 1;
    expected[{k, 2304, Dtype::BF16}] = 1;
  }
  CHECK(seen == expected);
  const SimulationResult r = run_experiment(e);
  CHECK(r.metrics.optimizer.ns > 0);
  // An even step (training.normuon_step even) steps NorMuon alone: its 8 collectives, and no
  // DistAdam gradient added to the step before's.
  const Experiment even = test::experiment_from_doc(record({{"normuon_step", "even"}}));
  const Program pe = even.strategy->build(even);
  std::map<std::tuple<CollectiveKind, std::int64_t, Dtype>, int> seen_even;
  int accumulated = 0, accumulated_even = 0;
  for (const Instruction& i : pe.instructions) {
    if (const auto* c = std::get_if<Collective>(&i)) ++seen_even[{c->kind, c->bytes.count, c->dtype}];
    if (const auto* l = std::get_if<Launch>(&i)) accumulated_even += std::string_view(l->kernel.name).starts_with("AccumulateGrad add");
  }
  for (const Instruction& i : p.instructions)
    if (const auto* l = std::get_if<Launch>(&i)) accumulated += std::string_view(l->kernel.name).starts_with("AccumulateGrad add");
  std::map<std::tuple<CollectiveKind, std::int64_t, Dtype>, int> expected_even;
  for (CollectiveKind k : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
    expected_even[{k, group, Dtype::FP32}] = 2;
    expected_even[{k, 192, Dtype::BF16}] = 1;
    expected_even[{k, 2304, Dtype::BF16}] = 1;
  }
  CHECK(seen_even == expected_even);
  CHECK(accumulated == 6);  // embed, 3 value embeddings, scalars, lm_head
  CHECK(accumulated_even == 0);
  CHECK(run_experiment(even).metrics.optimizer < r.metrics.optimizer);
}

TEST_CASE("nanogpt-2025 goes with modded_nanogpt, flash3, 12 layers and normuon; normuon and window_blocks with it only",
          "[config][nanogpt]") {
  CHECK(error_of(record()).empty());
  CHECK_THAT(error_of(record(Json::object(), {{"attention", "sdpa_flash"}})),
             Catch::Contains("/workload/attention") && Catch::Contains("flash3 with the family nanogpt-2025"));
  CHECK_THAT(error_of(record(Json::object(), {{"window_blocks", 0}})), Catch::Contains("/workload/window_blocks"));
  CHECK_THAT(error_of(record(Json::object(), {{"window_blocks", 65}})), Catch::Contains("/workload/window_blocks"));
  CHECK_THAT(error_of(record({{"optimizer", "adamw"}})),
             Catch::Contains("/training/optimizer: \"adamw\"") && Catch::Contains("normuon with the family nanogpt-2025"));
  CHECK_THAT(error_of(record({{"normuon_step", "third"}})), Catch::Contains("/training/normuon_step"));
  Json stepped = record({{"optimizer", "adamw"}, {"normuon_step", "even"}}, {{"preset", "llama3-8b"}, {"seq_len", 4096}});
  CHECK_THAT(error_of(stepped), Catch::Contains("/training/normuon_step") && Catch::Contains("unless the optimizer is normuon"));
  CHECK_THAT(error_of(record(Json::object(), Json::object(), {{"bucket_cap_mb", 50}})),
             Catch::Contains("/strategy/bucket_cap_mb") && Catch::Contains("no DDP bucket setting with the optimizer normuon"));
  Json fsdp = record();
  fsdp["strategy"] = {{"framework", "fsdp2"}};
  CHECK_THAT(error_of(fsdp), Catch::Contains("/training/optimizer") && Catch::Contains("with fsdp2"));
  Json llama = record({{"optimizer", "normuon"}}, {{"preset", "llama3-8b"}, {"seq_len", 4096}});
  llama["workload"].erase("window_blocks");
  CHECK_THAT(error_of(llama), Catch::Contains("/training/optimizer: \"normuon\"") && Catch::Contains("an optimizer other than normuon"));
  Json windows = record({{"optimizer", "adamw"}}, {{"preset", "llama3-8b"}, {"seq_len", 4096}, {"window_blocks", 3}});
  CHECK_THAT(error_of(windows), Catch::Contains("/workload/window_blocks") && Catch::Contains("the family llama"));
  Json custom = record();
  custom["workload"].erase("preset");
  custom["workload"]["model"] = {{"family", "nanogpt-2025"}, {"hidden", 768}, {"layers", 8}, {"heads", 6}, {"ffn", 3072}, {"vocab", 50304}};
  CHECK_THAT(error_of(custom), Catch::Contains("/workload/model") && Catch::Contains("12 layers for the family nanogpt-2025, not 8"));
}
