// training.optimizer adamw8bit: bitsandbytes' AdamW8bit (bitsandbytes/optim/optimizer.py,
// Optimizer8bit.step and Optimizer2State) over every parameter with DDP, over the flat
// parameters with FSDP1.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "optimizer_checks.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {

Experiment experiment(const std::string& framework, const std::string& training) {
  return test::llama2_7b_on_8_h100(framework, training);
}

}  // namespace

TEST_CASE("AdamW8bit's step: one kernel per parameter, each followed by torch.cuda.synchronize()", "[adamw8bit]") {
  ProgramBuilder b;
  // A bf16 matrix of 8,192 elements (8-bit state: 32 blocks of 256) and a norm's 4,095 (below
  // min_8bit_size: float32 state).
  launch_adamw8bit_step(b, b.default_stream(), Adamw8bitStep{.tensors = {8192, 4095}, .dtype = Dtype::BF16});
  const Program p = b.take();
  REQUIRE(p.instructions.size() == 2 * kAdamw8bitInstructionsPerTensor);
  const auto& blockwise = std::get<Launch>(p.instructions[0]).kernel;
  CHECK(blockwise.name.view().ends_with("kOptimizerStatic8bit2StateBlockwise"));
  CHECK(blockwise.cls == KernelClass::Optimizer);
  // g, p (read), p (written): 3 x 2 B; state1, state2 read and written: 4 x 1 B; absmax1 and
  // absmax2 read and written: 4 x 4 B per block.
  CHECK(blockwise.work->memory_bytes == Bytes{8192 * (3 * 2 + 4) + 32 * 16});
  CHECK(std::holds_alternative<HostSync>(p.instructions[1]));
  const auto& fp32 = std::get<Launch>(p.instructions[2]).kernel;
  CHECK(fp32.name.view().ends_with("kOptimizer32bit2State"));
  CHECK(fp32.work->memory_bytes == Bytes{4095 * (3 * 2 + 4 * 4)});
  CHECK(std::holds_alternative<HostSync>(p.instructions[3]));
}

TEST_CASE("AdamW8bit's state: two bytes and two absmax floats per 256 elements of each tensor of 4,096 or more, "
          "eight bytes per element below",
          "[adamw8bit][memory]") {
  CHECK(optimizer_state_bytes(Optimizer::AdamW8bit, 4096, Dtype::BF16) == Bytes{2 * 4096 + 2 * 4 * 16});
  CHECK(optimizer_state_bytes(Optimizer::AdamW8bit, 4097, Dtype::FP32) == Bytes{2 * 4097 + 2 * 4 * 17});
  CHECK(optimizer_state_bytes(Optimizer::AdamW8bit, 4095, Dtype::BF16) == Bytes{8 * 4095});
  ProgramBuilder b;
  alloc_optimizer_state(b, Optimizer::AdamW8bit, "w", 1000, Dtype::FP32, b.default_stream());
  alloc_optimizer_state(b, Optimizer::AdamW8bit, "v", 1024 * 1024, Dtype::FP32, b.default_stream());
  std::vector<std::int64_t> allocs;
  for (const Instruction& i : b.take().instructions) {
    const auto& a = std::get<Alloc>(i);
    CHECK(a.lazy);  // created by the first step()
    allocs.push_back(a.bytes.count);
  }
  CHECK(allocs == std::vector<std::int64_t>{4000, 4000, 1024 * 1024, 1024 * 1024, 4 * 4096, 4 * 4096});

  // Llama-2-7B: every tensor but the norms (4,096 elements: 8-bit too, at the threshold) is a
  // matrix; the state is 2 B and 2 x 4 B per 256 elements of each, and the two maps.
  Experiment adamw = experiment("ddp", R"({"optimizer": "adamw"})");
  Experiment bnb = experiment("ddp", R"({"optimizer": "adamw8bit"})");
  std::int64_t state = 2 * kBnbQuantileMapBytes;
  for (const Layer& l : bnb.workload->layers)
    for (const Param* p : l.params()) {
      REQUIRE(p->numel >= 4096);
      state += 2 * p->numel + 8 * ((p->numel + 255) / 256);
    }
  // A host wait per parameter tensor leaves the GPU idle while the host launches the next.
  test::check_beside_adamw(adamw, bnb, state);
}

TEST_CASE("AdamW8bit over FSDP1's flat parameters: one kernel and one wait per unit, its state over this rank's shard",
          "[adamw8bit][fsdp1][memory]") {
  Experiment adamw = experiment("fsdp1", R"({"optimizer": "adamw"})");
  Experiment bnb = experiment("fsdp1", R"({"optimizer": "adamw8bit"})");
  const Program p = bnb.strategy->build(bnb);
  CHECK(p.instructions.size() <= bnb.strategy->instruction_estimate(bnb));
  // The tensors the step saw, from its kernels (3 x 4 B + 4 B per fp32 element, 16 B per block),
  // and the uint8 moments the state holds: the same shards, in the same order.
  std::vector<std::int64_t> stepped, moments;
  std::int64_t maps = 0;
  bool waits_after_each = true;
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    if (const auto* l = std::get_if<Launch>(&p.instructions[i]); l && l->kernel.name.view().ends_with("kOptimizerStatic8bit2StateBlockwise")) {
      const std::int64_t bytes = l->kernel.work->memory_bytes.count;
      std::int64_t n = bytes / 16;  // at most 16 B of absmax per 256 elements: n is within 1 % of it
      while (n * 16 + 16 * ((n + 255) / 256) > bytes) --n;
      REQUIRE(n * 16 + 16 * ((n + 255) / 256) == bytes);
      stepped.push_back(n);
      waits_after_each = waits_after_each && i + 1 < p.instructions.size() && std::holds_alternative<HostSync>(p.instructions[i + 1]);
    }
    if (const auto* a = std::get_if<Alloc>(&p.instructions[i])) {
      if (a->name.view().starts_with("state1 (uint8) ")) moments.push_back(a->bytes.count);
      if (a->name.view().starts_with("bnb qmap ")) maps += a->bytes.count;
    }
  }
  CHECK(waits_after_each);
  CHECK(stepped.size() == 33);  // 32 blocks and the root (wrap: block)
  CHECK(stepped == moments);
  CHECK(maps == 2 * kBnbQuantileMapBytes);
  std::int64_t local = 0, state = maps;
  for (const std::int64_t n : stepped) local += n, state += 2 * n + 8 * ((n + 255) / 256);
  const SimulationResult ra = run_experiment(adamw), rb = run_experiment(bnb);
  CHECK(ra.metrics.persistent_memory - rb.metrics.persistent_memory == Bytes{8 * local - state});
}

TEST_CASE("AdamW8bit runs with DDP and FSDP1's flat parameters, and in bitsandbytes' own loop only", "[adamw8bit][config]") {
  for (const char* fw : {"fsdp2", "zero"}) {
    INFO(fw);
    CHECK_THROWS_WITH(experiment(fw, R"({"optimizer": "adamw8bit"})"),
                      Catch::Contains("/training/optimizer: \"adamw8bit\": expected adamw, sgd, lion or none with " + std::string(fw)));
  }
  CHECK_NOTHROW(experiment("fsdp1", R"({"optimizer": "adamw8bit"})"));
  nlohmann::json doc = {
      {"workload", {{"preset", "llama2-7b"}, {"seq_len", 1024}, {"micro_batch", 1}}},
      {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
      {"strategy", {{"framework", "fsdp1"}, {"use_orig_params", true}}},
      {"training", {{"optimizer", "adamw8bit"}}}};
  CHECK_THROWS_WITH(test::experiment_from_doc(doc),
                    Catch::Contains("/strategy/use_orig_params: true: expected false with training.optimizer adamw8bit"));
  for (const char* impl : {"fused", "foreach"}) {
    INFO(impl);
    CHECK_THROWS_WITH(experiment("ddp", std::string(R"({"optimizer": "adamw8bit", "optimizer_impl": ")") + impl + "\"}"),
                      Catch::Contains("/training/optimizer_impl: \"" + std::string(impl) + "\": expected for_loop with adamw8bit"));
  }
  CHECK_NOTHROW(experiment("ddp", R"({"optimizer": "adamw8bit", "optimizer_impl": "for_loop"})"));
}
