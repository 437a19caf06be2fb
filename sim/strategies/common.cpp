#include "sim/strategies/common.hpp"

#include <fmt/format.h>

namespace stepsim {

Kernel forward_kernel(const Layer& l, int micro) {
  (void)micro;
  return Kernel{"fwd " + l.name, KernelClass::Compute, l.forward(), l.name};
}

Kernel backward_kernel(const Layer& l, int micro) {
  (void)micro;
  return Kernel{"bwd " + l.name, KernelClass::Compute, l.backward(), l.name};
}

std::vector<BufferId> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro) {
  std::vector<BufferId> acts(w.layers.size(), -1);
  for (std::size_t li = 0; li < w.layers.size(); ++li) {
    const Layer& l = w.layers[li];
    if (l.saved_activations.count > 0)
      acts[li] = b.alloc("activations " + l.name, l.saved_activations, MemCategory::Activations, s);
    b.launch(s, forward_kernel(l, micro));
  }
  return acts;
}

void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, BufferId saved,
                    const std::function<void()>& before_launch) {
  BufferId recompute = -1;
  if (l.recompute_activations.count > 0)
    recompute = b.alloc("recomputed " + l.name, l.recompute_activations, MemCategory::Activations, s);
  if (before_launch) before_launch();
  b.launch(s, backward_kernel(l, micro));
  if (recompute >= 0) b.free(recompute);
  if (saved >= 0) b.free(saved);
}

Kernel elementwise(std::string name, Bytes bytes, std::string unit, KernelClass cls) {
  KernelWork w;
  w.memory_bytes = bytes;
  return Kernel{std::move(name), cls, w, std::move(unit)};
}

Kernel optimizer_kernel(Optimizer opt, std::int64_t numel, Dtype dtype, std::string name) {
  std::int64_t tensors = opt == Optimizer::AdamW ? 7 : opt == Optimizer::SGD ? 3 : 0;
  return elementwise(std::move(name), Bytes{tensors * numel * dtype_bytes(dtype)}, "", KernelClass::Optimizer);
}

Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype) {
  return opt == Optimizer::AdamW ? Bytes{2 * numel * dtype_bytes(dtype)} : Bytes{0};
}

}  // namespace stepsim
