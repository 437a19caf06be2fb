#include "sim/strategies/common.hpp"

#include <algorithm>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "sim/core/format.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::size_t instruction_estimate(const Experiment& e, std::size_t per_layer) {
  std::size_t per_micro_batch = 64;  // setup, the optimizer step and the marks
  for (const Layer& l : e.workload->layers) {
    std::size_t ops = l.recompute.size();
    for (const Module& m : l.modules) ops += m.forward.size() + m.backward.size();
    per_micro_batch += per_layer + 3 * ops;
  }
  return per_micro_batch * static_cast<std::size_t>(std::max(1, e.training.grad_accum));
}

// The launch's name and unit as the workload named them (`named`: name_launches'), else formed now.
// The first branch inline (a launch of a built workload), the second out of line: GCC kept the
// whole of it out of line once it took `named`, and a build paid a call at every launch.
[[gnu::noinline]] static void form_launch(ProgramBuilder& b, const Layer& l, const Module& m, const Op& op, LaunchPass pass, Kernel& k) {
  k.name = form_launch_name(b.text_pool(), l, m, op, pass);
  k.unit = b.unit_text(l.name);
}

[[gnu::always_inline]] static inline void name_launch(ProgramBuilder& b, const Layer& l, const Module& m, const Op& op, LaunchPass pass,
                                                      Text named, Kernel& k) {
  if (!named.empty() && l.text) {
    b.borrow(l.text);
    k.name = named;
    k.unit = l.unit;
  } else {
    form_launch(b, l, m, op, pass, k);
  }
}

Kernel op_kernel(ProgramBuilder& b, const Layer& l, const Module& m, const Op& op, bool forward, Text named) {
  Kernel k;
  name_launch(b, l, m, op, forward ? LaunchPass::Forward : LaunchPass::Backward, named, k);
  k.cls = op.cls;
  k.work = b.work(l.text.get(), op.work_id, op.work);
  k.work_id = op.work_id;
  k.kernels = op.kernels;
  k.dispatch = forward ? l.forward_dispatch : l.backward_dispatch;
  if (op.continues_previous && k.dispatch != HostDispatch::Launch) k.dispatch = HostDispatch::Continue;
  return k;
}

void KeptOutput::setup(ProgramBuilder& b, const Workload& w, StreamId s) {
  if (w.kept_output.count > 0)
    current_ = b.alloc("model output kept by the training loop (previous step)", w.kept_output, MemCategory::Activations, s);
}

void KeptOutput::created(ProgramBuilder& b, const Op& op, StreamId s) {
  if (op.kept_output.count > 0) {
    previous_ = current_;
    current_ = b.alloc("model output kept by the training loop", op.kept_output, MemCategory::Activations, s);
  }
}

void KeptOutput::returned(ProgramBuilder& b, const Op& op) {
  if (op.model_returns && previous_) {
    b.free(*previous_);
    previous_.reset();
  }
}

// An op whose Python copies a host value from pageable memory first waits for the stream.
static void sync_if_needed(ProgramBuilder& b, StreamId s, const Op& op) {
  if (op.host_sync_before) b.host_sync_stream(s, op.name + ": torch.tensor(..., device=cuda) from pageable memory");
}

void SavedActivations::free_module(ProgramBuilder& b, std::size_t module) {
  per_op_.erase(std::remove_if(per_op_.begin(), per_op_.end(),
                               [&](const auto& t) {
                                 if (t.first == module) b.free(t.second);
                                 return t.first == module;
                               }),
                per_op_.end());
}

void SavedActivations::free_all(ProgramBuilder& b) {
  for (const auto& t : per_op_) b.free(t.second);
  for (BufferId id : block_) b.free(id);
  per_op_.clear();
  block_.clear();
}

// An op's own saved tensor (Op::own_saved_tensor), allocated as it is issued.
static void alloc_own_saved(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const Op& op,
                            SavedActivations* saved) {
  if (saved && op.own_saved_tensor && op.saved.count > 0)
    saved->add_op_tensor(static_cast<std::size_t>(&m - l.modules.data()),
                         b.alloc({"activations ", m.name, " ", op.name}, op.saved, MemCategory::Activations, s));
}

SavedActivations alloc_saved_activations(ProgramBuilder& b, const Layer& l, StreamId s) {
  std::int64_t block = l.saved_activations.count;
  for (const auto& m : l.modules)
    for (const auto& op : m.forward)
      if (op.own_saved_tensor) block -= op.saved.count;
  SavedActivations saved;
  if (block > 0) saved.add_block(b.alloc({"activations ", l.name}, Bytes{block}, MemCategory::Activations, s));
  return saved;
}

void ForwardTemporaries::before(ProgramBuilder& b, StreamId s, const Module& m, const Op& op) {
  if (op.transient.count > 0)
    live_.push_back({b.alloc({"temporary ", m.name, " ", op.name}, op.transient, MemCategory::Activations, s),
                     op.transient_consumers + 1});
}

void ForwardTemporaries::after(ProgramBuilder& b) {
  for (auto& t : live_)
    if (--t.second == 0) b.free(t.first);
  std::erase_if(live_, [](const auto& t) { return t.second <= 0; });
}

void ForwardTemporaries::finish(ProgramBuilder& b) {
  for (auto& t : live_) b.free(t.first);
  live_.clear();
}

bool owns_backward_gradients(const Layer& l) {
  return l.recompute.empty() && l.backward_transients.empty() && l.recompute_activations.count == 0;
}

Bytes BackwardTemporaries::output_bytes(const Op& op) {
  if (op.param_grad) return Bytes{0};
  if (op.cls == KernelClass::Gemm) {
    std::int64_t out = 0;
    for (const GemmShape& g : op.work.gemms) out += g.batch * g.m * g.n * dtype_bytes(g.dtype);
    return Bytes{out};
  }
  // An op of several kernels writes one tensor per kernel, its intermediates freed inside it.
  return Bytes{op.written.count / std::max(1, op.kernels)};
}

void BackwardTemporaries::before(ProgramBuilder& b, StreamId s, const Module& m, const Op& op) {
  const Bytes out = output_bytes(op);
  if (out.count <= 0) return;
  if (produced_) {  // this op consumes the last gradient produced
    if (consumed_) b.free(*consumed_);
    consumed_ = produced_;
  }
  produced_ = b.alloc({"gradient ", m.name, " ", op.name}, out, MemCategory::Activations, s);
}

void BackwardTemporaries::after(ProgramBuilder& b) {
  if (consumed_) b.free(*consumed_);
  consumed_.reset();
}

void BackwardTemporaries::finish(ProgramBuilder& b) {
  after(b);
  if (produced_) b.free(*produced_);
  produced_.reset();
}

// One forward op with the allocations around it: its own saved tensor and its temporary before
// it, the output the loop keeps after it, then the temporaries it was the last to read (a
// temporary read by this op outlives its output's allocation), then the previous output if the
// model returns here. `launch_empty`: an op without work still launches (launch_forward).
static void issue_forward_op(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const Op& op, Text named,
                             KeptOutput* kept, SavedActivations* saved, ForwardTemporaries* temps, bool launch_empty) {
  sync_if_needed(b, s, op);
  alloc_own_saved(b, s, l, m, op, saved);
  if (temps) temps->before(b, s, m, op);
  if (launch_empty || !op.work.empty()) b.launch(s, op_kernel(b, l, m, op, true, named));
  if (kept) kept->created(b, op, s);
  if (temps) temps->after(b);
  if (kept) kept->returned(b, op);
}

void launch_ops(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const OpList& ops, bool forward,
                KeptOutput* kept, SavedActivations* saved, ForwardTemporaries* temps, BackwardTemporaries* grads) {
  std::size_t at = l.first_launch(m, forward ? LaunchPass::Forward : LaunchPass::Backward);
  for (const auto& op : ops) {
    const Text named = l.launch_name_at(at++);
    if (forward) {
      issue_forward_op(b, s, l, m, op, named, kept, saved, temps, false);
      continue;
    }
    sync_if_needed(b, s, op);
    if (grads) grads->before(b, s, m, op);
    if (!op.work.empty()) b.launch(s, op_kernel(b, l, m, op, false, named));
    if (grads) grads->after(b);
  }
}

// Every op launches, empty ones included (a toy layer of zero time is still a launch, as before).
void launch_forward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept,
                    SavedActivations* saved) {
  (void)micro;
  ForwardTemporaries temps;
  for (const auto& m : l.modules) {
    std::size_t at = l.first_launch(m, LaunchPass::Forward);
    for (const auto& op : m.forward) issue_forward_op(b, s, l, m, op, l.launch_name_at(at++), kept, saved, &temps, true);
  }
  temps.finish(b);
}

void launch_recompute(ProgramBuilder& b, StreamId s, const Layer& l) {
  static const Module none;  // a recomputed op is named by its layer
  std::size_t at = l.first_launch(none, LaunchPass::Recompute);
  for (const auto& op : l.recompute) {
    sync_if_needed(b, s, op);
    Kernel k;
    name_launch(b, l, none, op, LaunchPass::Recompute, l.launch_name_at(at++), k);
    k.cls = op.cls;
    k.work = b.work(l.text.get(), op.work_id, op.work);
    k.work_id = op.work_id;
    k.kernels = op.kernels;
    // Recomputation runs the forward modules again from the autograd engine's thread.
    k.dispatch = l.forward_dispatch == HostDispatch::Launch ? HostDispatch::Launch
                 : op.continues_previous                     ? HostDispatch::Continue
                                                             : HostDispatch::Eager;
    b.launch(s, std::move(k));
  }
}

void launch_backward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, SavedActivations* saved) {
  (void)micro;
  launch_recompute(b, s, l);
  const bool own_grads = owns_backward_gradients(l);
  BackwardTemporaries grads;
  for (std::size_t k = l.modules.size(); k-- > 0;) {
    const Module& m = l.modules[k];
    std::size_t at = l.first_launch(m, LaunchPass::Backward);
    for (const auto& op : m.backward) {
      if (own_grads) grads.before(b, s, m, op);
      b.launch(s, op_kernel(b, l, m, op, false, l.launch_name_at(at++)));
      grads.after(b);
    }
    if (saved) saved->free_module(b, k);
  }
  grads.finish(b);
}

SavedActivations forward_layer(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept) {
  SavedActivations saved = alloc_saved_activations(b, l, s);
  launch_forward(b, s, l, micro, kept, &saved);
  return saved;
}

std::vector<SavedActivations> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro,
                                                KeptOutput* kept) {
  std::vector<SavedActivations> acts(w.layers.size());
  for (std::size_t li = 0; li < w.layers.size(); ++li) acts[li] = forward_layer(b, s, w.layers[li], micro, kept);
  return acts;
}

BufferIds alloc_backward_transients(ProgramBuilder& b, const Layer& l, StreamId s) {
  BufferIds ids;
  if (!l.backward_transients.empty()) {
    for (Bytes t : l.backward_transients) ids.push_back(b.alloc({"recomputed ", l.name}, t, MemCategory::Activations, s));
  } else if (l.recompute_activations.count > 0) {
    ids.push_back(b.alloc({"recomputed ", l.name}, l.recompute_activations, MemCategory::Activations, s));
  }
  return ids;
}

void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, SavedActivations& saved,
                    const std::function<void()>& before_launch) {
  const BufferIds transients = alloc_backward_transients(b, l, s);
  if (before_launch) before_launch();
  launch_backward(b, s, l, micro, &saved);
  for (BufferId t : transients) b.free(t);
  saved.free_all(b);
}

void free_collective_tensor(ProgramBuilder& b, bool records_streams, BufferId id, StreamId stream) {
  if (records_streams) b.free_after(id, {stream});
  else b.free(id);
}

KernelSpec elementwise(std::string name, Bytes bytes, std::string unit, KernelClass cls) {
  KernelWork w;
  w.memory_bytes = bytes;
  return KernelSpec{std::move(name), cls, w, std::move(unit)};
}

Kernel elementwise(ProgramBuilder& b, std::initializer_list<std::string_view> name, Bytes bytes, std::string_view unit, KernelClass cls) {
  Kernel k;
  k.name = b.text(name);
  k.cls = cls;
  KernelWork w;
  w.memory_bytes = bytes;
  k.work = b.work(w);
  k.unit = b.unit_text(unit);
  return k;
}

KernelSpec scalar_kernel(std::string name, std::int64_t bytes, KernelClass cls, HostDispatch dispatch) {
  KernelSpec k = elementwise(std::move(name), Bytes{bytes}, "", cls);
  if (cls == KernelClass::ElementwiseStrided) k.work.elements = 1;
  k.dispatch = dispatch;
  return k;
}

void seed_loss_gradient(ProgramBuilder& b, StreamId s, Dtype loss_dtype) {
  b.launch(s, scalar_kernel("autograd.backward: ones_like(loss)", dtype_bytes(loss_dtype), KernelClass::Elementwise, HostDispatch::Eager));
}

void enter_backward(ProgramBuilder& b, const Experiment& e, int micro) {
  b.mark(fmt::format("backward {}", micro), Phase::Backward);
  const Time per_node = e.cluster.profile->host.autograd_engine_per_node;
  const std::int64_t nodes = e.workload->autograd_nodes();
  if (per_node.ns > 0 && nodes > 0)
    b.host_work(per_node * nodes, fmt::format("autograd engine: compute_dependencies over {} graph nodes", nodes));
}

KernelSpec memcpy_dtod(std::string name, Bytes bytes, std::string unit) {
  KernelSpec k = elementwise(std::move(name), bytes, std::move(unit), KernelClass::Copy);
  k.kernels = 0;
  return k;
}

namespace {

// MultiTensorApply.cuh: kChunkSize and depth_to_max_tensors / depth_to_max_blocks.
constexpr std::int64_t kChunk = 65536;
constexpr std::int64_t kMaxBlocks = 320;
constexpr std::int64_t kMaxTensors[] = {110, 64, 48, 36, 30};

// Kernels one multi-tensor op over `tensors` tensors of `numel` elements launches (`depth` lists).
int multi_tensor_launches(int depth, std::int64_t tensors, std::int64_t numel) {
  // Each tensor is cut into chunks on its own: its last one is on average half full.
  const std::int64_t chunks = std::max(tensors, ceil_div(numel, kChunk) + tensors / 2);
  const std::int64_t n = std::max({std::int64_t{1}, ceil_div(tensors, kMaxTensors[depth - 1]), ceil_div(chunks, kMaxBlocks)});
  return static_cast<int>(std::min<std::int64_t>(n, std::numeric_limits<int>::max()));
}

struct StepOp {
  const char* name;
  int depth;     // tensor lists (multi-tensor kernels)
  int elements;  // elements read + written per parameter
};
// _multi_tensor_adamw / _single_tensor_adamw, in order; the sqrt (index 4) allocates the
// temporary the next three ops use.
constexpr StepOp kAdamwOps[] = {{"mul_ (weight decay)", 1, 2}, {"lerp_ (exp_avg)", 2, 3},    {"mul_ (exp_avg_sq)", 1, 2},
                                {"addcmul_ (exp_avg_sq)", 3, 3}, {"sqrt (exp_avg_sq)", 2, 2}, {"div_ (bias correction)", 1, 2},
                                {"add_ (eps)", 1, 2},            {"addcdiv_ (param)", 3, 4}};
constexpr std::size_t kSqrtOp = 4;
constexpr StepOp kSgdOps[] = {{"add_ (param)", 2, 3}};
// Composer's DecoupledLionW (composer/optim/decoupled_weight_decay.py `lionw`): the decay, the
// update exp_avg.lerp(grad, 1 - beta1) (a new tensor, index 1) and its sign_, the parameter's
// add_, then exp_avg.lerp_(grad, 1 - beta2). DeepSpeed's FusedLion reads param, grad and exp_avg
// and writes param and exp_avg: 5 elements.
constexpr StepOp kLionOps[] = {{"mul_ (weight decay)", 1, 2}, {"lerp (update)", 2, 3}, {"sign_ (update)", 1, 2},
                               {"add_ (param)", 2, 3},        {"lerp_ (exp_avg)", 2, 3}};

// At most this many launches (and temporaries) stand for a for-loop over the tensors: each one
// the loop's ops over its share of them, so a step's program stays small whatever the model.
constexpr std::int64_t kMaxLoopGroups = 64;

// A memory-bound launch of `kernels` CUDA kernels, named by the concatenation of `name` written
// straight into the program's pool (an optimizer step's names were a heap string each, at every
// sweep point).
Kernel memory_kernels(ProgramBuilder& b, std::initializer_list<std::string_view> name, Bytes bytes, int kernels, KernelClass cls,
                      std::string_view unit = {}) {
  Kernel k = elementwise(b, name, bytes, unit, cls);
  k.kernels = kernels;
  return k;
}

// Part i of `total` cut into `parts` near-equal parts (the first total % parts one larger).
std::int64_t share(std::int64_t total, std::int64_t parts, std::int64_t i) { return total / parts + (i < total % parts); }

std::int64_t bnb_blocks(std::int64_t numel) { return ceil_div(numel, kBnbBlockSize); }

}  // namespace

void launch_optimizer_step(ProgramBuilder& b, StreamId s, const OptimizerStep& st) {
  if (st.optimizer == Optimizer::None || st.numel <= 0) return;
  const bool adamw = st.optimizer == Optimizer::AdamW, lion = st.optimizer == Optimizer::Lion;
  const std::int64_t eb = dtype_bytes(st.dtype);
  const std::int64_t tensors = std::max<std::int64_t>(1, st.tensors);
  if (st.impl == OptimizerImpl::Fused) {
    const int elements = adamw ? 7 : lion ? 5 : 3, depth = adamw ? 4 : lion ? 3 : 2;
    b.launch(s, memory_kernels(b, {st.name}, Bytes{elements * st.numel * eb}, multi_tensor_launches(depth, tensors, st.numel),
                               KernelClass::Optimizer));
    return;
  }
  const std::span<const StepOp> ops = adamw  ? std::span<const StepOp>(kAdamwOps)
                                      : lion ? std::span<const StepOp>(kLionOps)
                                             : std::span<const StepOp>(kSgdOps);
  if (st.impl == OptimizerImpl::Foreach && !lion) {  // no Lion runs foreach: its loop below
    // The sqrt's outputs (one per tensor) live until the function returns after addcdiv_; they
    // are held here as at most kMaxLoopGroups buffers of the tensors' shares.
    std::vector<BufferId> temps;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (adamw && i == kSqrtOp) {
        const std::int64_t groups = std::min(tensors, kMaxLoopGroups);
        for (std::int64_t g = 0; g < groups; ++g)
          temps.push_back(b.alloc({st.name, " exp_avg_sq_sqrt"}, Bytes{share(st.numel, groups, g) * eb}, MemCategory::Other, s));
      }
      b.launch(s, memory_kernels(b, {st.name, " _foreach_", ops[i].name}, Bytes{ops[i].elements * st.numel * eb},
                                 multi_tensor_launches(ops[i].depth, tensors, st.numel), KernelClass::Optimizer));
    }
    for (BufferId t : temps) b.free(t);
    return;
  }
  // for-loop: tensor after tensor, every op once each. AdamW's sqrt and division each make a
  // tensor-sized temporary, the first freed by the division, the second when the next tensor's
  // denominator replaces it: two at a time. Lion's update is one, from its lerp to the add_.
  int per_tensor = 0, elements = 0;
  for (const StepOp& op : ops) per_tensor += 1, elements += op.elements;
  const int temporaries = adamw ? 2 : lion ? 1 : 0;
  const std::int64_t groups = std::min(tensors, kMaxLoopGroups);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t n = share(st.numel, groups, g), t = share(tensors, groups, g);
    std::optional<BufferId> temp;
    if (temporaries > 0)
      temp = b.alloc({st.name, adamw ? " denom" : " update"}, Bytes{temporaries * ceil_div(n, t) * eb}, MemCategory::Other, s);
    fmt::memory_buffer tensors_text;  // inline storage: no heap string
    fmt::format_to(std::back_inserter(tensors_text), "{}", t);
    b.launch(s, memory_kernels(b, {st.name, " for-loop (", std::string_view(tensors_text.data(), tensors_text.size()), " tensors)"},
                               Bytes{elements * n * eb},
                               static_cast<int>(std::min<std::int64_t>(per_tensor * t, std::numeric_limits<int>::max())),
                               KernelClass::Optimizer));
    if (temp) b.free(*temp);
  }
}

// A weight of more than one row and column (Param::dim0 rows): a 2-D tensor.
static bool is_matrix(const Param& p) { return p.dim0 > 1 && p.dim0 < p.numel && p.numel % p.dim0 == 0; }

void alloc_adamw8bit_maps(ProgramBuilder& b, StreamId s) {
  b.alloc_lazy_optimizer_state({"bnb qmap dynamic"}, Bytes{kBnbQuantileMapBytes}, s);
  b.alloc_lazy_optimizer_state({"bnb qmap udynamic"}, Bytes{kBnbQuantileMapBytes}, s);
}

void launch_adamw8bit_step(ProgramBuilder& b, StreamId s, const Adamw8bitStep& st) {
  const std::int64_t eb = dtype_bytes(st.dtype);
  for (const std::int64_t n : st.tensors) {
    // Read g, p, state1, state2 (and the absmax of each, 8-bit); write p, state1, state2 (and
    // the new absmax). The quantization maps sit in shared memory, read once per CUDA block.
    const bool q = bnb_8bit(n);
    const std::int64_t bytes = q ? n * (3 * eb + 4) + 4 * 4 * bnb_blocks(n) : n * (3 * eb + 4 * 4);
    b.launch(s, elementwise(concat({st.name, q ? " kOptimizerStatic8bit2StateBlockwise" : " kOptimizer32bit2State"}), Bytes{bytes},
                            "step", KernelClass::Optimizer));
    b.host_sync_stream(s, concat({st.name, ": sync_gpu(p), torch.cuda.synchronize() after each parameter"}));
  }
}

AdafactorTensor adafactor_tensor(const Param& p) {
  if (is_matrix(p)) return {p.dim0, p.numel / p.dim0};
  return {p.numel, 0};
}

Bytes adafactor_state_bytes(const Param& p, Dtype dtype) {
  const AdafactorTensor t = adafactor_tensor(p);
  return Bytes{(t.cols > 0 ? t.rows + t.cols : t.rows) * dtype_bytes(dtype)};
}

void launch_adafactor_step(ProgramBuilder& b, StreamId s, const AdafactorStep& st) {
  const std::int64_t eb = dtype_bytes(st.dtype);
  const auto op = [&](std::string what, KernelClass cls, std::int64_t elements) {
    b.launch(s, elementwise(concat({st.name, " ", what}), Bytes{elements * eb}, "step", cls));
  };
  // .item() of a norm: the host waits until the GPU has run everything queued before it.
  const auto item = [&](std::string what) { b.host_sync_stream(s, concat({st.name, " ", what, ".item()"})); };
  for (const AdafactorTensor& t : st.tensors) {
    const std::int64_t m = t.rows, n = t.cols, numel = n > 0 ? m * n : m;
    op("param.norm", KernelClass::Reduction, numel);
    item("param.norm");
    op("mul_ (weight decay)", KernelClass::Optimizer, 2 * numel);
    BufferId estimate{0};
    if (n > 0) {
      op("vector_norm (rows)", KernelClass::Reduction, numel + m);
      op("square_ (rows)", KernelClass::Elementwise, 2 * m);
      op("div_ (rows)", KernelClass::Elementwise, 2 * m);
      op("lerp_ (row_var)", KernelClass::Optimizer, 3 * m);
      op("vector_norm (columns)", KernelClass::Reduction, numel + n);
      op("square_ (columns)", KernelClass::Elementwise, 2 * n);
      op("div_ (columns)", KernelClass::Elementwise, 2 * n);
      op("lerp_ (col_var)", KernelClass::Optimizer, 3 * n);
      estimate = b.alloc({st.name, " var_estimate"}, Bytes{numel * eb}, MemCategory::Other, s);
      op("row_var @ col_var (outer product)", KernelClass::Elementwise, m + n + numel);
      op("row_var.mean", KernelClass::Reduction, m + 1);
      op("clamp_ (row_var.mean)", KernelClass::Elementwise, 2);
      op("div_ (var_estimate)", KernelClass::Elementwise, 2 * numel + 1);
    } else {
      const BufferId squared = b.alloc({st.name, " grad * grad"}, Bytes{numel * eb}, MemCategory::Other, s);
      op("grad * grad", KernelClass::Elementwise, 2 * numel);
      op("lerp_ (variance)", KernelClass::Optimizer, 3 * numel);
      b.free(squared);
      estimate = b.alloc({st.name, " var_estimate"}, Bytes{numel * eb}, MemCategory::Other, s);
      op("clone (variance)", KernelClass::Copy, 2 * numel);
    }
    op("clamp_ (var_estimate)", KernelClass::Elementwise, 2 * numel);
    op("rsqrt_", KernelClass::Elementwise, 2 * numel);
    op("mul_ (grad)", KernelClass::Elementwise, 3 * numel);
    op("update.norm", KernelClass::Reduction, numel);
    item("update.norm");
    op("add_ (param)", KernelClass::Optimizer, 3 * numel);
    b.free(estimate);
  }
}

bool muon_matrix(const Layer& l, const Param& p) {
  return l.kind == LayerKind::Block && is_matrix(p);
}


namespace {

// A Muon step's launches on `s`, each named "<step name> <what>": one aten op called from the
// optimizer's Python loop is a launch of one kernel, with the host cost of a launch
// (host.launch_overhead_us) as the for-loop AdamW's ops; host.eager_op_overhead_us is measured on
// forward ops, whose module calls and hooks the loop does not run.
struct MuonLaunches {
  ProgramBuilder& b;
  StreamId s;
  std::string_view name;
  void op(std::string_view what, KernelClass cls, std::int64_t bytes) const {
    b.launch(s, elementwise(concat({name, " ", what}), Bytes{bytes}, "step", cls));
  }
  // `copy_` between contiguous tensors of one dtype: a cudaMemcpyAsync device to device, no kernel.
  void memcpy(std::string_view what, std::int64_t bytes) const {
    b.launch(s, memcpy_dtod(concat({name, " ", what}), Bytes{bytes}, "step"));
  }
  void mm(std::string_view what, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1) const {  // a bf16 GEMM
    KernelSpec g{concat({name, " ", what}), KernelClass::Gemm, {}, "step"};
    g.work.gemms.push_back(GemmShape{.m = m, .n = n, .k = k, .batch = batch, .dtype = Dtype::BF16});
    b.launch(s, g);
  }
};

}  // namespace

void launch_muon_step(ProgramBuilder& b, StreamId s, const MuonStep& st) {
  constexpr std::int64_t kBf16 = 2;
  const std::int64_t eb = dtype_bytes(st.dtype);
  const MuonLaunches step{b, s, st.name};
  for (const MuonMatrix& p : st.matrices) {
    const std::int64_t m = std::min(p.rows, p.cols), n = std::max(p.rows, p.cols), mn = m * n;
    step.op("lerp_ (momentum_buffer)", KernelClass::Optimizer, 3 * mn * eb);
    const BufferId update = b.alloc({st.name, " update"}, Bytes{mn * eb}, MemCategory::Other, s);
    step.op("lerp (nesterov)", KernelClass::Optimizer, 3 * mn * eb);
    // .bfloat16() of a bf16 update is the update itself: no copy.
    const std::optional<BufferId> x =
        st.dtype == Dtype::BF16 ? std::nullopt
                                : std::optional(b.alloc({st.name, " X (bf16)"}, Bytes{mn * kBf16}, MemCategory::Other, s));
    if (x) step.op("bfloat16", KernelClass::Copy, mn * (eb + kBf16));
    step.op("norm", KernelClass::Reduction, mn * kBf16);
    step.op("clamp", KernelClass::Elementwise, 2 * kBf16);
    step.op("div_", KernelClass::Elementwise, 2 * mn * kBf16);
    for (int i = 0; i < kMuonNsSteps; ++i) {
      // A and B (m x m), the old and new X, a * X and B @ X (m x n): 2 m^2 + 3 m n bf16 elements.
      const BufferId temps = b.alloc({st.name, " Newton-Schulz temporaries"}, Bytes{(2 * m * m + 3 * mn) * kBf16},
                                     MemCategory::Other, s);
      step.mm("Newton-Schulz X @ X.T", m, m, n);
      step.op("Newton-Schulz c * A", KernelClass::Elementwise, 2 * m * m * kBf16);
      step.mm("Newton-Schulz (c * A) @ A", m, m, m);
      step.op("Newton-Schulz b * A", KernelClass::Elementwise, 2 * m * m * kBf16);
      step.op("Newton-Schulz add (B)", KernelClass::Elementwise, 3 * m * m * kBf16);
      step.op("Newton-Schulz a * X", KernelClass::Elementwise, 2 * mn * kBf16);
      step.mm("Newton-Schulz B @ X", m, n, m);
      step.op("Newton-Schulz add (X)", KernelClass::Elementwise, 3 * mn * kBf16);
      b.free(temps);
    }
    step.op("mul_ (weight decay)", KernelClass::Optimizer, 2 * mn * eb);
    step.op("add_ (param)", KernelClass::Optimizer, mn * (2 * eb + kBf16));
    if (x) b.free(*x);
    b.free(update);
  }
}

void launch_modded_muon_step(ProgramBuilder& b, StreamId s, const ModdedMuonStep& st) {
  constexpr std::int64_t kBf16 = 2;
  const std::int64_t eb = dtype_bytes(st.dtype);
  const MuonLaunches step{b, s, st.name};
  std::int64_t total = 0;
  for (const MuonMatrix& p : st.matrices) total += p.rows * p.cols;
  std::optional<BufferId> flat;
  if (st.world > 1) {
    flat = b.alloc({st.name, " updates_flat"}, Bytes{total * kBf16}, MemCategory::Other, s);
    step.op("zeros (updates_flat)", KernelClass::Elementwise, total * kBf16);
  }
  for (std::size_t i = 0; i < st.matrices.size(); ++i) {
    if (st.world > 1 && static_cast<int>(i % static_cast<std::size_t>(st.world)) != st.rank) continue;
    const MuonMatrix& p = st.matrices[i];
    const std::int64_t m = std::min(p.rows, p.cols), n = std::max(p.rows, p.cols), mn = m * n;
    step.op("mul_ (momentum_buffer)", KernelClass::Optimizer, 2 * mn * eb);
    step.op("add_ (momentum_buffer)", KernelClass::Optimizer, 3 * mn * eb);
    const BufferId update = b.alloc({st.name, " g"}, Bytes{mn * eb}, MemCategory::Other, s);
    step.op("add (nesterov)", KernelClass::Optimizer, 3 * mn * eb);
    // zeropower_via_newtonschulz5 under torch.compile: X = G.bfloat16() / (X.norm() + eps) as a
    // reduction over G and one pointwise kernel; per iteration cuBLAS's A = X @ X.T (m,m,n) and
    // B = A @ X (m,n,m), `c * A` (pointwise), (c A) @ B (m,n,m), and a * X + b * B + (c A) @ B
    // (pointwise).
    const BufferId x = b.alloc({st.name, " X (bf16)"}, Bytes{mn * kBf16}, MemCategory::Other, s);
    step.op("Newton-Schulz norm", KernelClass::Reduction, mn * eb);
    step.op("Newton-Schulz X = G.bfloat16() / norm", KernelClass::Elementwise, mn * (eb + kBf16));
    for (int it = 0; it < kMuonNsSteps; ++it) {
      const BufferId temps = b.alloc({st.name, " Newton-Schulz temporaries"}, Bytes{(2 * m * m + 3 * mn) * kBf16},
                                     MemCategory::Other, s);
      step.mm("Newton-Schulz A = X @ X.T", m, m, n);
      step.mm("Newton-Schulz B = A @ X", m, n, m);
      step.op("Newton-Schulz c * A", KernelClass::Elementwise, 2 * m * m * kBf16);
      step.mm("Newton-Schulz (c * A) @ B", m, n, m);
      step.op("Newton-Schulz X = a * X + b * B + c A B", KernelClass::Elementwise, 4 * mn * kBf16);
      b.free(temps);
    }
    if (flat) {
      step.op("mul_ (scale)", KernelClass::Elementwise, 2 * mn * kBf16);
      step.op("copy_ (updates_flat)", KernelClass::Copy, 2 * mn * kBf16);
    } else {
      step.op("add_ (param)", KernelClass::Optimizer, mn * (2 * eb + kBf16));
    }
    b.free(x);
    b.free(update);
  }
  if (!flat) return;
  // dist.all_reduce(updates_flat) on the default process group: NCCL's stream waits for the
  // current one, and the current one for the collective (a synchronous call).
  b.wait_stream(st.nccl, s);
  b.collective(st.comm, st.nccl, CollectiveKind::AllReduce, Bytes{total * kBf16}, Dtype::BF16,
               concat({st.name, " all_reduce (updates_flat)"}), "step");
  b.wait_stream(s, st.nccl);
  for (const MuonMatrix& p : st.matrices) {
    const std::int64_t mn = p.rows * p.cols;
    step.op("type_as (update)", KernelClass::Elementwise, mn * (kBf16 + eb));
    step.op("add_ (param)", KernelClass::Optimizer, 3 * mn * eb);
  }
  b.free(*flat);
}

std::vector<NorMuonGroup> normuon_groups(std::int64_t smear_gates, std::int64_t attn_gates, std::int64_t gate_inputs,
                                         std::int64_t heads, std::int64_t attn, std::int64_t mlp, std::int64_t hidden, int world) {
  std::vector<NorMuonGroup> g;
  const NorMuonGroup smear{smear_gates, 1, gate_inputs, false, Dtype::BF16}, gate{attn_gates, heads, gate_inputs, false, Dtype::BF16};
  if (world == 8 && attn + mlp == 32) {
    // generate_custom_param_groups: sizes [1, 10, 16, 16] over the parameters sorted smear_gate,
    // attn_gate, attn, mlp; the third group holds the attn matrices and the first mlp ones.
    g = {smear, gate, {16, hidden, 4 * hidden, attn > 0}, {16, hidden, 4 * hidden, false}};
  } else {
    g = {smear, gate, {attn, hidden, 4 * hidden, true}, {mlp, hidden, 4 * hidden, false}};
  }
  std::erase_if(g, [](const NorMuonGroup& x) { return x.params == 0; });
  return g;
}

void launch_normuon_step(ProgramBuilder& b, StreamId s, const NorMuonStep& st) {
  constexpr std::int64_t kBf16 = 2;
  const std::int64_t W = st.world;
  // Every kernel below is an aten op's (vectorized_elementwise_kernel, reduce_kernel), so it
  // takes the class `analyze` gives those in the record's trace: no optimizer class (a fused or
  // multi_tensor_apply kernel). Its copy_s between contiguous tensors are memcpys (the trace's
  // step #13: 111 device-to-device memcpys, 865 us).
  // DistAdam: every reduce-scatter launched, then per parameter its wait, Adam on its slice and
  // the all-gather.
  {
    const MuonLaunches step{b, s, "optimizer.step dist_adam"};
    std::vector<BufferId> slices;
    std::vector<EventId> reduced;  // each reduce-scatter's end: its future's wait()
    for (std::size_t i = 0; i < st.adam_params.size(); ++i) {
      const std::int64_t eb = dtype_bytes(st.adam_dtypes[i]), n = st.adam_params[i];
      slices.push_back(b.alloc("optimizer.step dist_adam grad_slice", Bytes{(n + W - 1) / W * eb}, MemCategory::Other, s));
      b.wait_stream(st.nccl, s);
      b.collective(st.comm, st.nccl, CollectiveKind::ReduceScatter, Bytes{n * eb}, st.adam_dtypes[i], "RS dist_adam grad", "step");
      reduced.push_back(b.record(st.nccl));
    }
    for (std::size_t i = 0; i < st.adam_params.size(); ++i) {
      const std::int64_t eb = dtype_bytes(st.adam_dtypes[i]), n = st.adam_params[i], slice = (n + W - 1) / W * eb;
      b.wait(s, reduced[i]);
      // weight_decay 0 in the record: no p_slice.mul_.
      for (const char* what : {"mul_ (exp_avg)", "add_ (exp_avg)", "mul_ (exp_avg_sq)", "addcmul_ (exp_avg_sq)", "sqrt (denom)",
                               "add_ (denom)", "div (update)", "mul_ (update)", "add_ (p)"})
        step.op(what, KernelClass::Elementwise, 3 * slice);
      b.wait_stream(st.nccl, s);
      b.collective(st.comm, st.nccl, CollectiveKind::AllGather, Bytes{n * eb}, st.adam_dtypes[i], "AG dist_adam param", "step");
      b.free(slices[i]);
    }
    b.wait_stream(s, st.nccl);
  }
  const MuonLaunches step{b, s, "optimizer.step normuon"};
  std::vector<BufferId> stacked;
  std::vector<EventId> reduced, gathered;
  std::vector<BufferId> gathered_into;
  for (const NorMuonGroup& g : st.groups) {
    const std::int64_t eb = dtype_bytes(g.dtype), chunk = (g.params + W - 1) / W, padded = chunk * W, mn = g.rows * g.cols;
    stacked.push_back(b.alloc("optimizer.step normuon stacked_grads", Bytes{padded * mn * eb}, MemCategory::Other, s));
    for (std::int64_t i = 0; i < g.params; ++i) step.memcpy("copy_ (stacked_grads)", 2 * mn * eb);
    if (g.params < padded) step.op("zero_ (padding)", KernelClass::Elementwise, (padded - g.params) * mn * eb);
    b.wait_stream(st.nccl, s);
    b.collective(st.comm, st.nccl, CollectiveKind::ReduceScatter, Bytes{padded * mn * eb}, g.dtype, "RS normuon stacked_grads", "step");
    reduced.push_back(b.record(st.nccl));
  }
  for (std::size_t gi = 0; gi < st.groups.size(); ++gi) {
    const NorMuonGroup& g = st.groups[gi];
    const std::int64_t eb = dtype_bytes(g.dtype), chunk = (g.params + W - 1) / W, mn = g.rows * g.cols, E = chunk * mn;
    b.wait(s, reduced[gi]);
    step.op("lerp_ (momentum_buffer)", KernelClass::Elementwise, 3 * E * eb);
    step.op("lerp_ (update)", KernelClass::Elementwise, 3 * E * eb);
    // Polar Express over a batch of `batch` matrices m x n, m <= n (X.mT when rows > cols).
    const std::int64_t batch = g.attn ? 4 * chunk : chunk, cols = g.attn ? g.cols / 4 : g.cols;
    const std::int64_t m = std::min(g.rows, cols), n = std::max(g.rows, cols);
    const BufferId x = b.alloc("optimizer.step normuon polar_express X A B C", Bytes{batch * (2 * m * n + 2 * m * m) * kBf16},
                               MemCategory::Other, s);
    step.op("bfloat16 (X)", KernelClass::Elementwise, E * (eb + kBf16));
    step.op("norm (X)", KernelClass::Reduction, E * kBf16);
    step.op("div (X)", KernelClass::Elementwise, 2 * E * kBf16);
    if (g.rows > cols) step.op("contiguous (X.mT)", KernelClass::ElementwiseStrided, 2 * E * kBf16);  // else a no-op
    for (int it = 0; it < kPolarExpressSteps; ++it) {
      step.mm("XXT (A = X X^T)", m, m, n, batch);
      step.mm("ba_plus_cAA (B = b A + c A A)", m, m, m, batch);
      step.mm("baddbmm (C = a X + B X)", m, n, m, batch);
    }
    // NorMuon: norms, the row (or column) mean of squares, the second momentum, its rsqrt, the
    // rescale; cautious weight decay: the mask, addcmul_ twice; the update into updated_params.
    step.op("norm (v)", KernelClass::Reduction, E * kBf16);
    step.op("square (v)", KernelClass::Elementwise, 2 * E * kBf16);
    step.op("mean (v)", KernelClass::Reduction, E * kBf16);
    for (const char* what : {"lerp_ (second_momentum_buffer)", "clamp_min", "rsqrt_"}) step.op(what, KernelClass::Elementwise, 3 * E / std::max<std::int64_t>(1, n) * kBf16);
    step.op("mul_ (step_size)", KernelClass::Elementwise, 2 * E * kBf16);
    step.op("norm (v_new)", KernelClass::Reduction, E * kBf16);
    step.op("clamp_min_ (v_norm_new)", KernelClass::Elementwise, 8);
    step.op("div (v_norm)", KernelClass::Elementwise, 8);
    step.op("mul_ (v)", KernelClass::Elementwise, 2 * E * kBf16);
    step.op("stack (param_chunk)", KernelClass::Copy, 2 * E * eb);
    step.op("mul (v * p)", KernelClass::Elementwise, E * (kBf16 + eb + kBf16));
    step.op("ge (mask)", KernelClass::Elementwise, E * (kBf16 + 1));
    step.op("mul (eff_wd * mask)", KernelClass::Elementwise, E * (1 + eb));
    step.op("addcmul_ (v)", KernelClass::Elementwise, E * (3 * kBf16 + eb));
    step.op("addcmul_ (p)", KernelClass::Elementwise, E * (3 * eb + kBf16));
    step.memcpy("copy_ (updated_params)", 2 * E * eb);
    b.free(x);
    gathered_into.push_back(b.alloc("optimizer.step normuon stacked_params", Bytes{chunk * W * mn * eb}, MemCategory::Other, s));
    b.wait_stream(st.nccl, s);
    b.collective(st.comm, st.nccl, CollectiveKind::AllGather, Bytes{chunk * W * mn * eb}, g.dtype, "AG normuon stacked_params", "step");
    gathered.push_back(b.record(st.nccl));
  }
  for (std::size_t gi = 0; gi < st.groups.size(); ++gi) {
    const NorMuonGroup& g = st.groups[gi];
    b.wait(s, gathered[gi]);
    for (std::int64_t i = 0; i < g.params; ++i) step.memcpy("copy_ (param)", 2 * g.rows * g.cols * dtype_bytes(g.dtype));
    b.free(gathered_into[gi]);
    b.free(stacked[gi]);
  }
}

OptimizerImpl loop_optimizer_impl(const Experiment& e) {
  if (e.training.optimizer_impl) return *e.training.optimizer_impl;
  // Lion's loop is Composer's for-loop, whatever the implementation's AdamW would run.
  if (e.training.optimizer == Optimizer::Lion) return OptimizerImpl::ForLoop;
  if (!e.workload->options) return OptimizerImpl::Fused;
  switch (e.workload->options->impl) {
    case Implementation::LlmFoundry: return OptimizerImpl::ForLoop;
    case Implementation::Megatron:
    case Implementation::ModdedNanogpt: return OptimizerImpl::Fused;  // its AdamW over lm_head: fused=True
    case Implementation::Hf:
    case Implementation::Torchtitan: return OptimizerImpl::Foreach;
  }
  return OptimizerImpl::Foreach;
}

OptimizerImpl deepspeed_optimizer_impl(const Experiment& e) { return e.training.optimizer_impl.value_or(OptimizerImpl::Fused); }

bool loop_clips_grad_norm(const Experiment& e) {
  if (e.training.clip_grad_norm) return e.training.clip_grad_norm->has_value();
  return e.workload->options && e.workload->options->impl == Implementation::Torchtitan;
}

nlohmann::json effective_training(const Experiment& e) {
  const TrainingConfig& t = e.training;
  const bool zero = e.strategy && e.strategy->framework() == "zero";
  nlohmann::json out = nlohmann::json::object();
  out["grad_accum"] = t.grad_accum;
  if (!zero) out["no_sync"] = t.no_sync;
  out["optimizer"] = to_string(t.optimizer);
  if (t.optimizer == Optimizer::Muon) out["muon_impl"] = to_string(t.muon_impl);
  if (t.optimizer == Optimizer::NorMuon) out["normuon_step"] = t.normuon_odd_step ? "odd" : "even";
  if (t.optimizer != Optimizer::None) {
    // Adafactor's is its for-loop (the only path modelled), AdamW8bit's bitsandbytes' loop (its
    // only path); Muon's is AdamW's, for what Muon leaves.
    const bool loop_only = t.optimizer == Optimizer::Adafactor || t.optimizer == Optimizer::AdamW8bit;
    out["optimizer_impl"] = to_string(zero ? deepspeed_optimizer_impl(e) : loop_only ? OptimizerImpl::ForLoop : loop_optimizer_impl(e));
    out["master_dtype"] = to_string(t.master_dtype);
  }
  if (!zero) {
    if (loop_clips_grad_norm(e)) out["clip_grad_norm"] = t.clip_grad_norm ? **t.clip_grad_norm : 1.0;
    else out["clip_grad_norm"] = nullptr;
  }
  out["allocator"] = {{"expandable_segments", t.allocator.expandable_segments},
                      {"max_split_size_mb", t.allocator.max_split_size ? nlohmann::json(t.allocator.max_split_size->count / (1024 * 1024))
                                                                          : nlohmann::json(nullptr)}};
  if (t.torch_version) out["torch_version"] = t.torch_version->text();
  else out["torch_version"] = zero ? "from deepspeed_version" : kDefaultTorchRelease.text();
  return out;
}

void launch_clip_grad_norm(ProgramBuilder& b, StreamId s, const ClipGradNorm& c) {
  if (c.numel <= 0) return;
  const std::int64_t eb = dtype_bytes(c.dtype);
  const std::int64_t tensors = std::max<std::int64_t>(1, c.tensors);
  // Per gradient (FSDP1's loop) or one multi-tensor series (_foreach_norm, _foreach_mul_).
  const int per_grad = c.per_tensor ? static_cast<int>(std::min<std::int64_t>(tensors, std::numeric_limits<int>::max()))
                                    : multi_tensor_launches(1, tensors, c.numel);
  b.launch(s, memory_kernels(b, {c.per_tensor ? "clip_grad_norm_: vector_norm per gradient" : "clip_grad_norm_: _foreach_norm"},
                             Bytes{c.numel * eb}, per_grad, KernelClass::Reduction, "step"));
  b.launch(s, memory_kernels(b, {"clip_grad_norm_: stack, vector_norm"}, Bytes{tensors * 8}, 2, KernelClass::Reduction, "step"));
  if (c.comm) b.collective(*c.comm, s, CollectiveKind::AllReduce, Bytes{4}, Dtype::FP32, "AR clip_grad_norm_ total_norm", "step");
  b.launch(s, memory_kernels(b, {"clip_grad_norm_: pow, add, div, clamp"}, Bytes{32}, 4, KernelClass::Elementwise, "step"));
  b.launch(s, memory_kernels(b, {c.per_tensor ? "clip_grad_norm_: mul_ per gradient" : "clip_grad_norm_: _foreach_mul_"},
                             Bytes{2 * c.numel * eb}, per_grad, KernelClass::Elementwise, "step"));
}

Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype) {
  if (opt == Optimizer::AdamW) return Bytes{2 * numel * dtype_bytes(dtype)};
  if (opt == Optimizer::AdamW8bit) return Bytes{bnb_8bit(numel) ? 2 * numel + 2 * 4 * bnb_blocks(numel) : 2 * 4 * numel};
  if (opt == Optimizer::Muon || opt == Optimizer::Lion) return Bytes{numel * dtype_bytes(dtype)};
  return Bytes{0};
}

void alloc_optimizer_state(ProgramBuilder& b, Optimizer opt, const std::string& name, std::int64_t numel, Dtype dtype,
                           StreamId s) {
  if (opt == Optimizer::Muon || opt == Optimizer::Lion) {
    b.alloc_lazy_optimizer_state({opt == Optimizer::Muon ? "momentum_buffer " : "exp_avg ", name},
                                 optimizer_state_bytes(opt, numel, dtype), s);
    return;
  }
  if (opt == Optimizer::AdamW8bit) {  // Optimizer2State.init_state, in its order
    if (numel <= 0) return;  // a unit without parameters: no tensor to step
    if (bnb_8bit(numel)) {
      b.alloc_lazy_optimizer_state({"state1 (uint8) ", name}, Bytes{numel}, s);
      b.alloc_lazy_optimizer_state({"state2 (uint8) ", name}, Bytes{numel}, s);
      b.alloc_lazy_optimizer_state({"absmax1 ", name}, Bytes{4 * bnb_blocks(numel)}, s);
      b.alloc_lazy_optimizer_state({"absmax2 ", name}, Bytes{4 * bnb_blocks(numel)}, s);
    } else {
      b.alloc_lazy_optimizer_state({"state1 (fp32) ", name}, Bytes{4 * numel}, s);
      b.alloc_lazy_optimizer_state({"state2 (fp32) ", name}, Bytes{4 * numel}, s);
    }
    return;
  }
  const Bytes both = optimizer_state_bytes(opt, numel, dtype);  // AdamW's two moments, or none
  if (both.count <= 0) return;
  b.alloc_lazy_optimizer_state({"exp_avg ", name}, Bytes{both.count / 2}, s);
  b.alloc_lazy_optimizer_state({"exp_avg_sq ", name}, Bytes{both.count / 2}, s);
}

void alloc_param_optimizer_state(ProgramBuilder& b, Optimizer opt, const Layer& l, const Param& p, Dtype dtype, StreamId s) {
  if (opt == Optimizer::Adafactor) {
    b.alloc_lazy_optimizer_state({"adafactor state ", p.name}, adafactor_state_bytes(p, dtype), s);
    return;
  }
  if (opt == Optimizer::Muon && !muon_matrix(l, p)) opt = Optimizer::AdamW;
  alloc_optimizer_state(b, opt, p.name, p.numel, dtype, s);
}

}  // namespace stepsim
