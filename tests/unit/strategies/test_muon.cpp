// training.optimizer muon: torch.optim.Muon (PyTorch 2.9, torch/optim/_muon.py) over the 2-D
// weights of the transformer blocks, AdamW over the rest, with DDP.
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {

Experiment experiment(const std::string& framework, const std::string& training) {
  return test::llama2_7b_on_8_h100(framework, training);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

TEST_CASE("Muon: the blocks' matrices take Muon's step (5 Newton-Schulz iterations of three GEMMs each, in bf16, on the "
          "matrix with its short side first); everything else takes AdamW's",
          "[muon][ddp]") {
  Experiment e = experiment("ddp", R"({"optimizer": "muon"})");
  const Program p = e.strategy->build(e);
  // Llama-2-7B: 32 blocks of q, k, v, o (4096 x 4096) and gate, up (11008 x 4096), down (4096 x 11008).
  std::map<std::string, std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int>> gemms;
  int muon_launches = 0, adamw_launches = 0;
  for (const Instruction& i : p.instructions) {
    const auto* l = std::get_if<Launch>(&i);
    if (!l) continue;
    const std::string_view name = l->kernel.name;
    if (starts_with(name, "optimizer.step muon ")) {
      ++muon_launches;
      CHECK(l->kernel.kernels == 1);  // each an aten op of one kernel from Python's loop
      for (const GemmShape& g : l->kernel.work->gemms) {
        CHECK(g.dtype == Dtype::BF16);
        ++gemms[std::string(name.substr(std::string_view("optimizer.step muon ").size()))][{g.m, g.n, g.k}];
      }
    } else if (starts_with(name, "optimizer.step _foreach_") || starts_with(name, "optimizer.step for-loop") ||
               name == "optimizer.step") {
      ++adamw_launches;
    }
  }
  const int matrices = 32 * 7;
  CHECK(muon_launches == matrices * (8 + kMuonNsSteps * 8));
  CHECK(adamw_launches > 0);  // embeddings, head and norms
  // X @ X.T is (m, m, n), (c * A) @ A (m, m, m), B @ X (m, n, m), with m <= n: the 11008 x 4096
  // gate and up and the 4096 x 11008 down all run with m = 4096, n = 11008.
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  CHECK(gemms["Newton-Schulz X @ X.T"] == std::map<Shape, int>{{{4096, 4096, 4096}, 4 * 32 * 5}, {{4096, 4096, 11008}, 3 * 32 * 5}});
  CHECK(gemms["Newton-Schulz (c * A) @ A"] == std::map<Shape, int>{{{4096, 4096, 4096}, 7 * 32 * 5}});
  CHECK(gemms["Newton-Schulz B @ X"] == std::map<Shape, int>{{{4096, 4096, 4096}, 4 * 32 * 5}, {{4096, 11008, 4096}, 3 * 32 * 5}});
  CHECK(p.instructions.size() <= e.strategy->instruction_estimate(e));
}

TEST_CASE("Muon's state is one momentum buffer per matrix (AdamW's two moments for the rest), and its step costs the "
          "Newton-Schulz GEMMs AdamW does not run",
          "[muon][ddp][memory]") {
  Experiment adamw = experiment("ddp", R"({"optimizer": "adamw"})");
  Experiment muon = experiment("ddp", R"({"optimizer": "muon"})");
  const SimulationResult ra = run_experiment(adamw), rm = run_experiment(muon);
  std::int64_t matrix_numel = 0;
  for (const Layer& l : muon.workload->layers)
    for (const Param* p : l.params())
      if (muon_matrix(l, *p)) matrix_numel += p->numel;
  CHECK(matrix_numel == 32LL * (4 * 4096 * 4096 + 3 * 11008 * 4096));
  // fp32 parameters (DDP's default): AdamW keeps 8 bytes a parameter, Muon 4 for its matrices.
  CHECK(ra.metrics.persistent_memory - rm.metrics.persistent_memory == Bytes{4 * matrix_numel});
  // Each NS iteration is 4 m^2 n + 2 m^3 FLOPs: ~6.8e14 over the model's matrices, about a second
  // on an H100; AdamW's step over 6.7 B parameters is memory-bound, tens of ms.
  CHECK(rm.metrics.optimizer > ra.metrics.optimizer + Time::from_ms(300));
}

TEST_CASE("Muon and Adafactor are refused where they cannot step the parameters as they are held (sharded), and Muon "
          "before PyTorch 2.9",
          "[muon][adafactor][config]") {
  for (const std::string opt : {"muon", "adafactor"})
    for (const std::string fw : {"fsdp1", "fsdp2", "zero"}) {
      INFO(opt << " with " << fw);
      CHECK_THROWS_WITH(experiment(fw, R"({"optimizer": ")" + opt + "\"}"),
                        Catch::Contains("/training/optimizer: \"" + opt + "\": expected adamw, sgd or none with " + fw));
    }
  CHECK_THROWS_WITH(experiment("ddp", R"({"optimizer": "muon", "torch_version": "2.8"})"),
                    Catch::Contains("/training/optimizer: \"muon\": expected adamw, sgd or none with PyTorch 2.8.0 "
                                    "(torch.optim.Muon is in PyTorch 2.9 and later)"));
  CHECK_NOTHROW(experiment("ddp", R"({"optimizer": "muon", "torch_version": "2.9"})"));
}

TEST_CASE("Muon's step of one matrix: the fp32 update, X in bf16, and each iteration's temporaries at their peak",
          "[muon][memory]") {
  ProgramBuilder b;
  // A 8 x 4 weight runs transposed: m = 4, n = 8.
  launch_muon_step(b, b.default_stream(), MuonStep{.matrices = {MuonMatrix{8, 4}}, .dtype = Dtype::FP32});
  const Program p = b.take();
  std::vector<std::int64_t> allocs;
  int frees = 0, launches = 0;
  for (const Instruction& i : p.instructions) {
    if (const auto* a = std::get_if<Alloc>(&i)) allocs.push_back(a->bytes.count);
    frees += std::holds_alternative<Free>(i);
    launches += std::holds_alternative<Launch>(i);
  }
  // update 32 x 4 B, X 32 x 2 B, then per iteration A and B (2 x 16 x 2 B) and the new X, a * X
  // and B @ X (3 x 32 x 2 B).
  const std::int64_t temps = 2 * 16 * 2 + 3 * 32 * 2;
  CHECK(allocs == std::vector<std::int64_t>{128, 64, temps, temps, temps, temps, temps});
  CHECK(frees == 7);
  CHECK(launches == 8 + kMuonNsSteps * 8);
  CHECK(p.instructions.size() == kMuonInstructionsPerMatrix);
}

TEST_CASE("Muon on bf16 parameters: .bfloat16() of the update is the update, no copy and no buffer", "[muon][memory]") {
  ProgramBuilder b;
  launch_muon_step(b, b.default_stream(), MuonStep{.matrices = {MuonMatrix{8, 4}}, .dtype = Dtype::BF16});
  const Program p = b.take();
  std::vector<std::int64_t> allocs;
  for (const Instruction& i : p.instructions)
    if (const auto* a = std::get_if<Alloc>(&i)) allocs.push_back(a->bytes.count);
  const std::int64_t temps = 2 * 16 * 2 + 3 * 32 * 2;
  CHECK(allocs == std::vector<std::int64_t>{64, temps, temps, temps, temps, temps});
  CHECK(p.instructions.size() == kMuonInstructionsPerMatrix - 3);  // the cast, its buffer and its free
}
