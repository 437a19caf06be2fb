// DeepSpeed ZeRO stages 1 and 2 (stage_1_and_2.py :: DeepSpeedZeroOptimizer), steady state,
// following framework-semantics.md Z4.2-Z4.6, script S8.4 and memory M5.1/M5.5.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/zero_common.hpp"

namespace stepsim {

namespace {

class Zero12Builder {
 public:
  Zero12Builder(const ZeroConfig& c, const Experiment& e)
      : c_(c), e_(e), w_(*e.workload), dp_world_size_(e.cluster.world_size()), model_bytes_(dtype_bytes(c.model_dtype)),
        communication_bytes_(dtype_bytes(c.communication_data_type)) {}

  Program build() {
    b_.reserve(instruction_estimate(e_, kZero12OwnPerLayer));
    dflt_ = b_.default_stream();
    // Z4.5: overlap_comm puts the flushes on reduction_stream; otherwise on the current stream.
    reduction_stream_ = c_.overlap_comm ? b_.stream("reduction") : dflt_;
    dp_process_group_ = b_.comm("zero dp", dp_world_size_, e_.cluster.nodes);
    layout();

    // Persistent state (M5.1), per optimizer param group: the flat bit16 buffer (params are
    // views into it), this rank's fp32 partition (the optimizer's param) and Adam states on it.
    b_.mark("setup", Phase::Setup);
    const bool one = groups_.size() == 1;
    for (std::size_t i = 0; i < groups_.size(); ++i)
      b_.alloc(one ? std::string("bit16_groups_flat") : fmt::format("bit16_groups_flat {}", i), Bytes{groups_[i].flat * model_bytes_},
               MemCategory::Parameters, dflt_);
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      b_.alloc(one ? std::string("fp32 partition") : fmt::format("fp32 partition {}", i), Bytes{groups_[i].part * 4},
               MemCategory::OptimizerState, dflt_);
      Bytes opt = optimizer_state_bytes(e_.training.optimizer, groups_[i].part, Dtype::FP32);
      if (opt.count > 0)
        b_.alloc(one ? std::string("optimizer state (fp32 partition)") : fmt::format("optimizer state (fp32 partition {})", i), opt,
                 MemCategory::OptimizerState, dflt_);
    }
    kept_output_.setup(b_, w_, dflt_);

    const int A = e_.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) micro_batch(micro, micro == A - 1);
    step();
    return b_.take();
  }

 private:
  // Z4.2: each param group flattened in model order (bit16_groups[i]), padded to
  // nccl_start_alignment_factor(2) * dp, split into W equal partitions; grads_in_partition
  // holds the whole grads of every param that intersects this rank's partition of its group
  // (copy_grads_in_partition). With two groups (decay / no decay), the 1-D params (biases,
  // norm weights: numel == dim0) form group 1.
  void layout() {
    std::vector<const Param*> all;
    for (const Layer& l : w_.layers)
      for (const Param* p : l.params()) all.push_back(p);
    std::vector<PGroup> gs(c_.two_param_groups ? 2 : 1);
    for (const Param* p : all) {
      bool no_decay = c_.two_param_groups && p->numel == p->dim0;
      gs[no_decay ? 1 : 0].params.push_back(p);
    }
    for (auto& g : gs) {
      if (g.params.empty()) continue;  // an empty group has nothing to flatten
      const int gi = static_cast<int>(groups_.size());
      std::int64_t off = 0;
      for (const Param* p : g.params) {
        order_.push_back(p);  // reduce_gradients walks group by group, params in group order
        offset_[p] = off;
        group_of_[p] = gi;
        off += p->numel;
      }
      g.flat = ceil_div(off, 2 * dp_world_size_) * 2 * dp_world_size_;
      g.part = g.flat / dp_world_size_;
      groups_.push_back(std::move(g));
    }
    for (const Param* p : order_) {
      const PGroup& g = groups_[static_cast<std::size_t>(group_of_.at(p))];
      const std::int64_t lo = g.part * kZeroSimulatedRank, hi = lo + g.part;
      std::int64_t s = offset_[p], t = s + p->numel;
      if (s < hi && t > lo) {
        params_in_partition_.insert(p);
        grads_in_partition_size_ += p->numel;
      }
    }
  }

  // Grad slices, param by param: (param, elements); what a reduction copies back.
  using GradSlices = std::vector<std::pair<const Param*, std::int64_t>>;

  // The owner ranks of a param's elements, as (rank, elements) runs.
  std::vector<std::pair<int, std::int64_t>> owners(const Param* p) const {
    std::vector<std::pair<int, std::int64_t>> out;
    const std::int64_t part = groups_[static_cast<std::size_t>(group_of_.at(p))].part;
    std::int64_t s = offset_.at(p), t = s + p->numel;
    while (s < t) {
      int r = static_cast<int>(s / part);
      std::int64_t end = std::min(t, (r + 1) * part);
      out.emplace_back(r, end - s);
      s = end;
    }
    return out;
  }

  void micro_batch(int micro, bool boundary) {
    b_.mark(fmt::format("forward {}", micro), Phase::Forward);
    std::vector<SavedActivations> acts = replicated_forward(b_, w_, dflt_, micro, &kept_output_);

    engine_backward_prologue(b_, c_, w_, dflt_, micro, e_.training.grad_accum, e_.cluster.profile->host.monitor_write);
    enter_backward(b_, e_, micro);
    loss_scale_backward(b_, w_, dflt_, e_.training.grad_accum);
    // Z4.3: stage 2 reduces in the hooks every micro-batch; stage 1 only with overlap_comm and
    // only on the boundary micro-batch; default stage 1 reduces after backward.
    const bool reduce_in_hooks = c_.stage == 2 || (c_.overlap_comm && boundary);
    // create_gradient_handling_hooks (stage_1_and_2.py): registered when partition_gradients
    // (stage 2), overlap_comm or contiguous_gradients (the default): so also at stage 1, where
    // the hook only calls setup_buckets (the IPG buffer) and, off the boundary, nothing else.
    const bool hooks = c_.stage == 2 || c_.overlap_comm || c_.contiguous_gradients;
    accumulate_ = c_.stage == 2 && micro > 0;  // stage 2 adds into grads_in_partition
    if (c_.stage == 2 && micro > 0 && grads_in_partition_.has_value()) {
      // Each backward's copy_grads_in_partition allocates a fresh grads_in_partition (the
      // epilogue's _release_ipg_buffers set it to None). Micro-batch 0's stays alive to the
      // boundary as all_grad_tensors, which the epilogue add_()s every later one into; a later
      // one lives on in the param.grad views until this backward's hooks move them into the
      // IPG buffer (independent_gradient_partition_epilogue, reduce_independent_p_g_...).
      if (!accumulated_grads_in_partition_.has_value()) accumulated_grads_in_partition_ = grads_in_partition_;
      else previous_grads_in_partition_ = grads_in_partition_;
      grads_in_partition_ = std::nullopt;
    }
    hooked_params_in_partition_ = 0;
    bucket_seq_ = 0;
    // Before 0.18.3, DeepSpeedZeroOptimizer.backward() allocates the IPG buffers before it calls
    // loss.backward() (stage_1_and_2.py at v0.12.6, backward(): `self.ipg_buffer = []`,
    // torch.empty(reduce_bucket_size) once, twice with overlap_comm): they are live with every
    // activation, at the loss backward. The li-plus ZeRO-2 trace shows both 954 MiB blocks
    // allocated 1.2 ms before NllLossBackward0.
    if (c_.ipg_buffers_at_backward_start()) setup_buckets();
    for (std::size_t li = w_.layers.size(); li-- > 0;) {
      const Layer& l = w_.layers[li];
      layer_backward(b_, l, micro, dflt_, acts[li]);
      auto ps = l.params();
      // AccumulateGrad fires per param in reverse creation order; a grad is allocated when
      // none is held (it accumulates in place across non-reducing micro-batches).
      for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
        const Param* p = *it;
        if (!grad_.count(p))
          grad_.emplace(p, b_.alloc(".grad " + p->name, Bytes{p->numel * model_bytes_}, MemCategory::Gradients, dflt_));
        // grad_handling_hook -> process_gradients -> setup_buckets: the IPG buffer is
        // allocated at the first gradient of the backward, and (stage 1 off the boundary: no
        // epilogue runs) stays allocated until the boundary's epilogue releases it.
        if (hooks) setup_buckets();
        if (reduce_in_hooks) hook(p);
      }
    }
    if (reduce_in_hooks) {
      epilogue();
    } else if (boundary) {
      // engine.allreduce_gradients -> reduce_gradients(): the same bucketing, in parameter
      // order, after the whole backward (Z4.3): nothing overlaps backward compute.
      b_.mark("reduce_gradients");
      for (const Param* p : order_) hook(p);
      epilogue();
    }
  }

  // setup_buckets: one IPG buffer, two with overlap_comm (double buffering), model dtype;
  // only while none is held (ready_for_gradients).
  void setup_buckets() {
    // reduce_bucket_size 0: torch.empty(0) allocates nothing, and every parameter is an "extra
    // large param" reduced from its own gradient.
    if (!c_.contiguous_gradients || !ipg_buffer_.empty() || c_.reduce_bucket_size == 0) return;
    const int n = c_.overlap_comm ? 2 : 1;
    for (int i = 0; i < n; ++i)
      ipg_buffer_.push_back(b_.alloc(fmt::format("ipg buffer {}", i), Bytes{c_.reduce_bucket_size * model_bytes_}, MemCategory::CommBuffers, dflt_));
    ipg_index_ = 0;
  }

  // reduce_independent_p_g_buckets_and_remove_grads (Z4.4).
  void hook(const Param* p) {
    setup_buckets();
    if (elements_in_ipg_bucket_ + p->numel > c_.reduce_bucket_size) reduce_ipg_grads();
    params_in_ipg_bucket_.push_back(p);
    elements_in_ipg_bucket_ += p->numel;
    if (c_.contiguous_gradients && p->numel <= c_.reduce_bucket_size) {
      // Copy into the IPG buffer on the current stream; param.grad becomes a view of it and
      // the autograd grad storage goes (stream-ordered on the current stream).
      b_.launch(dflt_, memcpy_dtod("grad->ipg " + p->name, Bytes{2 * p->numel * model_bytes_}, fmt::format("bucket {}", bucket_seq_)));
      b_.free(grad_.at(p));
      grad_.erase(p);
    }
    // Once every in-partition param's hook has run, no param.grad views the previous
    // micro-batch's grads_in_partition any more: it is freed.
    if (params_in_partition_.count(p) && ++hooked_params_in_partition_ == params_in_partition_.size() && previous_grads_in_partition_.has_value()) {
      b_.free(*previous_grads_in_partition_);
      previous_grads_in_partition_ = std::nullopt;
    }
    // An "extra large param" (numel > reduce_bucket_size) keeps its own grad and is reduced on
    // its own at the next flush; without contiguous_gradients every grad stays until reduced.
  }

  // reduce_ipg_grads (Z4.5): reduce the bucket on the reduction stream (average_tensor), copy
  // this rank's part into grads_in_partition, release the reduced grads, swap the
  // double-buffered IPG buffer.
  void reduce_ipg_grads() {
    if (params_in_ipg_bucket_.empty()) return;
    const int k = bucket_seq_++;
    const std::string unit = fmt::format("bucket {}", k);
    const Bytes bb{elements_in_ipg_bucket_ * model_bytes_};
    if (c_.overlap_comm) {
      // reduction_stream.wait_stream(current); current.wait_stream(reduction_stream): the
      // compute stream waits for the PREVIOUS flush, so at most one overlaps compute.
      b_.wait_stream(reduction_stream_, dflt_);
      b_.wait_stream(dflt_, reduction_stream_);
    }
    if (!c_.contiguous_gradients) {
      buffered_reduce_fallback(unit, bb);
    } else if (!c_.reduce_scatter) {
      // gradient_reduction_w_predivide: divide, all-reduce the bucket in place.
      b_.launch(reduction_stream_, elementwise("div_ " + unit, bb * 2, unit));
      reduce_collective(CollectiveKind::AllReduce, elements_in_ipg_bucket_, fmt::format("AR {}", unit), unit, {});
    } else {
      average_tensor(unit, bb);
    }
    copy_grads_in_partition(unit);
    release_reduced_grads();
    params_in_ipg_bucket_.clear();
    elements_in_ipg_bucket_ = 0;
    if (c_.overlap_comm && c_.contiguous_gradients) ipg_index_ = 1 - ipg_index_;
  }

  // average_tensor (reduce_scatter=true): divide, then one all-reduce of the bucket
  // (use_multi_rank_bucket_allreduce: allreduce_and_copy_with_multiple_ranks copies back the
  // slices this rank owns) or one reduce per destination rank.
  void average_tensor(const std::string& unit, Bytes bb) {
    b_.launch(reduction_stream_, elementwise("div_ " + unit, bb * 2, unit));
    if (c_.use_multi_rank_bucket_allreduce)
      reduce_collective(CollectiveKind::AllReduce, elements_in_ipg_bucket_, fmt::format("AR {}", unit), unit,
                        owned_slices(kZeroSimulatedRank));
    else
      allreduce_no_retain(unit);
  }

  // Without contiguous_gradients, reduce_ipg_grads falls back to buffered_reduce_fallback(None,
  // grads_in_ipg_bucket) (stage_1_and_2.py v0.12.6 l.1317-1332; ZeRO-1 before 0.13.0 always,
  // which forces contiguous_gradients off): allreduce_no_retain with rank None, whose bucket is the
  // whole IPG bucket, so one allreduce_and_copy: allreduce_bucket (flatten, div_, all-reduce) and
  // then `buf.copy_(synced)` for every grad of the bucket on every rank (rank None).
  void buffered_reduce_fallback(const std::string& unit, Bytes bb) {
    allreduce_and_copy_synchronize();
    b_.launch(reduction_stream_, elementwise("div_ " + unit, bb * 2, unit));
    GradSlices every;
    for (const Param* p : params_in_ipg_bucket_) every.emplace_back(p, p->numel);
    reduce_collective(CollectiveKind::AllReduce, elements_in_ipg_bucket_, fmt::format("AR {}", unit), unit, every);
  }

  // allreduce_and_copy begins with get_accelerator().synchronize() under overlap_comm.
  void allreduce_and_copy_synchronize() {
    if (!c_.overlap_comm) return;
    b_.host_sync_stream(dflt_, "allreduce_and_copy: cuda.synchronize()");
    b_.host_sync_stream(reduction_stream_, "allreduce_and_copy: cuda.synchronize()");
  }

  // The slices of the bucket's grads that partition `rank` owns (owners()), param by param.
  GradSlices owned_slices(int rank) const {
    GradSlices out;
    for (const Param* p : params_in_ipg_bucket_)
      for (auto [r, n] : owners(p))
        if (r == rank) out.emplace_back(p, n);
    return out;
  }

  // DeepSpeed < 0.12.4: slices grouped per destination rank, one dist.reduce each
  // (allreduce_no_retain -> allreduce_and_copy), in order of first appearance.
  void allreduce_no_retain(const std::string& unit) {
    std::vector<int> ranks;
    std::map<int, std::int64_t> per_rank;
    for (const Param* p : params_in_ipg_bucket_)
      for (auto [r, n] : owners(p)) {
        if (!per_rank.count(r)) ranks.push_back(r);
        per_rank[r] += n;
      }
    for (int r : ranks) {
      allreduce_and_copy_synchronize();
      reduce_collective(CollectiveKind::Reduce, per_rank[r], fmt::format("RD {} -> rank {}", unit, r), unit,
                        r == kZeroSimulatedRank ? owned_slices(r) : GradSlices{});
    }
  }

  // After the reduction, on the same stream: grads of params in this rank's partition are
  // copied into grads_in_partition (copy_grads_in_partition); stage 2 drops the others.
  void copy_grads_in_partition(const std::string& unit) {
    std::int64_t own = 0;
    for (const Param* p : params_in_ipg_bucket_)
      if (params_in_partition_.count(p)) own += p->numel;
    if (own > 0 && c_.contiguous_gradients) {
      if (!grads_in_partition_.has_value()) grads_in_partition_ = b_.alloc("grads_in_partition", Bytes{grads_in_partition_size_ * model_bytes_}, MemCategory::Gradients, reduction_stream_);
      b_.launch(reduction_stream_, elementwise("copy_grads_in_partition " + unit, Bytes{own * model_bytes_ * (accumulate_ ? 3 : 2)}, unit,
                                  KernelClass::Copy));
    }
  }

  // A grad still held: an extra large param's (its partition part was copied above), or any
  // grad without contiguous_gradients, where stage 1 keeps every grad and stage 2 the
  // in-partition ones until the step. The others' storage returns once the reduce stream is done.
  void release_reduced_grads() {
    for (const Param* p : params_in_ipg_bucket_) {
      auto g = grad_.find(p);
      if (g == grad_.end()) continue;
      bool keep = !c_.contiguous_gradients && (c_.stage == 1 || params_in_partition_.count(p));
      if (keep) continue;
      b_.free_after(g->second, {reduction_stream_});
      grad_.erase(g);
    }
  }

  // allreduce_bucket: flatten (a torch.cat copy of the bucket), cast to the communication
  // dtype if it differs, the collective (synchronous on the issuing stream, G0.4), then copy
  // back `copy_back`: per grad slice `buf.copy_(synced)`, a same-dtype contiguous copy, so a
  // DtoD memcpy each (allreduce_and_copy*, stage_1_and_2.py v0.12.6 l.966-968, l.1498-1500).
  void reduce_collective(CollectiveKind kind, std::int64_t numel, std::string name, const std::string& unit,
                         const GradSlices& copy_back) {
    BufferId flat = b_.alloc("flatten " + unit, Bytes{numel * model_bytes_}, MemCategory::CommBuffers, reduction_stream_);
    b_.launch(reduction_stream_, elementwise("flatten " + unit, Bytes{2 * numel * model_bytes_}, unit, KernelClass::Copy));
    std::optional<BufferId> cast;
    if (c_.communication_data_type != c_.model_dtype) {
      cast = b_.alloc("comm-dtype cast " + unit, Bytes{numel * communication_bytes_}, MemCategory::CommBuffers, reduction_stream_);
      b_.launch(reduction_stream_, elementwise("cast " + unit, Bytes{numel * (model_bytes_ + communication_bytes_)}, unit));
    }
    b_.collective(dp_process_group_, reduction_stream_, kind, Bytes{numel * communication_bytes_}, c_.communication_data_type, std::move(name), unit);
    for (auto [p, n] : copy_back) b_.launch(reduction_stream_, memcpy_dtod("copy back " + p->name, Bytes{2 * n * model_bytes_}, unit));
    // The collective's tensor (the cast, else the flat bucket) waits for it before PyTorch 2.8.
    if (cast.has_value()) {
      free_collective_tensor(b_, c_.c10d_records_streams(e_.training), *cast, reduction_stream_);
      b_.free(flat);
    } else {
      free_collective_tensor(b_, c_.c10d_records_streams(e_.training), flat, reduction_stream_);
    }
  }

  // independent_gradient_partition_epilogue (Z4.4).
  void epilogue() {
    reduce_ipg_grads();
    if (c_.overlap_comm) {
      b_.host_sync_stream(dflt_, "independent_gradient_partition_epilogue: cuda.synchronize()");
      b_.host_sync_stream(reduction_stream_, "independent_gradient_partition_epilogue: cuda.synchronize()");
    }
    for (BufferId i : ipg_buffer_) b_.free(i);  // _release_ipg_buffers; re-allocated next backward
    ipg_buffer_.clear();
  }

  // Z4.6 (DeepSpeedZeroOptimizer.step): global norm over the bit16 grads, then per param group:
  // a bf16 flat copy of the group's gradient partition (flatten(averaged_gradients[i])), its
  // fp32 cast (.to(fp32), then `del flat_grad_partition`), the bit16 grads released
  // (free_grad_in_param_list), Adam on the fp32 partition, the copy back to bit16; finally
  // all_gather_dp_groups: one all-gather per group's flat bit16 buffer (nothing overlaps it).
  //
  // The optimizer phase starts where DeepSpeed calls the torch optimizer of group 0
  // (_optimizer_step: the `Optimizer.step#` span a profiler trace shows, where `analyze` starts
  // it): the gradient norm and group 0's flatten and fp32 cast are in the backward phase.
  void step() {
    b_.mark("step");  // DeepSpeedZeroOptimizer.step() begins (no phase change)
    grad_norm();
    const bool one = groups_.size() == 1;
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      const PGroup& g = groups_[i];
      const std::string sfx = one ? std::string() : fmt::format(" {}", i);
      // free_grad_in_param_list(params_not_in_partition[i]): grads still held (no
      // contiguous_gradients) of params this rank does not update.
      release_held_grads(i, false);
      BufferId flat = b_.alloc("flat grad partition" + sfx, Bytes{g.part * model_bytes_}, MemCategory::Gradients, dflt_);
      b_.launch(dflt_, elementwise("flatten grad partition" + sfx, Bytes{2 * g.part * model_bytes_}, "step", KernelClass::Copy));
      BufferId g32 = b_.alloc("fp32 partition grad" + sfx, Bytes{g.part * 4}, MemCategory::Gradients, dflt_);
      b_.launch(dflt_, elementwise("grads -> fp32 partition" + sfx, Bytes{g.part * (model_bytes_ + 4)}, "step", KernelClass::Copy));
      b_.free(flat);
      // free_grad_in_param_list(params_in_partition[i]); averaged_gradients[i] = None,
      // all_grad_tensors[i] = None: after the last group nothing views grads_in_partition.
      release_held_grads(i, true);
      if (i + 1 == groups_.size()) {
        for (std::optional<BufferId>* b : {&grads_in_partition_, &accumulated_grads_in_partition_, &previous_grads_in_partition_})
          if (b->has_value()) b_.free(**b), b->reset();
        for (auto& [p, gb] : grad_) b_.free(gb);
        grad_.clear();
      }
      // unscale_and_clip_grads([single_grad_partition], ...): grad.data.mul_(1. / combined_scale)
      // on the fp32 partition whatever the scale (stage_1_and_2.py: v0.12.6 l.1909-1924, v0.19.5
      // l.2408-2423; no early exit at scale 1).
      b_.launch(dflt_, elementwise("unscale_and_clip_grads: mul_ (fp32 partition" + sfx + ")", Bytes{g.part * 8}, "step"));
      if (i == 0) b_.mark("optimizer", Phase::Optimizer);
      launch_optimizer_step(b_, dflt_, {.optimizer = e_.training.optimizer, .impl = deepspeed_optimizer_impl(e_),
                                        .numel = g.part, .dtype = Dtype::FP32, .name = "optimizer.step (fp32 partition" + sfx + ")"});
      b_.free(g32);
      b_.launch(dflt_, elementwise("fp32 -> bit16 partition" + sfx, Bytes{g.part * (4 + model_bytes_)}, "step", KernelClass::Copy));
    }
    if (groups_.empty()) b_.mark("optimizer", Phase::Optimizer);
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      const PGroup& g = groups_[i];
      const std::string sfx = one ? std::string() : fmt::format(" {}", i);
      if (c_.all_gather_into_tensor) {
        b_.collective(dp_process_group_, dflt_, CollectiveKind::AllGather, Bytes{g.flat * model_bytes_}, c_.model_dtype, "AG step flat" + sfx, "step");
      } else {
        // Legacy all_gather_dp_groups: the partition in allgather_bucket_size shards, one
        // dist.all_gather each (num_shards = max(1, partition * dp // allgather_bucket_size)).
        std::int64_t shards = std::max<std::int64_t>(1, g.part * dp_world_size_ / c_.allgather_bucket_size);
        std::int64_t shard = g.part / shards;
        for (std::int64_t k = 0; k < shards; ++k) {
          std::int64_t n = k == shards - 1 ? g.part - shard * (shards - 1) : shard;
          b_.collective(dp_process_group_, dflt_, CollectiveKind::AllGather, Bytes{n * dp_world_size_ * model_bytes_}, c_.model_dtype,
                        fmt::format("AG step flat{} shard {}", sfx, k), "step");
        }
      }
    }
  }

  // Z4.6a scaled_global_norm: get_grad_norm_direct per param group over averaged_gradients[i],
  // the slices of this rank's partition, one per param in it (get_flat_partition). Per slice
  // `g.data.double()` (a strided fp64 copy) and its norm (a reduction), eager ops from Python.
  // Before 0.13.2 (stage_1_and_2.py of 0.12.6: `total_norm += param_norm.item()**2`) each norm
  // is read back at once, a host synchronisation per slice, then the group's scalar goes up in
  // a FloatTensor, is all-reduced and read back again. Since 0.13.2 the norms stay on the device:
  // torch.stack(...).square().sum().float(), the all-reduce, then pow and the inf/nan masking
  // (isinf, isnan, logical_or, mul, logical_not, mul, add), no synchronisation.
  void grad_norm() {
    const bool item_per_slice = c_.version < DeepSpeedVersion{0, 13, 2};
    auto eager = [](KernelSpec k) {
      k.dispatch = HostDispatch::Eager;
      return k;
    };
    const bool one = groups_.size() == 1;
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      const PGroup& g = groups_[i];
      const std::string sfx = one ? std::string() : fmt::format(" {}", i);
      const std::int64_t lo = g.part * kZeroSimulatedRank, hi = lo + g.part;
      std::int64_t covered = 0;
      std::vector<std::int64_t> slices;
      for (const Param* p : g.params) {
        const std::int64_t s0 = std::max(offset_.at(p), lo), s1 = std::min(offset_.at(p) + p->numel, hi);
        if (s1 > s0) slices.push_back(s1 - s0), covered += s1 - s0;
      }
      if (covered < g.part) slices.push_back(g.part - covered);  // get_flat_partition's zero padding
      for (std::int64_t n : slices) {
        // The fp64 copy is a tensor of its own, dropped once its norm is taken (the embedding's
        // slice on rank 0 of OPT-1.3B: 786 MiB, in the li-plus ZeRO-1 trace's memory events).
        BufferId f64 = b_.alloc("grad norm: g.double()" + sfx, Bytes{n * 8}, MemCategory::Other, dflt_);
        KernelSpec to_f64 = elementwise("grad norm: g.double()" + sfx, Bytes{n * (model_bytes_ + 8)}, "step", KernelClass::ElementwiseStrided);
        to_f64.work.elements = n;
        b_.launch(dflt_, eager(std::move(to_f64)));
        b_.launch(dflt_, eager(elementwise("grad norm: norm(2)" + sfx, Bytes{n * 8}, "step", KernelClass::Reduction)));
        b_.free(f64);
        if (item_per_slice) b_.host_sync_stream(dflt_, "get_grad_norm_direct: param_norm.item()");
      }
      if (!item_per_slice) {
        KernelSpec k = eager(elementwise("grad norm: stack, square, sum, float" + sfx, Bytes{static_cast<std::int64_t>(slices.size()) * 16},
                                     "step", KernelClass::Elementwise));
        k.kernels = 4;
        b_.launch(dflt_, k);
      } else {
        b_.launch(dflt_, eager(elementwise("grad norm: FloatTensor([total_norm])" + sfx, Bytes{8}, "step", KernelClass::Copy)));
      }
      b_.collective(dp_process_group_, dflt_, CollectiveKind::AllReduce, Bytes{4}, Dtype::FP32, "AR grad norm" + sfx, "step");
      if (item_per_slice) {
        b_.host_sync_stream(dflt_, "get_grad_norm_direct: total_norm_cuda[0].item()");
      } else {
        KernelSpec k = eager(elementwise("grad norm: pow, isinf, isnan, logical_or, mul, logical_not, mul, add" + sfx, Bytes{64}, "step",
                                     KernelClass::Elementwise));
        k.kernels = 8;
        b_.launch(dflt_, k);
      }
    }
  }

  // Frees the grads still held of group i's params in (or not in) this rank's partition.
  void release_held_grads(std::size_t i, bool in_partition) {
    for (const Param* p : groups_[i].params) {
      if (params_in_partition_.count(p) != (in_partition ? 1u : 0u)) continue;
      auto it = grad_.find(p);
      if (it == grad_.end()) continue;
      b_.free(it->second);
      grad_.erase(it);
    }
  }

  const ZeroConfig& c_;
  const Experiment& e_;
  const Workload& w_;
  const int dp_world_size_;
  const std::int64_t model_bytes_;          // bytes per element of the bit16 model dtype
  const std::int64_t communication_bytes_;  // ... of communication_data_type
  ProgramBuilder b_;
  StreamId dflt_{0}, reduction_stream_{0};
  KeptOutput kept_output_;
  CommId dp_process_group_{0};

  struct PGroup {
    std::vector<const Param*> params;
    std::int64_t flat = 0, part = 0;  // padded flat numel, partition numel
  };
  std::vector<PGroup> groups_;
  std::map<const Param*, int> group_of_;
  std::vector<const Param*> order_;
  std::map<const Param*, std::int64_t> offset_;  // within its group's flat buffer
  std::int64_t grads_in_partition_size_ = 0;
  std::set<const Param*> params_in_partition_;

  std::map<const Param*, BufferId> grad_;  // autograd grads still held
  std::vector<BufferId> ipg_buffer_;
  int ipg_index_ = 0;
  std::vector<const Param*> params_in_ipg_bucket_;
  std::int64_t elements_in_ipg_bucket_ = 0;
  int bucket_seq_ = 0;
  bool accumulate_ = false;
  std::optional<BufferId> grads_in_partition_;
  std::optional<BufferId> accumulated_grads_in_partition_;   // stage 2 with accumulation: micro-batch 0's, to the boundary
  std::optional<BufferId> previous_grads_in_partition_;  // the previous micro-batch's, until its views move
  std::size_t hooked_params_in_partition_ = 0;
};

}  // namespace

Program build_zero12(const ZeroConfig& c, const Experiment& e) { return Zero12Builder(c, e).build(); }

}  // namespace stepsim
