// DeepSpeed ZeRO stage 3 (stage3.py, parameter_offload.py, partitioned_param_coordinator.py,
// partition_parameters.py), steady state with a COMPLETE trace (iteration >= 2), following
// framework-semantics.md Z4.7-Z4.16, script S8.5 and memory M5.1/M5.5.
#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/zero_common.hpp"

namespace stepsim {

namespace {

// The coordinator's rate limits (ppc.py __max_ongoing_fetch_events, stage3.py
// max_param_reduce_events): beyond these the CPU synchronizes on the oldest event.
constexpr std::size_t kMaxOngoingFetchEvents = 2;
constexpr std::size_t kMaxPendingReduceEvents = 2;

class Zero3Builder {
 public:
  Zero3Builder(const ZeroConfig& c, const Experiment& e)
      : c_(c), e_(e), w_(*e.workload), dp_world_size_(e.cluster.world_size()), model_bytes_(dtype_bytes(c.model_dtype)),
        communication_bytes_(dtype_bytes(c.communication_data_type)), grad_accum_bytes_(dtype_bytes(c.grad_accum_dtype)) {}

  Program build() {
    b_.reserve(instruction_estimate(e_, kZero3OwnPerLayer));
    dflt_ = b_.default_stream();
    // Z4.11/Z4.14: separate all-gather and reduce streams iff overlap_comm.
    allgather_stream_ = c_.overlap_comm ? b_.stream("allgather") : dflt_;
    reduce_and_partition_stream_ = c_.overlap_comm ? b_.stream("reduce_and_partition") : dflt_;
    dp_process_group_ = b_.comm("zero dp", dp_world_size_, e_.cluster.nodes);
    mark_persistent_parameters();
    record_trace();

    // Persistent state (M5.1 + Z4.8): ds_tensor partitions, the grad partition buffer, fp32
    // partition + Adam states, the persistent IPG buffer, persistent params kept gathered.
    b_.mark("setup", Phase::Setup);
    b_.alloc("ds_tensor partitions", Bytes{partition_numel_total_ * model_bytes_}, MemCategory::Parameters, dflt_);
    b_.alloc("grad_partitions_flat_buffer", Bytes{partition_numel_total_ * grad_accum_bytes_}, MemCategory::Gradients, dflt_);
    b_.alloc("fp32 partition", Bytes{partition_numel_total_ * 4}, MemCategory::OptimizerState, dflt_);
    Bytes opt = optimizer_state_bytes(e_.training.optimizer, partition_numel_total_, Dtype::FP32);
    if (opt.count > 0) b_.alloc("optimizer state (fp32 partition)", opt, MemCategory::OptimizerState, dflt_);
    if (c_.contiguous_gradients && c_.reduce_bucket_size > 0)  // torch.empty(0) allocates nothing
      b_.alloc("ipg buffer", Bytes{c_.reduce_bucket_size * communication_bytes_}, MemCategory::CommBuffers, dflt_);
    if (persistent_numel_ > 0)
      b_.alloc("persistent params (gathered)", Bytes{persistent_numel_ * model_bytes_}, MemCategory::UnshardedParameters, dflt_);
    kept_output_.setup(b_, w_, dflt_);

    const int A = e_.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) micro_batch(micro);
    step();
    return b_.take();
  }

 private:
  // partition_parameters.py ZeroParamStatus.
  enum class ZeroParamStatus { NotAvailable, Inflight, Available };
  // What a ds param carries while the step runs: ds_status, the AllGatherCoalescedHandle it
  // waits on while in flight, and param.data once gathered.
  struct DsParamState {
    ZeroParamStatus ds_status = ZeroParamStatus::NotAvailable;
    int handle = -1;        // index into allgather_handles_ while Inflight
    std::optional<BufferId> data;     // the unsharded param.data while Available
  };
  struct AllGatherCoalescedHandle {
    std::vector<int> params;
    std::optional<BufferId> flat;  // coalesced AG output (W * sum of partitions)
    bool done = false;
  };
  struct SubmoduleStep {
    std::string name;
    std::vector<int> params;  // direct params, ds_id order
  };

  std::int64_t partition_numel(int id) const { return ceil_div(params_[id]->numel, dp_world_size_); }  // Z4.7

  void mark_persistent_parameters() {
    std::int64_t running = 0;
    for (const Layer& l : w_.layers)
      for (const Param* p : l.params()) {
        id_[p] = static_cast<int>(params_.size());
        params_.push_back(p);
        partition_numel_total_ += ceil_div(p->numel, dp_world_size_);
        // Z4.8 mark_persistent_parameters: small params while the model total allows.
        bool persist = false;
        if (p->numel + running <= c_.model_persistence_threshold && p->numel <= c_.param_persistence_threshold) {
          persist = true;
          running += p->numel;
        }
        ds_persist_.push_back(persist);
      }
    persistent_numel_ = running;
    param_state_.assign(params_.size(), DsParamState{});
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (ds_persist_[i]) param_state_[i].ds_status = ZeroParamStatus::Available;
  }

  // Tied LM head (gpt/opt presets): the head module owns no Param in the workload but uses
  // the token embedding's weight, so ZeRO-3 fetches that for it.
  std::vector<int> module_params(const Layer& l, const Module& m) const {
    std::vector<int> out;
    for (const Param& p : m.params) out.push_back(id_.at(&p));
    if (out.empty() && l.kind == LayerKind::Head && !w_.toy && !w_.layers.empty() &&
        w_.layers.front().kind == LayerKind::Embedding && !w_.layers.front().modules.empty() &&
        !w_.layers.front().modules.front().params.empty())
      out.push_back(id_.at(&w_.layers.front().modules.front().params.front()));
    return out;
  }

  // Z4.9/Z4.10: every module's fetch_sub_module is a trace step: the root, each layer (container, no
  // direct params) and its modules in forward; in backward the root, then per layer the
  // container and its modules in reverse.
  void record_trace() {
    submodule_order_.push_back({"model fwd", {}});
    for (const Layer& l : w_.layers) {
      submodule_order_.push_back({l.name, {}});
      for (const Module& m : l.modules) submodule_order_.push_back({m.name, module_params(l, m)});
    }
    submodule_order_.push_back({"model bwd", {}});
    for (auto l = w_.layers.rbegin(); l != w_.layers.rend(); ++l) {
      submodule_order_.push_back({l->name, {}});
      for (auto m = l->modules.rbegin(); m != l->modules.rend(); ++m) submodule_order_.push_back({m->name, module_params(*l, *m)});
    }
  }

  // reset_step (root pre-forward): the param queue restarts from the recorded trace.
  void reset_step() {
    step_id_ = 0;
    param_queue_.clear();
    for (std::size_t s = 0; s < submodule_order_.size(); ++s)
      for (int p : submodule_order_[s].params) param_queue_.emplace_back(p, static_cast<int>(s));
    most_recent_step_id_param_fetched_for_.assign(params_.size(), -1);
  }

  // __all_gather_params -> all_gather_coalesced on the allgather stream (Z4.13).
  void all_gather_params(std::vector<int> ps, bool forward, const std::string& name, const std::string& unit) {
    std::sort(ps.begin(), ps.end());
    std::int64_t parts = 0;
    for (int p : ps) {
      parts += partition_numel(p);
      n_available_params_ += params_[p]->numel;
      param_state_[p].ds_status = ZeroParamStatus::Inflight;
      param_state_[p].handle = static_cast<int>(allgather_handles_.size());
    }
    AllGatherCoalescedHandle h;
    h.params = ps;
    const std::string label = fmt::format("AG {} {}", name, forward ? "fwd" : "bwd");
    if (ps.size() == 1) {
      // Single param: the gathered (padded) buffer becomes the param's storage, no copy-out.
      param_state_[ps[0]].data = b_.alloc("full " + params_[ps[0]]->name, Bytes{parts * dp_world_size_ * model_bytes_}, MemCategory::UnshardedParameters, allgather_stream_);
    } else {
      h.flat = b_.alloc("AG buffer " + name, Bytes{parts * dp_world_size_ * model_bytes_}, MemCategory::UnshardedParameters, allgather_stream_);
      b_.launch(allgather_stream_, elementwise("AG copy-in " + name, Bytes{2 * parts * model_bytes_}, unit, KernelClass::Copy));
    }
    b_.collective(dp_process_group_, allgather_stream_, CollectiveKind::AllGather, Bytes{parts * dp_world_size_ * model_bytes_}, c_.model_dtype, label, unit);
    allgather_handles_.push_back(std::move(h));
  }

  // AllGatherCoalescedHandle.wait: per param torch.cat of its pieces into a new unsharded
  // tensor on the allgather stream; the pieces are record_stream'ed on it.
  void wait_handle(int hi) {
    AllGatherCoalescedHandle& h = allgather_handles_[static_cast<std::size_t>(hi)];
    if (h.done) return;
    h.done = true;
    if (!h.flat.has_value()) return;
    for (int p : h.params) {
      param_state_[p].data = b_.alloc("full " + params_[p]->name, Bytes{params_[p]->numel * model_bytes_}, MemCategory::UnshardedParameters, allgather_stream_);
      b_.launch(allgather_stream_, elementwise("copy-out " + params_[p]->name, Bytes{2 * params_[p]->numel * model_bytes_}, params_[p]->name,
                                 KernelClass::Copy));
    }
    b_.free_after(h.flat.value(), {allgather_stream_});
  }

  // fetch_sub_module (Z4.11).
  void fetch_sub_module(bool forward) {
    const SubmoduleStep& st = submodule_order_[static_cast<std::size_t>(step_id_)];
    std::vector<int> missing;
    for (int p : st.params)
      if (param_state_[p].ds_status == ZeroParamStatus::NotAvailable) missing.push_back(p);
    if (!missing.empty()) all_gather_params(missing, forward, st.name, st.name);
    for (int p : st.params) {
      if (param_state_[p].ds_status != ZeroParamStatus::Inflight) continue;
      if (ongoing_fetch_events_.size() > kMaxOngoingFetchEvents) {
        b_.host_sync(ongoing_fetch_events_.front(), "fetch_sub_module: > 2 ongoing fetch events");
        ongoing_fetch_events_.pop_front();
      }
      wait_handle(param_state_[p].handle);
      param_state_[p].ds_status = ZeroParamStatus::Available;
      ongoing_fetch_events_.push_back(b_.record(allgather_stream_));
    }
    b_.wait_stream(dflt_, allgather_stream_);
    prefetch(st, forward);
    ++step_id_;
  }

  // _fetch_sub_module_impl, prefetch part (Z4.11 step 4): pop this module's params off the
  // param queue, then gather the next not-available params until
  // min(max_live_parameters - n_available_params, prefetch_bucket_size) elements, in one AG.
  void prefetch(const SubmoduleStep& st, bool forward) {
    std::set<int> not_fetched;
    for (int p : st.params)
      if (most_recent_step_id_param_fetched_for_[p] < step_id_) not_fetched.insert(p);
    std::size_t discarded = 0;
    while (!param_queue_.empty() && discarded < not_fetched.size()) {
      auto [p, s] = param_queue_.front();
      param_queue_.pop_front();
      most_recent_step_id_param_fetched_for_[p] = s;
      ++discarded;
    }
    if (c_.prefetch_bucket_size > 0) {
      const std::int64_t limit = std::min(c_.max_live_parameters - n_available_params_, c_.prefetch_bucket_size);
      std::set<int> pick;
      std::int64_t numel = 0;
      std::string first, last;
      while (!param_queue_.empty() && numel < limit) {
        auto [p, s] = param_queue_.front();
        param_queue_.pop_front();
        if (param_state_[p].ds_status == ZeroParamStatus::NotAvailable) {
          pick.insert(p);
          numel += params_[p]->numel;
          if (first.empty()) first = submodule_order_[static_cast<std::size_t>(s)].name;
          last = submodule_order_[static_cast<std::size_t>(s)].name;
        }
        most_recent_step_id_param_fetched_for_[p] = std::max(most_recent_step_id_param_fetched_for_[p], s);
      }
      if (!pick.empty()) {
        std::string name = first == last ? "prefetch " + first : fmt::format("prefetch {}..{}", first, last);
        all_gather_params(std::vector<int>(pick.begin(), pick.end()), forward, name, first);
      }
    }
  }

  // release_sub_module (Z4.12): keep persistent params, params whose later use was already
  // popped by a prefetch, and params used again within max_reuse_distance elements.
  void release_sub_module() {
    const SubmoduleStep& st = submodule_order_[static_cast<std::size_t>(step_id_ - 1)];
    for (int p : st.params) {
      if (ds_persist_[p] || most_recent_step_id_param_fetched_for_[p] > step_id_ ||
          param_state_[p].ds_status != ZeroParamStatus::Available || reused_within_max_reuse_distance(p))
        continue;
      release_param(p);
    }
  }

  // __params_to_release: is p used again by a module within the next max_reuse_distance
  // parameter elements of the trace?
  bool reused_within_max_reuse_distance(int p) const {
    std::int64_t traversed = 0;
    for (std::size_t s = static_cast<std::size_t>(step_id_); s < submodule_order_.size(); ++s) {
      if (traversed >= c_.max_reuse_distance) return false;
      bool reused = false;
      for (int q : submodule_order_[s].params) {
        if (q == p) reused = true;
        traversed += params_[q]->numel;
      }
      if (reused) return true;
    }
    return false;
  }

  // __release_param -> free_param: record_stream(current), then the gathered data is freed.
  void release_param(int p) {
    b_.free_after(param_state_[p].data.value(), {dflt_});
    param_state_[p] = DsParamState{};
    n_available_params_ -= params_[p]->numel;
  }

  void micro_batch(int micro) {
    reset_step();
    std::vector<SavedActivations> acts = forward(micro);
    backward(micro, acts);
    independent_gradient_partition_epilogue();
    release_and_reset_all();
  }

  // Forward: the pre-hook fetches each module, the post-hook releases it (Z4.9). Returns the
  // saved activations per layer.
  std::vector<SavedActivations> forward(int micro) {
    b_.mark(fmt::format("forward {}", micro), Phase::Forward);
    fetch_sub_module(true);  // root
    std::vector<SavedActivations> acts(w_.layers.size());
    for (std::size_t li = 0; li < w_.layers.size(); ++li) {
      const Layer& l = w_.layers[li];
      fetch_sub_module(true);  // the layer container
      acts[li] = alloc_saved_activations(b_, l, dflt_);
      ForwardTemporaries temps;
      for (const Module& m : l.modules) {
        fetch_sub_module(true);
        launch_ops(b_, dflt_, l, m, m.forward, true, &kept_output_, &acts[li], &temps);
        release_sub_module();
      }
      temps.finish(b_);
    }
    return acts;
  }

  // Backward in reverse layer order: fetch for backward, the module's backward, the grad hooks
  // of its params, release. A checkpointed layer fetches all its modules before recomputing.
  void backward(int micro, std::vector<SavedActivations>& acts) {
    engine_backward_prologue(b_, c_, w_, dflt_, micro, e_.training.grad_accum, e_.cluster.profile->host.monitor_write);
    enter_backward(b_, e_, micro);
    loss_scale_backward(b_, w_, dflt_, e_.training.grad_accum);
    accumulate_ = micro > 0;
    fetch_sub_module(false);  // root
    for (std::size_t li = w_.layers.size(); li-- > 0;) {
      const Layer& l = w_.layers[li];
      fetch_sub_module(false);  // the layer container
      const bool rec = !l.recompute.empty();
      // Checkpointed layer: its params are fetched before the recomputed forward runs. The
      // transients (recomputed activations, the head's loss gradients) as layer_backward's.
      if (rec)
        for (std::size_t k = 0; k < l.modules.size(); ++k) fetch_sub_module(false);
      const BufferIds transients = alloc_backward_transients(b_, l, dflt_);
      if (rec) launch_recompute(b_, dflt_, l);
      const int first_step = step_id_ - (rec ? static_cast<int>(l.modules.size()) : 0);
      BackwardTemporaries grads;  // as launch_backward's
      const bool own_grads = owns_backward_gradients(l);
      for (std::size_t k = l.modules.size(); k-- > 0;) {
        const Module& m = l.modules[k];
        if (!rec) fetch_sub_module(false);
        launch_ops(b_, dflt_, l, m, m.backward, false, nullptr, nullptr, nullptr, own_grads ? &grads : nullptr);
        acts[li].free_module(b_, k);
        for (auto p = m.params.rbegin(); p != m.params.rend(); ++p) reduce_independent_p_g_buckets_and_remove_grads(id_.at(&*p));
        if (rec) {
          // release the module's step as if it had just been fetched
          int saved = step_id_;
          step_id_ = first_step + static_cast<int>(l.modules.size() - k);
          release_sub_module();
          step_id_ = saved;
        } else {
          release_sub_module();
        }
      }
      grads.finish(b_);
      for (BufferId t : transients) b_.free(t);
      acts[li].free_all(b_);
    }
  }

  // release_and_reset_all: whatever is still gathered (not persistent) is partitioned.
  void release_and_reset_all() {
    for (std::size_t p = 0; p < params_.size(); ++p)
      if (!ds_persist_[p] && param_state_[p].ds_status == ZeroParamStatus::Available) release_param(static_cast<int>(p));
  }

  // reduce_independent_p_g_buckets_and_remove_grads -> __add_grad_to_ipg_bucket (Z4.14).
  void reduce_independent_p_g_buckets_and_remove_grads(int p) {
    const std::int64_t n = params_[p]->numel;
    BufferId g = b_.alloc(".grad " + params_[p]->name, Bytes{n * model_bytes_}, MemCategory::Gradients, dflt_);
    if (elements_in_ipg_bucket_ + n > c_.reduce_bucket_size) reduce_and_partition_ipg_grads();
    b_.wait_stream(reduce_and_partition_stream_, dflt_);
    if (c_.contiguous_gradients && elements_in_ipg_bucket_ + n <= c_.reduce_bucket_size) {
      b_.launch(reduce_and_partition_stream_, elementwise("grad->ipg " + params_[p]->name, Bytes{n * (model_bytes_ + communication_bytes_)}, fmt::format("bucket {}", bucket_seq_),
                                  KernelClass::Copy));
      b_.free_after(g, {reduce_and_partition_stream_});
    } else {
      held_grads_.push_back(g);  // reduced from its own storage, freed after the flush
    }
    params_in_ipg_bucket_.push_back(p);
    elements_in_ipg_bucket_ += n;
  }

  // __reduce_and_partition_ipg_grads: rate limiter, then on the reduce stream the
  // rank-interleaved padded copy, div_, one reduce-scatter, copy/add into the grad partition.
  void reduce_and_partition_ipg_grads() {
    if (params_in_ipg_bucket_.empty()) return;
    if (param_reduce_events_.size() > kMaxPendingReduceEvents) {
      b_.host_sync(param_reduce_events_.front(), "__reduce_and_partition_ipg_grads: > 2 pending reductions");
      param_reduce_events_.pop_front();
    }
    const int k = bucket_seq_++;
    const std::string unit = fmt::format("bucket {}", k);
    std::int64_t parts = 0;
    for (int p : params_in_ipg_bucket_) parts += partition_numel(p);
    const Bytes full{parts * dp_world_size_ * communication_bytes_};
    if (c_.reduce_scatter) {
      // reduce_scatter_coalesced reduces in place: the output is this rank's torch.chunk of the
      // same flat buffer and the grad partitions are narrow() views of it
      // (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/comm/coalesced_collectives.py l.199-214),
      // so the buffer lives until partition_grads has copied out of it. The reduce-scatter is
      // synchronous (l.22-23 `_torch_reduce_scatter_fn ... async_op=False`): c10d records its
      // stream on the buffer only before PyTorch 2.2 (pytorch#111431).
      BufferId inter = b_.alloc("RS interleaved " + unit, full, MemCategory::CommBuffers, reduce_and_partition_stream_);
      b_.launch(reduce_and_partition_stream_, elementwise("interleave " + unit, full * 2, unit, KernelClass::Copy));
      b_.launch(reduce_and_partition_stream_, elementwise("div_ " + unit, full * 2, unit));
      b_.collective(dp_process_group_, reduce_and_partition_stream_, CollectiveKind::ReduceScatter, full, c_.communication_data_type, "RS " + unit, unit);
      b_.launch(reduce_and_partition_stream_, elementwise("partition_grads " + unit, Bytes{parts * (communication_bytes_ + grad_accum_bytes_ * (accumulate_ ? 2 : 1))}, unit,
                                  KernelClass::Copy));
      free_collective_tensor(b_, c_.c10d_records_sync_gather_scatter_streams(e_.training), inter, reduce_and_partition_stream_);
    } else {
      // reduce_scatter=false with contiguous grads: all-reduce the bucket, then slice.
      b_.launch(reduce_and_partition_stream_, elementwise("div_ " + unit, Bytes{2 * elements_in_ipg_bucket_ * communication_bytes_}, unit));
      b_.collective(dp_process_group_, reduce_and_partition_stream_, CollectiveKind::AllReduce, Bytes{elements_in_ipg_bucket_ * communication_bytes_}, c_.communication_data_type,
                    "AR " + unit, unit);
      b_.launch(reduce_and_partition_stream_, elementwise("partition_grads " + unit, Bytes{parts * (communication_bytes_ + grad_accum_bytes_ * (accumulate_ ? 2 : 1))}, unit,
                                  KernelClass::Copy));
    }
    for (BufferId g : held_grads_) b_.free_after(g, {reduce_and_partition_stream_});
    held_grads_.clear();
    params_in_ipg_bucket_.clear();
    elements_in_ipg_bucket_ = 0;
    param_reduce_events_.push_back(b_.record(reduce_and_partition_stream_));
  }

  // independent_gradient_partition_epilogue: flush, then the CPU waits for the reduce stream.
  void independent_gradient_partition_epilogue() {
    reduce_and_partition_ipg_grads();
    b_.host_sync_stream(reduce_and_partition_stream_, "independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize()");
    b_.wait_stream(dflt_, reduce_and_partition_stream_);
    param_reduce_events_.clear();
    bucket_seq_ = 0;
  }

  // Z4.15: per sub_group (sub_group_size partition elements): fp32 grad, optimizer step,
  // copy back to the bit16 ds_tensors; no parameter all-gather, except _post_step's gather
  // of the (small) persistent params.
  void step() {
    b_.mark("optimizer", Phase::Optimizer);
    b_.launch(dflt_, elementwise("grad norm", Bytes{partition_numel_total_ * grad_accum_bytes_}));
    b_.collective(dp_process_group_, dflt_, CollectiveKind::AllReduce, Bytes{4}, Dtype::FP32, "AR grad norm", "step");
    std::vector<std::int64_t> groups;
    std::int64_t cur = 0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      cur += partition_numel(static_cast<int>(i));
      if (cur >= c_.sub_group_size || i + 1 == params_.size()) {
        groups.push_back(cur);
        cur = 0;
      }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::int64_t n = groups[g];
      const std::string unit = fmt::format("sub_group {}", g);
      BufferId g32 = b_.alloc("fp32 grad " + unit, Bytes{n * 4}, MemCategory::Gradients, dflt_);
      b_.launch(dflt_, elementwise("grad -> fp32 " + unit, Bytes{n * (grad_accum_bytes_ + 4)}, unit, KernelClass::Copy));
      // unscale_and_clip_grads(sub_group_id, ...): fp32 grad .mul_(1. / combined_scale), always
      // (stage3.py v0.19.5 l.2666-2675).
      b_.launch(dflt_, elementwise("unscale_and_clip_grads: mul_ " + unit, Bytes{n * 8}, unit));
      launch_optimizer_step(b_, dflt_, {.optimizer = e_.training.optimizer, .impl = deepspeed_optimizer_impl(e_),
                                        .numel = n, .dtype = Dtype::FP32, .name = "optimizer.step " + unit});
      b_.launch(dflt_, elementwise("fp32 -> bit16 " + unit, Bytes{n * (4 + model_bytes_)}, unit, KernelClass::Copy));
      b_.free(g32);
    }
    if (persistent_numel_ > 0) {
      std::int64_t parts = 0;
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (ds_persist_[i]) parts += partition_numel(static_cast<int>(i));
      b_.collective(dp_process_group_, dflt_, CollectiveKind::AllGather, Bytes{parts * dp_world_size_ * model_bytes_}, c_.model_dtype, "AG persistent params (post step)",
                    "step");
    }
  }

  const ZeroConfig& c_;
  const Experiment& e_;
  const Workload& w_;
  const int dp_world_size_;               // stage3.py dp_world_size: the partition count
  const std::int64_t model_bytes_;        // bytes per element of the bit16 model dtype
  const std::int64_t communication_bytes_;  // ... of communication_data_type
  const std::int64_t grad_accum_bytes_;   // ... of gradient_accumulation_dtype
  ProgramBuilder b_;
  StreamId dflt_{0};
  KeptOutput kept_output_;
  StreamId allgather_stream_{0};             // parameter_offload.py __allgather_stream
  StreamId reduce_and_partition_stream_{0};  // stage3.py reduce_and_partition_stream
  CommId dp_process_group_{0};

  // The partitioned parameters (partition_parameters.py).
  std::vector<const Param*> params_;  // ds_id order (model order)
  std::map<const Param*, int> id_;    // Param -> ds_id
  std::vector<bool> ds_persist_;      // per ds_id: mark_persistent_parameters chose it
  std::int64_t partition_numel_total_ = 0;  // sum of every param's ds_tensor numel
  std::int64_t persistent_numel_ = 0;       // sum of the persistent params' numel

  // The coordinator (partitioned_param_coordinator.py).
  std::vector<SubmoduleStep> submodule_order_;   // __submodule_order, the COMPLETE trace
  std::deque<std::pair<int, int>> param_queue_;  // __param_queue: (ds_id, step it is used at)
  std::vector<int> most_recent_step_id_param_fetched_for_;  // per ds_id
  int step_id_ = 0;                                         // __step_id
  std::int64_t n_available_params_ = 0;                     // __n_available_params (elements)
  std::vector<DsParamState> param_state_;                   // per ds_id
  std::vector<AllGatherCoalescedHandle> allgather_handles_; // __inflight_param_registry's handles
  std::deque<EventId> ongoing_fetch_events_;                // __ongoing_fetch_events

  // The IPG bucket (stage3.py).
  std::vector<int> params_in_ipg_bucket_;   // ds_ids
  std::int64_t elements_in_ipg_bucket_ = 0;
  std::vector<BufferId> held_grads_;        // grads reduced from their own storage (no IPG copy)
  std::deque<EventId> param_reduce_events_; // __param_reduce_events
  int bucket_seq_ = 0;                      // flush count in this backward: names "bucket k"
  bool accumulate_ = false;                 // micro_step_id > 0: add into the grad partition
};

}  // namespace

Program build_zero3(const ZeroConfig& c, const Experiment& e) { return Zero3Builder(c, e).build(); }

}  // namespace stepsim
