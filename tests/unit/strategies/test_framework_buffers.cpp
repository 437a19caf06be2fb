// Framework buffers allocated when the framework allocates them (issue 14 item 3). Each test
// names the upstream rule: DeepSpeed 0.19.6 deepspeed/runtime/zero/stage_1_and_2.py
// (deepspeedai/DeepSpeed edaa7221), PyTorch torch/distributed/fsdp/_fully_shard/
// (_fully_shard.py, _fsdp_state.py).
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using nlohmann::json;

namespace {

// OPT-1.3B on 8 x A800, per-device batch 8, sequence 512 (the shipped ZeRO examples).
Experiment opt13(json strategy, int grad_accum = 1) {
  json doc = {{"workload", {{"preset", "opt-1.3b"}, {"micro_batch", 8}, {"seq_len", 512}, {"dtype", "bf16"}}},
              {"cluster", {{"profile", "configs/hardware/a800-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", std::move(strategy)},
              {"training", {{"grad_accum", grad_accum}, {"optimizer", "adamw"}}}};
  return test::experiment_from_doc(doc);
}

// The same run under each framework that calls loss.backward() (ZeRO as stage 2).
std::vector<std::pair<std::string, Experiment>> opt13_every_framework(int grad_accum) {
  std::vector<std::pair<std::string, Experiment>> out;
  for (const char* fw : {"ddp", "fsdp1", "fsdp2", "zero"}) {
    json strategy = {{"framework", fw}};
    if (std::string(fw) == "zero") strategy["stage"] = 2;
    out.emplace_back(fw, opt13(strategy, grad_accum));
  }
  return out;
}

// Index of the first instruction matching `pred`, or -1.
template <class F>
long first_index(const Program& p, F pred) {
  for (std::size_t i = 0; i < p.instructions.size(); ++i)
    if (pred(p.instructions[i])) return static_cast<long>(i);
  return -1;
}
long mark_index(const Program& p, const std::string& name) {
  return first_index(p, [&](const Instruction& ins) {
    auto* m = std::get_if<Mark>(&ins);
    return m && m->name == name;
  });
}
long alloc_index(const Program& p, const std::string& prefix, long from = 0) {
  for (std::size_t i = static_cast<std::size_t>(from); i < p.instructions.size(); ++i)
    if (auto* a = std::get_if<Alloc>(&p.instructions[i]); a && a->name.rfind(prefix, 0) == 0) return static_cast<long>(i);
  return -1;
}
// Buffers whose name starts with `prefix` that are allocated and not yet freed before
// instruction `until` (program order; frees count at issue).
int live_named(const Program& p, const std::string& prefix, long until) {
  std::map<BufferId, bool> live;
  for (long i = 0; i < until && i < static_cast<long>(p.instructions.size()); ++i) {
    const auto& ins = p.instructions[static_cast<std::size_t>(i)];
    if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind(prefix, 0) == 0) live[a->buffer] = true;
    if (auto* f = std::get_if<Free>(&ins)) live.erase(f->buffer);
  }
  return static_cast<int>(live.size());
}

}  // namespace

TEST_CASE("ZeRO-1 with contiguous_gradients allocates the IPG buffer at the first gradient of backward, not after it",
          "[zero][memory][framework]") {
  // stage_1_and_2.py __init__: create_gradient_handling_hooks() when partition_gradients or
  // overlap_comm or use_grad_accum_attribute or contiguous_gradients (true by default); the
  // hook's process_gradients() calls setup_buckets(), which allocates
  // torch.empty(reduce_bucket_size) in the model dtype when not ready_for_gradients.
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
  Program p = e.strategy->build(e);
  long bwd = mark_index(p, "backward 0"), reduce = mark_index(p, "reduce_gradients");
  long first_grad = alloc_index(p, ".grad ", bwd);
  long ipg = alloc_index(p, "ipg buffer 0");
  REQUIRE(bwd >= 0);
  REQUIRE(reduce > bwd);
  CHECK(ipg > first_grad);  // after the first grad exists (the hook fires after accumulation)
  CHECK(ipg < reduce);      // long before reduce_gradients()
  // The next gradient's Alloc comes after the IPG buffer: it is the first hook's doing.
  CHECK(alloc_index(p, ".grad ", first_grad + 1) > ipg);
  // 5e8 bf16 elements = 1 GB.
  CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(ipg)]).bytes.count == 1'000'000'000);
}

TEST_CASE("ZeRO-1 with gradient accumulation keeps the IPG buffer from the first backward to the boundary's epilogue",
          "[zero][memory][framework]") {
  // Off the boundary, engine.allreduce_gradients() does nothing at stage 1 (it reduces only at
  // is_gradient_accumulation_boundary()), so independent_gradient_partition_epilogue() and its
  // _release_ipg_buffers() do not run: the buffer allocated by setup_buckets() in backward 0
  // is still held in forward 1 and released only after reduce_gradients() at the boundary.
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}}, 2);
  Program p = e.strategy->build(e);
  CHECK(live_named(p, "ipg buffer", mark_index(p, "forward 1")) == 1);
  CHECK(live_named(p, "ipg buffer", mark_index(p, "optimizer")) == 0);
  // One allocation in the whole step, not one per micro-batch.
  int allocs = 0;
  for (const auto& ins : p.instructions)
    if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind("ipg buffer", 0) == 0) ++allocs;
  CHECK(allocs == 1);
}

TEST_CASE("ZeRO-1 without contiguous_gradients has no IPG buffer", "[zero][memory][framework]") {
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}, {"contiguous_gradients", false}});
  Program p = e.strategy->build(e);
  CHECK(alloc_index(p, "ipg buffer") == -1);
}

TEST_CASE("ZeRO-2 with gradient accumulation holds two grads_in_partition buffers from the second micro-batch on",
          "[zero][memory][framework]") {
  // independent_gradient_partition_epilogue: _release_ipg_buffers() sets grads_in_partition =
  // None, so every backward's copy_grads_in_partition() allocates a fresh one; micro-batch 0's
  // stays referenced by all_grad_tensors (views), into which later epilogues add_() the new
  // gradients, until step() sets all_grad_tensors[i] = None.
  SECTION("grad_accum 1: one buffer at the step") {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 2}});
    Program p = e.strategy->build(e);
    CHECK(live_named(p, "grads_in_partition", mark_index(p, "optimizer")) == 1);
  }
  SECTION("grad_accum 2: micro-batch 0's and micro-batch 1's at the step") {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 2}}, 2);
    Program p = e.strategy->build(e);
    CHECK(live_named(p, "grads_in_partition", mark_index(p, "forward 1")) == 1);
    CHECK(live_named(p, "grads_in_partition", mark_index(p, "optimizer")) == 2);
  }
  SECTION("grad_accum 3: still two at the step (micro-batch 1's goes once its param.grad views move to the IPG buffer)") {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 2}}, 3);
    Program p = e.strategy->build(e);
    CHECK(live_named(p, "grads_in_partition", mark_index(p, "optimizer")) == 2);
    // And none after the step.
    CHECK(live_named(p, "grads_in_partition", static_cast<long>(p.instructions.size())) == 0);
  }
}

TEST_CASE("ZeRO-1/2 step() flattens each group's bf16 gradient partition before the fp32 cast", "[zero][memory][framework]") {
  // step(): flat_grad_partition = self.flatten(self.averaged_gradients[i]) (bit16), then
  // single_grad_partition = flat_grad_partition.to(fp32), then `del flat_grad_partition`: for a
  // moment the bf16 flat copy, the fp32 grad and grads_in_partition coexist.
  for (int stage : {1, 2}) {
    Experiment e = opt13({{"framework", "zero"}, {"stage", stage}, {"param_groups", "one"}});
    Program p = e.strategy->build(e);
    long flat = alloc_index(p, "flat grad partition");
    long g32 = alloc_index(p, "fp32 partition grad");
    REQUIRE(flat >= 0);
    CHECK(g32 > flat);
    // The partition of the single group: 1,315,758,080 / 8 = 164,469,760 bf16 elements.
    CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(flat)]).bytes.count == 164'469'760LL * 2);
    CHECK(live_named(p, "flat grad partition", g32 + 1) == 1);
    CHECK(live_named(p, "grads_in_partition", g32 + 1) == 1);
  }
}

TEST_CASE("ZeRO-1/2 with the usual decay / no-decay param groups all-gather each group's flat buffer after the step",
          "[zero][traffic][framework]") {
  // step() ends with all_gather_dp_groups(groups_flat=self.bit16_groups_flat, ...): one
  // all_gather_into_tensor per param group, each group flattened and padded to 2 * dp on its
  // own. OPT-1.3B: the 1-D params (biases, LayerNorm weights and biases) are 24 x 26,624 +
  // 4,096 (final LayerNorm) = 643,072 elements (a multiple of 16: no padding); the rest is
  // 1,315,758,080 - 643,072 = 1,315,115,008 (also a multiple of 16).
  auto step_ags = [](const SimulationResult& r) {
    std::vector<std::int64_t> bytes;
    for (const auto& op : r.timeline.ops)
      if (op.kind == TimelineOp::Kind::Collective && op.name.rfind("AG step flat", 0) == 0) bytes.push_back(op.bytes.count);
    return bytes;
  };
  auto two = step_ags(run_experiment(opt13({{"framework", "zero"}, {"stage", 1}})));
  REQUIRE(two.size() == 2);
  CHECK(two[0] == 1'315'115'008LL * 2);
  CHECK(two[1] == 643'072LL * 2);
  auto one = step_ags(run_experiment(opt13({{"framework", "zero"}, {"stage", 1}, {"param_groups", "one"}})));
  REQUIRE(one.size() == 1);
  CHECK(one[0] == 1'315'758'080LL * 2);
}

namespace {

// Llama-2-7B under FSDP2 `strategy` on 8 H100: how many times the root all-gathers again at backward's
// start ("AG root bwd"), and the root_reshard_after_forward the strategy reports.
std::pair<int, bool> root_backward_all_gathers(const json& strategy, const json& training) {
  json doc = {{"workload", {{"preset", "llama2-7b"}, {"seq_len", 2048}, {"micro_batch", 1}, {"dtype", "bf16"}}},
              {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", strategy},
              {"training", training}};
  Experiment e = test::experiment_from_doc(doc);
  Program p = e.strategy->build(e);
  int n = 0;
  for (const auto& ins : p.instructions)
    if (auto* c = std::get_if<Collective>(&ins); c && c->name == "AG root bwd") ++n;
  return {n, e.strategy->effective_config().at("root_reshard_after_forward").get<bool>()};
}

}  // namespace

TEST_CASE("FSDP2 reshards the root after forward when reshard_after_forward is passed explicitly; None exempts it",
          "[fsdp2][framework]") {
  // _fully_shard.py: auto_reshard_after_forward = reshard_after_forward is None; only then does
  // FSDPState._lazy_init clear the root's post_forward_mesh_info ("For the root, do not
  // reshard after forward"). torchtitan passes the value explicitly, so its root is resharded
  // and all-gathered again when backward starts.
  auto root_bwd_ags = [](const json& strategy) { return root_backward_all_gathers(strategy, {{"optimizer", "adamw"}}); };
  CHECK(root_bwd_ags({{"framework", "fsdp2"}}) == std::make_pair(0, false));
  CHECK(root_bwd_ags({{"framework", "fsdp2"}, {"reshard_after_forward", nullptr}}) == std::make_pair(0, false));
  CHECK(root_bwd_ags({{"framework", "fsdp2"}, {"reshard_after_forward", true}}) == std::make_pair(1, true));
  CHECK(root_bwd_ags({{"framework", "fsdp2"}, {"reshard_after_forward", false}}) == std::make_pair(0, false));
}

// Catches: a root resharded at a PyTorch whose FSDP2 never resharded it (one extra all-gather at
// backward start).
TEST_CASE("Before PyTorch 2.8 FSDP2's root never reshards after forward, whatever reshard_after_forward says",
          "[fsdp2][framework][config]") {
  // Early FSDPState._lazy_init cleared the root's post_forward_mesh_info unconditionally; since
  // pytorch/pytorch#154704 + #155319 (2.8) only `if self._auto_reshard_after_forward` (torch 2.9
  // torch/distributed/fsdp/_fully_shard/_fsdp_state.py l.183-186), i.e. for the None default.
  auto root_bwd_ags = [](const json& strategy, const char* torch) {
    return root_backward_all_gathers(strategy, {{"optimizer", "adamw"}, {"torch_version", torch}});
  };
  const json explicit_true = {{"framework", "fsdp2"}, {"reshard_after_forward", true}};
  CHECK(root_bwd_ags(explicit_true, "2.7") == std::make_pair(0, false));
  CHECK(root_bwd_ags(explicit_true, "2.8") == std::make_pair(1, true));
  CHECK(root_bwd_ags({{"framework", "fsdp2"}, {"reshard_after_forward", 2}}, "2.4") == std::make_pair(0, false));
  // Stating the root resharded at such a release is an input error naming the release.
  json root_true = explicit_true;
  root_true["root_reshard_after_forward"] = true;
  CHECK_THROWS_WITH(root_bwd_ags(root_true, "2.7"),
                    Catch::Contains("/strategy/root_reshard_after_forward") && Catch::Contains("2.7.0") && Catch::Contains("2.8"));
}

namespace {

int count_allocs(const Program& p, const std::string& prefix) {
  int n = 0;
  for (const auto& ins : p.instructions)
    if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind(prefix, 0) == 0) ++n;
  return n;
}

// Index of the first Launch whose kernel name ends with `suffix`, from `from`.
long launch_index(const Program& p, const std::string& suffix, long from = 0) {
  for (std::size_t i = static_cast<std::size_t>(from); i < p.instructions.size(); ++i)
    if (auto* l = std::get_if<Launch>(&p.instructions[i]); l && l->kernel.name.ends_with(suffix)) return static_cast<long>(i);
  return -1;
}

// Index of the Free of the buffer allocated at instruction `alloc`, or -1.
long free_index(const Program& p, long alloc) {
  BufferId id = std::get<Alloc>(p.instructions[static_cast<std::size_t>(alloc)]).buffer;
  for (std::size_t i = static_cast<std::size_t>(alloc) + 1; i < p.instructions.size(); ++i)
    if (auto* f = std::get_if<Free>(&p.instructions[i]); f && f->buffer == id) return static_cast<long>(i);
  return -1;
}

const std::string kKept = "model output kept by the training loop";

}  // namespace

TEST_CASE("An HF training loop keeps the logits from one forward until the next forward's model returns",
          "[memory][framework]") {
  // DeepSpeed-Chat step 1 (main.py: `outputs = model(**batch, use_cache=False)`, then
  // model.backward(outputs.loss)): `outputs` holds the logits through backward and the step, and
  // the next assignment drops them only once the next forward, loss included (HF computes it
  // inside forward), has returned. The li-plus ZeRO-1 trace shows it: step 11 allocates its
  // 392.75 MiB logits block at 88.45 ms and frees step 10's at 89.03 ms, after the loss.
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
  Program p = e.strategy->build(e);
  long fwd = mark_index(p, "forward 0"), bwd = mark_index(p, "backward 0");
  long previous = alloc_index(p, kKept + " (previous step)");
  long current = alloc_index(p, kKept, fwd);
  REQUIRE(previous >= 0);
  REQUIRE(previous < fwd);
  REQUIRE(current > fwd);
  // 8 x 512 tokens x 50,272 vocab in bf16 = 411,828,224 B, the trace's logits block exactly.
  CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(current)]).bytes.count == 411'828'224);
  const long log_softmax = launch_index(p, "log_softmax", fwd), nll_loss = launch_index(p, "nll_loss", fwd);
  REQUIRE(log_softmax > fwd);
  REQUIRE(nll_loss > log_softmax);
  CHECK(current < log_softmax);  // the lm_head output, before the loss
  long dropped = free_index(p, previous);
  CHECK(dropped > nll_loss);  // after the model (and its loss) returned
  CHECK(dropped < bwd);
  CHECK(live_named(p, kKept, dropped) == 2);  // both at the forward's end
  CHECK(live_named(p, kKept, bwd) == 1);
  CHECK(free_index(p, current) == -1);  // still held when the step ends
}

TEST_CASE("With gradient accumulation each micro-batch's output replaces the previous one", "[memory][framework]") {
  Experiment e = opt13({{"framework", "zero"}, {"stage", 2}}, 2);
  Program p = e.strategy->build(e);
  CHECK(count_allocs(p, kKept) == 3);  // the previous step's and one per micro-batch
  CHECK(live_named(p, kKept, mark_index(p, "forward 1")) == 1);
  CHECK(live_named(p, kKept, mark_index(p, "optimizer")) == 1);
}

TEST_CASE("Which loops keep the output: torchtitan after its #391 and Megatron do not; the knob overrides",
          "[memory][framework]") {
  auto build = [](const std::string& preset, std::optional<bool> keeps) {
    json w = {{"preset", preset}, {"seq_len", 2048}, {"micro_batch", 1}, {"dtype", "bf16"}};
    if (keeps) w["loop_keeps_output"] = *keeps;
    json doc = {{"workload", w},
                {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                {"strategy", {{"framework", "fsdp2"}}},
                {"training", {{"optimizer", "adamw"}}}};
    Experiment e = test::experiment_from_doc(doc);
    return e.strategy->build(e);
  };
  // torchtitan train.py `del pred` before loss.backward() (e29b6b4d, 2024-06-12): nothing kept.
  CHECK(count_allocs(build("llama2-7b", std::nullopt), kKept) == 0);
  // Before it (83c879f1, PR #165's runs): `pred = model(input_ids)`, the model returning
  // self.output(h).float(): 2,048 tokens x 32,000 vocab in fp32, dropped as soon as the next
  // model call returns, before the loss.
  Program p = build("llama2-7b", true);
  long fwd = mark_index(p, "forward 0");
  long current = alloc_index(p, kKept, fwd);
  REQUIRE(current >= 0);
  CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(current)]).bytes.count == 2048LL * 32000 * 4);
  long dropped = free_index(p, alloc_index(p, kKept + " (previous step)"));
  CHECK(dropped > current);
  REQUIRE(launch_index(p, "log_softmax", fwd) > fwd);
  CHECK(dropped < launch_index(p, "log_softmax", fwd));
  // Megatron's model returns the loss: no logits-sized output outlives it, knob or not.
  CHECK(count_allocs(build("gpt3-6.7b", true), kKept) == 0);
}

TEST_CASE("Before DeepSpeed 0.18.3 backward() allocates the IPG buffers ahead of the loss backward", "[zero][memory][framework]") {
  // stage_1_and_2.py at v0.12.6, DeepSpeedZeroOptimizer.backward(): `self.ipg_buffer = []`,
  // torch.empty(reduce_bucket_size) (twice with overlap_comm), then loss.backward(); #7665
  // (53e91a09, v0.18.3) moved it into setup_buckets() at the first gradient hook. The li-plus
  // ZeRO-2 trace allocates both 954 MiB blocks 1.2 ms before NllLossBackward0.
  auto first_ipg_vs_loss_bwd = [](const std::string& version) {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 2}, {"overlap_comm", true}, {"deepspeed_version", version}});
    Program p = e.strategy->build(e);
    long bwd = mark_index(p, "backward 0");
    // The loss backward's first kernel carries the layer's name ("bwd head"); its second is
    // log_softmax's.
    long loss_bwd = launch_index(p, "bwd head", bwd);
    REQUIRE(loss_bwd > bwd);
    return std::pair{alloc_index(p, "ipg buffer", bwd), loss_bwd};
  };
  auto [old_ipg, old_loss] = first_ipg_vs_loss_bwd("0.12.6");
  CHECK(old_ipg > 0);
  CHECK(old_ipg < old_loss);
  auto [new_ipg, new_loss] = first_ipg_vs_loss_bwd("0.19.6");
  CHECK(new_ipg > new_loss);
}

TEST_CASE("Before DeepSpeed 0.13.0 stage 1 ignores overlap_comm and contiguous_gradients", "[zero][framework]") {
  // engine.py _configure_zero_optimizer from #2703 (v0.8.0) until #4887 (af033831, v0.13.0):
  // "Overlap and contiguous grads are meaningless in stage 1 and are ignored".
  Experiment old = opt13({{"framework", "zero"}, {"stage", 1}, {"overlap_comm", true}, {"deepspeed_version", "0.12"}});
  json eff = old.strategy->effective_config();
  CHECK(eff["overlap_comm"] == false);
  CHECK(eff["contiguous_gradients"] == false);
  CHECK(eff["deepspeed_version"] == "0.12.0");
  CHECK(alloc_index(old.strategy->build(old), "ipg buffer") == -1);
  Experiment now = opt13({{"framework", "zero"}, {"stage", 1}, {"overlap_comm", true}, {"deepspeed_version", "0.13.0"}});
  CHECK(now.strategy->effective_config()["overlap_comm"] == true);
  // Stage 2 is not affected by the stage-1 rule.
  Experiment s2 = opt13({{"framework", "zero"}, {"stage", 2}, {"deepspeed_version", "0.12.6"}});
  CHECK(s2.strategy->effective_config()["contiguous_gradients"] == true);
}

TEST_CASE("deepspeed_version must be a release number", "[zero][config]") {
  for (const char* bad : {"abc", "0", "0.12.", "1.2.3.4", "0.x", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(opt13({{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", bad}}),
                      Catch::Contains("deepspeed_version") && Catch::Contains("a DeepSpeed release"));
  }
  CHECK_THROWS_WITH(opt13({{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", 12}}), Catch::Contains("a DeepSpeed release"));
}

TEST_CASE("FSDP2, FSDP1 and DDP create AdamW's state lazily, two tensors per parameter the optimizer steps",
          "[memory][optimizer]") {
  // torch.optim AdamW (_init_group): exp_avg and exp_avg_sq per parameter, zeros_like at the
  // first step(). FSDP2 steps each parameter's DTensor shard, FSDP1 each unit's flat parameter,
  // DDP each parameter; DeepSpeed creates its state at initialization (not lazy).
  auto lazy_of = [](json strategy) {
    json doc = {{"workload", {{"preset", "llama2-7b"}, {"micro_batch", 1}, {"seq_len", 1024}, {"dtype", "bf16"}}},
                          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                          {"strategy", std::move(strategy)},
                          {"training", {{"grad_accum", 1}, {"optimizer", "adamw"}}}};
    const Program p = run_experiment(test::experiment_from_doc(doc)).program;
    std::int64_t count = 0, bytes = 0, state_bytes = 0;
    for (const auto& ins : p.instructions)
      if (const auto* a = std::get_if<Alloc>(&ins)) {
        if (a->lazy) ++count, bytes += a->bytes.count;
        if (a->category == MemCategory::OptimizerState) state_bytes += a->bytes.count;
      }
    if (count > 0) CHECK(bytes == state_bytes);  // all of the optimizer state, nothing else
    return count;
  };
  // Llama-2-7B: 32 blocks x 9 parameters (4 attention, 3 MLP, 2 norms) + embedding, final norm,
  // output = 291 parameters; FSDP1 wraps 32 blocks + the root = 33 flat parameters.
  CHECK(lazy_of({{"framework", "fsdp2"}}) == 2 * 291);
  CHECK(lazy_of({{"framework", "ddp"}}) == 2 * 291);
  CHECK(lazy_of({{"framework", "fsdp1"}}) == 2 * 33);
  CHECK(lazy_of({{"framework", "zero"}, {"stage", 1}}) == 0);
}

namespace {

// The sizes of the buffers named `name` exactly, in program order from `from`.
std::vector<std::int64_t> alloc_sizes(const Program& p, const std::string& name, long from = 0) {
  std::vector<std::int64_t> sizes;
  for (std::size_t i = static_cast<std::size_t>(from); i < p.instructions.size(); ++i)
    if (auto* a = std::get_if<Alloc>(&p.instructions[i]); a && a->name == name) sizes.push_back(a->bytes.count);
  return sizes;
}

// torchtitan's Llama-2-7B at local batch 1 x 2,048 on 8 H100 (its loss over pred.float()), its
// program under `strategy`; `keeps`: the loop keeps `pred` (before torchtitan #391).
Program llama7b(json strategy, bool keeps = false) {
  json w = {{"preset", "llama2-7b"}, {"seq_len", 2048}, {"micro_batch", 1}, {"dtype", "bf16"}};
  if (keeps) w["loop_keeps_output"] = true;
  json doc = {{"workload", w},
              {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", std::move(strategy)},
              {"training", {{"optimizer", "adamw"}}}};
  Experiment e = test::experiment_from_doc(doc);
  return e.strategy->build(e);
}

}  // namespace

TEST_CASE("The loss's logits-sized tensors reach the allocator one by one, as the ops allocate them",
          "[memory][framework]") {
  // The caching allocator serves each request by its size, so how the bytes are cut into tensors
  // decides which cached blocks a step reuses (and so its reserved bytes). The li-plus ZeRO-1
  // trace (profile_memory, step 11) shows the HF OPT loss's tensors, 8 x 512 x 50,272 bf16 each:
  // forward, the lm_head output (kept), the shifted copy, then log_softmax's output at
  // aten::_log_softmax (saved); backward, nll_loss's gradient, log_softmax's gradient while it
  // lives, then the two slice_backward zeros, never more than two at once.
  const std::int64_t TV = 8LL * 512 * 50272, bf16 = 2;
  {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
    Program p = e.strategy->build(e);
    const long fwd = mark_index(p, "forward 0"), bwd = mark_index(p, "backward 0");
    const long saved = alloc_index(p, "activations head.loss log_softmax", fwd);
    REQUIRE(saved > fwd);
    CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(saved)]).bytes.count == TV * bf16);
    CHECK(saved > alloc_index(p, kKept, fwd));  // after the lm_head output
    CHECK(saved < launch_index(p, "log_softmax", fwd));
    CHECK(free_index(p, saved) > bwd);
    // The head's other saved tensor is lm_head's input (8 x 512 x 2,048 bf16), a tensor of its
    // own as every op's of a layer that is not checkpointed.
    CHECK(alloc_sizes(p, "activations head.lm_head linear", fwd) == std::vector<std::int64_t>{8LL * 512 * 2048 * bf16});
    CHECK(alloc_sizes(p, "activations head", fwd).empty());  // no block
    CHECK(alloc_sizes(p, "recomputed head", bwd) == std::vector<std::int64_t>{TV * bf16, TV * bf16});
  }
  {
    // torchtitan's loss over pred.float() (PR #165's runs): nll_loss's fp32 gradient, then
    // log_softmax_backward_data's fp32 grad_input while it lives.
    Program p = llama7b({{"framework", "fsdp2"}});
    const std::int64_t fp32_logits = 2048LL * 32000 * 4;
    CHECK(alloc_sizes(p, "activations head.loss log_softmax") == std::vector<std::int64_t>{fp32_logits});
    CHECK(alloc_sizes(p, "recomputed head") == std::vector<std::int64_t>{fp32_logits, fp32_logits});
  }
  {
    // ZeRO-3 allocates them too (it skipped the head's loss gradients: only checkpointed layers
    // allocated backward transients).
    Experiment e = opt13({{"framework", "zero"}, {"stage", 3}});
    Program p = e.strategy->build(e);
    CHECK(alloc_sizes(p, "recomputed head") == std::vector<std::int64_t>{TV * bf16, TV * bf16});
    CHECK(alloc_sizes(p, "activations head.loss log_softmax") == std::vector<std::int64_t>{TV * bf16});
  }
}

TEST_CASE("The loss's logits-sized temporaries live from their op to their last reader", "[memory][framework]") {
  // li-plus ZeRO-1 trace, step 11: HF OPT's shifted copy is allocated at 88.56 ms (aten::clone),
  // read by log_softmax, and freed at 88.98 ms, after nll_loss, before the previous step's logits
  // (89.03 ms); the step's peak allocated (16.75 GiB at 88.83 ms) has it alive.
  const std::int64_t TV = 8LL * 512 * 50272;
  {
    Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
    Program p = e.strategy->build(e);
    const long fwd = mark_index(p, "forward 0");
    const long shift = alloc_index(p, "temporary head.loss shift_logits.contiguous", fwd);
    REQUIRE(shift > fwd);
    CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(shift)]).bytes.count == TV * 2);
    CHECK(shift < launch_index(p, "shift_logits.contiguous", fwd));
    const long freed = free_index(p, shift);
    CHECK(freed > launch_index(p, "nll_loss", fwd));
    CHECK(freed < free_index(p, alloc_index(p, kKept + " (previous step)")));
    CHECK(count_allocs(p, "temporary ") == 1);
  }
  // torchtitan at PR #165 (`self.output(h).float()`): lm_head's bf16 output lives until the fp32
  // copy is written, next to it; under ZeRO-3 too, where the two ops are in different modules.
  for (const char* framework : {"fsdp2", "zero"}) {
    json strategy = {{"framework", framework}};
    if (std::string(framework) == "zero") strategy["stage"] = 3;
    Program p = llama7b(strategy, true);
    const long fwd = mark_index(p, "forward 0");
    const long bf16 = alloc_index(p, "temporary head.lm_head linear", fwd);
    REQUIRE(bf16 > fwd);
    CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(bf16)]).bytes.count == 2048LL * 32000 * 2);
    const long fp32 = alloc_index(p, kKept, fwd);
    CHECK(bf16 < fp32);
    CHECK(fp32 < free_index(p, bf16));  // the fp32 copy is written while the bf16 output lives
    CHECK(free_index(p, bf16) > launch_index(p, "logits.float", fwd));
    CHECK(free_index(p, bf16) < launch_index(p, "log_softmax", fwd));
  }
  {
    // torchtitan after #391 (`del pred` before `loss.backward()`): the fp32 copy is a temporary
    // too, alive until the loss has read it, gone before backward.
    Program p = llama7b({{"framework", "fsdp2"}});
    const long fwd = mark_index(p, "forward 0"), bwd = mark_index(p, "backward 0");
    CHECK(count_allocs(p, kKept) == 0);
    const long bf16 = alloc_index(p, "temporary head.lm_head linear", fwd);
    const long fp32 = alloc_index(p, "temporary head.loss logits.float", fwd);
    REQUIRE(bf16 > fwd);
    REQUIRE(fp32 > bf16);
    CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(fp32)]).bytes.count == 2048LL * 32000 * 4);
    CHECK(fp32 < free_index(p, bf16));
    CHECK(free_index(p, fp32) > launch_index(p, "nll_loss", fwd));
    CHECK(free_index(p, fp32) < bwd);
  }
}

namespace {

// OPT-1.3B on 8 A800 (micro-batch 8, sequence 512) under `strategy`, with `training` merged in
// (torch_version, ...).
Experiment opt13(json strategy, json training, json workload_extra = json::object()) {
  json doc = {{"workload", {{"preset", "opt-1.3b"}, {"micro_batch", 8}, {"seq_len", 512}, {"dtype", "bf16"}}},
              {"cluster", {{"profile", "configs/hardware/a800-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
              {"strategy", std::move(strategy)},
              {"training", std::move(training)}};
  doc["workload"].update(workload_extra);
  return test::experiment_from_doc(doc);
}

// The same under ZeRO-1.
Experiment opt13_training(json training, json workload_extra = json::object()) {
  return opt13({{"framework", "zero"}, {"stage", 1}}, std::move(training), std::move(workload_extra));
}

// The program of opt13(strategy, training).
Program opt13_program(json strategy, json training) {
  Experiment e = opt13(std::move(strategy), std::move(training));
  return e.strategy->build(e);
}

const Free& free_at(const Program& p, long i) { return std::get<Free>(p.instructions[static_cast<std::size_t>(i)]); }

}  // namespace

TEST_CASE("A block that is not checkpointed hands the allocator each op's saved tensor, freed as its module's backward runs",
          "[memory][framework]") {
  // Autograd keeps what each op saved (the li-plus ZeRO-1 trace's memory events: 128 MiB
  // attention-score tensors, 64 MiB dropout masks, 16 MiB hidden states per block, never a
  // block-sized request) and releases a node's saved variables as the node runs
  // (engine.cpp call_function -> release_variables), so a module's tensors go once its
  // backward has been issued, before the block's next module's backward.
  const std::int64_t S2 = 8LL * 32 * 512 * 512, bf16 = 2;
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
  Program p = e.strategy->build(e);
  const long bwd = mark_index(p, "backward 0");
  const long softmax = alloc_index(p, "activations block.3.attn.core softmax");
  REQUIRE(softmax >= 0);
  CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(softmax)]).bytes.count == S2 * bf16);
  CHECK(alloc_sizes(p, "activations block.3").empty());  // no block-sized request
  const long core_bwd = launch_index(p, "block.3.attn.core softmax.bwd", bwd);
  const long v_bwd = launch_index(p, "block.3.attn.v_proj linear.dgrad", bwd);
  REQUIRE(core_bwd > bwd);
  REQUIRE(v_bwd > core_bwd);
  const long freed = free_index(p, softmax);
  CHECK(freed > core_bwd);
  CHECK(freed < v_bwd);

  // A fully checkpointed block keeps only its input, one tensor (8 x 512 x 2,048 bf16).
  Experiment ac = opt13_training({{"optimizer", "adamw"}}, {{"activation_checkpointing", "full"}});
  Program q = ac.strategy->build(ac);
  CHECK(alloc_sizes(q, "activations block.3") == std::vector<std::int64_t>{8LL * 512 * 2048 * bf16});
  CHECK(alloc_index(q, "activations block.3.attn.core") == -1);
}

TEST_CASE("Backward allocates each op's activation gradient and frees the one it consumed", "[memory][framework]") {
  // An autograd node's output gradient is a new tensor, its incoming gradient is dropped once
  // the node has run: the li-plus ZeRO-1 trace allocates 2-3 attention-score-sized gradients
  // per block in backward and some 25 of the hidden size. Weight and bias gradients are the
  // strategy's (.grad, buckets), not activation gradients.
  const std::int64_t S2 = 8LL * 32 * 512 * 512, bf16 = 2;
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
  Program p = e.strategy->build(e);
  CHECK(alloc_sizes(p, "gradient block.3.attn.core softmax.bwd") == std::vector<std::int64_t>{S2 * bf16});
  CHECK(alloc_index(p, "gradient block.3.mlp.fc1 linear.wgrad") == -1);
  CHECK(alloc_index(p, "gradient block.3.mlp.fc1 bias.grad_sum") == -1);
  CHECK(alloc_index(p, "gradient block.3.mlp.fc1 linear.dgrad") >= 0);
  // Never more than two live at once: the one an op reads and the one it writes.
  std::map<BufferId, bool> live;
  std::size_t most = 0;
  for (const auto& ins : p.instructions) {
    if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind("gradient ", 0) == 0) live[a->buffer] = true;
    if (auto* f = std::get_if<Free>(&ins)) live.erase(f->buffer);
    most = std::max(most, live.size());
  }
  CHECK(most == 2);
  CHECK(live.empty());
}

TEST_CASE("Before PyTorch 2.8 a bucket freed after its collective waits for the collective (c10d recordStream)",
          "[zero][memory][framework]") {
  // ProcessGroupNCCL before pytorch#148590 (2.8) runs the all-reduce on its NCCL stream and
  // records that stream on the bucket, so DeepSpeed's `del` of the flattened bucket right after
  // allreduce_bucket returns it to the caching allocator only once the all-reduce has run. The
  // li-plus ZeRO-1 trace (torch of Dec 2023) puts its three buckets at three addresses although
  // each is freed before the next is allocated; 2.8+ stashes the tensors until wait() and the
  // free is stream-ordered.
  Experiment old_torch = opt13_training({{"optimizer", "adamw"}, {"torch_version", "2.1"}});
  Experiment new_torch = opt13_training({{"optimizer", "adamw"}});
  Program po = old_torch.strategy->build(old_torch), pn = new_torch.strategy->build(new_torch);
  const long bo = alloc_index(po, "flatten bucket 0"), bn = alloc_index(pn, "flatten bucket 0");
  REQUIRE(bo >= 0);
  REQUIRE(bn >= 0);
  CHECK(free_at(po, free_index(po, bo)).record_streams.size() == 1);
  CHECK(free_at(pn, free_index(pn, bn)).record_streams.empty());
  // The next bucket cannot take the pending one's block: the step reserves about a bucket more.
  const double more = static_cast<double>(run_experiment(old_torch).metrics.peak_reserved.count -
                                          run_experiment(new_torch).metrics.peak_reserved.count);
  CHECK(more > 900.0 * 1024 * 1024);
}

TEST_CASE("ZeRO-1/2's gradient norm makes an fp64 copy of each gradient slice, one tensor at a time", "[zero][memory][framework]") {
  // get_grad_norm_direct (stage_1_and_2.py): torch.linalg.vector_norm(g.data.double()) per
  // slice of this rank's partition. On rank 0 of OPT-1.3B the first slice is the token
  // embedding's gradient, 50,272 x 2,048: an 786 MiB fp64 tensor in the li-plus ZeRO-1 trace.
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}});
  Program p = e.strategy->build(e);
  const long first = alloc_index(p, "grad norm: g.double()");
  REQUIRE(first >= 0);
  CHECK(std::get<Alloc>(p.instructions[static_cast<std::size_t>(first)]).bytes.count == 50272LL * 2048 * 8);
  // Each copy is dropped before the next is made.
  std::map<BufferId, bool> live;
  std::size_t most = 0, copies = 0;
  for (const auto& ins : p.instructions) {
    if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind("grad norm: g.double()", 0) == 0) live[a->buffer] = true, ++copies;
    if (auto* f = std::get_if<Free>(&ins)) live.erase(f->buffer);
    most = std::max(most, live.size());
  }
  CHECK(copies > 1);
  CHECK(most == 1);
  CHECK(live.empty());
}

TEST_CASE("torch_version names a PyTorch release", "[config]") {
  CHECK_THROWS_WITH(opt13_training({{"torch_version", "2"}}),
                    Catch::Contains("/training/torch_version") && Catch::Contains("a PyTorch release such as"));
  CHECK_THROWS_WITH(opt13_training({{"torch_version", 2.1}}), Catch::Contains("/training/torch_version"));
  CHECK(opt13_training({{"torch_version", "2.7.1"}}).training.c10d_records_streams());
  CHECK(!opt13_training({{"torch_version", "2.8"}}).training.c10d_records_streams());
  CHECK(!opt13_training(json::object()).training.c10d_records_streams());
  // Synchronous all-gather / reduce-scatter lost recordStream in 2.2 (pytorch#111431).
  CHECK(opt13_training({{"torch_version", "2.1"}}).training.c10d_records_sync_gather_scatter_streams());
  CHECK(!opt13_training({{"torch_version", "2.2"}}).training.c10d_records_sync_gather_scatter_streams());
  CHECK(!opt13_training({{"torch_version", "2.7.1"}}).training.c10d_records_sync_gather_scatter_streams());
}

// Catches: ZeRO-3's reduce-scatter buffer held for its collective at PyTorch 2.2-2.7 (c10d stashes
// synchronous reduce-scatters since pytorch#111431), or a separate output buffer DeepSpeed never
// allocates.
TEST_CASE("ZeRO-3 reduce-scatters in place, and c10d holds the buffer for it only before PyTorch 2.2", "[zero][memory]") {
  // deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/comm/coalesced_collectives.py l.22-23:
  // `dist.reduce_scatter_fn(output_tensor, input_tensor, group=group, async_op=False)`, called at
  // l.205 with this rank's torch.chunk (l.202) of the flat buffer as the output: no second buffer.
  auto rs_hold = [](json strategy, json training) {
    Program p = opt13_program(std::move(strategy), std::move(training));
    CHECK(count_allocs(p, "RS output") == 0);
    const long buffer = alloc_index(p, "RS interleaved bucket 0");
    REQUIRE(buffer >= 0);
    const long freed = free_index(p, buffer);
    // Freed once partition_grads has copied out of its views, not right after the collective.
    CHECK(freed > launch_index(p, "partition_grads bucket 0", buffer));
    return free_at(p, freed).record_streams.size();
  };
  const json ds = {{"framework", "zero"}, {"stage", 3}};
  CHECK(rs_hold(ds, {{"torch_version", "2.1"}}) == 1);
  CHECK(rs_hold(ds, {{"torch_version", "2.2"}}) == 0);
  CHECK(rs_hold(ds, {{"torch_version", "2.7"}}) == 0);
  // Without torch_version, the PyTorch of the DeepSpeed release's time: v0.13.1 (2024-01-23)
  // predates PyTorch 2.2.0 (2024-01-30), v0.13.2 (2024-02-10) does not.
  json old_ds = ds, new_ds = ds;
  old_ds["deepspeed_version"] = "0.13.1";
  new_ds["deepspeed_version"] = "0.13.2";
  CHECK(rs_hold(old_ds, json::object()) == 1);
  CHECK(rs_hold(new_ds, json::object()) == 0);
}

// Catches: FSDP1 at PyTorch <= 2.1 freeing its unsharded flat parameter without c10d's hold on the
// all-gather's output.
TEST_CASE("FSDP1 before PyTorch 2.2: c10d's recordStream holds the all-gathered flat parameter for the unshard stream too",
          "[fsdp1][memory]") {
  // FSDP1's all_gather_into_tensor and reduce_scatter_tensor are synchronous; before
  // pytorch#111431 (2.2) c10d recorded its NCCL stream on their tensors, so _reshard's free of the
  // flat parameter (record_stream on the compute stream) also waits for the unshard stream's work
  // queued by then: 2 recorded streams instead of 1.
  auto recorded = [](const char* torch) {
    Program p = opt13_program({{"framework", "fsdp1"}}, {{"torch_version", torch}});
    const long full = alloc_index(p, "full_param");
    REQUIRE(full >= 0);
    return free_at(p, free_index(p, full)).record_streams.size();
  };
  CHECK(recorded("2.1") == 2);
  CHECK(recorded("2.2") == 1);
}

TEST_CASE("Without torch_version, ZeRO takes the PyTorch of its DeepSpeed release's time", "[zero][memory][config]") {
  // DeepSpeed up to 0.16.4 (February 2025) predates pytorch#148590 (2.8): its runs held
  // collective tensors; a later release is taken with the default 2.9; a declared torch_version wins.
  auto bucket_free = [](json strategy, json training) {
    Program p = opt13_program(std::move(strategy), std::move(training));
    return free_at(p, free_index(p, alloc_index(p, "flatten bucket 0"))).record_streams.size();
  };
  const json old_ds = {{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", "0.12.6"}};
  const json new_ds = {{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", "0.17.0"}};
  CHECK(bucket_free(old_ds, json::object()) == 1);
  CHECK(bucket_free(new_ds, json::object()) == 0);
  CHECK(bucket_free(old_ds, {{"torch_version", "2.8"}}) == 0);
  CHECK(bucket_free(new_ds, {{"torch_version", "2.4.1"}}) == 1);
}

TEST_CASE("loss.backward() seeds the loss gradient with ones_like before autograd starts, in every framework", "[strategy][loss]") {
  // torch/autograd/__init__.py _make_grads: `torch.ones_like(out, memory_format=torch.preserve_format)`
  // for the 0-d loss, launched from Python before the engine runs its first node (the li-plus
  // ZeRO-1 trace: aten::ones_like > aten::fill_ then run_backward). One per micro-batch, the last
  // kernel ahead of each backward mark.
  for (const auto& [fw, e] : opt13_every_framework(3)) {
    INFO(fw);
    const Program p = e.strategy->build(e);
    int seeds = 0, marks = 0;
    std::string last_kernel;
    for (const auto& ins : p.instructions) {
      if (const auto* l = std::get_if<Launch>(&ins)) {
        last_kernel = l->kernel.name;
        if (last_kernel == "autograd.backward: ones_like(loss)") {
          ++seeds;
          CHECK(l->kernel.dispatch == HostDispatch::Eager);
          CHECK(l->kernel.kernels == 1);
        }
      }
      if (const auto* m = std::get_if<Mark>(&ins); m && m->phase == Phase::Backward) {
        ++marks;
        CHECK(last_kernel == "autograd.backward: ones_like(loss)");
      }
    }
    CHECK(marks == 3);
    CHECK(seeds == 3);
  }
}

TEST_CASE("Each backward first walks the autograd graph: host time per node, before any backward op", "[strategy][host]") {
  // Engine::execute's compute_dependencies visits every node before the first runs: right after
  // the backward mark, one HostWork of host.autograd_engine_per_node_us x Workload::autograd_nodes(),
  // ahead of the first backward launch (and of FSDP's pre-backward hooks), once per micro-batch.
  for (const auto& [fw, e] : opt13_every_framework(2)) {
    INFO(fw);
    const Time per_node = e.cluster.profile->host.autograd_engine_per_node;
    REQUIRE(per_node.ns > 0);
    const Program p = e.strategy->build(e);
    int starts = 0;
    bool after_mark = false, started = false;
    for (const auto& ins : p.instructions) {
      if (const auto* m = std::get_if<Mark>(&ins); m && m->phase == Phase::Backward) after_mark = true, started = false;
      if (const auto* w = std::get_if<HostWork>(&ins); w && w->name.starts_with("autograd engine")) {
        ++starts;
        CHECK(after_mark);
        started = true;
        CHECK(w->duration == per_node * e.workload->autograd_nodes());
      }
      if (std::holds_alternative<Launch>(ins) && after_mark) {
        CHECK(started);  // the first backward launch waits for the walk
        after_mark = false;
      }
    }
    CHECK(starts == 2);
  }
}
