// The optimizer step by implementation and the training loop's gradient clipping (issue 13 item
// 1): torch.optim's fused, foreach and for-loop AdamW (torch/optim/adamw.py, PyTorch 2.1-2.9),
// DeepSpeed's FusedAdam, and clip_grad_norm_ as FSDP1 (fully_sharded_data_parallel.py) and
// torch.nn.utils run it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/fsdp1_units.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using nlohmann::json;

namespace {

struct Step {
  std::shared_ptr<TextPool> names;  // the launches' names point into it (the program's pool)
  std::vector<Launch> launches;
  std::vector<Bytes> temporaries;  // the step's allocations, in order
  Bytes peak_temporary;            // the most live at once
};

Step run_step(const OptimizerStep& st) {
  ProgramBuilder b;
  launch_optimizer_step(b, b.default_stream(), st);
  Program p = b.take();
  Step out;
  out.names = p.text;
  Bytes live;
  for (const Instruction& ins : p.instructions) {
    if (const auto* l = std::get_if<Launch>(&ins)) out.launches.push_back(*l);
    if (const auto* a = std::get_if<Alloc>(&ins)) {
      out.temporaries.push_back(a->bytes);
      live += a->bytes;
      out.peak_temporary = std::max(out.peak_temporary, live);
    }
    if (const auto* f = std::get_if<Free>(&ins)) live -= out.temporaries.at(f->buffer.index());
  }
  return out;
}

Bytes moved(const Step& s) {
  Bytes b;
  for (const Launch& l : s.launches) b += l.kernel.work->memory_bytes;
  return b;
}

int kernels(const Step& s) {
  int k = 0;
  for (const Launch& l : s.launches) k += l.kernel.kernels;
  return k;
}

Experiment experiment(json workload, json strategy, json training = json::object()) {
  json t = {{"optimizer", "adamw"}};
  t.update(training);
  return test::experiment_from_doc({{"workload", std::move(workload)},
                                    {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                                    {"strategy", std::move(strategy)},
                                    {"training", t}});
}

json small(const std::string& implementation) {
  return {{"model", {{"family", "llama"}, {"hidden", 256}, {"layers", 3}, {"heads", 4}, {"ffn", 688}, {"vocab", 1003}}},
          {"implementation", implementation}, {"seq_len", 128}, {"micro_batch", 1}, {"dtype", "bf16"}};
}

std::vector<const TimelineOp*> ops_named(const Timeline& t, const std::string& prefix) {
  std::vector<const TimelineOp*> out;
  for (const auto& o : t.ops)
    if (o.name.rfind(prefix, 0) == 0) out.push_back(&o);
  return out;
}

}  // namespace

TEST_CASE("fused AdamW is one multi-tensor kernel series moving 7 elements per parameter", "[optimizer]") {
  // 100M fp32 elements: 1,526 chunks of 65,536, at most 320 per kernel -> 5 kernels (the same for
  // DeepSpeed's FusedAdam over one flat partition).
  Step s = run_step({.impl = OptimizerImpl::Fused, .numel = 100'000'000, .tensors = 1, .dtype = Dtype::FP32});
  REQUIRE(s.launches.size() == 1);
  CHECK(moved(s).count == 7LL * 4 * 100'000'000);
  CHECK(kernels(s) == 5);
  CHECK(s.temporaries.empty());
  // Many small tensors: at most 36 tensors per kernel for its four lists.
  CHECK(kernels(run_step({.impl = OptimizerImpl::Fused, .numel = 1'000'000, .tensors = 100})) == 3);
}

TEST_CASE("foreach AdamW is _multi_tensor_adamw's eight ops, 20 elements per parameter, and a parameter-sized "
          "temporary from the sqrt to the addcdiv_",
          "[optimizer][memory]") {
  const std::int64_t n = 100'000'000;
  Step s = run_step({.impl = OptimizerImpl::Foreach, .numel = n, .tensors = 291, .dtype = Dtype::FP32});
  REQUIRE(s.launches.size() == 8);
  CHECK(moved(s).count == 20LL * 4 * n);
  const std::vector<std::string> ops = {"mul_ (weight decay)", "lerp_ (exp_avg)", "mul_ (exp_avg_sq)", "addcmul_ (exp_avg_sq)",
                                        "sqrt (exp_avg_sq)",   "div_ (bias correction)", "add_ (eps)", "addcdiv_ (param)"};
  for (std::size_t i = 0; i < ops.size(); ++i) CHECK(s.launches[i].kernel.name == "optimizer.step _foreach_" + ops[i]);
  // 291 tensors, 1,526 chunks plus half a chunk per tensor for their partial last ones: 6 kernels
  // per op by chunks (the tensor limits, 110 to 48 per kernel, give 7 for the three-list ops).
  CHECK(s.launches[0].kernel.kernels == 6);
  CHECK(s.launches[3].kernel.kernels == 7);  // addcmul_: ceil(291 / 48)
  CHECK(s.peak_temporary.count == 4 * n);    // every exp_avg_sq's sqrt at once
  // SGD without momentum: one _foreach_add_ of 3 elements.
  Step sgd = run_step({.optimizer = Optimizer::SGD, .impl = OptimizerImpl::Foreach, .numel = n, .tensors = 291});
  CHECK(sgd.launches.size() == 1);
  CHECK(moved(sgd).count == 3LL * 4 * n);
}

TEST_CASE("for-loop AdamW launches each op once per tensor and holds two tensor-sized temporaries at a time", "[optimizer][memory]") {
  const std::int64_t n = 12'000'000;
  Step s = run_step({.impl = OptimizerImpl::ForLoop, .numel = n, .tensors = 24, .dtype = Dtype::FP32});
  CHECK(kernels(s) == 8 * 24);
  CHECK(moved(s).count == 20LL * 4 * n);
  CHECK(s.peak_temporary.count == 2 * 4 * (n / 24));
  // A step over thousands of tensors stays a bounded program.
  Step many = run_step({.impl = OptimizerImpl::ForLoop, .numel = n, .tensors = 5000});
  CHECK(many.launches.size() == 64);
  CHECK(kernels(many) == 8 * 5000);
}

TEST_CASE("the training loop's optimizer path: DeepSpeed's FusedAdam under ZeRO, else the implementation's; the knob wins",
          "[optimizer][config]") {
  CHECK(loop_optimizer_impl(experiment(small("torchtitan"), {{"framework", "fsdp2"}})) == OptimizerImpl::Foreach);
  CHECK(loop_optimizer_impl(experiment(small("hf"), {{"framework", "ddp"}})) == OptimizerImpl::Foreach);
  CHECK(loop_optimizer_impl(experiment(small("llm_foundry"), {{"framework", "fsdp1"}})) == OptimizerImpl::ForLoop);
  CHECK(loop_optimizer_impl(experiment(small("megatron"), {{"framework", "ddp"}})) == OptimizerImpl::Fused);
  CHECK(loop_optimizer_impl(experiment(small("torchtitan"), {{"framework", "fsdp2"}}, {{"optimizer_impl", "fused"}})) ==
        OptimizerImpl::Fused);
  // ZeRO steps with FusedAdam whatever the workload's loop: one launch per fp32 partition.
  Experiment z = experiment(small("hf"), {{"framework", "zero"}, {"stage", 1}, {"param_groups", "one"}});
  SimulationResult r = run_experiment(z);
  auto steps = ops_named(r.timeline, "optimizer.step");
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]->name == "optimizer.step (fp32 partition)");
}

TEST_CASE("clip_grad_norm_: FSDP1 norms and multiplies per gradient and all-reduces the norm between backward and the "
          "step; DDP's replicas need no all-reduce",
          "[optimizer][clip]") {
  Experiment e = experiment(small("llm_foundry"), {{"framework", "fsdp1"}}, {{"clip_grad_norm", 1.0}});
  SimulationResult r = run_experiment(e);
  auto ar = ops_named(r.timeline, "AR clip_grad_norm_");
  REQUIRE(ar.size() == 1);
  CHECK(ar[0]->bytes.count == 4);
  auto rs_root = ops_named(r.timeline, "RS root");
  auto step = ops_named(r.timeline, "optimizer.step");
  REQUIRE(rs_root.size() == 1);
  REQUIRE(!step.empty());
  CHECK(ar[0]->start >= rs_root[0]->end);
  CHECK(step.front()->start >= ar[0]->end);
  // The norms read every fp32 gradient shard once; the multiply reads and writes them.
  std::int64_t local = 0;
  for (const auto& u : make_fsdp1_units(*e.workload, Fsdp1Config{}, 8, Dtype::FP32)) local += u.shard_numel;
  Program p = e.strategy->build(e);
  int seen = 0;
  for (const Instruction& ins : p.instructions)
    if (const auto* l = std::get_if<Launch>(&ins)) {
      if (l->kernel.name == "clip_grad_norm_: vector_norm per gradient") {
        ++seen;
        CHECK(l->kernel.work->memory_bytes.count == 4 * local);
      }
      if (l->kernel.name == "clip_grad_norm_: mul_ per gradient") {
        ++seen;
        CHECK(l->kernel.work->memory_bytes.count == 8 * local);
      }
    }
  CHECK(seen == 2);
  // Off by default outside torchtitan's loop, off when declared null.
  CHECK(ops_named(run_experiment(experiment(small("llm_foundry"), {{"framework", "fsdp1"}})).timeline, "clip_grad_norm_").empty());
  CHECK(ops_named(run_experiment(experiment(small("torchtitan"), {{"framework", "fsdp2"}}, {{"clip_grad_norm", nullptr}})).timeline,
                  "clip_grad_norm_")
            .empty());
  CHECK(!ops_named(run_experiment(experiment(small("torchtitan"), {{"framework", "fsdp2"}})).timeline, "AR clip_grad_norm_").empty());
  // HYBRID_SHARD: FSDP1 all-reduces the norm over self.process_group, the node's shard group, only.
  Experiment hsdp = test::experiment_from_doc(
      {{"workload", small("llm_foundry")},
       {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 2}, {"gpus_per_node", 4}}},
       {"strategy", {{"framework", "fsdp1"}, {"sharding", "hybrid_shard"}}},
       {"training", {{"optimizer", "adamw"}, {"clip_grad_norm", 1.0}}}});
  SimulationResult h = run_experiment(hsdp);
  auto hybrid_ar = ops_named(h.timeline, "AR clip_grad_norm_");
  REQUIRE(hybrid_ar.size() == 1);
  CHECK(h.timeline.comms[hybrid_ar[0]->comm.value().index()].ranks == 4);
  SimulationResult ddp = run_experiment(experiment(small("hf"), {{"framework", "ddp"}}, {{"clip_grad_norm", 1.0}}));
  CHECK(!ops_named(ddp.timeline, "clip_grad_norm_: _foreach_norm").empty());
  CHECK(ops_named(ddp.timeline, "AR clip_grad_norm_").empty());
}

TEST_CASE("optimizer_impl and clip_grad_norm refuse what they cannot mean", "[optimizer][config]") {
  CHECK_THROWS_WITH(experiment(small("hf"), {{"framework", "ddp"}}, {{"optimizer_impl", "apex"}}),
                    Catch::Contains("/training/optimizer_impl") && Catch::Contains("for_loop"));
  CHECK_THROWS_WITH(experiment(small("hf"), {{"framework", "ddp"}}, {{"clip_grad_norm", 0}}), Catch::Contains("/training/clip_grad_norm"));
  CHECK_THROWS_WITH(experiment(small("hf"), {{"framework", "ddp"}}, {{"clip_grad_norm", "1.0"}}),
                    Catch::Contains("/training/clip_grad_norm"));
}

TEST_CASE("Lion: DeepSpeed's FusedLion one multi-tensor series of 5 elements a parameter; Composer's DecoupledLionW "
          "five ops per tensor, 13 elements, with the update a tensor-sized temporary; no foreach path",
          "[optimizer][memory]") {
  const std::int64_t n = 12'000'000;
  Step fused = run_step({.optimizer = Optimizer::Lion, .impl = OptimizerImpl::Fused, .numel = n, .tensors = 1, .dtype = Dtype::FP32});
  REQUIRE(fused.launches.size() == 1);
  CHECK(moved(fused).count == 5LL * 4 * n);
  CHECK(fused.temporaries.empty());
  // Three lists (param, grad, exp_avg): at most 48 tensors per kernel.
  CHECK(kernels(run_step({.optimizer = Optimizer::Lion, .impl = OptimizerImpl::Fused, .numel = 1'000'000, .tensors = 100})) == 3);
  Step loop = run_step({.optimizer = Optimizer::Lion, .impl = OptimizerImpl::ForLoop, .numel = n, .tensors = 24, .dtype = Dtype::FP32});
  CHECK(kernels(loop) == 5 * 24);
  CHECK(moved(loop).count == 13LL * 4 * n);
  CHECK(loop.peak_temporary.count == 4 * (n / 24));
  // Its state is one exp_avg; its loop is Composer's for-loop unless fused is asked for.
  CHECK(optimizer_state_bytes(Optimizer::Lion, n, Dtype::FP32).count == 4 * n);
  CHECK(loop_optimizer_impl(experiment(small("torchtitan"), {{"framework", "fsdp2"}}, {{"optimizer", "lion"}})) == OptimizerImpl::ForLoop);
  CHECK(deepspeed_optimizer_impl(experiment(small("hf"), {{"framework", "zero"}, {"stage", 1}}, {{"optimizer", "lion"}})) ==
        OptimizerImpl::Fused);
  CHECK_THROWS_WITH(experiment(small("hf"), {{"framework", "ddp"}}, {{"optimizer", "lion"}, {"optimizer_impl", "foreach"}}),
                    Catch::Contains("/training/optimizer_impl: \"foreach\": expected for_loop or fused with lion"));
}
