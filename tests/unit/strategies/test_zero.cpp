// DeepSpeed ZeRO stages 1/2/3 (sim/strategies/zero*.cpp): memory per M5.1, the overlap
// contracts of Z4.3-Z4.5 / S8.5, the DeepSpeed-version knobs of section 10, config errors.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

using namespace stepsim;

namespace {

nlohmann::json experiment_doc(const std::string& preset, std::int64_t micro_batch, std::int64_t seq, const std::string& profile,
                              nlohmann::json strategy) {
  return {{"workload", {{"preset", preset}, {"micro_batch", micro_batch}, {"seq_len", seq}, {"dtype", "bf16"}}},
          {"cluster", {{"profile", profile}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", std::move(strategy)},
          {"training", {{"grad_accum", 1}, {"optimizer", "adamw"}}}};
}

Experiment llama7b(nlohmann::json strategy) {
  return experiment_from_json(experiment_doc("llama2-7b", 1, 1024, "configs/hardware/h100-sxm-8x.json", std::move(strategy)),
                              SourceMap{});
}

// OPT-1.3B on 8 x A800, per-device batch 8, sequence 512 (the shipped examples).
Experiment opt13(nlohmann::json strategy) {
  return experiment_from_json(experiment_doc("opt-1.3b", 8, 512, "configs/hardware/a800-sxm-8x.json", std::move(strategy)),
                              SourceMap{});
}

// Live bytes per category in program order up to the first Mark named `mark` (frees count
// at issue; the record_stream'ed ones are then already complete in these schedules, because
// the stage-1/2 flushes are stream-ordered or followed by cuda.synchronize()).
std::map<MemCategory, std::int64_t> live_at(const Program& p, const std::string& mark) {
  std::map<BufferId, std::pair<MemCategory, std::int64_t>> live;
  for (const auto& ins : p.instructions) {
    if (const auto* m = std::get_if<Mark>(&ins); m && m->name == mark) break;
    if (const auto* a = std::get_if<Alloc>(&ins)) live[a->buffer] = {a->category, a->bytes.count};
    if (const auto* f = std::get_if<Free>(&ins)) live.erase(f->buffer);
  }
  std::map<MemCategory, std::int64_t> out;
  for (const auto& [b, v] : live) out[v.first] += v.second;
  return out;
}

// The highest live bytes in program order from the first Mark named `mark` on, with the
// per-category bytes at that point (frees at issue, as live_at).
std::pair<std::int64_t, std::map<MemCategory, std::int64_t>> peak_from(const Program& p, const std::string& mark) {
  std::map<BufferId, std::pair<MemCategory, std::int64_t>> live;
  bool after = false;
  std::int64_t peak = -1;
  std::map<MemCategory, std::int64_t> at_peak;
  for (const auto& ins : p.instructions) {
    if (const auto* m = std::get_if<Mark>(&ins); m && m->name == mark) after = true;
    if (const auto* a = std::get_if<Alloc>(&ins)) live[a->buffer] = {a->category, a->bytes.count};
    if (const auto* f = std::get_if<Free>(&ins)) live.erase(f->buffer);
    if (!after) continue;
    std::int64_t total = 0;
    for (const auto& [b, v] : live) total += v.second;
    if (total > peak) {
      peak = total;
      at_peak.clear();
      for (const auto& [b, v] : live) at_peak[v.first] += v.second;
    }
  }
  return {peak, at_peak};
}

std::int64_t model_states(const std::map<MemCategory, std::int64_t>& m) {
  auto get = [&](MemCategory c) { return m.count(c) ? m.at(c) : 0; };
  return get(MemCategory::Parameters) + get(MemCategory::Gradients) + get(MemCategory::OptimizerState);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }

// A kernel of a layer's own forward/backward (op-level layers: every class), not a strategy's
// bookkeeping copy or the optimizer.
bool is_layer_op(const TimelineOp& op) {
  return starts_with(op.name, "fwd ") || starts_with(op.name, "bwd ") || starts_with(op.name, "recompute ");
}

// Length of the part of collectives whose name starts with `prefix` that compute covers.
struct CommOverlap {
  Time total, overlapped;
  int count = 0;
};
CommOverlap overlap_of(const Timeline& t, const std::string& prefix) {
  std::vector<Interval> compute, comm;
  CommOverlap o;
  for (const auto& op : t.ops) {
    if (op.kind == TimelineOp::Kind::Kernel && is_layer_op(op)) compute.push_back({op.start, op.end});
    if (op.kind == TimelineOp::Kind::Collective && starts_with(op.name, prefix)) {
      comm.push_back({op.start, op.end});
      ++o.count;
    }
  }
  auto c = merge_intervals(compute), m = merge_intervals(comm);
  o.total = total_length(m);
  o.overlapped = intersection_length(c, m);
  return o;
}

// Llama-2-7B: embed 32000*4096 = 131,072,000; per block 2 norms of 4,096, q/k/v/o 4 x 16,777,216,
// gate/up/down 3 x 45,088,768 = 202,383,360; 32 blocks = 6,476,267,520; final norm 4,096; untied
// head 131,072,000. Psi = 6,738,415,616 = 16 * 421,150,976, so the ZeRO-1/2 flat buffer needs no
// padding to 2*dp = 16 (Z4.2) and every param divides by 8 (Z4.7): Psi/N = 842,301,952.
constexpr std::int64_t kPsi = 6'738'415'616;
constexpr std::int64_t kPart = 842'301'952;
// Rank 0's partition is flat elements [0, 842,301,952): embed, blocks 0-2 (ending at
// 738,222,080), then block 3's attn_norm, q/k/v/o, mlp_norm (ending at 805,339,136) and its
// gate_proj [805,339,136, 850,427,904), which straddles the boundary and is counted whole by
// copy_grads_in_partition: grads_in_partition = 850,427,904 elements.
constexpr std::int64_t kGradsInPartition = 850'427'904;

// PyTorch's cuBLAS workspaces: one per handle that runs GEMMs on the compute stream, the
// forward's and the backward's, taken from the caching allocator and kept (docs/memory.md).
std::int64_t workspaces(const Experiment& e) { return 2 * e.cluster.profile->outside_allocator.cublas_workspace.count; }

}  // namespace

TEST_CASE("ZeRO-1 on Llama-2-7B at N=8 holds the M5.1 model states: 2Psi + 2Psi grads after backward, 2Psi + 14Psi/N at the step",
          "[zero][memory]") {
  // One param group: M5.1's arithmetic is over one flat buffer (two groups: test_framework_buffers).
  Experiment e = llama7b({{"framework", "zero"}, {"stage", 1}, {"param_groups", "one"}});
  SimulationResult r = run_experiment(e);
  // End of backward (before reduce_gradients): bf16 flat params 2Psi + every autograd grad 2Psi
  // + fp32 partition 4Psi/N + Adam 8Psi/N = 2*13,476,831,232 + 12*842,301,952 = 37,061,285,888.
  CHECK(model_states(live_at(r.program, "reduce_gradients")) == 4 * kPsi + 12 * kPart);
  // At the step: the autograd grads went into the IPG buffer as they were bucketed (Z4.4) and
  // rank 0 keeps grads_in_partition: 2Psi + 2*850,427,904 + 12*842,301,952 = 25,285,310,464.
  // Table M5.1's "~4Psi + 14Psi/N" adds both gradient terms; they never coexist in full.
  CHECK(model_states(live_at(r.program, "step")) == 2 * kPsi + 2 * kGradsInPartition + 12 * kPart);
  // Between steps (grads freed in step): 2Psi + 12Psi/N = 23,584,454,656 bytes, plus PyTorch's
  // two cuBLAS workspaces (the forward's and the backward's handle; docs/memory.md).
  CHECK(r.metrics.persistent_memory.count == 2 * kPsi + 12 * kPart + workspaces(e));
}

TEST_CASE("ZeRO-2 on Llama-2-7B at N=8 holds 2Psi + 14Psi/N model states at the step (M5.1) and 2Psi + 12Psi/N between steps",
          "[zero][memory]") {
  Experiment e = llama7b({{"framework", "zero"}, {"stage", 2}, {"param_groups", "one"}});
  SimulationResult r = run_experiment(e);
  // 2Psi + 2*grads_in_partition + 12Psi/N = 13,476,831,232 + 1,700,855,808 + 10,107,623,424
  // = 25,285,310,464; the table's 2Psi + 14Psi/N = 25,269,058,560 differs by the whole
  // straddling gate_proj grad (2 * (850,427,904 - 842,301,952) = 16,251,904 bytes).
  CHECK(model_states(live_at(r.program, "step")) == 2 * kPsi + 2 * kGradsInPartition + 12 * kPart);
  CHECK(r.metrics.persistent_memory.count == 2 * kPsi + 12 * kPart + workspaces(e));
  // The step's own peak, after the fp32 cast: grads_in_partition 1,700,855,808 + the bf16 flat
  // copy of the partition 2 * 842,301,952 + its fp32 cast 4 * 842,301,952 = 6,754,667,520 bytes
  // of gradients on top of 2Psi + 12Psi/N (the 1 GB IPG buffer was released in the epilogue):
  // 30,339,122,176 bytes. (The step's overall peak is in backward: the op-level activations of
  // an eager Llama block at seq 1024 are larger than this.)
  auto [step_peak, at_peak] = peak_from(r.program, "step");
  CHECK(at_peak[MemCategory::Gradients] == 2 * kGradsInPartition + 6 * kPart);
  CHECK(step_peak == 2 * kPsi + 2 * kGradsInPartition + 18 * kPart);
  CHECK(r.metrics.peak_memory.count >= step_peak);
}

TEST_CASE("ZeRO-3 on Llama-2-7B at N=8 holds exactly 16Psi/N model states plus the 1 GB IPG buffer and the persistent norms",
          "[zero][memory]") {
  Experiment e = llama7b({{"framework", "zero"}, {"stage", 3}});
  SimulationResult r = run_experiment(e);
  // ds_tensor 2Psi/N + grad_partitions_flat_buffer 2Psi/N + fp32 4Psi/N + Adam 8Psi/N
  // = 16 * 842,301,952 = 13,476,831,232 bytes.
  CHECK(model_states(live_at(r.program, "optimizer")) == 16 * kPart);
  // Between steps add the permanent IPG buffer (5e8 * 2 B) and the persistent params gathered
  // in full (Z4.8: the 65 norms of 4,096 <= 1e5 elements: 266,240 * 2 B = 532,480 B):
  // 13,476,831,232 + 1,000,000,000 + 532,480 = 14,477,363,712, plus the two cuBLAS workspaces.
  CHECK(r.metrics.persistent_memory.count == 16 * kPart + 1'000'000'000 + 532'480 + workspaces(e));
}

TEST_CASE("ZeRO-1 default does not overlap gradient all-reduces with backward: they start after the last backward kernel",
          "[zero][overlap]") {
  SimulationResult r = run_experiment(opt13({{"framework", "zero"}, {"stage", 1}}));
  Time last_bwd_kernel{0};
  for (const auto& op : r.timeline.ops)
    if (op.kind == TimelineOp::Kind::Kernel && is_layer_op(op) && op.phase == Phase::Backward)
      last_bwd_kernel = std::max(last_bwd_kernel, op.end);
  int buckets = 0;
  for (const auto& op : r.timeline.ops)
    if (op.kind == TimelineOp::Kind::Collective && starts_with(op.name, "AR bucket")) {
      ++buckets;
      CHECK(op.start >= last_bwd_kernel);
    }
  // OPT-1.3B: 1,315,758,080 elements in 5e8-element buckets -> 3 all-reduces.
  CHECK(buckets == 3);
  CommOverlap o = overlap_of(r.timeline, "AR bucket");
  CHECK(o.overlapped == Time::zero());
  CHECK(o.total > Time::zero());
}

TEST_CASE("ZeRO-2 overlaps gradient all-reduces with backward only with overlap_comm=true", "[zero][overlap]") {
  CommOverlap on = overlap_of(run_experiment(opt13({{"framework", "zero"}, {"stage", 2}, {"overlap_comm", true}})).timeline, "AR bucket");
  CommOverlap off = overlap_of(run_experiment(opt13({{"framework", "zero"}, {"stage", 2}})).timeline, "AR bucket");
  CHECK(on.count == 3);
  CHECK(off.count == 3);
  CHECK(on.overlapped > Time::zero());
  // overlap_comm=false: the flush is a synchronous collective on the compute stream (Z4.5).
  CHECK(off.overlapped == Time::zero());
}

TEST_CASE("ZeRO-3 backward all-gathers are partly hidden behind backward compute", "[zero][overlap]") {
  SimulationResult r = run_experiment(opt13({{"framework", "zero"}, {"stage", 3}}));
  std::vector<Time> exposed = exposed_per_op(r.timeline);
  Time total{0}, exp{0};
  int n = 0;
  for (std::size_t i = 0; i < r.timeline.ops.size(); ++i) {
    const auto& op = r.timeline.ops[i];
    if (op.kind == TimelineOp::Kind::Collective && op.collective == CollectiveKind::AllGather && op.phase == Phase::Backward) {
      total += op.duration();
      exp += exposed[i];
      ++n;
    }
  }
  CHECK(n > 0);
  CHECK(exp < total);
  // Reduce-scatters of 5e8-element buckets: OPT-1.3B needs 3; nothing is gathered at the step
  // except the small persistent params (_post_step).
  int rs = 0, step_ag = 0;
  for (const auto& op : r.timeline.ops) {
    if (op.kind != TimelineOp::Kind::Collective) continue;
    if (op.collective == CollectiveKind::ReduceScatter) ++rs;
    if (op.phase == Phase::Optimizer && op.collective == CollectiveKind::AllGather) ++step_ag;
  }
  CHECK(rs == 3);
  CHECK(step_ag == 1);
}

TEST_CASE("use_multi_rank_bucket_allreduce=false (DeepSpeed < 0.12.4) reduces each bucket with one dist.reduce per owner rank",
          "[zero][version]") {
  auto collect = [](const SimulationResult& r, CollectiveKind k) {
    std::int64_t bytes = 0;
    int n = 0;
    for (const auto& op : r.timeline.ops)
      if (op.kind == TimelineOp::Kind::Collective && op.collective == k && op.phase != Phase::Optimizer &&
          !starts_with(op.name, "AR grad norm")) {
        bytes += op.bytes.count;
        ++n;
      }
    return std::make_pair(n, bytes);
  };
  SimulationResult now = run_experiment(opt13({{"framework", "zero"}, {"stage", 2}, {"overlap_comm", true}}));
  SimulationResult old = run_experiment(
      opt13({{"framework", "zero"}, {"stage", 2}, {"overlap_comm", true}, {"use_multi_rank_bucket_allreduce", false}}));
  auto [ar_now, ar_bytes] = collect(now, CollectiveKind::AllReduce);
  auto [rd_now, rd_bytes_now] = collect(now, CollectiveKind::Reduce);
  auto [ar_old, ar_bytes_old] = collect(old, CollectiveKind::AllReduce);
  auto [rd_old, rd_bytes] = collect(old, CollectiveKind::Reduce);
  CHECK(ar_now == 3);
  CHECK(rd_now == 0);
  CHECK(ar_old == 0);
  // Every bucket is split by owner: 8 owners over the whole flat buffer, and a bucket boundary
  // inside a partition adds a run (3 buckets, 8 partitions -> 8 + 2 = 10 reduces).
  CHECK(rd_old == 10);
  // Same elements reduced either way (gradients only: the flat buffer without its padding).
  CHECK(rd_bytes == ar_bytes);
  // The old path synchronizes the CPU before every reduce with overlap_comm (allreduce_and_copy).
  int syncs_now = 0, syncs_old = 0;
  for (const auto& ins : now.program.instructions) syncs_now += std::holds_alternative<HostSync>(ins);
  for (const auto& ins : old.program.instructions) syncs_old += std::holds_alternative<HostSync>(ins);
  CHECK(syncs_old == syncs_now + 2 * 10);
}

TEST_CASE("all_gather_into_tensor=false (legacy all_gather_dp_groups) splits the post-step gather into allgather_bucket_size shards",
          "[zero][version]") {
  auto step_ags = [](const SimulationResult& r) {
    int n = 0;
    std::int64_t bytes = 0;
    for (const auto& op : r.timeline.ops)
      if (op.kind == TimelineOp::Kind::Collective && starts_with(op.name, "AG step flat")) {
        ++n;
        bytes += op.bytes.count;
      }
    return std::make_pair(n, bytes);
  };
  auto [n1, b1] = step_ags(run_experiment(opt13({{"framework", "zero"}, {"stage", 1}, {"param_groups", "one"}})));
  auto [n2, b2] = step_ags(
      run_experiment(opt13({{"framework", "zero"}, {"stage", 1}, {"param_groups", "one"}, {"all_gather_into_tensor", false}})));
  CHECK(n1 == 1);
  // partition * dp = the padded flat buffer, 1,315,758,080 elements: 1,315,758,080 // 5e8 = 2 shards.
  CHECK(n2 == 2);
  CHECK(b1 == 1'315'758'080LL * 2);
  CHECK(b2 == b1);
}

TEST_CASE("ZeRO defaults follow DeepSpeed 0.19: element-count sizes, overlap_comm false for 1/2 and true for 3", "[zero][config]") {
  auto cfg12 = llama7b({{"framework", "zero"}, {"stage", 2}}).strategy->effective_config();
  CHECK(cfg12["reduce_bucket_size"] == 500000000);
  CHECK(cfg12["overlap_comm"] == false);
  CHECK(cfg12["contiguous_gradients"] == true);
  CHECK(cfg12["use_multi_rank_bucket_allreduce"] == true);
  CHECK(cfg12["communication_data_type"] == "bf16");
  auto cfg3 = llama7b({{"framework", "zero"}, {"stage", 3}, {"prefetch_bucket_size", 2e7}}).strategy->effective_config();
  CHECK(cfg3["overlap_comm"] == true);
  CHECK(cfg3["stage3_prefetch_bucket_size"] == 20000000);
  CHECK(cfg3["stage3_max_live_parameters"] == 1000000000);
  CHECK(cfg3["stage3_param_persistence_threshold"] == 100000);
}

TEST_CASE("Bad ZeRO input is an InputError naming the JSON path", "[zero][config]") {
  auto message = [](nlohmann::json s) -> std::string {
    try {
      llama7b(std::move(s));
    } catch (const InputError& err) {
      return err.what();
    }
    return "no error";
  };
  CHECK_THAT(message({{"framework", "zero"}, {"stage", 4}}), Catch::Contains("/strategy/stage"));
  CHECK_THAT(message({{"framework", "zero"}}), Catch::Contains("/strategy/stage"));
  CHECK_THAT(message({{"framework", "zero"}, {"stage", 2}, {"reduce_bucket_size", 2.5}}), Catch::Contains("/strategy/reduce_bucket_size"));
  CHECK_THAT(message({{"framework", "zero"}, {"stage", 3}, {"prefetch_bucket_size", 1e7}, {"stage3_prefetch_bucket_size", 1e7}}),
             Catch::Contains("prefetch_bucket_size"));
  CHECK_THAT(message({{"framework", "zero"}, {"stage", 2}, {"bucket_cap_mb", 25}}), Catch::Contains("bucket_cap_mb"));
}

TEST_CASE("Element counts of 0 are DeepSpeed's own: accepted and meaning what DeepSpeed does with them", "[zero][config]") {
  // deepspeed/runtime/zero/config.py declares every element count Field(..., ge=0).
  // stage3_param_persistence_threshold 0: no parameter is small enough to stay gathered.
  Experiment e3 = llama7b({{"framework", "zero"}, {"stage", 3}, {"stage3_param_persistence_threshold", 0}, {"stage3_max_live_parameters", 0},
                           {"stage3_max_reuse_distance", 0}, {"stage3_prefetch_bucket_size", 0}, {"sub_group_size", 0}});
  CHECK(e3.strategy->effective_config()["stage3_param_persistence_threshold"] == 0);
  Program p3 = e3.strategy->build(e3);
  for (const auto& ins : p3.instructions)
    if (auto* a = std::get_if<Alloc>(&ins)) CHECK(a->name != "persistent params (gathered)");
  CHECK_NOTHROW(simulate_program(p3, e3.cluster.profile, e3.training.allocator));
  // reduce_bucket_size 0: torch.empty(0) is no allocation, and every parameter is an "extra large
  // param" reduced from its own gradient.
  Experiment e2 = llama7b({{"framework", "zero"}, {"stage", 2}, {"reduce_bucket_size", 0}});
  Program p2 = e2.strategy->build(e2);
  for (const auto& ins : p2.instructions)
    if (auto* a = std::get_if<Alloc>(&ins)) CHECK(a->name.rfind("ipg buffer", 0) != 0);
  CHECK_NOTHROW(simulate_program(p2, e2.cluster.profile, e2.training.allocator));
  // The legacy gather divides by allgather_bucket_size: 0 is refused there, naming the key.
  CHECK_THROWS_WITH(llama7b({{"framework", "zero"}, {"stage", 1}, {"all_gather_into_tensor", false}, {"allgather_bucket_size", 0}}),
                    Catch::Contains("/strategy/allgather_bucket_size") && Catch::Contains("divides by it"));
  CHECK_THROWS_WITH(llama7b({{"framework", "zero"}, {"stage", 2}, {"reduce_bucket_size", -1}}), Catch::Contains(">= 0"));
}

TEST_CASE("stepsim simulate runs the shipped OPT-1.3B ZeRO-1 and ZeRO-2 examples", "[zero][cli]") {
  const std::filesystem::path root = std::filesystem::path(STEPSIM_SOURCE_DIR);
  for (const char* name : {"opt-1.3b-zero1-8xa800.json", "opt-1.3b-zero2-8xa800.json", "opt-1.3b-zero3-8xa800.json"}) {
    std::string cmd = std::string(STEPSIM_BINARY) + " simulate " + (root / "configs/examples" / name).string() + " > /dev/null";
    INFO(cmd);
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("The gradient norm as DeepSpeed runs it: a host synchronisation per partition slice before 0.13.2, none after",
          "[zero][version]") {
  auto norm_ops = [](const SimulationResult& r) {
    int syncs = 0, copies = 0, norms = 0;
    for (const auto& ins : r.program.instructions) {
      if (const auto* h = std::get_if<HostSync>(&ins); h && h->reason.starts_with("get_grad_norm_direct")) ++syncs;
      if (const auto* l = std::get_if<Launch>(&ins)) {
        copies += l->kernel.name.starts_with("grad norm: g.double()");
        norms += l->kernel.name.starts_with("grad norm: norm(2)");
      }
    }
    return std::make_tuple(syncs, copies, norms);
  };
  const auto [syncs_old, copies_old, norms_old] =
      norm_ops(run_experiment(opt13({{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", "0.12.6"}})));
  const auto [syncs_new, copies_new, norms_new] = norm_ops(run_experiment(opt13({{"framework", "zero"}, {"stage", 1}})));
  // One slice per param in rank 0's partition of each group (decay, no decay): an fp64 copy and
  // a norm each either way.
  CHECK(copies_old == norms_old);
  CHECK(copies_new == copies_old);
  CHECK(norms_new == norms_old);
  CHECK(copies_old > 2);
  // 0.12.6: `.item()` after every norm, and the group's all-reduced total read back.
  CHECK(syncs_old == copies_old + 2);
  CHECK(syncs_new == 0);
}

TEST_CASE("engine.backward's loss log, release by release: its mean kernel, its read-back, its sum", "[zero][version]") {
  // engine.py backward(): up to 0.9.2 only the monitor logs (`loss.mean().item() * gas`); 0.9.3
  // (#3428) to 0.10.0 `self.losses.append(loss.mean().item())` off the boundary; 0.10.1 (#4030)
  // to 0.13.2 `self.losses += loss.mean().item()` every micro-batch; from 0.13.3 (#5135)
  // `mean_loss = loss.mean().detach()`, summed on the device after a window's first micro-batch.
  struct Seen {
    int syncs = 0, means = 0, sums = 0, syncs_before_backward = 0;
  };
  auto scan = [](Experiment e, int grad_accum) {
    e.training.grad_accum = grad_accum;
    const Program p = e.strategy->build(e);
    Seen s;
    bool pending = false;
    for (const auto& ins : p.instructions) {
      if (const auto* h = std::get_if<HostSync>(&ins); h && h->reason.starts_with("engine.backward: self.losses")) {
        ++s.syncs;
        pending = true;
      }
      if (const auto* l = std::get_if<Launch>(&ins)) {
        if (l->kernel.name == "engine.backward: loss.mean()") ++s.means;
        if (l->kernel.name == "engine.backward: self.losses + mean_loss") ++s.sums;
      }
      if (const auto* m = std::get_if<Mark>(&ins); m && m->phase == Phase::Backward && pending) {
        ++s.syncs_before_backward;  // the read-back comes before autograd starts
        pending = false;
      }
    }
    CHECK(s.syncs_before_backward == s.syncs);
    return s;
  };
  auto run = [&](int stage, const char* version, int grad_accum) {
    return scan(opt13({{"framework", "zero"}, {"stage", stage}, {"deepspeed_version", version}}), grad_accum);
  };
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    for (const char* v : {"0.9.2", "0.9.3", "0.10.0", "0.10.1", "0.13.2", "0.13.3", "0.19.6"}) {
      INFO("DeepSpeed " << v);
      const Seen one = run(stage, v, 1), four = run(stage, v, 4);
      const std::string r = v;
      if (r == "0.9.2") {  // no monitor: no log at all
        CHECK((one.means == 0 && one.syncs == 0 && four.means == 0 && four.syncs == 0));
      } else if (r == "0.9.3" || r == "0.10.0") {  // off the boundary only
        CHECK((one.means == 0 && one.syncs == 0));
        CHECK((four.means == 3 && four.syncs == 3));
      } else if (r == "0.10.1" || r == "0.13.2") {  // every micro-batch, read back
        CHECK((one.means == 1 && one.syncs == 1));
        CHECK((four.means == 4 && four.syncs == 4));
      } else {  // every micro-batch, on the device
        CHECK((one.means == 1 && one.syncs == 0 && one.sums == 0));
        CHECK((four.means == 4 && four.syncs == 0 && four.sums == 3));
      }
      if (r != "0.13.3" && r != "0.19.6") CHECK(four.sums == 0);
    }
    CHECK(scan(opt13({{"framework", "zero"}, {"stage", stage}}), 2).means == 2);  // the default release, 0.19.6
  }
}

TEST_CASE("With gradient accumulation engine.backward divides the fp32 loss by the steps, and autograd divides back",
          "[zero][loss]") {
  // engine.py (v0.6.7 to v0.16.5) backward(): `if gradient_accumulation_steps() > 1 and
  // scale_wrt_gas: loss = self._scale_loss_by_gas(loss.float())`, `prescaled_loss / scaling_factor`.
  // The optimizer's own `loss.float()` is then a no-op: one cast per micro-batch, not two.
  auto names = [](Experiment e, int grad_accum) {
    e.training.grad_accum = grad_accum;
    const Program p = e.strategy->build(e);
    std::vector<std::string> first_micro;  // up to micro-batch 0's ones_like, and its backward's first three
    int after = -1;
    for (const auto& ins : p.instructions) {
      if (const auto* l = std::get_if<Launch>(&ins)) {
        const std::string_view n = l->kernel.name;
        if (after < 0 && (n.starts_with("engine.backward") || n.starts_with("_scale_loss") || n.starts_with("optimizer.backward") ||
                          n.starts_with("loss_scaler") || n.starts_with("autograd.backward")))
          first_micro.emplace_back(n);
        if (after >= 0 && after < 3) {
          first_micro.emplace_back(n);
          ++after;
        }
        if (n == "autograd.backward: ones_like(loss)" && after < 0) after = 0;
      }
      if (after >= 3) break;
    }
    return first_micro;
  };
  for (int stage : {1, 3}) {
    INFO("stage " << stage);
    // HF OPT's bf16 loss, DeepSpeed 0.19.6, accumulation 4: cast, divide, log, scale, seed.
    CHECK(names(opt13({{"framework", "zero"}, {"stage", stage}}), 4) ==
          std::vector<std::string>{"engine.backward: loss.float()", "_scale_loss_by_gas: loss / gradient_accumulation_steps",
                                   "engine.backward: loss.mean()", "loss_scaler.backward: loss * loss_scale",
                                   "autograd.backward: ones_like(loss)", "bwd loss_scale: MulBackward0",
                                   "bwd _scale_loss_by_gas: DivBackward0", "bwd loss.float: ToCopyBackward0"});
    // Without accumulation the cast is the optimizer's, and nothing divides.
    const auto one = names(opt13({{"framework", "zero"}, {"stage", stage}}), 1);
    CHECK(one.front() == "engine.backward: loss.mean()");
    CHECK(one[1] == "optimizer.backward: loss.float()");
    CHECK(std::find(one.begin(), one.end(), "bwd _scale_loss_by_gas: DivBackward0") == one.end());
  }
  // torchtitan's Llama loss is fp32: accumulation divides without a cast, and nothing casts back.
  const auto fp32 = names(llama7b({{"framework", "zero"}, {"stage", 3}}), 2);
  CHECK(fp32.front() == "_scale_loss_by_gas: loss / gradient_accumulation_steps");
  CHECK(std::find(fp32.begin(), fp32.end(), "bwd loss.float: ToCopyBackward0") == fp32.end());
  CHECK(std::find(fp32.begin(), fp32.end(), "bwd _scale_loss_by_gas: DivBackward0") != fp32.end());
}

TEST_CASE("The ZeRO optimizer's loss scaling: cast, multiply and seed before autograd starts, their backward first after",
          "[zero][loss]") {
  // stage_1_and_2.py / stage3.py backward(): `self.loss_scaler.backward(loss.float())`;
  // fp16/loss_scaler.py: `(loss * self.loss_scale).backward()`; torch.autograd.backward seeds
  // with ones_like. The li-plus ZeRO-1 trace launches the copy, mul and fill before the first
  // autograd::engine::evaluate_function, then MulBackward0's mul and ToCopyBackward0's copy.
  auto around_mark = [](const Experiment& e) {
    const Program p = e.strategy->build(e);
    std::vector<std::string> before, after;
    bool in_backward = false;
    for (const auto& ins : p.instructions) {
      if (const auto* m = std::get_if<Mark>(&ins)) {
        if (m->phase == Phase::Backward) in_backward = true;
        if (in_backward && m->phase != Phase::Backward) break;
      }
      if (const auto* l = std::get_if<Launch>(&ins)) {
        if (!in_backward) before.push_back(l->kernel.name.str());
        else if (after.size() < 2) after.push_back(l->kernel.name.str());
      }
    }
    return std::pair{std::vector<std::string>(before.end() - 3, before.end()), after};
  };
  for (int stage : {1, 3}) {
    INFO("stage " << stage);
    // HF OPT's CrossEntropyLoss over bf16 logits returns a bf16 loss: the cast and its backward run.
    auto [before, after] = around_mark(opt13({{"framework", "zero"}, {"stage", stage}}));
    CHECK(before == std::vector<std::string>{"optimizer.backward: loss.float()", "loss_scaler.backward: loss * loss_scale",
                                             "autograd.backward: ones_like(loss)"});
    CHECK(after == std::vector<std::string>{"bwd loss_scale: MulBackward0", "bwd loss.float: ToCopyBackward0"});
  }
  // torchtitan's Llama computes the loss over fp32 logits: `.float()` is a no-op.
  auto [before, after] = around_mark(llama7b({{"framework", "zero"}, {"stage", 3}}));
  CHECK(before.back() == "autograd.backward: ones_like(loss)");
  CHECK(before[1] == "loss_scaler.backward: loss * loss_scale");
  CHECK(after.front() == "bwd loss_scale: MulBackward0");
  CHECK(std::find(after.begin(), after.end(), "bwd loss.float: ToCopyBackward0") == after.end());
}

TEST_CASE("DeepSpeed's monitor: rank 0 reads the loss back and writes it before the backward of each accumulation boundary",
          "[zero][monitor]") {
  // engine.py v0.12.6 l.1934-1944 and v0.16.5 l.2104-2115: `if self.monitor.enabled: if
  // self.is_gradient_accumulation_boundary(): if self.global_rank == 0: ... write_events(...)`,
  // after the loss log; since 0.13.3 the loss is read back (`self.losses.item()`) only there.
  struct Seen {
    int writes = 0, monitor_syncs = 0, writes_before_last_backward = 0;
    Time write;
  };
  auto scan = [](Experiment e) {
    e.training.grad_accum = 2;
    e.cluster.profile.edit().host.monitor_write = Time::from_us(700);
    const Program p = e.strategy->build(e);
    Seen s;
    int backward_marks = 0;
    for (const auto& ins : p.instructions) {
      if (const auto* w = std::get_if<HostWork>(&ins); w && w->name.find("monitor.write_events") != std::string::npos) {
        ++s.writes;
        s.write = w->duration;
        if (backward_marks == 1) ++s.writes_before_last_backward;  // after micro-batch 0's backward began
      }
      if (const auto* h = std::get_if<HostSync>(&ins); h && h->reason.find("monitor reads the loss back") != std::string::npos) ++s.monitor_syncs;
      if (const auto* m = std::get_if<Mark>(&ins); m && m->phase == Phase::Backward) ++backward_marks;
    }
    return s;
  };
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    const Seen off = scan(opt13({{"framework", "zero"}, {"stage", stage}}));
    CHECK(off.writes == 0);
    CHECK(off.monitor_syncs == 0);
    const Seen on = scan(opt13({{"framework", "zero"}, {"stage", stage}, {"monitor", true}}));
    CHECK(on.writes == 1);  // the boundary micro-batch only, before its backward
    CHECK(on.writes_before_last_backward == 1);
    CHECK(on.write == Time::from_us(700));
    CHECK(on.monitor_syncs == 1);
    // 0.10.1-0.13.2 read the loss back on every micro-batch already: no second sync.
    const Seen old = scan(opt13({{"framework", "zero"}, {"stage", stage}, {"monitor", true}, {"deepspeed_version", "0.12.6"}}));
    CHECK(old.writes == 1);
    CHECK(old.monitor_syncs == 0);
    // 0.9.3-0.10.0 write the mean of floats read back off the boundary; up to 0.9.2 the monitor
    // itself reads `loss.mean().item()`.
    CHECK(scan(opt13({{"framework", "zero"}, {"stage", stage}, {"monitor", true}, {"deepspeed_version", "0.10.0"}})).monitor_syncs == 0);
    const Seen oldest = scan(opt13({{"framework", "zero"}, {"stage", stage}, {"monitor", true}, {"deepspeed_version", "0.9.2"}}));
    CHECK(oldest.monitor_syncs == 1);
    CHECK(oldest.writes == 1);
  }
  Experiment e = opt13({{"framework", "zero"}, {"stage", 1}, {"monitor", true}});
  CHECK(e.strategy->effective_config()["monitor"] == true);
}

TEST_CASE("The reduced bucket is copied back grad by grad as DtoD memcpys: every grad without contiguous_gradients, the owned slices with",
          "[zero][reduce]") {
  // stage_1_and_2.py v0.12.6: reduce_ipg_grads without contiguous_gradients (ZeRO-1 before 0.13.0
  // forces it off) -> buffered_reduce_fallback(None) -> allreduce_and_copy, `buf.copy_(synced)`
  // for every grad of the bucket on every rank (l.1330, l.1498-1500); with contiguous_gradients
  // average_tensor -> allreduce_and_copy_with_multiple_ranks copies the slices whose bucket rank
  // is this rank (l.966-968). A same-dtype contiguous copy_ is a cudaMemcpyAsync DtoD.
  auto copy_back = [](const Experiment& e) {
    const Program p = e.strategy->build(e);
    std::int64_t n = 0, bytes = 0;
    for (const auto& ins : p.instructions)
      if (const auto* l = std::get_if<Launch>(&ins); l && l->kernel.name.starts_with("copy back ")) {
        CHECK(l->kernel.kernels == 0);  // a memcpy, not a kernel
        CHECK(l->kernel.cls == KernelClass::Copy);
        ++n;
        bytes += l->kernel.work->memory_bytes.count;
      }
    return std::make_pair(n, bytes);
  };
  const Experiment old = opt13({{"framework", "zero"}, {"stage", 1}, {"deepspeed_version", "0.12.6"}});
  std::int64_t params = 0, numel = 0;
  for (const Layer& l : old.workload->layers)
    for (const Param* p : l.params()) ++params, numel += p->numel;
  const auto [n_all, b_all] = copy_back(old);
  CHECK(n_all == params);           // every grad, once (each in one IPG bucket)
  CHECK(b_all == 2 * 2 * numel);    // read + write of the whole model's bf16 grads
  // Stage 2 (contiguous_gradients): the slices of rank 0's partition only, about 1/8 of the model
  // (the partitions are padded; a param that straddles a boundary is split).
  const auto [n_own, b_own] = copy_back(opt13({{"framework", "zero"}, {"stage", 2}, {"deepspeed_version", "0.12.6"}}));
  CHECK(n_own > 0);
  CHECK(n_own < params);
  CHECK(b_own <= 2 * 2 * numel / 8 + 2 * 2 * 8);
  CHECK(b_own >= 2 * 2 * numel / 8 - 2 * 2 * 8 * 4096);
}

TEST_CASE("Every OPT block's forward synchronizes the host once (the pageable clamp scalar)", "[zero]") {
  const SimulationResult r = run_experiment(opt13({{"framework", "zero"}, {"stage", 1}}));
  int syncs = 0;
  for (const auto& ins : r.program.instructions)
    if (const auto* h = std::get_if<HostSync>(&ins); h && h->reason.starts_with("scores.max_clamp")) ++syncs;
  CHECK(syncs == 24);  // OPT-1.3B: 24 decoder layers, one micro-batch
}

TEST_CASE("unscale_and_clip_grads multiplies every fp32 gradient partition, at any scale, before the optimizer",
          "[zero][step]") {
  // stage_1_and_2.py (v0.12.6 l.1909-1924, v0.19.5 l.2408-2423) and stage3.py (v0.19.5
  // l.2666-2675): grad.mul_(1. / combined_scale) with no exit at scale 1 (bf16 has no loss scale).
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    const SimulationResult r = run_experiment(opt13({{"framework", "zero"}, {"stage", stage}}));
    std::int64_t mul_bytes = 0, muls = 0, steps = 0;
    bool each_before_its_step = true;
    for (const auto& ins : r.program.instructions)
      if (const auto* l = std::get_if<Launch>(&ins)) {
        if (l->kernel.name.starts_with("unscale_and_clip_grads: mul_")) {
          mul_bytes += l->kernel.work->memory_bytes.count;
          ++muls;
        }
        if (l->kernel.name.starts_with("optimizer.step")) {
          ++steps;
          each_before_its_step = each_before_its_step && muls == steps;
        }
      }
    // Read and write of the fp32 partition: 8 bytes per element of this rank's 1/8 of OPT-1.3B
    // (1.32 B parameters, padded partitions).
    CHECK(muls == steps);
    CHECK(each_before_its_step);
    CHECK(static_cast<double>(mul_bytes) == Approx(8.0 * 1.3157e9 / 8).epsilon(0.01));
  }
}
