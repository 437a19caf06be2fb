#pragma once
// Pieces every strategy uses: the kernels of a layer's passes (one Launch per op, as the
// framework launches them), elementwise/copy kernels sized in bytes, the optimizer step, and
// persistent-state sizes.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/core/checked.hpp"
#include "sim/program/builder.hpp"
#include "sim/program/program.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

// About how many instructions a strategy writes for one step of `e`, for ProgramBuilder::reserve:
// a launch per op of every layer and micro-batch (recompute included), and `per_layer` of the
// strategy's own (collectives, events, allocations) per layer and micro-batch. Over is address
// space never touched; under regrows the array as before.
std::size_t instruction_estimate(const Experiment& e, std::size_t per_layer);

// The Kernel of one op of `l` ("fwd block.3.attn.q_proj linear"); a layer of a single op keeps
// the layer's name ("fwd layer.0", the toy workloads).
Kernel op_kernel(const Layer& l, const Module& m, const Op& op, bool forward);

// The model output the training loop keeps (Workload::kept_output, WorkloadOptions::
// loop_keeps_output): allocated when the forward op that creates it runs, freed when the next
// micro-batch's forward returns and the loop's `outputs = model(...)` drops the old one. So one
// is live through backward and the optimizer step, and two from the new output's creation to
// the model's return (the li-plus ZeRO traces show both 392.75 MiB logits blocks at the
// forward peak, the old one freed as the model returns). A workload without it does nothing.
class KeptOutput {
 public:
  // At setup: the previous step's output, live when the step starts.
  void setup(ProgramBuilder& b, const Workload& w, StreamId s);
  // After each forward op (launch_forward / launch_ops call it).
  void after_forward_op(ProgramBuilder& b, const Op& op, StreamId s);

 private:
  std::optional<BufferId> previous_, current_;
};

// Launches the layer's forward ops on `s`, in order, one Launch per op.
void launch_forward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept = nullptr);
// Launches the ops of `ops` (a module's forward or backward) on `s`.
void launch_ops(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const std::vector<Op>& ops, bool forward,
                KeptOutput* kept = nullptr);
// Launches the recompute ops of a checkpointed layer on `s`.
void launch_recompute(ProgramBuilder& b, StreamId s, const Layer& l);
// Launches the layer's backward ops (recompute first, then the modules in reverse) on `s`.
void launch_backward(ProgramBuilder& b, StreamId s, const Layer& l, int micro);

// A cudaMemcpyAsync device-to-device of `bytes` (read + write; what a same-dtype contiguous
// copy_ does): not a kernel (kernels = 0: profiler traces list it as Memcpy DtoD, `analyze` counts
// it neither among the kernels nor in compute, and neither do the metrics). Priced at the
// profile's memcpy_GBps (else the Copy class rate) and one kernel_gap, like a queued kernel.
// E.g. DeepSpeed's `ipg_buffer.narrow(...).copy_(grad)` and allreduce_and_copy's `buf.copy_(synced)`.
Kernel memcpy_dtod(std::string name, Bytes bytes, std::string unit = {});
// A memory-bound kernel moving `bytes` (read + write).
Kernel elementwise(std::string name, Bytes bytes, std::string unit = {}, KernelClass cls = KernelClass::Elementwise);

// The optimizer step over `numel` parameters held in `dtype` (fused/foreach AdamW reads
// param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq: 7 tensors). The
// multi-tensor kernels process 65,536-element chunks, at most 320 chunks per launch (PyTorch
// aten/src/ATen/native/cuda/MultiTensorApply.cuh kChunkSize / depth_to_max_blocks; DeepSpeed
// FusedAdam's chunk_size 2048*32 over csrc/adam/multi_tensor_apply.cuh), so the step is
// ceil(numel / 20,971,520) kernels.
Kernel optimizer_kernel(Optimizer opt, std::int64_t numel, Dtype dtype, std::string name = "optimizer.step");
// Optimizer state bytes for `numel` parameters in `dtype` (AdamW: two states; SGD without
// momentum: none).
Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype);

// torch.optim's state for one tensor the optimizer steps (`name`, `numel` elements of `dtype`):
// AdamW's exp_avg and exp_avg_sq, each a zeros_like created at the first step() (adamw.py
// _init_group), as two lazy allocations (Alloc::lazy); nothing for the other optimizers.
void alloc_optimizer_state(ProgramBuilder& b, Optimizer opt, const std::string& name, std::int64_t numel, Dtype dtype,
                           StreamId s);

// The forward pass of a model whose parameters are all resident (DDP, ZeRO-1/2): per layer,
// allocate its saved activations and launch its forward ops on `s`. Returns the activation
// buffer of each layer (-1 where it saves none), freed by the caller's backward.
std::vector<std::optional<BufferId>> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro,
                                                        KeptOutput* kept = nullptr);

// One layer's backward on `s`: the recomputed activations of a checkpointed layer (and the
// head's loss-gradient transients) are allocated first, `before_launch` runs (a strategy's own
// allocations, e.g. FSDP2's unsharded grads), the backward ops launch, then the recomputed and
// the saved activations (`saved`, if any) are freed.
void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, std::optional<BufferId> saved,
                    const std::function<void()>& before_launch = {});

}  // namespace stepsim
