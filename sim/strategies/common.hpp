#pragma once
// Pieces every strategy uses: the kernels of a layer's passes, elementwise/copy kernels sized
// in bytes, the optimizer step, and persistent-state sizes.

#include <functional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/program/builder.hpp"
#include "sim/program/program.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

Kernel forward_kernel(const Layer& l, int micro);
Kernel backward_kernel(const Layer& l, int micro);
// A memory-bound kernel moving `bytes` (read + write).
Kernel elementwise(std::string name, Bytes bytes, std::string unit = {}, KernelClass cls = KernelClass::Elementwise);

// The optimizer step over `numel` parameters held in `dtype` (fused/foreach AdamW reads
// param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq: 7 tensors).
Kernel optimizer_kernel(Optimizer opt, std::int64_t numel, Dtype dtype, std::string name = "optimizer.step");
// Optimizer state bytes for `numel` parameters in `dtype` (AdamW: two states; SGD without
// momentum: none).
Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype);

// The forward pass of a model whose parameters are all resident (DDP, ZeRO-1/2): per layer,
// allocate its saved activations and launch its forward on `s`. Returns the activation
// buffer of each layer (-1 where it saves none), freed by the caller's backward.
std::vector<BufferId> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro);

// One layer's backward on `s`: the recomputed activations of a checkpointed layer are
// allocated first, `before_launch` runs (a strategy's own allocations, e.g. FSDP2's unsharded
// grads), the backward kernel launches, then the recomputed and the saved activations (`saved`,
// -1 for none) are freed.
void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, BufferId saved,
                    const std::function<void()>& before_launch = {});

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace stepsim
