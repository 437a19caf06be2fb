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
      : c_(c), e_(e), w_(e.workload), W_(e.cluster.world_size()), p_(dtype_bytes(c.model_dtype)),
        cb_(dtype_bytes(c.communication_data_type)), gb_(dtype_bytes(c.grad_accum_dtype)) {}

  Program build() {
    dflt_ = b_.default_stream();
    // Z4.11/Z4.14: separate all-gather and reduce streams iff overlap_comm.
    ag_ = c_.overlap_comm ? b_.stream("allgather") : dflt_;
    red_ = c_.overlap_comm ? b_.stream("reduce_and_partition") : dflt_;
    pg_ = b_.comm("zero dp", W_, e_.cluster.nodes);
    layout();
    make_trace();

    // Persistent state (M5.1 + Z4.8): ds_tensor partitions, the grad partition buffer, fp32
    // partition + Adam states, the persistent IPG buffer, persistent params kept gathered.
    b_.mark("setup", Phase::Setup);
    b_.alloc("ds_tensor partitions", Bytes{part_total_ * p_}, MemCategory::Parameters, dflt_);
    b_.alloc("grad_partitions_flat_buffer", Bytes{part_total_ * gb_}, MemCategory::Gradients, dflt_);
    b_.alloc("fp32 partition", Bytes{part_total_ * 4}, MemCategory::OptimizerState, dflt_);
    Bytes opt = optimizer_state_bytes(e_.training.optimizer, part_total_, Dtype::FP32);
    if (opt.count > 0) b_.alloc("optimizer state (fp32 partition)", opt, MemCategory::OptimizerState, dflt_);
    if (c_.contiguous_gradients)
      b_.alloc("ipg buffer", Bytes{c_.reduce_bucket_size * cb_}, MemCategory::CommBuffers, dflt_);
    if (persistent_numel_ > 0)
      b_.alloc("persistent params (gathered)", Bytes{persistent_numel_ * p_}, MemCategory::UnshardedParameters, dflt_);

    const int A = e_.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) micro_batch(micro);
    step();
    return b_.take();
  }

 private:
  struct PState {
    enum class S { NotAvailable, Inflight, Available } s = S::NotAvailable;
    int handle = -1;
    BufferId full = -1;
  };
  struct Handle {
    std::vector<int> params;
    BufferId flat = -1;  // coalesced AG output (W * sum of partitions)
    bool done = false;
  };
  struct TraceStep {
    std::string name;
    std::vector<int> params;  // direct params, ds_id order
  };

  std::int64_t part(int id) const { return ceil_div(params_[id]->numel, W_); }  // Z4.7

  void layout() {
    std::int64_t running = 0;
    for (const Layer& l : w_.layers)
      for (const Param* p : l.params()) {
        id_[p] = static_cast<int>(params_.size());
        params_.push_back(p);
        part_total_ += ceil_div(p->numel, W_);
        // Z4.8 mark_persistent_parameters: small params while the model total allows.
        bool persist = false;
        if (p->numel + running <= c_.model_persistence_threshold && p->numel <= c_.param_persistence_threshold) {
          persist = true;
          running += p->numel;
        }
        persist_.push_back(persist);
      }
    persistent_numel_ = running;
    state_.assign(params_.size(), PState{});
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (persist_[i]) state_[i].s = PState::S::Available;
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

  // Z4.9/Z4.10: every module's fetch is a trace step: the root, each layer (container, no
  // direct params) and its modules in forward; in backward the root, then per layer the
  // container and its modules in reverse.
  void make_trace() {
    trace_.push_back({"model fwd", {}});
    for (const Layer& l : w_.layers) {
      trace_.push_back({l.name, {}});
      for (const Module& m : l.modules) trace_.push_back({m.name, module_params(l, m)});
    }
    trace_.push_back({"model bwd", {}});
    for (auto l = w_.layers.rbegin(); l != w_.layers.rend(); ++l) {
      trace_.push_back({l->name, {}});
      for (auto m = l->modules.rbegin(); m != l->modules.rend(); ++m) trace_.push_back({m->name, module_params(*l, *m)});
    }
  }

  // reset_step (root pre-forward): the param queue restarts from the recorded trace.
  void reset_step() {
    step_id_ = 0;
    queue_.clear();
    for (std::size_t s = 0; s < trace_.size(); ++s)
      for (int p : trace_[s].params) queue_.emplace_back(p, static_cast<int>(s));
    most_recent_.assign(params_.size(), -1);
  }

  // __all_gather_params -> all_gather_coalesced on the allgather stream (Z4.13).
  void all_gather(std::vector<int> ps, bool forward, const std::string& name, const std::string& unit) {
    std::sort(ps.begin(), ps.end());
    std::int64_t parts = 0;
    for (int p : ps) {
      parts += part(p);
      n_available_ += params_[p]->numel;
      state_[p].s = PState::S::Inflight;
      state_[p].handle = static_cast<int>(handles_.size());
    }
    Handle h;
    h.params = ps;
    const std::string label = fmt::format("AG {} {}", name, forward ? "fwd" : "bwd");
    if (ps.size() == 1) {
      // Single param: the gathered (padded) buffer becomes the param's storage, no copy-out.
      state_[ps[0]].full = b_.alloc("full " + params_[ps[0]]->name, Bytes{parts * W_ * p_}, MemCategory::UnshardedParameters, ag_);
    } else {
      h.flat = b_.alloc("AG buffer " + name, Bytes{parts * W_ * p_}, MemCategory::UnshardedParameters, ag_);
      b_.launch(ag_, elementwise("AG copy-in " + name, Bytes{2 * parts * p_}, unit, KernelClass::Copy));
    }
    b_.collective(pg_, ag_, CollectiveKind::AllGather, Bytes{parts * W_ * p_}, c_.model_dtype, label, unit);
    handles_.push_back(std::move(h));
  }

  // AllGatherCoalescedHandle.wait: per param torch.cat of its pieces into a new unsharded
  // tensor on the allgather stream; the pieces are record_stream'ed on it.
  void wait_handle(int hi) {
    Handle& h = handles_[static_cast<std::size_t>(hi)];
    if (h.done) return;
    h.done = true;
    if (h.flat < 0) return;
    for (int p : h.params) {
      state_[p].full = b_.alloc("full " + params_[p]->name, Bytes{params_[p]->numel * p_}, MemCategory::UnshardedParameters, ag_);
      b_.launch(ag_, elementwise("copy-out " + params_[p]->name, Bytes{2 * params_[p]->numel * p_}, params_[p]->name,
                                 KernelClass::Copy));
    }
    b_.free_after(h.flat, {ag_});
  }

  // fetch_sub_module (Z4.11).
  void fetch(bool forward) {
    const TraceStep& st = trace_[static_cast<std::size_t>(step_id_)];
    std::vector<int> missing;
    for (int p : st.params)
      if (state_[p].s == PState::S::NotAvailable) missing.push_back(p);
    if (!missing.empty()) all_gather(missing, forward, st.name, st.name);
    for (int p : st.params) {
      if (state_[p].s != PState::S::Inflight) continue;
      if (fetch_events_.size() > kMaxOngoingFetchEvents) {
        b_.host_sync(fetch_events_.front(), "fetch_sub_module: > 2 ongoing fetch events");
        fetch_events_.pop_front();
      }
      wait_handle(state_[p].handle);
      state_[p].s = PState::S::Available;
      fetch_events_.push_back(b_.record(ag_));
    }
    b_.wait_stream(dflt_, ag_);

    // Prefetch: pop this module's params off the queue, then gather the next not-available
    // params until min(max_live - n_available, prefetch_bucket_size) elements, in one AG.
    std::set<int> not_fetched;
    for (int p : st.params)
      if (most_recent_[p] < step_id_) not_fetched.insert(p);
    std::size_t discarded = 0;
    while (!queue_.empty() && discarded < not_fetched.size()) {
      auto [p, s] = queue_.front();
      queue_.pop_front();
      most_recent_[p] = s;
      ++discarded;
    }
    if (c_.prefetch_bucket_size > 0) {
      const std::int64_t limit = std::min(c_.max_live_parameters - n_available_, c_.prefetch_bucket_size);
      std::set<int> pick;
      std::int64_t numel = 0;
      std::string first, last;
      while (!queue_.empty() && numel < limit) {
        auto [p, s] = queue_.front();
        queue_.pop_front();
        if (state_[p].s == PState::S::NotAvailable) {
          pick.insert(p);
          numel += params_[p]->numel;
          if (first.empty()) first = trace_[static_cast<std::size_t>(s)].name;
          last = trace_[static_cast<std::size_t>(s)].name;
        }
        most_recent_[p] = std::max(most_recent_[p], s);
      }
      if (!pick.empty()) {
        std::string name = first == last ? "prefetch " + first : fmt::format("prefetch {}..{}", first, last);
        all_gather(std::vector<int>(pick.begin(), pick.end()), forward, name, first);
      }
    }
    ++step_id_;
  }

  // release_sub_module (Z4.12): keep persistent params, params whose later use was already
  // popped by a prefetch, and params used again within max_reuse_distance elements.
  void release() {
    const TraceStep& st = trace_[static_cast<std::size_t>(step_id_ - 1)];
    for (int p : st.params) {
      if (persist_[p] || most_recent_[p] > step_id_ || state_[p].s != PState::S::Available) continue;
      bool reused = false;
      std::int64_t traversed = 0;
      for (std::size_t s = static_cast<std::size_t>(step_id_); s < trace_.size() && !reused; ++s) {
        if (traversed >= c_.max_reuse_distance) break;
        for (int q : trace_[s].params) {
          if (q == p) reused = true;
          traversed += params_[q]->numel;
        }
      }
      if (reused) continue;
      b_.free_after(state_[p].full, {dflt_});  // free_param: record_stream(current)
      state_[p] = PState{};
      n_available_ -= params_[p]->numel;
    }
  }

  void micro_batch(int micro) {
    reset_step();
    b_.mark(fmt::format("forward {}", micro), Phase::Forward);
    fetch(true);  // root
    std::vector<BufferId> acts(w_.layers.size(), -1);
    for (std::size_t li = 0; li < w_.layers.size(); ++li) {
      const Layer& l = w_.layers[li];
      fetch(true);  // the layer container
      if (l.saved_activations.count > 0)
        acts[li] = b_.alloc("activations " + l.name, l.saved_activations, MemCategory::Activations, dflt_);
      for (const Module& m : l.modules) {
        fetch(true);
        launch_ops(b_, dflt_, l, m, m.forward, true);
        release();
      }
    }

    b_.mark(fmt::format("backward {}", micro), Phase::Backward);
    accumulate_ = micro > 0;
    fetch(false);  // root
    for (std::size_t li = w_.layers.size(); li-- > 0;) {
      const Layer& l = w_.layers[li];
      fetch(false);  // the layer container
      BufferId recompute = -1;
      const bool rec = !l.recompute.empty();
      if (rec) {
        // Checkpointed layer: its params are fetched before the recomputed forward runs.
        for (std::size_t k = 0; k < l.modules.size(); ++k) fetch(false);
        recompute = b_.alloc("recomputed " + l.name, l.recompute_activations, MemCategory::Activations, dflt_);
        launch_recompute(b_, dflt_, l);
      }
      const int first_step = step_id_ - (rec ? static_cast<int>(l.modules.size()) : 0);
      for (std::size_t k = l.modules.size(); k-- > 0;) {
        const Module& m = l.modules[k];
        if (!rec) fetch(false);
        launch_ops(b_, dflt_, l, m, m.backward, false);
        for (auto p = m.params.rbegin(); p != m.params.rend(); ++p) grad_hook(id_.at(&*p));
        if (rec) {
          // release the module's step as if it had just been fetched
          int saved = step_id_;
          step_id_ = first_step + static_cast<int>(l.modules.size() - k);
          release();
          step_id_ = saved;
        } else {
          release();
        }
      }
      if (recompute >= 0) b_.free(recompute);
      if (acts[li] >= 0) b_.free(acts[li]);
    }
    epilogue();
    // release_and_reset_all: whatever is still gathered (not persistent) is partitioned.
    for (std::size_t p = 0; p < params_.size(); ++p)
      if (!persist_[p] && state_[p].s == PState::S::Available) {
        b_.free_after(state_[p].full, {dflt_});
        state_[p] = PState{};
        n_available_ -= params_[p]->numel;
      }
  }

  // reduce_independent_p_g_buckets_and_remove_grads -> __add_grad_to_ipg_bucket (Z4.14).
  void grad_hook(int p) {
    const std::int64_t n = params_[p]->numel;
    BufferId g = b_.alloc(".grad " + params_[p]->name, Bytes{n * p_}, MemCategory::Gradients, dflt_);
    if (bucket_elements_ + n > c_.reduce_bucket_size) reduce_ipg();
    b_.wait_stream(red_, dflt_);
    if (c_.contiguous_gradients && bucket_elements_ + n <= c_.reduce_bucket_size) {
      b_.launch(red_, elementwise("grad->ipg " + params_[p]->name, Bytes{n * (p_ + cb_)}, fmt::format("bucket {}", bucket_seq_),
                                  KernelClass::Copy));
      b_.free_after(g, {red_});
    } else {
      held_grads_.push_back(g);  // reduced from its own storage, freed after the flush
    }
    bucket_.push_back(p);
    bucket_elements_ += n;
  }

  // __reduce_and_partition_ipg_grads: rate limiter, then on the reduce stream the
  // rank-interleaved padded copy, div_, one reduce-scatter, copy/add into the grad partition.
  void reduce_ipg() {
    if (bucket_.empty()) return;
    if (reduce_events_.size() > kMaxPendingReduceEvents) {
      b_.host_sync(reduce_events_.front(), "__reduce_and_partition_ipg_grads: > 2 pending reductions");
      reduce_events_.pop_front();
    }
    const int k = bucket_seq_++;
    const std::string unit = fmt::format("bucket {}", k);
    std::int64_t parts = 0;
    for (int p : bucket_) parts += part(p);
    const Bytes full{parts * W_ * cb_};
    if (c_.reduce_scatter) {
      BufferId inter = b_.alloc("RS interleaved " + unit, full, MemCategory::CommBuffers, red_);
      b_.launch(red_, elementwise("interleave " + unit, full * 2, unit, KernelClass::Copy));
      b_.launch(red_, elementwise("div_ " + unit, full * 2, unit));
      BufferId out = b_.alloc("RS output " + unit, Bytes{parts * cb_}, MemCategory::CommBuffers, red_);
      b_.collective(pg_, red_, CollectiveKind::ReduceScatter, full, c_.communication_data_type, "RS " + unit, unit);
      b_.free(inter);
      b_.launch(red_, elementwise("partition_grads " + unit, Bytes{parts * (cb_ + gb_ * (accumulate_ ? 2 : 1))}, unit,
                                  KernelClass::Copy));
      b_.free(out);
    } else {
      // reduce_scatter=false with contiguous grads: all-reduce the bucket, then slice.
      b_.launch(red_, elementwise("div_ " + unit, Bytes{2 * bucket_elements_ * cb_}, unit));
      b_.collective(pg_, red_, CollectiveKind::AllReduce, Bytes{bucket_elements_ * cb_}, c_.communication_data_type,
                    "AR " + unit, unit);
      b_.launch(red_, elementwise("partition_grads " + unit, Bytes{parts * (cb_ + gb_ * (accumulate_ ? 2 : 1))}, unit,
                                  KernelClass::Copy));
    }
    for (BufferId g : held_grads_) b_.free_after(g, {red_});
    held_grads_.clear();
    bucket_.clear();
    bucket_elements_ = 0;
    reduce_events_.push_back(b_.record(red_));
  }

  // independent_gradient_partition_epilogue: flush, then the CPU waits for the reduce stream.
  void epilogue() {
    reduce_ipg();
    b_.host_sync_stream(red_, "independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize()");
    b_.wait_stream(dflt_, red_);
    reduce_events_.clear();
    bucket_seq_ = 0;
  }

  // Z4.15: per sub_group (sub_group_size partition elements): fp32 grad, optimizer step,
  // copy back to the bit16 ds_tensors; no parameter all-gather, except _post_step's gather
  // of the (small) persistent params.
  void step() {
    b_.mark("optimizer", Phase::Optimizer);
    b_.launch(dflt_, elementwise("grad norm", Bytes{part_total_ * gb_}));
    b_.collective(pg_, dflt_, CollectiveKind::AllReduce, Bytes{4}, Dtype::FP32, "AR grad norm", "step");
    std::vector<std::int64_t> groups;
    std::int64_t cur = 0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      cur += part(static_cast<int>(i));
      if (cur >= c_.sub_group_size || i + 1 == params_.size()) {
        groups.push_back(cur);
        cur = 0;
      }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::int64_t n = groups[g];
      const std::string unit = fmt::format("sub_group {}", g);
      BufferId g32 = b_.alloc("fp32 grad " + unit, Bytes{n * 4}, MemCategory::Gradients, dflt_);
      b_.launch(dflt_, elementwise("grad -> fp32 " + unit, Bytes{n * (gb_ + 4)}, unit, KernelClass::Copy));
      if (e_.training.optimizer != Optimizer::None)
        b_.launch(dflt_, optimizer_kernel(e_.training.optimizer, n, Dtype::FP32, "optimizer.step " + unit));
      b_.launch(dflt_, elementwise("fp32 -> bit16 " + unit, Bytes{n * (4 + p_)}, unit, KernelClass::Copy));
      b_.free(g32);
    }
    if (persistent_numel_ > 0) {
      std::int64_t parts = 0;
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (persist_[i]) parts += part(static_cast<int>(i));
      b_.collective(pg_, dflt_, CollectiveKind::AllGather, Bytes{parts * W_ * p_}, c_.model_dtype, "AG persistent params (post step)",
                    "step");
    }
  }

  const ZeroConfig& c_;
  const Experiment& e_;
  const Workload& w_;
  const int W_;
  const std::int64_t p_, cb_, gb_;  // bytes per element: model, communication, grad accumulation
  ProgramBuilder b_;
  StreamId dflt_ = 0, ag_ = 0, red_ = 0;
  CommId pg_ = 0;

  std::vector<const Param*> params_;  // ds_id order (model order)
  std::map<const Param*, int> id_;
  std::vector<bool> persist_;
  std::int64_t part_total_ = 0, persistent_numel_ = 0;

  std::vector<TraceStep> trace_;
  std::deque<std::pair<int, int>> queue_;  // (param, step it is used at)
  std::vector<int> most_recent_;
  int step_id_ = 0;
  std::int64_t n_available_ = 0;
  std::vector<PState> state_;
  std::vector<Handle> handles_;
  std::deque<EventId> fetch_events_;

  std::vector<int> bucket_;
  std::int64_t bucket_elements_ = 0;
  std::vector<BufferId> held_grads_;
  std::deque<EventId> reduce_events_;
  int bucket_seq_ = 0;
  bool accumulate_ = false;
};

}  // namespace

Program build_zero3(const ZeroConfig& c, const Experiment& e) { return Zero3Builder(c, e).build(); }

}  // namespace stepsim
