#include "sim/strategies/common.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/format.hpp"

namespace stepsim {

static bool single_op(const Layer& l) {
  return l.modules.size() == 1 && l.modules.front().forward.size() <= 1 && l.modules.front().backward.size() <= 1;
}

// The first op of a layer's forward (backward) carries the layer's name alone ("fwd block.3"),
// so the start of a layer's pass is found by name as before op-level layers; the others name
// their module and op ("fwd block.3.attn.q_proj linear").
static bool first_op(const Layer& l, const Op& op, bool forward) {
  if (forward) {
    for (const auto& m : l.modules)
      if (!m.forward.empty()) return &m.forward.front() == &op;
  } else {
    for (auto it = l.modules.rbegin(); it != l.modules.rend(); ++it)
      if (!it->backward.empty()) return &it->backward.front() == &op;
  }
  return false;
}

std::size_t instruction_estimate(const Experiment& e, std::size_t per_layer) {
  std::size_t per_micro_batch = 64;  // setup, the optimizer step and the marks
  for (const Layer& l : e.workload.layers) {
    per_micro_batch += l.recompute.size() + per_layer;
    for (const Module& m : l.modules) per_micro_batch += m.forward.size() + m.backward.size();
  }
  return per_micro_batch * static_cast<std::size_t>(std::max(1, e.training.grad_accum));
}

Kernel op_kernel(const Layer& l, const Module& m, const Op& op, bool forward) {
  Kernel k;
  const std::string_view pass = forward ? "fwd " : "bwd ";
  k.name = single_op(l) || first_op(l, op, forward) ? concat({pass, l.name}) : concat({pass, m.name, " ", op.name});
  k.cls = op.cls;
  k.work = op.work;
  k.unit = l.name;
  k.kernels = op.kernels;
  k.dispatch = forward ? l.forward_dispatch : l.backward_dispatch;
  return k;
}

void KeptOutput::setup(ProgramBuilder& b, const Workload& w, StreamId s) {
  if (w.kept_output.count > 0)
    current_ = b.alloc("model output kept by the training loop (previous step)", w.kept_output, MemCategory::Activations, s);
}

void KeptOutput::after_forward_op(ProgramBuilder& b, const Op& op, StreamId s) {
  if (op.kept_output.count > 0) {
    previous_ = current_;
    current_ = b.alloc("model output kept by the training loop", op.kept_output, MemCategory::Activations, s);
  }
  if (op.model_returns && previous_) {
    b.free(*previous_);
    previous_.reset();
  }
}

// An op whose Python copies a host value from pageable memory first waits for the stream.
static void sync_if_needed(ProgramBuilder& b, StreamId s, const Op& op) {
  if (op.host_sync_before) b.host_sync_stream(s, op.name + ": torch.tensor(..., device=cuda) from pageable memory");
}

void launch_ops(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const std::vector<Op>& ops, bool forward,
                KeptOutput* kept) {
  for (const auto& op : ops) {
    sync_if_needed(b, s, op);
    if (!op.work.empty()) b.launch(s, op_kernel(l, m, op, forward));
    if (kept && forward) kept->after_forward_op(b, op, s);
  }
}

// Every op launches, empty ones included (a toy layer of zero time is still a launch, as before).
void launch_forward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept) {
  (void)micro;
  for (const auto& m : l.modules)
    for (const auto& op : m.forward) {
      sync_if_needed(b, s, op);
      b.launch(s, op_kernel(l, m, op, true));
      if (kept) kept->after_forward_op(b, op, s);
    }
}

void launch_recompute(ProgramBuilder& b, StreamId s, const Layer& l) {
  for (const auto& op : l.recompute) {
    sync_if_needed(b, s, op);
    Kernel k;
    k.name = concat({"recompute ", l.name, " ", op.name});
    k.cls = op.cls;
    k.work = op.work;
    k.unit = l.name;
    k.kernels = op.kernels;
    // Recomputation runs the forward modules again from the autograd engine's thread.
    k.dispatch = l.forward_dispatch == HostDispatch::Launch ? HostDispatch::Launch : HostDispatch::Eager;
    b.launch(s, std::move(k));
  }
}

void launch_backward(ProgramBuilder& b, StreamId s, const Layer& l, int micro) {
  (void)micro;
  launch_recompute(b, s, l);
  for (auto it = l.modules.rbegin(); it != l.modules.rend(); ++it)
    for (const auto& op : it->backward) b.launch(s, op_kernel(l, *it, op, false));
}

std::vector<std::optional<BufferId>> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro,
                                                        KeptOutput* kept) {
  std::vector<std::optional<BufferId>> acts(w.layers.size());
  for (std::size_t li = 0; li < w.layers.size(); ++li) {
    const Layer& l = w.layers[li];
    if (l.saved_activations.count > 0)
      acts[li] = b.alloc("activations " + l.name, l.saved_activations, MemCategory::Activations, s);
    launch_forward(b, s, l, micro, kept);
  }
  return acts;
}

void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, std::optional<BufferId> saved,
                    const std::function<void()>& before_launch) {
  std::optional<BufferId> recompute;
  if (l.recompute_activations.count > 0)
    recompute = b.alloc("recomputed " + l.name, l.recompute_activations, MemCategory::Activations, s);
  if (before_launch) before_launch();
  launch_backward(b, s, l, micro);
  if (recompute.has_value()) b.free(*recompute);
  if (saved.has_value()) b.free(*saved);
}

Kernel elementwise(std::string name, Bytes bytes, std::string unit, KernelClass cls) {
  KernelWork w;
  w.memory_bytes = bytes;
  return Kernel{std::move(name), cls, w, std::move(unit)};
}

Kernel memcpy_dtod(std::string name, Bytes bytes, std::string unit) {
  Kernel k = elementwise(std::move(name), bytes, std::move(unit), KernelClass::Copy);
  k.kernels = 0;
  return k;
}

Kernel optimizer_kernel(Optimizer opt, std::int64_t numel, Dtype dtype, std::string name) {
  std::int64_t tensors = opt == Optimizer::AdamW ? 7 : opt == Optimizer::SGD ? 3 : 0;
  Kernel k = elementwise(std::move(name), Bytes{tensors * numel * dtype_bytes(dtype)}, "", KernelClass::Optimizer);
  k.kernels = static_cast<int>(std::max<std::int64_t>(1, ceil_div(numel, std::int64_t{65536} * 320)));
  return k;
}

Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype) {
  return opt == Optimizer::AdamW ? Bytes{2 * numel * dtype_bytes(dtype)} : Bytes{0};
}

void alloc_optimizer_state(ProgramBuilder& b, Optimizer opt, const std::string& name, std::int64_t numel, Dtype dtype,
                           StreamId s) {
  const Bytes both = optimizer_state_bytes(opt, numel, dtype);  // AdamW's two moments, or none
  if (both.count <= 0) return;
  b.alloc_lazy_optimizer_state(concat({"exp_avg ", name}), Bytes{both.count / 2}, s);
  b.alloc_lazy_optimizer_state(concat({"exp_avg_sq ", name}), Bytes{both.count / 2}, s);
}

}  // namespace stepsim
