// PyTorch FullyShardedDataParallel (FSDP1), steady state (iteration >= 2), following
// framework-semantics.md section 1 (F1.x), memory section 5 (M5.1, M5.2, M5.6) and script S8.1.
// The writer below mirrors _runtime_utils.py: one method per hook or primitive, in the order the
// Python calls them, so a reader can hold the two side by side.
#include <deque>
#include <map>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/fsdp1_units.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

namespace stepsim {

namespace {

// The instructions FSDP1 writes of its own per layer and micro-batch, beside its ops'
// (instruction_estimate, common.hpp): collectives, events, allocations.
constexpr std::size_t kFsdp1OwnPerLayer = 40;

constexpr std::size_t kMaxInflightAllGathers = 2;  // _limiter_utils.py, "empirically chosen"

// Per-unit run state of the handle (what FlatParamHandle and its flags hold).
struct HandleState {
  bool unsharded = false;            // parameters point at the unsharded flat parameter
  std::optional<BufferId> full;                // _full_param_padded
  std::optional<BufferId> mp_shard;            // _mp_shard (param mixed precision)
  std::optional<BufferId> grad;                // flat_param.grad: the unsharded gradient (param dtype)
  std::optional<BufferId> saved_grad_shard;    // _saved_grad_shard (fp32 sharded, becomes .grad)
  bool prefetched = false;
  bool needs_pre_forward_unshard = false;
  bool needs_pre_backward_unshard = false;
};

class StepWriter {
 public:
  // `units` outlive the writer (Fsdp1::build writes the step from them once or twice).
  StepWriter(const Fsdp1Config& c, const Experiment& e, const std::vector<Fsdp1Unit>& units, std::size_t stale_events)
      : c_(c), e_(e), w_(*e.workload), units_(units), h_(units_.size()) {
    free_events_.assign(stale_events, std::nullopt);
    orig_dtype_ = e.training.master_dtype;
    param_dtype_ = c.param_dtype(orig_dtype_);
    reduce_dtype_ = c.reduce_dtype(orig_dtype_);
    world_ = e.cluster.world_size();
    predivide_ = fsdp1_predivide_factor(world_);
    unit_of_layer_.assign(w_.layers.size(), 0);
    for (std::size_t u = 0; u < units_.size(); ++u)
      for (std::size_t li : units_[u].layers) unit_of_layer_[li] = u;
    // F1.15: pre-forward order [root, b0..], post-forward order [b0.., root]; handle-less
    // units are not recorded (_exec_order_utils.py: `if not handle: return`).
    for (std::size_t u = 0; u < units_.size(); ++u)
      if (units_[u].has_handle()) pre_forward_order_.push_back(u);
    for (std::size_t u = 1; u < units_.size(); ++u)
      if (units_[u].has_handle()) post_forward_order_.push_back(u);
    if (units_[0].has_handle()) post_forward_order_.push_back(0);
    // Each unit's neighbour in those orders, looked up in O(1) per hook (a scan of the order
    // per hook made the build quadratic in layers).
    next_pre_forward_.assign(units_.size(), kNone);
    prev_post_forward_.assign(units_.size(), kNone);
    for (std::size_t i = 0; i + 1 < pre_forward_order_.size(); ++i) next_pre_forward_[pre_forward_order_[i]] = pre_forward_order_[i + 1];
    for (std::size_t i = 1; i < post_forward_order_.size(); ++i) prev_post_forward_[post_forward_order_[i]] = post_forward_order_[i - 1];
  }

  Program write();
  // The events the rate limiter's queue would hold after this step had it started with `stale`
  // (F1.9). The queue's pushes (a reshard that frees) and pops (an unshard finding it full) come
  // where the hooks run, whatever it holds: only which pops wait, and what the program says, depend
  // on how many stale events it started with. So the step written once tells where the queue ends
  // from any start.
  std::size_t free_events_after(std::size_t stale) const {
    std::size_t n = stale;
    for (const bool push : queue_ops_) {
      if (push) ++n;
      else if (n >= kMaxInflightAllGathers) --n;
    }
    return n;
  }

 private:
  bool handle(std::size_t u) const { return units_[u].has_handle(); }
  Bytes bytes(std::int64_t numel, Dtype d) const { return Bytes{numel * dtype_bytes(d)}; }
  const std::string& name(std::size_t u) const { return units_[u].name; }

  void setup();
  std::int64_t optimizer_tensors() const;
  // This rank's elements of a unit's flat parameter: its shard, or the whole of it (NO_SHARD).
  std::int64_t local_numel(const Fsdp1Unit& u) const { return c_.sharded() ? u.shard_numel : u.flat_numel; }
  void forward(int micro);
  void backward(int micro, bool sync);
  void unshard(std::size_t u, const char* pass);
  void reshard(std::size_t u, bool free);
  void pre_forward(std::size_t u);
  void post_forward(std::size_t u);
  void pre_backward(std::size_t u);
  void post_backward(std::size_t u, bool sync);
  void prefetch_backward(std::size_t u);
  void reduce_grad(std::size_t u);
  void reduce_grad_no_shard(std::size_t u);
  void accumulate_sharded_grad(std::size_t u, BufferId sharded_grad, Dtype dt, StreamId current);
  void flat_grad_ready(std::size_t u, const BufferIds& view_grads);
  void final_callback(bool sync);

  const Fsdp1Config& c_;
  const Experiment& e_;
  const Workload& w_;
  const std::vector<Fsdp1Unit>& units_;
  std::vector<HandleState> h_;
  std::vector<std::size_t> unit_of_layer_;
  std::vector<std::size_t> pre_forward_order_, post_forward_order_;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> next_pre_forward_, prev_post_forward_;  // per unit, kNone at the ends
  std::deque<std::optional<EventId>> free_events_;  // _FreeEventQueue (F1.9); none: a free event of the previous step, long complete
  std::vector<bool> queue_ops_;  // the queue's pushes (true) and pop checks (false), in order (free_events_after)
  std::vector<SavedActivations> acts_;             // saved activations per layer of the current micro-batch
  Dtype orig_dtype_ = Dtype::FP32;    // the sharded flat parameter's dtype (master weights)
  Dtype param_dtype_ = Dtype::FP32;   // MixedPrecision.param_dtype: the unsharded forward/backward dtype
  Dtype reduce_dtype_ = Dtype::FP32;  // MixedPrecision.reduce_dtype: the reduce-scatter dtype
  int world_ = 1;
  std::int64_t predivide_ = 1;

  ProgramBuilder b_;
  StreamId dflt_{0}, unshard_{0}, post_backward_{0}, pre_unshard_{0}, all_reduce_{0};
  KeptOutput kept_output_;
  CommId shard_pg_{0};
  std::optional<CommId> replicate_pg_;  // hybrid sharding only
};

Program StepWriter::write() {
  // F1.5: streams created by the root in lazy init; priority -1 iff limit_all_gathers and HSDP.
  const int prio = c_.limit_all_gathers && c_.hybrid() ? -1 : 0;
  b_.reserve(stepsim::instruction_estimate(e_, kFsdp1OwnPerLayer));
  dflt_ = b_.default_stream();
  unshard_ = b_.stream("unshard", prio);
  post_backward_ = b_.stream("post_backward", prio);
  pre_unshard_ = b_.stream("pre_unshard", prio);
  all_reduce_ = c_.hybrid() ? b_.stream("all_reduce") : dflt_;
  // F1.4: HSDP shards within the node and replicates across nodes; otherwise one group of
  // every rank. All-gathers and reduce-scatters share the shard group's communicator (G0.3).
  const int nodes = e_.cluster.nodes;
  if (c_.hybrid()) {
    shard_pg_ = b_.comm("fsdp shard", e_.cluster.gpus_per_node, 1);
    replicate_pg_ = b_.comm("fsdp replicate", nodes, nodes);
  } else {
    shard_pg_ = b_.comm("fsdp", world_, nodes);
  }

  setup();
  const int A = e_.training.grad_accum;
  for (int micro = 0; micro < A; ++micro) {
    // F1.20: inside no_sync() the post-backward hooks return before reducing.
    const bool sync = micro == A - 1 || !e_.training.no_sync;
    forward(micro);
    backward(micro, sync);
  }
  std::int64_t local = 0;  // parameters this rank's optimizer updates (fp32 shards)
  for (const auto& u : units_) local += local_numel(u);
  const std::int64_t tensors = optimizer_tensors();
  // The training loop's FSDP.clip_grad_norm_ (fully_sharded_data_parallel.py): a norm per
  // gradient, the sum of squares all-reduced over self.process_group only (hybrid: the node's
  // shard group; the replicas already hold equal gradients), a multiply per gradient.
  if (loop_clips_grad_norm(e_))
    launch_clip_grad_norm(b_, dflt_, {.numel = local, .tensors = tensors, .dtype = orig_dtype_, .per_tensor = true, .comm = shard_pg_});
  b_.mark("optimizer", Phase::Optimizer);
  if (e_.training.optimizer == Optimizer::AdamW8bit) {
    // bitsandbytes over the flat parameters: one per unit, this rank's shard of it.
    Adamw8bitStep step{.dtype = orig_dtype_};
    for (const auto& u : units_)
      if (u.has_handle()) step.tensors.push_back(local_numel(u));
    launch_adamw8bit_step(b_, dflt_, step);
  } else {
    launch_optimizer_step(b_, dflt_, {.optimizer = e_.training.optimizer, .impl = loop_optimizer_impl(e_), .numel = local,
                                      .tensors = tensors, .dtype = orig_dtype_});
  }
  return b_.take();
}

// The tensors the optimizer steps on this rank: one flat parameter per unit; with use_orig_params
// the original parameters' views into this rank's shard of it (an empty view has no gradient and
// is skipped). A unit of P parameters cut into N equal shards gives N + P - 1 (rank, parameter)
// pieces when no parameter boundary meets a shard boundary: 1 + (P - 1) / N per rank.
std::int64_t StepWriter::optimizer_tensors() const {
  const std::int64_t n = c_.shard_size(world_, e_.cluster.gpus_per_node);
  std::int64_t pieces = 0, units = 0;
  for (const auto& u : units_) {
    if (!u.has_handle()) continue;
    ++units;
    std::int64_t params = 0;
    for (std::size_t li : u.layers) params += w_.layers[li].param_count();
    pieces += n + std::max<std::int64_t>(params, 1) - 1;
  }
  return c_.use_orig_params ? std::max<std::int64_t>(1, (pieces + n / 2) / n) : std::max<std::int64_t>(1, units);
}

// Persistent state at a step boundary (M5.1): the sharded fp32 flat parameters, the optimizer
// states over them, and the previous step's fp32 sharded gradients. The training loop calls
// optimizer.zero_grad(set_to_none=True) at the top of the iteration, which frees those
// gradients; each unit's reduce-scatter then creates this step's _saved_grad_shard, so the
// step ends at the level it started from (16 * numel / N with AdamW and fp32 masters).
void StepWriter::setup() {
  b_.mark("setup", Phase::Setup);
  std::int64_t local = 0;
  for (const auto& u : units_) local += local_numel(u);
  b_.alloc("flat_param shards", bytes(local, orig_dtype_), MemCategory::Parameters, dflt_);
  // Per flat parameter (one per unit): the state over this rank's shard of it (AdamW8bit: and the
  // quantization maps, moved to the GPU at the first 8-bit one's init_state).
  if (e_.training.optimizer == Optimizer::AdamW8bit && std::ranges::any_of(units_, [&](const auto& u) {
        return bnb_8bit(local_numel(u));
      }))
    alloc_adamw8bit_maps(b_, dflt_);
  for (const auto& u : units_)
    alloc_optimizer_state(b_, e_.training.optimizer, u.name, local_numel(u), orig_dtype_, dflt_);
  if (local > 0) {
    BufferId prev = b_.alloc(".grad of the previous step", bytes(local, orig_dtype_), MemCategory::Gradients, dflt_);
    b_.free(prev);  // zero_grad(set_to_none=True)
  }
  kept_output_.setup(b_, w_, dflt_);
  // NO_SHARD: the flat parameter *is* the unsharded parameter.
  for (auto& h : h_) h.unsharded = !c_.sharded();
}

// F1.7 _unshard: pre-unshard cast, rate limiter, all-gather, post-unshard.
void StepWriter::unshard(std::size_t u, const char* pass) {
  if (!handle(u)) return;
  const Fsdp1Unit& unit = units_[u];
  HandleState& h = h_[u];
  bool ran_pre_unshard = false;
  if (c_.mp_param && !h.mp_shard.has_value() && (!c_.sharded() || !h.unsharded)) {
    // _use_low_precision_shard on the pre-unshard stream: fp32 shard -> param dtype.
    std::int64_t n = local_numel(unit);
    h.mp_shard = b_.alloc({"mp_shard ", unit.name}, bytes(n, param_dtype_), MemCategory::CommBuffers, pre_unshard_);
    b_.launch(pre_unshard_, elementwise(b_, {"cast param ", unit.name}, bytes(n, orig_dtype_) + bytes(n, param_dtype_), unit.name));
    ran_pre_unshard = true;
  }
  if (ran_pre_unshard) b_.wait_stream(unshard_, pre_unshard_);
  if (c_.limit_all_gathers) queue_ops_.push_back(false);
  if (c_.limit_all_gathers && free_events_.size() >= kMaxInflightAllGathers) {
    std::optional<EventId> ev = free_events_.front();
    free_events_.pop_front();
    if (ev) b_.host_sync(*ev, "FullyShardedDataParallel.rate_limiter");
  }
  if (c_.sharded() && !h.unsharded) {
    Bytes full = bytes(unit.padded_numel, param_dtype_);
    h.full = b_.alloc({"full_param ", unit.name}, full, MemCategory::UnshardedParameters, unshard_);
    b_.collective(shard_pg_, unshard_, CollectiveKind::AllGather, full, param_dtype_, {"AG ", unit.name, " ", pass},
                  unit.name);
    h.unsharded = true;
  }
  // post_unshard frees _mp_shard under record_stream(unshard stream) (sharded strategies only;
  // NO_SHARD computes on it until post_reshard).
  if (c_.sharded() && h.mp_shard.has_value()) {
    b_.free_after(*h.mp_shard, {unshard_});
    h.mp_shard = std::nullopt;
  }
}

// F1.8 _reshard: free the unsharded flat parameter under record_stream(current stream) and, with
// limit_all_gathers, enqueue a free event recorded on the compute stream.
// Before PyTorch 2.2 c10d also recorded its NCCL stream on the synchronous
// all_gather_into_tensor's output (the flat parameter; pytorch#111431 stopped it,
// TrainingConfig::c10d_records_sync_gather_scatter_streams): the block then waits for the
// unshard stream's work queued by the time of the free too (often the next prefetched all-gather).
void StepWriter::reshard(std::size_t u, bool free) {
  HandleState& h = h_[u];
  if (free && h.full.has_value()) {
    if (e_.training.c10d_records_sync_gather_scatter_streams()) b_.free_after(*h.full, {dflt_, unshard_});
    else b_.free_after(*h.full, {dflt_});
    h.full = std::nullopt;
    h.unsharded = false;
  }
  if (c_.limit_all_gathers && free) {
    free_events_.push_back(b_.record(dflt_));
    queue_ops_.push_back(true);
  }
  // post_reshard: NO_SHARD with param mixed precision frees its low-precision copy.
  if (!c_.sharded() && h.mp_shard.has_value()) {
    b_.free_after(*h.mp_shard, {dflt_});
    h.mp_shard = std::nullopt;
  }
  h.prefetched = false;
}

// F1.11 _pre_forward_unshard + F1.13 explicit forward prefetch.
void StepWriter::pre_forward(std::size_t u) {
  if (!handle(u)) return;
  if (!h_[u].prefetched) unshard(u, "fwd");
  h_[u].needs_pre_forward_unshard = false;
  b_.wait_stream(dflt_, unshard_);
  if (!c_.forward_prefetch) return;
  // Steady state: the pre-forward order recorded in iteration 0, one unit ahead.
  const std::size_t t = next_pre_forward_[u];
  if (t != kNone && h_[t].needs_pre_forward_unshard && !h_[t].prefetched) {
    unshard(t, "fwd");
    h_[t].prefetched = true;
  }
}

// F1.14 _post_forward_reshard; registering the pre-backward hooks sets
// _needs_pre_backward_unshard.
void StepWriter::post_forward(std::size_t u) {
  if (!handle(u)) return;
  reshard(u, !units_[u].root && c_.reshard_after_forward());
  h_[u].needs_pre_backward_unshard = true;
}

// _prefetch_handle(BACKWARD): the target is the unit before this one in post-forward order
// (backward_prefetch_limit = 1), if it still needs its pre-backward unshard.
void StepWriter::prefetch_backward(std::size_t u) {
  const std::size_t t = prev_post_forward_[u];
  if (t != kNone && h_[t].needs_pre_backward_unshard && !h_[t].prefetched) {
    unshard(t, "bwd");
    h_[t].prefetched = true;
  }
}

// F1.16 _pre_backward_hook.
void StepWriter::pre_backward(std::size_t u) {
  if (!handle(u)) return;
  if (h_[u].needs_pre_backward_unshard) {
    if (!h_[u].prefetched) unshard(u, "bwd");
    b_.wait_stream(dflt_, unshard_);
  }
  h_[u].needs_pre_backward_unshard = false;
  if (c_.backward_prefetch == Fsdp1BackwardPrefetch::BackwardPre) prefetch_backward(u);
}

// The flat gradient: autograd holds every parameter view's gradient until the unit's last one
// exists, then SplitWithSizesBackward concatenates them (the "2x buffer" of M5.2). Inside
// no_sync the new flat gradient is accumulated into the existing .grad.
void StepWriter::flat_grad_ready(std::size_t u, const BufferIds& view_grads) {
  const Fsdp1Unit& unit = units_[u];
  HandleState& h = h_[u];
  Bytes flat = bytes(unit.flat_numel, param_dtype_);
  BufferId g = b_.alloc({"flat grad ", unit.name}, flat, MemCategory::Gradients, dflt_);
  b_.launch(dflt_, elementwise(b_, {"concat grad ", unit.name}, flat * 2, unit.name, KernelClass::Copy));
  for (BufferId v : view_grads) b_.free(v);
  if (h.grad.has_value()) {
    b_.launch(dflt_, elementwise(b_, {"accumulate grad ", unit.name}, flat * 3, unit.name));
    b_.free(g);
  } else {
    h.grad = g;
  }
}

// F1.17 _post_backward_hook.
void StepWriter::post_backward(std::size_t u, bool sync) {
  if (!handle(u)) return;
  // _post_backward_reshard: _should_free_in_backward, then the BACKWARD_POST prefetch.
  const bool free = c_.sharded() && (sync || c_.reshard_after_forward());
  reshard(u, free);
  if (c_.backward_prefetch == Fsdp1BackwardPrefetch::BackwardPost) prefetch_backward(u);
  if (!sync) return;  // no_sync: the unsharded gradient stays in .grad
  b_.wait_stream(post_backward_, dflt_);
  if (c_.sharded()) reduce_grad(u);
  else reduce_grad_no_shard(u);
}

// _reduce_grad on the post-backward stream (+ the HSDP all-reduce on its own stream).
void StepWriter::reduce_grad(std::size_t u) {
  const Fsdp1Unit& unit = units_[u];
  HandleState& h = h_[u];
  const std::string& n = unit.name;
  const BufferId autograd_grad = h.grad.value();
  h.grad = std::nullopt;  // flat_param.grad = None
  std::optional<BufferId> cast;
  if (reduce_dtype_ != param_dtype_) {  // flat_param.grad.to(reduce_dtype)
    cast = b_.alloc({"reduce-dtype grad ", n}, bytes(unit.flat_numel, reduce_dtype_), MemCategory::Gradients, post_backward_);
    b_.launch(post_backward_, elementwise(b_, {"cast grad ", n}, bytes(unit.flat_numel, param_dtype_) + bytes(unit.flat_numel, reduce_dtype_), n));
  }
  std::optional<BufferId> pad;
  if (unit.padded_numel > unit.flat_numel) {  // F.pad copy (never with use_orig_params)
    pad = b_.alloc({"padded grad ", n}, bytes(unit.padded_numel, reduce_dtype_), MemCategory::CommBuffers, post_backward_);
    b_.launch(post_backward_, elementwise(b_, {"pad grad ", n}, bytes(unit.flat_numel + unit.padded_numel, reduce_dtype_), n,
                                          KernelClass::Copy));
  }
  // new_sharded_grad; it becomes _saved_grad_shard directly when no fp32 cast follows.
  BufferId out = b_.alloc({"sharded grad ", n}, bytes(unit.shard_numel, reduce_dtype_),
                          reduce_dtype_ == orig_dtype_ ? MemCategory::Gradients : MemCategory::CommBuffers, post_backward_);
  if (predivide_ > 1) b_.launch(post_backward_, elementwise(b_, {"prediv ", n}, bytes(unit.padded_numel, reduce_dtype_) * 2, n));
  b_.collective(shard_pg_, post_backward_, CollectiveKind::ReduceScatter, bytes(unit.padded_numel, reduce_dtype_), reduce_dtype_, {"RS ", n}, n);
  // Stream-ordered frees on the stream that allocated them (record_stream on the allocation
  // stream is a no-op in the caching allocator); before PyTorch 2.2 c10d recorded its NCCL
  // stream on the synchronous reduce_scatter_tensor's input (pytorch#111431), which waits for
  // the reduce-scatter to run (only the input FSDP frees here: the padded copy, else the cast).
  const bool c10d_holds = e_.training.c10d_records_sync_gather_scatter_streams();
  if (pad.has_value()) free_collective_tensor(b_, c10d_holds, *pad, post_backward_);
  if (cast.has_value()) free_collective_tensor(b_, c10d_holds && !pad.has_value(), *cast, post_backward_);
  const bool postdivide = world_ > predivide_;
  if (c_.hybrid()) {
    b_.wait_stream(all_reduce_, post_backward_);
    b_.collective(replicate_pg_.value(), all_reduce_, CollectiveKind::AllReduce, bytes(unit.shard_numel, reduce_dtype_), reduce_dtype_,
                  {"AR ", n, " replicate"}, n);
    if (postdivide) b_.launch(all_reduce_, elementwise(b_, {"postdiv ", n}, bytes(unit.shard_numel, reduce_dtype_) * 2, n));
    accumulate_sharded_grad(u, out, reduce_dtype_, all_reduce_);
  } else {
    if (postdivide) b_.launch(post_backward_, elementwise(b_, {"postdiv ", n}, bytes(unit.shard_numel, reduce_dtype_) * 2, n));
    accumulate_sharded_grad(u, out, reduce_dtype_, post_backward_);
  }
  // record_stream(autograd_computed_grad, post_backward_stream): reusable once the reduction
  // queued so far has run (M5.6).
  b_.free_after(autograd_grad, {post_backward_});
}

// _cast_grad_to_param_dtype + _accumulate_sharded_grad on `current`.
void StepWriter::accumulate_sharded_grad(std::size_t u, BufferId sharded_grad, Dtype dt, StreamId current) {
  const Fsdp1Unit& unit = units_[u];
  HandleState& h = h_[u];
  const std::int64_t n = local_numel(unit);
  BufferId g = sharded_grad;
  if (dt != orig_dtype_) {
    g = b_.alloc({"fp32 grad ", unit.name}, bytes(n, orig_dtype_), MemCategory::Gradients, current);
    b_.launch(current, elementwise(b_, {"cast grad fp32 ", unit.name}, bytes(n, dt) + bytes(n, orig_dtype_), unit.name));
    // The low-precision grad was allocated on the post-backward stream and recorded on
    // `current` (the all-reduce stream for HSDP).
    if (current == post_backward_) b_.free(sharded_grad);
    else b_.free_after(sharded_grad, {current});
  }
  if (h.saved_grad_shard.has_value()) {  // _saved_grad_shard += sharded_grad
    b_.launch(current, elementwise(b_, {"accumulate grad shard ", unit.name}, bytes(n, orig_dtype_) * 3, unit.name));
    if (current == post_backward_) b_.free(g);
    else b_.free_after(g, {current});
  } else {
    h.saved_grad_shard = g;
  }
}

// _reduce_grad_no_shard: all-reduce the whole flat gradient, then cast it to fp32 as .grad.
void StepWriter::reduce_grad_no_shard(std::size_t u) {
  const Fsdp1Unit& unit = units_[u];
  HandleState& h = h_[u];
  const std::string& n = unit.name;
  BufferId g = h.grad.value();
  h.grad = std::nullopt;
  if (reduce_dtype_ != param_dtype_) {
    BufferId cast = b_.alloc({"reduce-dtype grad ", n}, bytes(unit.flat_numel, reduce_dtype_), MemCategory::Gradients, post_backward_);
    b_.launch(post_backward_, elementwise(b_, {"cast grad ", n}, bytes(unit.flat_numel, param_dtype_) + bytes(unit.flat_numel, reduce_dtype_), n));
    b_.free_after(g, {post_backward_});
    g = cast;
  }
  const Bytes buf = bytes(unit.flat_numel, reduce_dtype_);
  if (predivide_ > 1) b_.launch(post_backward_, elementwise(b_, {"prediv ", n}, buf * 2, n));
  b_.collective(shard_pg_, post_backward_, CollectiveKind::AllReduce, buf, reduce_dtype_, {"AR ", n}, n);
  if (world_ > predivide_) b_.launch(post_backward_, elementwise(b_, {"postdiv ", n}, buf * 2, n));
  if (reduce_dtype_ == param_dtype_) {
    // The autograd gradient itself was reduced: it was allocated on the compute stream.
    if (reduce_dtype_ != orig_dtype_) {
      BufferId g32 = b_.alloc({"fp32 grad ", n}, bytes(unit.flat_numel, orig_dtype_), MemCategory::Gradients, post_backward_);
      b_.launch(post_backward_, elementwise(b_, {"cast grad fp32 ", n}, buf + bytes(unit.flat_numel, orig_dtype_), n));
      b_.free_after(g, {post_backward_});
      g = g32;
    }
    if (h.saved_grad_shard.has_value()) {
      b_.launch(post_backward_, elementwise(b_, {"accumulate grad ", n}, bytes(unit.flat_numel, orig_dtype_) * 3, n));
      b_.free_after(g, {post_backward_});
    } else {
      h.saved_grad_shard = g;
    }
  } else {
    accumulate_sharded_grad(u, g, reduce_dtype_, post_backward_);
  }
}

// F1.19 _post_backward_final_callback.
void StepWriter::final_callback(bool sync) {
  if (!sync) return;
  b_.wait_stream(dflt_, post_backward_);
  if (c_.hybrid()) b_.wait_stream(dflt_, all_reduce_);
}

void StepWriter::forward(int micro) {
  b_.mark(fmt::format("forward {}", micro), Phase::Forward);
  // F1.6 _root_pre_forward: all-gathers of this step follow the previous optimizer step.
  b_.wait_stream(unshard_, dflt_);
  b_.wait_stream(pre_unshard_, dflt_);
  for (auto& h : h_) h.needs_pre_forward_unshard = true;
  acts_.assign(w_.layers.size(), {});
  pre_forward(0);  // the root's forward wraps the whole model (S8.1)
  for (std::size_t li = 0; li < w_.layers.size(); ++li) {
    const Layer& l = w_.layers[li];
    const std::size_t u = unit_of_layer_[li];
    if (u != 0) pre_forward(u);
    acts_[li] = forward_layer(b_, dflt_, l, micro, &kept_output_);
    if (u != 0) post_forward(u);
  }
  post_forward(0);
}

void StepWriter::backward(int micro, bool sync) {
  seed_loss_gradient(b_, dflt_, w_.loss_dtype);
  enter_backward(b_, e_, micro);
  // The root's pre-backward hook fires first (the loss is the root's output).
  pre_backward(0);
  std::vector<BufferIds> view_grads(units_.size());  // inline: a unit holds a layer or a few
  std::vector<std::size_t> layers_left(units_.size());
  for (std::size_t u = 0; u < units_.size(); ++u) layers_left[u] = units_[u].layers.size();
  for (std::size_t li = w_.layers.size(); li-- > 0;) {
    const Layer& l = w_.layers[li];
    const std::size_t u = unit_of_layer_[li];
    if (u != 0) pre_backward(u);
    layer_backward(b_, l, micro, dflt_, acts_[li]);
    if (l.numel() > 0)
      view_grads[u].push_back(b_.alloc({"grads ", l.name}, bytes(l.numel(), param_dtype_), MemCategory::Gradients, dflt_));
    // The post-backward hook fires once the unit's whole flat gradient exists: for the root
    // holding the embedding, at the very end of backward (F1.19).
    if (--layers_left[u] == 0 && handle(u)) {
      flat_grad_ready(u, view_grads[u]);
      post_backward(u, sync);
    }
  }
  final_callback(sync);
}

class Fsdp1 final : public Strategy {
 public:
  // `master` is the training's master-weight dtype: without mixed precision FSDP1 gathers and
  // reduces in it, so the reported param/reduce dtypes depend on it.
  Fsdp1(Fsdp1Config c, Dtype master) : c_(c), master_(master) {}
  std::string framework() const override { return "fsdp1"; }
  nlohmann::json effective_config() const override { return c_.to_json(master_); }
  std::size_t instruction_estimate(const Experiment& e) const override { return stepsim::instruction_estimate(e, kFsdp1OwnPerLayer); }

  Program build(const Experiment& e) const override {
    const int shard = c_.shard_size(e.cluster.world_size(), e.cluster.gpus_per_node);
    const std::vector<Fsdp1Unit> units = make_fsdp1_units(*e.workload, c_, shard, e.training.master_dtype);
    // Steady state of the rate limiter: the free events left by the previous step are complete,
    // so the first pops of this step do not block. Iterate to the fixed point of the queue length
    // from an empty queue, four times at most: the step written from the fixed point (or from the
    // fourth count) is the program. The iteration needs the step written once, from any start
    // (free_events_after); it is written from the fixed point the last step built on this thread
    // came to, and again only where this one's is another. A sweep's points share theirs (3 for
    // the suite's FSDP1 runs but two, 4 for the examples), and writing a step is most of a point's
    // build: the iteration wrote every limited step twice.
    thread_local std::size_t last_fixed_point = kMaxInflightAllGathers;
    const std::size_t guess = c_.limit_all_gathers ? last_fixed_point : 0;
    StepWriter writer(c_, e, units, guess);
    Program p = writer.write();
    std::size_t stale = 0;
    for (int i = 0; i < 4; ++i) {
      const std::size_t left = writer.free_events_after(stale);
      if (left == stale) break;
      stale = left;
    }
    if (c_.limit_all_gathers) last_fixed_point = stale;
    if (stale == guess) return p;
    return StepWriter(c_, e, units, stale).write();
  }

 private:
  Fsdp1Config c_;
  Dtype master_;
};

Fsdp1Sharding parse_sharding(const std::string& s) {
  if (s == "shard_grad_op") return Fsdp1Sharding::ShardGradOp;
  if (s == "no_shard") return Fsdp1Sharding::NoShard;
  if (s == "hybrid_shard") return Fsdp1Sharding::HybridShard;
  if (s == "hybrid_shard_zero2") return Fsdp1Sharding::HybridShardZero2;
  return Fsdp1Sharding::FullShard;
}

}  // namespace

std::unique_ptr<Strategy> parse_fsdp1(ObjectReader& r, const Experiment& e) {
  Fsdp1Config c;
  c.requested = parse_sharding(r.declared_choice("sharding"));
  // _init_core_state: a world size of 1 silently becomes NO_SHARD.
  c.sharding = e.cluster.world_size() == 1 ? Fsdp1Sharding::NoShard : c.requested;
  std::string bp = r.declared_choice("backward_prefetch");
  c.backward_prefetch = bp == "backward_post" ? Fsdp1BackwardPrefetch::BackwardPost
                        : bp == "none"        ? Fsdp1BackwardPrefetch::None
                                              : Fsdp1BackwardPrefetch::BackwardPre;
  c.forward_prefetch = r.declared_boolean("forward_prefetch");
  c.limit_all_gathers = r.declared_boolean("limit_all_gathers");
  std::string wrap = r.declared_choice("wrap");
  c.wrap = wrap == "block" ? Fsdp1Wrap::Block : wrap == "size" ? Fsdp1Wrap::Size : Fsdp1Wrap::None;
  if (r.has("min_num_params")) {
    if (c.wrap != Fsdp1Wrap::Size) r.fail("min_num_params", "no min_num_params unless \"wrap\" is \"size\"");
    c.min_num_params = r.positive_integer("min_num_params");
  }
  c.use_orig_params = r.declared_boolean("use_orig_params");
  // bitsandbytes then steps each original parameter's view into the shard, whose sizes this
  // rank's layout of the flat parameter decides (its state is per view).
  if (c.use_orig_params && e.training.optimizer == Optimizer::AdamW8bit)
    r.fail("use_orig_params", "false with training.optimizer adamw8bit (bitsandbytes' state over each original parameter's "
                              "view into the shard: " + not_modelled("adamw8bit with use_orig_params") + ")");
  if (r.has("mixed_precision")) {
    const Json& mp = r.raw("mixed_precision");
    if (mp.is_string() && mp.get<std::string>() == "none") {
    } else if (!mp.is_null()) {
      ObjectReader m = r.object("mixed_precision", strategy_keys::fsdp1_mixed_precision());
      // PyTorch's MixedPrecision names, and stepsim's first ones (param, reduce) as aliases.
      for (const auto& [name, alias] : {std::pair{"param_dtype", "param"}, std::pair{"reduce_dtype", "reduce"}})
        if (m.has(name) && m.has(alias)) m.fail(alias, fmt::format("either {} or its alias {}, not both", name, alias));
      for (const char* key : {"param_dtype", "param"})
        if (m.has(key)) c.mp_param = m.dtype(key, Dtype::FP32);
      for (const char* key : {"reduce_dtype", "reduce"})
        if (m.has(key)) c.mp_reduce = m.dtype(key, Dtype::FP32);
      if (m.has("buffer_dtype")) (void)m.dtype("buffer_dtype", Dtype::FP32);  // checked; buffers are not modelled
      m.finish();
    }
  }
  return std::make_unique<Fsdp1>(c, e.training.master_dtype);
}

}  // namespace stepsim
