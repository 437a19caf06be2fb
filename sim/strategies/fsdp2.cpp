// PyTorch FSDP2 (`fully_shard`), steady state, following framework-semantics.md section 2
// (F2.x), memory M5.3 and script S8.2. All frees are plain (stream-ordered): FSDP2 never uses
// record_stream, so live bytes follow the CPU program order, not GPU timing (F2.10, M5.6).
#include <deque>
#include <map>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/fsdp2.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {
namespace fsdp2 {

namespace {

// The instructions FSDP2 writes of its own per layer and micro-batch, beside its ops'
// (instruction_estimate, common.hpp): collectives, events, allocations.
constexpr std::size_t kFsdp2OwnPerLayer = 50;

enum class Pass { Forward, Backward };

// Emits one step. Mirrors FSDPParamGroup / FSDPState: each method is the framework function
// of the same name, and the members are the Python-side state those functions keep.
class Emitter {
 public:
  Emitter(const Experiment& e, const Fsdp2Config& c) : e_(e), c_(c), w_(*e.workload) {
    groups_ = build_groups(w_, c_);
    const int n = static_cast<int>(groups_.size());
    for (int g = 0; g < n; ++g)
      for (const Layer* l : groups_[static_cast<std::size_t>(g)].layers) group_of_[l] = g;
    st_.resize(groups_.size());
    param_bytes_ = dtype_bytes(c_.param_dtype);
    reduce_bytes_ = dtype_bytes(c_.effective_reduce_dtype());
    orig_bytes_ = dtype_bytes(c_.orig_dtype);
  }

  Program build() {
    b_.reserve(stepsim::instruction_estimate(e_, kFsdp2OwnPerLayer));
    dflt_ = b_.default_stream();
    // F2.6 streams (FSDPCommContext.lazy_init) with their priorities.
    copy_in_ = b_.stream("all_gather_copy_in", -1);
    ag_ = b_.stream("all_gather", -1);
    rs_ = b_.stream("reduce_scatter", -1);
    ar_ = b_.stream("all_reduce", 0);
    const int gpn = e_.cluster.gpus_per_node;
    // Rank = replicate_index * shard + shard_index: shard groups are contiguous ranks,
    // replicate groups stride by the shard size (DeviceMesh over arange(world).view(R, S)).
    shard_pg_ = b_.comm("shard", c_.shard, nodes_spanned(0, 1, c_.shard, gpn));
    if (c_.replicate > 1) replicate_pg_ = b_.comm("replicate", c_.replicate, nodes_spanned(0, c_.shard, c_.replicate, gpn));
    if (c_.partial_reshard())
      post_forward_pg_ = b_.comm("post_forward", c_.reshard_size, nodes_spanned(0, 1, c_.reshard_size, gpn));

    setup();
    const int A = e_.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) {
      const bool sync = micro == A - 1 || !e_.training.no_sync;
      forward(micro);
      backward(micro, sync);
    }
    // The training loop's clip_grad_norm_ over the DTensor gradients (the partial norm all-reduced
    // over the shard mesh dimension; replicas hold equal gradients) and optimizer.step() over
    // every parameter's shard (one DTensor each).
    std::int64_t tensors = 0;
    for (const Group& g : groups_)
      for (const Layer* l : g.layers) tensors += l->param_count();
    if (loop_clips_grad_norm(e_))
      launch_clip_grad_norm(b_, dflt_, {.numel = total_shard_, .tensors = tensors, .dtype = c_.orig_dtype, .comm = shard_pg_});
    b_.mark("optimizer", Phase::Optimizer);
    launch_optimizer_step(b_, dflt_, {.optimizer = e_.training.optimizer, .impl = loop_optimizer_impl(e_), .numel = total_shard_,
                                      .tensors = tensors, .dtype = c_.orig_dtype});
    for (GroupState& s : st_)  // zero_grad(set_to_none=True)
      if (s.sharded_grad.has_value()) b_.free(*s.sharded_grad), s.sharded_grad = std::nullopt;
    return b_.take();
  }

 private:
  struct Pending {
    BufferId out;
    EventId event;
  };
  struct RsState {
    BufferId input;
    EventId event;
  };
  struct GroupState {
    std::optional<BufferId> unsharded;      // unsharded params (param dtype, padded)
    std::optional<BufferId> slice;          // reshard_after_forward=k: the post-forward 1/k slice
    std::optional<EventId> reshard_event;  // _reshard_after_forward_event
    std::optional<Pending> pending;  // issued all-gather not yet waited on
    std::vector<BufferId> grads;  // autograd unsharded grads of this backward
    std::optional<BufferId> accumulated;    // no_sync: unsharded grads kept across micro-batches
    std::optional<BufferId> sharded_grad;   // the fp32 (orig dtype) sharded .grad
  };

  Group& group(int g) { return groups_[static_cast<std::size_t>(g)]; }
  GroupState& state(int g) { return st_[static_cast<std::size_t>(g)]; }
  std::string unit(int g) { return group(g).name; }
  Bytes bytes(std::int64_t numel, std::int64_t elem) const { return Bytes{numel * elem}; }
  KernelSpec copy_kernel(std::string name, Bytes b, int g) { return elementwise(std::move(name), b, unit(g), KernelClass::Copy); }

  // Persistent state (M5.1): fp32 (orig dtype) shards and the optimizer states over them.
  void setup() {
    b_.mark("setup", Phase::Setup);
    for (const Group& g : groups_) total_shard_ += g.shard_numel();
    b_.alloc("sharded parameters", bytes(total_shard_, orig_bytes_), MemCategory::Parameters, dflt_);
    // Per parameter: its dim-0 shard (padded_numel / W), as the optimizer sees the DTensor.
    for (const Group& g : groups_)
      for (const Layer* l : g.layers)
        for (const Param* p : l->params())
          alloc_optimizer_state(b_, e_.training.optimizer, p->name,
                                fsdp2::padded_numel(*p, g.shard_ranks) / g.shard_ranks, c_.orig_dtype, dflt_);
    kept_output_.setup(b_, w_, dflt_);
  }

  // FSDPParamGroup.unshard -> foreach_all_gather (F2.8).
  void unshard(int g, Pass pass) {
    Group& G = group(g);
    GroupState& s = state(g);
    if (G.empty() || s.unsharded.has_value() || s.pending) return;
    const bool from_slice = pass == Pass::Backward && s.slice.has_value();
    const std::int64_t shard = G.shard_numel();
    if (from_slice) {
      // The slice was written on the default stream at post-forward; the next unshard waits on
      // _reshard_after_forward_event before reading it.
      b_.wait(copy_in_, s.reshard_event.value());
    }
    BufferId out = b_.alloc("AG output " + G.name, bytes(G.padded, param_bytes_), MemCategory::CommBuffers, copy_in_);
    if (from_slice) {
      const std::int64_t slice = G.padded / c_.reshard_size;
      b_.launch(copy_in_, copy_kernel("AG copy-in " + G.name, bytes(slice, 2 * param_bytes_), g));
    } else if (c_.param_dtype != c_.orig_dtype) {
      // Cast the orig-dtype shards into a flat param-dtype temp, then copy it into this rank's
      // slice of the output (all_gather_copy_in).
      BufferId tmp = b_.alloc("AG input " + G.name, bytes(shard, param_bytes_), MemCategory::CommBuffers, copy_in_);
      b_.launch(copy_in_, copy_kernel("AG copy-in " + G.name, bytes(shard, orig_bytes_ + 3 * param_bytes_), g));
      b_.free(tmp);
    } else {
      b_.launch(copy_in_, copy_kernel("AG copy-in " + G.name, bytes(shard, 2 * orig_bytes_), g));
    }
    b_.wait_stream(ag_, copy_in_);
    const CommId pg = from_slice ? post_forward_pg_.value() : shard_pg_;
    b_.collective(pg, ag_, CollectiveKind::AllGather, bytes(G.padded, param_bytes_), c_.param_dtype,
                  fmt::format("AG {} {}", G.name, pass == Pass::Forward ? "fwd" : "bwd"), G.name);
    s.pending = Pending{out, b_.record(ag_)};
  }

  // FSDPParamGroup.wait_for_unshard (F2.9).
  void wait_for_unshard(int g, Pass pass) {
    Group& G = group(g);
    GroupState& s = state(g);
    if (!s.pending) return;
    if (pass == Pass::Forward) release_kept_all_gather();
    b_.wait(dflt_, s.pending->event);
    s.unsharded = b_.alloc("unsharded " + G.name, bytes(G.padded, param_bytes_), MemCategory::UnshardedParameters, dflt_);
    b_.launch(dflt_, copy_kernel("AG copy-out " + G.name, bytes(G.padded, 2 * param_bytes_), g));  // split_with_sizes_copy
    if (s.slice.has_value()) b_.free(*s.slice), s.slice = std::nullopt;
    EventId copied = b_.record(dflt_);
    if (pass == Pass::Forward) {
      kept_ = Pending{s.pending->out, copied};  // all_gather_state: freed at the next wait
    } else {
      b_.wait(copy_in_, copied);
      b_.wait(ag_, copied);
      b_.free(s.pending->out);
    }
    s.pending.reset();
  }

  // Drop the previous forward AG output after both AG streams waited on its copy-out, so the
  // stream-ordered reuse is safe (F2.9-1, root post-forward).
  void release_kept_all_gather() {
    if (!kept_) return;
    b_.wait(copy_in_, kept_->event);
    b_.wait(ag_, kept_->event);
    b_.free(kept_->out);
    kept_.reset();
  }

  void pre_forward(int g) {
    unshard(g, Pass::Forward);
    wait_for_unshard(g, Pass::Forward);
    // set_modules_to_forward_prefetch: the next groups in forward order.
    const int n = static_cast<int>(groups_.size());
    for (int k = 1; k <= c_.forward_prefetch && g + k < n; ++k) unshard(g + k, Pass::Forward);
  }

  // FSDPParamGroup.post_forward -> reshard (F2.11). The root is not resharded unless
  // reshard_after_forward was passed explicitly (F2.4; Fsdp2Config::root_reshard).
  void post_forward(int g) {
    Group& G = group(g);
    GroupState& s = state(g);
    if (G.root) {
      release_kept_all_gather();
      if (!c_.root_reshard) return;
    }
    if (G.empty() || !c_.resharded_after_forward() || !s.unsharded.has_value()) return;
    // torchtitan's last block: kept unsharded for its backward, which runs first.
    if (!G.root && g == static_cast<int>(groups_.size()) - 1 && !c_.last_block_reshard) return;
    if (c_.partial_reshard()) {
      // to_sharded_post_forward: clone this rank's 1/k of the unsharded padded param before
      // freeing the unsharded storage.
      const std::int64_t slice = G.padded / c_.reshard_size;
      s.slice = b_.alloc("post-forward slice " + G.name, bytes(slice, param_bytes_), MemCategory::UnshardedParameters, dflt_);
      b_.launch(dflt_, copy_kernel("reshard slice " + G.name, bytes(slice, 2 * param_bytes_), g));
      s.reshard_event = b_.record(dflt_);
    }
    b_.free(s.unsharded.value());
    s.unsharded = std::nullopt;
  }

  // FSDPState._pre_backward (F2.13): unshard (no-op if prefetched), copy-out, then prefetch
  // the next groups in reverse post-forward order.
  void pre_backward(std::size_t order_index) {
    const int g = backward_order_[order_index];
    unshard(g, Pass::Backward);
    wait_for_unshard(g, Pass::Backward);
    for (int k = 1; k <= c_.backward_prefetch && order_index + static_cast<std::size_t>(k) < backward_order_.size(); ++k)
      unshard(backward_order_[order_index + static_cast<std::size_t>(k)], Pass::Backward);
  }

  // FSDPParamGroup.post_backward (F2.14) and foreach_reduce (F2.15).
  void post_backward(int g, bool sync) {
    Group& G = group(g);
    GroupState& s = state(g);
    if (G.empty()) return;
    if (s.unsharded.has_value()) b_.free(*s.unsharded), s.unsharded = std::nullopt;  // reshard_after_backward
    // 1. accumulate into the unsharded grads a previous no-sync backward left.
    if (s.accumulated.has_value() && !s.grads.empty()) {
      b_.launch(dflt_, elementwise("grad accumulate " + G.name, bytes(G.numel, param_bytes_ + 2 * reduce_bytes_), G.name));
      for (BufferId id : s.grads) b_.free(id);
      s.grads.clear();
    }
    if (!sync) {
      // 2. set_requires_gradient_sync(False): keep the unsharded grad in the reduce dtype.
      if (!s.accumulated.has_value()) {
        s.accumulated = b_.alloc("unsharded grad " + G.name, bytes(G.numel, reduce_bytes_), MemCategory::Gradients, dflt_);
        b_.launch(dflt_, elementwise("grad to reduce dtype " + G.name, bytes(G.numel, param_bytes_ + reduce_bytes_), G.name));
        for (BufferId id : s.grads) b_.free(id);
        s.grads.clear();
      }
      return;
    }
    wait_for_reduce_scatter_inputs();
    foreach_reduce(g);
  }

  // 4. RS throttle: the compute stream waits on the oldest RS before the next copy-in.
  void wait_for_reduce_scatter_inputs() {
    while (static_cast<int>(rs_in_flight_.size()) >= c_.rs_max_input_buffers) {
      b_.wait(dflt_, rs_in_flight_.front().event);
      b_.free(rs_in_flight_.front().input);
      rs_in_flight_.pop_front();
    }
  }

  // 5. foreach_reduce: RS input on the default stream (chunk_cat of the unsharded grads), the
  // reduce-scatter on its stream, with HSDP the all-reduce over the replicate group, then the
  // sharded .grad.
  void foreach_reduce(int g) {
    Group& G = group(g);
    GroupState& s = state(g);
    const Dtype rdt = c_.effective_reduce_dtype();
    BufferId rs_in = b_.alloc("RS input " + G.name, bytes(G.padded, reduce_bytes_), MemCategory::CommBuffers, dflt_);
    const std::int64_t src = s.accumulated.has_value() ? reduce_bytes_ : param_bytes_;
    b_.launch(dflt_, copy_kernel("RS copy-in " + G.name, Bytes{G.numel * src + G.padded * reduce_bytes_}, g));  // chunk_cat
    for (BufferId id : s.grads) b_.free(id);
    s.grads.clear();
    if (s.accumulated.has_value()) b_.free(*s.accumulated), s.accumulated = std::nullopt;

    b_.wait_stream(rs_, dflt_);
    const std::int64_t shard = G.shard_numel();
    // The RS output becomes .grad itself unless a cast or an accumulation needs a new tensor.
    const bool own_grad = rdt == c_.orig_dtype && !s.sharded_grad.has_value();
    BufferId rs_out = b_.alloc(own_grad ? ".grad " + G.name : "RS output " + G.name, bytes(shard, reduce_bytes_),
                               own_grad ? MemCategory::Gradients : MemCategory::CommBuffers, rs_);
    const bool fp16 = rdt == Dtype::FP16;  // SUM + pre/post divide; AVG inside NCCL otherwise (C6.6)
    if (fp16) b_.launch(rs_, elementwise("RS pre-divide " + G.name, bytes(G.padded, 2 * reduce_bytes_), G.name));
    b_.collective(shard_pg_, rs_, CollectiveKind::ReduceScatter, bytes(G.padded, reduce_bytes_), rdt, "RS " + G.name, G.name);
    rs_in_flight_.push_back(RsState{rs_in, b_.record(rs_)});
    StreamId post = rs_;
    if (c_.replicate > 1) {
      // HSDP: all-reduce the shard over the replicate group on its own communicator.
      b_.wait_stream(ar_, rs_);
      b_.collective(replicate_pg_.value(), ar_, CollectiveKind::AllReduce, bytes(shard, reduce_bytes_), rdt, "AR " + G.name, G.name);
      post = ar_;
    }
    if (fp16) b_.launch(post, elementwise("RS post-divide " + G.name, bytes(shard, 2 * reduce_bytes_), G.name));
    view_out_sharded_grad(g, rs_out, post, own_grad);
    post_reduce_events_.push_back(b_.record(post));
  }

  // The reduced shard becomes .grad: as is, or cast to the orig dtype and/or added into the
  // existing sharded .grad.
  void view_out_sharded_grad(int g, BufferId rs_out, StreamId post, bool own_grad) {
    Group& G = group(g);
    GroupState& s = state(g);
    const Dtype rdt = c_.effective_reduce_dtype();
    const std::int64_t shard = G.shard_numel();
    if (own_grad) {
      s.sharded_grad = rs_out;
    } else {
      // Cast to the orig dtype (new tensor) and/or add into the existing sharded .grad.
      const std::int64_t traffic = (rdt != c_.orig_dtype ? reduce_bytes_ + orig_bytes_ : 0) + (s.sharded_grad.has_value() ? 3 * orig_bytes_ : 0);
      if (!s.sharded_grad.has_value())
        s.sharded_grad = b_.alloc(".grad " + G.name, bytes(shard, orig_bytes_), MemCategory::Gradients, post);
      b_.launch(post, elementwise("grad view-out " + G.name, bytes(shard, traffic), G.name));
      // HSDP keeps the all-reduce input alive until finalize_backward (_all_reduce_state).
      if (c_.replicate > 1) held_ar_inputs_.push_back(rs_out);
      else b_.free(rs_out);
    }
  }

  void forward(int micro) {
    b_.mark(fmt::format("forward {}", micro), Phase::Forward);
    acts_.assign(w_.layers.size(), {});
    // F2.7 root pre-forward: both AG streams wait for the current stream (optimizer step).
    b_.wait_stream(copy_in_, dflt_);
    b_.wait_stream(ag_, dflt_);
    pre_forward(0);  // the root
    for (std::size_t li = 0; li < w_.layers.size(); ++li) {
      const Layer& l = w_.layers[li];
      const int g = group_of_.at(&l);
      if (g != 0) pre_forward(g);
      acts_[li] = forward_layer(b_, dflt_, l, micro, &kept_output_);
      if (g != 0) post_forward(g);
    }
    post_forward(0);
    // post_forward_order (F2.11): blocks in the order they finished forward, then the root.
    backward_order_.clear();
    backward_order_.push_back(0);
    for (int g = static_cast<int>(groups_.size()) - 1; g >= 1; --g) backward_order_.push_back(g);
  }

  void backward(int micro, bool sync) {
    seed_loss_gradient(b_, dflt_, w_.loss_dtype);
    enter_backward(b_, e_, micro);
    std::map<int, std::size_t> order_index;
    for (std::size_t i = 0; i < backward_order_.size(); ++i) order_index[backward_order_[i]] = i;
    pre_backward(0);  // tensor hook on the root's output
    for (std::size_t li = w_.layers.size(); li-- > 0;) {
      const Layer& l = w_.layers[li];
      const int g = group_of_.at(&l);
      if (g != 0) pre_backward(order_index.at(g));
      layer_backward(b_, l, micro, dflt_, acts_[li], [&] {
        if (l.numel() > 0)  // autograd's unsharded grads, in the param (compute) dtype
          state(g).grads.push_back(b_.alloc("grads " + l.name, bytes(l.numel(), param_bytes_), MemCategory::Gradients, dflt_));
      });
      // RegisterPostBackwardFunction fires once the group's input gradient is produced.
      if (g != 0) post_backward(g, sync);
    }
    // Root final callback (F2.16): the root's post-backward (its input, token ids, needs no
    // grad), then the current stream waits every post-reduce / all-reduce and remaining RS.
    post_backward(0, sync);
    for (EventId ev : post_reduce_events_) b_.wait(dflt_, ev);
    post_reduce_events_.clear();
    for (const RsState& rs : rs_in_flight_) {
      b_.wait(dflt_, rs.event);
      b_.free(rs.input);
    }
    rs_in_flight_.clear();
    for (BufferId id : held_ar_inputs_) b_.free(id);
    held_ar_inputs_.clear();
  }

  const Experiment& e_;
  const Fsdp2Config& c_;
  const Workload& w_;
  std::vector<Group> groups_;
  std::map<const Layer*, int> group_of_;
  std::vector<GroupState> st_;
  // Bytes per element of MixedPrecisionPolicy.param_dtype, of its reduce_dtype, and of the
  // sharded parameters' original dtype.
  std::int64_t param_bytes_ = 2, reduce_bytes_ = 2, orig_bytes_ = 4;
  std::int64_t total_shard_ = 0;
  ProgramBuilder b_;
  StreamId dflt_{0}, copy_in_{0}, ag_{0}, rs_{0}, ar_{0};
  KeptOutput kept_output_;
  CommId shard_pg_{0};
  std::optional<CommId> replicate_pg_;     // HSDP only
  std::optional<CommId> post_forward_pg_;  // reshard_after_forward=k only
  std::optional<Pending> kept_;             // comm_ctx.all_gather_state
  std::deque<RsState> rs_in_flight_;        // comm_ctx.reduce_scatter_state(s)
  std::vector<EventId> post_reduce_events_;
  std::vector<BufferId> held_ar_inputs_;
  std::vector<SavedActivations> acts_;
  std::vector<int> backward_order_;         // reverse post-forward order
};

class Fsdp2 final : public Strategy {
 public:
  explicit Fsdp2(Fsdp2Config c) : c_(std::move(c)) {}
  std::string framework() const override { return "fsdp2"; }

  nlohmann::json effective_config() const override {
    nlohmann::json reshard;
    if (!c_.resharded_after_forward()) reshard = false;
    else if (c_.partial_reshard()) reshard = c_.reshard_size;
    else reshard = true;
    nlohmann::json mp = {{"param_dtype", to_string(c_.param_dtype)}};
    mp["reduce_dtype"] = c_.reduce_dtype ? nlohmann::json(to_string(*c_.reduce_dtype)) : nlohmann::json();
    return {{"framework", "fsdp2"},
            {"wrap", c_.wrap},
            {"mesh", {{"replicate", c_.replicate}, {"shard", c_.shard}}},
            {"reshard_after_forward", reshard},
            {"root_reshard_after_forward", c_.root_reshard},
            {"reshard_last_block_after_forward", c_.last_block_reshard && c_.resharded_after_forward()},
            {"forward_prefetch", c_.forward_prefetch},
            {"backward_prefetch", c_.backward_prefetch},
            {"mixed_precision", mp},
            {"effective_reduce_dtype", to_string(c_.effective_reduce_dtype())},
            {"orig_dtype", to_string(c_.orig_dtype)},
            {"unset_reduce_dtype", c_.unset_reduce_dtype},
            {"reduce_scatter_max_input_buffers", c_.rs_max_input_buffers}};
  }

  Program build(const Experiment& e) const override { return Emitter(e, c_).build(); }
  std::size_t instruction_estimate(const Experiment& e) const override { return stepsim::instruction_estimate(e, kFsdp2OwnPerLayer); }

 private:
  Fsdp2Config c_;
};

}  // namespace

std::unique_ptr<Strategy> make_fsdp2(Fsdp2Config c) { return std::make_unique<Fsdp2>(std::move(c)); }

}  // namespace fsdp2
}  // namespace stepsim
