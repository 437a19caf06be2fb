// training.optimizer adafactor: torch.optim.Adafactor's for-loop (PyTorch 2.5,
// torch/optim/_adafactor.py _single_tensor_adafactor) over every parameter, with DDP.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

struct Counts {
  int launches = 0, syncs = 0;
  std::vector<std::int64_t> allocs;
  int frees = 0;
};

Counts count(const Program& p) {
  Counts c;
  for (const Instruction& i : p.instructions) {
    c.launches += std::holds_alternative<Launch>(i);
    c.syncs += std::holds_alternative<HostSync>(i);
    c.frees += std::holds_alternative<Free>(i);
    if (const auto* a = std::get_if<Alloc>(&i)) c.allocs.push_back(a->bytes.count);
  }
  return c;
}

}  // namespace

TEST_CASE("Adafactor's step of a matrix: 19 launches, the host waiting on two norms' .item(), the m x n var_estimate",
          "[adafactor]") {
  ProgramBuilder b;
  launch_adafactor_step(b, b.default_stream(), AdafactorStep{.tensors = {AdafactorTensor{4, 8}}, .dtype = Dtype::FP32});
  const Program p = b.take();
  const Counts c = count(p);
  CHECK(c.launches == 19);
  CHECK(c.syncs == 2);  // param.norm(2).item() and update.norm(2).item()
  CHECK(c.allocs == std::vector<std::int64_t>{32 * 4});
  CHECK(c.frees == 1);
  CHECK(p.instructions.size() == kAdafactorInstructionsPerTensor);
}

TEST_CASE("Adafactor's step of a vector: its variance unfactored, grad * grad and a clone as temporaries", "[adafactor]") {
  ProgramBuilder b;
  launch_adafactor_step(b, b.default_stream(), AdafactorStep{.tensors = {AdafactorTensor{16, 0}}, .dtype = Dtype::BF16});
  const Counts c = count(b.take());
  CHECK(c.launches == 10);
  CHECK(c.syncs == 2);
  CHECK(c.allocs == std::vector<std::int64_t>{16 * 2, 16 * 2});
  CHECK(c.frees == 2);
}

TEST_CASE("Adafactor's state: rows + columns per matrix, the whole vector per vector, where AdamW keeps two moments",
          "[adafactor][ddp][memory]") {
  Experiment adamw = experiment("ddp", R"({"optimizer": "adamw"})");
  Experiment adafactor = experiment("ddp", R"({"optimizer": "adafactor"})");
  std::int64_t state = 0;
  for (const Layer& l : adafactor.workload->layers)
    for (const Param* p : l.params()) state += adafactor_state_bytes(*p, Dtype::FP32).count;
  // Llama-2-7B: per block 4 of 4096 x 4096 and 3 of 11008 x 4096 (rows + columns each), two
  // norms (4096); the embedding and head 32000 x 4096; the final norm.
  const std::int64_t per_block = 4 * (4096 + 4096) + 3 * (11008 + 4096) + 2 * 4096;
  CHECK(state == 4 * (32 * per_block + 2 * (32000 + 4096) + 4096));
  // Two host waits per parameter tensor leave the GPU idle between them.
  test::check_beside_adamw(adamw, adafactor, state);
}

// (With a sharding framework: test_muon.cpp, beside Muon's.)
TEST_CASE("Adafactor is refused before PyTorch 2.5 and with a code path it does not have or that is not modelled",
          "[adafactor][config]") {
  CHECK_THROWS_WITH(experiment("ddp", R"({"optimizer": "adafactor", "torch_version": "2.4"})"),
                    Catch::Contains("(torch.optim.Adafactor is in PyTorch 2.5 and later)"));
  for (const char* impl : {"fused", "foreach"}) {
    INFO(impl);
    CHECK_THROWS_WITH(experiment("ddp", std::string(R"({"optimizer": "adafactor", "optimizer_impl": ")") + impl + "\"}"),
                      Catch::Contains("/training/optimizer_impl: \"" + std::string(impl) + "\": expected for_loop with adafactor"));
  }
  CHECK_NOTHROW(experiment("ddp", R"({"optimizer": "adafactor", "optimizer_impl": "for_loop", "torch_version": "2.5"})"));
}
