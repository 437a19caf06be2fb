#pragma once
// Pieces every strategy uses: the kernels of a layer's passes (one Launch per op, as the
// framework launches them), elementwise/copy kernels sized in bytes, the optimizer step, and
// persistent-state sizes.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "sim/config/experiment.hpp"
#include "sim/core/checked.hpp"
#include "sim/program/builder.hpp"
#include "sim/program/program.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

// About how many instructions a strategy writes for one step of `e`, for ProgramBuilder::reserve:
// up to three per op of every layer and micro-batch, recompute included (its launch, and the
// allocation and free of what it saves or makes), and `per_layer` of the strategy's own
// (collectives, events, allocations) per layer and micro-batch. Over is address space never
// touched; under regrows the array, which writes it to fresh pages once more: a launch per op
// alone fell short by 10-70 % on the examples, and the copy was a third of the page faults of a
// simulate call from Python (docs/limits.md).
std::size_t instruction_estimate(const Experiment& e, std::size_t per_layer);

// The Kernel of one op of `l` ("fwd block.3.attn.q_proj linear"); a layer of a single op keeps
// the layer's name ("fwd layer.0", the toy workloads). `named`: the name the workload made for it
// (Layer::launch_name_at), else empty and the name is formed now.
Kernel op_kernel(ProgramBuilder& b, const Layer& l, const Module& m, const Op& op, bool forward, Text named);

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
  // After each forward op (launch_forward / launch_ops call them): the output the op creates,
  // then, once the op's temporaries are freed, the previous output if the model returns here.
  void created(ProgramBuilder& b, const Op& op, StreamId s);
  void returned(ProgramBuilder& b, const Op& op);

 private:
  std::optional<BufferId> previous_, current_;
};

// The buffers of one layer's saved activations, freed by its backward: the layer's block of
// saved tensors, allocated as its forward starts and freed as its backward ends, and one buffer
// per op whose saved tensor the allocator meets on its own (Op::own_saved_tensor), allocated as
// that op is issued and freed once the backward of the op's module has been issued (autograd
// releases a node's saved variables as the node runs: torch/csrc/autograd/engine.cpp,
// call_function -> fn.release_variables() unless retain_graph).
class SavedActivations {
 public:
  void add_block(BufferId id) { block_.push_back(id); }
  void add_op_tensor(std::size_t module, BufferId id) { per_op_.push_back({module, id}); }
  // Frees the tensors of module `module`'s ops (its backward was just issued).
  void free_module(ProgramBuilder& b, std::size_t module);
  // Frees whatever is left: the block, and op tensors of modules without a backward call.
  void free_all(ProgramBuilder& b);

 private:
  // Inline: a layer holds a block and a few op tensors, and a step has a layer's worth per layer.
  boost::container::small_vector<BufferId, 2> block_;
  boost::container::small_vector<std::pair<std::size_t, BufferId>, 4> per_op_;  // (module index in the layer, tensor)
};
// A layer's backward transients (alloc_backward_transients): a few, inline.
using BufferIds = boost::container::small_vector<BufferId, 4>;
// Allocates `l`'s block of saved activations: Layer::saved_activations less the ops' own tensors.
SavedActivations alloc_saved_activations(ProgramBuilder& b, const Layer& l, StreamId s);

// The temporaries of a layer's forward (Op::transient) while its ops are issued: each is
// allocated before its op and freed once its last reader has been issued.
class ForwardTemporaries {
 public:
  void before(ProgramBuilder& b, StreamId s, const Module& m, const Op& op);  // allocates op's
  void after(ProgramBuilder& b);   // an op was issued: frees those whose last reader it was
  void finish(ProgramBuilder& b);  // the layer's forward ends: frees the rest
 private:
  std::vector<std::pair<BufferId, int>> live_;  // buffer, ops still to be issued before its free
};

// The activation gradients of a layer's backward while its ops are issued: each backward op's
// output (a GEMM's m x n, a memory-bound op's writes per kernel; none for Op::param_grad) is
// allocated before the op and freed once the next op that allocates one has been issued, the
// op that consumes it (autograd frees a node's incoming gradient when the node has run). The
// li-plus ZeRO traces allocate 2-3 tensors of the attention-score size per block in backward
// and some 25 of the hidden size.
class BackwardTemporaries {
 public:
  void before(ProgramBuilder& b, StreamId s, const Module& m, const Op& op);  // allocates op's output
  void after(ProgramBuilder& b);   // an op was issued: frees the gradient it consumed
  void finish(ProgramBuilder& b);  // the layer's backward ends: frees the last one
  static Bytes output_bytes(const Op& op);  // 0: the op writes no activation gradient
 private:
  std::optional<BufferId> consumed_, produced_;
};

// Whether `l`'s backward allocates its activation gradients op by op (BackwardTemporaries): not
// a checkpointed layer's nor the head's, whose backward memory is Layer::recompute_activations /
// Layer::backward_transients.
bool owns_backward_gradients(const Layer& l);

// Launches the layer's forward ops on `s`, in order, one Launch per op; with `saved`, an op's own
// saved tensor is allocated before it launches and appended there.
void launch_forward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept = nullptr,
                    SavedActivations* saved = nullptr);
// The saved block and the forward ops of `l` (alloc_saved_activations, then launch_forward).
SavedActivations forward_layer(ProgramBuilder& b, StreamId s, const Layer& l, int micro, KeptOutput* kept = nullptr);
// Launches the ops of `ops` (a module's forward or backward) on `s`; `saved` as launch_forward;
// `temps`: the layer's forward temporaries, across its modules (the caller finishes it).
void launch_ops(ProgramBuilder& b, StreamId s, const Layer& l, const Module& m, const OpList& ops, bool forward,
                KeptOutput* kept = nullptr, SavedActivations* saved = nullptr, ForwardTemporaries* temps = nullptr,
                BackwardTemporaries* grads = nullptr);
// Launches the recompute ops of a checkpointed layer on `s`.
void launch_recompute(ProgramBuilder& b, StreamId s, const Layer& l);
// Launches the layer's backward ops (recompute first, then the modules in reverse) on `s`;
// with `saved`, each module's own saved tensors are freed once its backward ops are issued.
void launch_backward(ProgramBuilder& b, StreamId s, const Layer& l, int micro, SavedActivations* saved = nullptr);

// A cudaMemcpyAsync device-to-device of `bytes` (read + write; what a same-dtype contiguous
// copy_ does): not a kernel (kernels = 0: profiler traces list it as Memcpy DtoD, `analyze` counts
// it neither among the kernels nor in compute, and neither do the metrics). Priced at the
// profile's memcpy_GBps (else the Copy class rate) and one kernel_gap, like a queued kernel.
// E.g. DeepSpeed's `ipg_buffer.narrow(...).copy_(grad)` and allreduce_and_copy's `buf.copy_(synced)`.
KernelSpec memcpy_dtod(std::string name, Bytes bytes, std::string unit = {});
// Frees a tensor a c10d collective issued on `stream` read or wrote, right after the collective:
// with `records_streams` (PyTorch before 2.8, TrainingConfig::c10d_records_streams) a
// record_stream free on that stream, so the block waits for the collective to run; else a plain
// free.
void free_collective_tensor(ProgramBuilder& b, bool records_streams, BufferId id, StreamId stream);
// A memory-bound kernel moving `bytes` (read + write).
KernelSpec elementwise(std::string name, Bytes bytes, std::string unit = {}, KernelClass cls = KernelClass::Elementwise);
// The same named by the concatenation of `name` ({"cast param ", unit}), written straight into
// b's pool: a build launches a few per unit, and a temporary string each was a heap allocation.
Kernel elementwise(ProgramBuilder& b, std::initializer_list<std::string_view> name, Bytes bytes, std::string_view unit = {},
                   KernelClass cls = KernelClass::Elementwise);
// One kernel over a 0-d tensor moving `bytes`, launched by `dispatch`. A dtype conversion runs
// TensorIterator's non-vectorized path (ElementwiseStrided: unrolled_elementwise_kernel with
// direct_copy_kernel_cuda in the li-plus trace), priced for its one element.
KernelSpec scalar_kernel(std::string name, std::int64_t bytes, KernelClass cls, HostDispatch dispatch);
// `loss.backward()` on the 0-d loss: torch.autograd.backward's _make_grads seeds it with
// `torch.ones_like(out, memory_format=torch.preserve_format)` (torch/autograd/__init__.py), a fill
// kernel launched from Python before the autograd engine starts, i.e. ahead of the backward mark,
// where a trace's phase rule (trace/trace_index.cpp) ends the forward too.
void seed_loss_gradient(ProgramBuilder& b, StreamId s, Dtype loss_dtype);
// Micro-batch `micro`'s backward begins where autograd takes over: the backward phase mark, then
// the engine's start, Engine::execute's compute_dependencies walking every node of the graph
// before the first runs (torch/csrc/autograd/engine.cpp): host time of the profile's
// autograd_engine_per_node times Workload::autograd_nodes(), none when either is 0 (toy
// workloads, profiles without it).
void enter_backward(ProgramBuilder& b, const Experiment& e, int micro);

// One optimizer step over this rank's parameters as the training loop runs it (`impl`, one of
// torch.optim's code paths; sim/config/experiment.hpp OptimizerImpl). AdamW moves 7 elements per
// parameter fused (read param, grad, exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq) and
// 20 in the foreach and for-loop paths, whose eight ops are _multi_tensor_adamw's and
// _single_tensor_adamw's (torch/optim/adamw.py, PyTorch 2.1-2.9, capturable=False, weight decay on):
// mul_ (decay), lerp_ (exp_avg), mul_ + addcmul_ (exp_avg_sq), sqrt, div_, add_ (denominator),
// addcdiv_ (param). The sqrt allocates a parameter-sized fp32 temporary: all the tensors' at once in
// foreach, two per tensor in turn in the for-loop. SGD (no momentum) is one add_ of 3 elements.
// Lion (Chen et al. 2023, arXiv 2302.06675): fused, DeepSpeed's FusedLion, 5 elements (read param,
// grad, exp_avg; write param, exp_avg); for-loop, Composer's DecoupledLionW `lionw` (llm-foundry's
// decoupled_lionw): mul_ (decay), lerp (update, a tensor-sized temporary), sign_, add_ (param),
// lerp_ (exp_avg), 13 elements; it has no foreach path.
// Multi-tensor launches follow MultiTensorApply.cuh: 65,536-element chunks, at most 320 chunks and
// 110/64/48/36 tensors (for 1/2/3/4 tensor lists) per kernel; a for-loop op is one kernel per tensor.
struct OptimizerStep {
  Optimizer optimizer = Optimizer::AdamW;
  OptimizerImpl impl = OptimizerImpl::Fused;
  std::int64_t numel = 0;    // elements this rank updates
  std::int64_t tensors = 1;  // the tensors holding them (flat parameters, DTensor shards, ...)
  Dtype dtype = Dtype::FP32;
  std::string name = "optimizer.step";
};
void launch_optimizer_step(ProgramBuilder& b, StreamId s, const OptimizerStep& step);

// torch.optim.Muon's step (PyTorch 2.9, torch/optim/_muon.py: _single_tensor_muon, its only code
// path: "Foreach is not supported for Muon yet"), parameter after parameter, each aten op one
// launch from Python's loop, with the defaults (momentum 0.95, nesterov, 5 Newton-Schulz steps,
// use_addmm False):
//   buf.lerp_(grad, 1 - momentum); update = grad.lerp(buf, momentum)        fp32, a new update
//   X = update.bfloat16() (the update itself when bf16), transposed (a view) when rows > cols:
//   X is m x n with m <= n
//   X.div_(X.norm().clamp(min=eps))                                           norm, clamp, div_
//   5 x { A = X @ X.T;  B = b * A + c * A @ A;  X = a * X + B @ X }         GEMMs (m,m,n),
//        (m,m,m), (m,n,m) in bf16; the scalar multiplies and adds as elementwise kernels
//   param.mul_(1 - lr * wd); param.add_(X, alpha=-lr)                        fp32 param, bf16 X
// Memory: the fp32 update and X live through the iterations; at its peak an iteration holds A and
// B and, beside X, the new X, a * X and B @ X: 4 m^2 + 6 m n bytes more (bf16). (From the second
// iteration the previous A and B live until replaced, 10 m^2 bytes at most, never more.)
struct MuonMatrix {
  std::int64_t rows = 0, cols = 0;
};
struct MuonStep {
  std::vector<MuonMatrix> matrices;  // the parameters Muon steps, as their weights are shaped
  Dtype dtype = Dtype::FP32;         // the parameters' and gradients' (the momentum buffer's too)
  std::string name = "optimizer.step muon";
};
inline constexpr int kMuonNsSteps = 5;
// What launch_muon_step writes per matrix at most (fp32 parameters; bf16 ones skip the cast and
// its buffer): 6 launches and 2 allocations before the iterations, 8 launches, an allocation and
// a free in each, 2 launches and 2 frees after.
inline constexpr std::size_t kMuonInstructionsPerMatrix = 6 + 2 + kMuonNsSteps * 10 + 2 + 2;
void launch_muon_step(ProgramBuilder& b, StreamId s, const MuonStep& step);
// KellerJordan/modded-nanogpt's Muon (training.muon_impl; records/track_1_short/2024-10-14_ModernArch
// train_gpt2.py and 2024-10-17_DistributedMuon), a Python loop over the blocks' matrices in
// parameter order, momentum 0.95, nesterov, 5 steps of its compiled zeropower_via_newtonschulz5:
//   buf.mul_(momentum).add_(g); g = g.add(buf, alpha=momentum)              fp32, a new g
//   X = G.bfloat16(); X /= (X.norm() + eps); X = X.T when rows > cols
//   5 x { A = X @ X.T; B = A @ X; X = a * X + b * B + c * A @ B }          GEMMs (m,m,n), (m,n,m),
//                                                                           (m,n,m) in bf16
//   2024-10-14 (world 1 here): p.data.add_(g, alpha=-lr * scale)
//   2024-10-17 (world > 1): updates_flat = zeros(total, bf16); rank r takes the matrices
//     i % world == r: g *= scale; updates_flat[...] = g.flatten(); then
//     dist.all_reduce(updates_flat); per matrix .type_as(p) and p.data.add_(g, alpha=-lr)
// The rank simulated is `rank`: with 6 matrices a block and 8 ranks every rank gets the same
// shapes (3 square, 3 not, per 4 blocks).
struct ModdedMuonStep {
  std::vector<MuonMatrix> matrices;  // in parameter order
  Dtype dtype = Dtype::FP32;
  int world = 1, rank = 0;           // world 1: every matrix on this rank, no all_reduce
  CommId comm{0};
  StreamId nccl{0};
  std::string name = "optimizer.step muon";
};
// What launch_modded_muon_step writes per matrix at most, and once.
inline constexpr std::size_t kModdedMuonInstructionsPerMatrix = 3 + 2 + 2 + kMuonNsSteps * 7 + 2 + 2 + 2;
inline constexpr std::size_t kModdedMuonInstructions = 6;
void launch_modded_muon_step(ProgramBuilder& b, StreamId s, const ModdedMuonStep& step);
// modded-nanogpt's optimizers of late 2025 (training.optimizer normuon;
// records/track_1_short/2025-10-31_AdamSyncGradientHook, the script in each log, l.411-740), which
// also synchronize the gradients (the record wraps no DDP), on an odd step, where both step (an
// even step, training.normuon_step, steps NorMuon alone: no DistAdam parameter is given):
//  DistAdam (embed, value embeddings, lm_head, scalars), first: per parameter
//    dist.reduce_scatter_tensor(grad_slice, grad, AVG, async_op=True), then, waiting for each in
//    turn, Adam on its slice (mul_, add_, mul_, addcmul_, sqrt, add_, div, mul_, add_: nine
//    kernels) and an async all_gather_into_tensor of the slice into the parameter; it waits for
//    them all;
//  NorMuon (the blocks' matrices and the gates), in groups of one shape each (world 8: 1 smear
//    gate, 10 attention gates, 16 attn/mlp and 16 mlp matrices; a group of n holds ceil(n /
//    world) x world): the gradients stacked (a copy each, the padding zeroed), one async
//    reduce_scatter_tensor per group; then per group, waiting for it, the rank's chunk: momentum
//    (lerp_, lerp_), Polar Express (the norm, 5 x {XXT: A = X X^T, ba_plus_cAA: B = b A + c A A,
//    baddbmm: C = a X + B X}; an attn chunk as 4 x its matrices of h x h), NorMuon's variance
//    normalisation and cautious weight decay (about 18 small kernels), the parameters' update, an
//    async all_gather_into_tensor of the updated chunk; then per group the wait and a copy back
//    into each parameter.
// Each wait is a future's: the current stream waits for that collective's end (an event), not for
// everything queued on NCCL's stream, so a group's update runs while the next group reduces.
// The rank simulated is rank 0 (every rank's chunk has the same shapes but for the attn/mlp
// group, whose ranks 0-4 take attn matrices).
struct NorMuonGroup {
  std::int64_t params = 0;    // in the group
  std::int64_t rows = 0, cols = 0;
  bool attn = false;          // qkvo_w: its chunk is reshaped to 4 x (rows, cols / 4)
  Dtype dtype = Dtype::FP32;  // the blocks' matrices (nn.Parameter) fp32, the gates (CastedLinear) bf16
};
struct NorMuonStep {
  std::vector<NorMuonGroup> groups;      // in launch order
  std::vector<std::int64_t> adam_params; // DistAdam's parameters' elements, in its order
  std::vector<Dtype> adam_dtypes;
  int world = 1;
  CommId comm{0};
  StreamId nccl{0};
};
inline constexpr int kPolarExpressSteps = 5;
// What launch_normuon_step writes per DistAdam parameter and per NorMuon group (and per
// parameter of it) at most.
inline constexpr std::size_t kDistAdamInstructionsPerParam = 3 + 2 + 9 + 2;
inline constexpr std::size_t kNorMuonInstructionsPerGroup = 3 + 3 + 2 + 4 + kPolarExpressSteps * 3 + 20 + 6 + 4;
inline constexpr std::size_t kNorMuonInstructionsPerParam = 2;
void launch_normuon_step(ProgramBuilder& b, StreamId s, const NorMuonStep& step);
// The groups NorMuon forms of the record's matrices and gates (generate_custom_param_groups at
// world 8, generate_standard_param_groups otherwise: one per label).
std::vector<NorMuonGroup> normuon_groups(std::int64_t smear_gates, std::int64_t attn_gates, std::int64_t gate_inputs,
                                         std::int64_t heads, std::int64_t attn, std::int64_t mlp, std::int64_t hidden, int world);

// torch.optim.Adafactor's step (PyTorch 2.5, torch/optim/_adafactor.py: _single_tensor_adafactor,
// its default: "Adafactor will default to the slower single tensor for-loop implementation unless
// this flag is explicitly True"), tensor after tensor, each aten op one launch from Python's loop:
//   alpha from param.norm(2).item()                 a reduction, then the host waits for the GPU
//   param.mul_(1 - lr * wd)                         weight decay
//   a matrix (m rows, n columns): its second moment factored over rows and columns
//     row_var.lerp_(vector_norm(grad, dim=-1).square_().div_(n))   reduction over n, 3 on m
//     col_var.lerp_(vector_norm(grad, dim=-2).square_().div_(m))   reduction over m, 3 on n
//     var_estimate = row_var @ col_var                              an m x n outer product (new)
//     var_estimate.div_(row_var.mean(dim=-2).clamp_(min=eps1))      reduction, clamp, div_
//   a vector: variance.lerp_(grad * grad); var_estimate = variance.clone()
//   update = var_estimate.clamp_(min=eps1^2).rsqrt_().mul_(grad)
//   update.norm(2).item()                           a reduction, then the host waits again
//   param.add_(update, alpha)
// Its state is row_var (m) and col_var (n) per matrix, variance (n) per vector, in the
// parameter's dtype (and a step count on the CPU); var_estimate lives through the update.
struct AdafactorTensor {
  std::int64_t rows = 0, cols = 0;  // cols 0: a vector of `rows` elements
};
struct AdafactorStep {
  std::vector<AdafactorTensor> tensors;
  Dtype dtype = Dtype::FP32;
  std::string name = "optimizer.step adafactor";
};
// What launch_adafactor_step writes per tensor at most (a matrix: 19 launches, 2 host waits, an
// allocation and its free).
inline constexpr std::size_t kAdafactorInstructionsPerTensor = 23;
void launch_adafactor_step(ProgramBuilder& b, StreamId s, const AdafactorStep& step);
// A parameter as torch.optim.Adafactor sees it: a matrix when it has more than one row and column.
AdafactorTensor adafactor_tensor(const Param& p);

// bitsandbytes' AdamW8bit (bnb.optim.AdamW8bit; bitsandbytes/optim/optimizer.py, Optimizer8bit.step
// and Optimizer2State, since 0.44 with 256-element blocks, bitsandbytes#1365), parameter after
// parameter from Python:
//   init_state (the first step): a tensor of at least min_8bit_size (4,096) elements keeps its two
//     moments as uint8 (state1, state2: zeros_like) and a float32 absmax per 256-element block
//     for each (absmax1, absmax2); a smaller one keeps them as float32; the dynamic quantization
//     maps (256 floats, signed and unsigned) go to the GPU once
//   update_step: one kernel, kOptimizerStatic8bit2StateBlockwise (or kOptimizer32bit2State for a
//     float32 state), reading the gradient, the parameter (both the parameter's dtype T), both
//     moments and their absmax, writing the parameter, the moments and the absmax
//   sync_gpu(p): torch.cuda.synchronize() after every parameter (since 0.39.1, bitsandbytes 41a9c70)
struct Adamw8bitStep {
  std::vector<std::int64_t> tensors;  // elements of each parameter, in step order
  Dtype dtype = Dtype::FP32;          // the parameters' and gradients'
  std::string name = "optimizer.step adamw8bit";
};
inline constexpr std::int64_t kBnbMin8bitSize = 4096;   // Optimizer2State's min_8bit_size default
inline constexpr std::int64_t kBnbBlockSize = 256;      // Optimizer2State.init_state's blocksize
inline constexpr std::int64_t kBnbQuantileMapBytes = 256 * 4;  // create_dynamic_map(): 256 floats
// Whether AdamW8bit keeps a tensor's moments as uint8 (else float32, whatever its dtype).
inline bool bnb_8bit(std::int64_t numel) { return numel >= kBnbMin8bitSize; }
// The two quantization maps (create_dynamic_map, signed and unsigned), moved to the GPU once, at
// the first 8-bit tensor's init_state: lazy allocations.
void alloc_adamw8bit_maps(ProgramBuilder& b, StreamId s);
// What launch_adamw8bit_step writes per tensor: its kernel and the host's wait.
inline constexpr std::size_t kAdamw8bitInstructionsPerTensor = 2;
void launch_adamw8bit_step(ProgramBuilder& b, StreamId s, const Adamw8bitStep& step);

// Whether training.optimizer muon gives `p` of `l` to Muon: a 2-D weight of a transformer block.
// The embeddings, the output head, norms and biases go to AdamW, as torch.optim.Muon's
// documentation says ("Other parameters, such as bias, and embedding, should be optimized by a
// standard method such as AdamW").
bool muon_matrix(const Layer& l, const Param& p);
// The code path of a PyTorch training loop's optimizer (FSDP, DDP): training.optimizer_impl, else
// the workload implementation's loop: llm_foundry's Composer DecoupledAdamW is a for-loop
// (composer/optim/decoupled_weight_decay.py `adamw`, v0.14-v0.17); Megatron's apex FusedAdam is
// fused; torch.optim.AdamW defaults to foreach for CUDA tensors (optimizer.py
// _default_to_fused_or_foreach) and torchtitan passes foreach=True (train.py at 83c879f1,
// optimizer.py at 9dec370: `"foreach": not fused`, fused off by default). Toy workloads: fused.
// Lion: for_loop (Composer's DecoupledLionW), unless the training says fused.
OptimizerImpl loop_optimizer_impl(const Experiment& e);
// DeepSpeed's: training.optimizer_impl, else fused (its FusedAdam over each flat fp32 partition,
// whatever the workload's loop would pass).
OptimizerImpl deepspeed_optimizer_impl(const Experiment& e);

// clip_grad_norm_(max_norm) over this rank's gradients before the step: a norm per tensor, their
// norm, the sum of squares all-reduced over `comm` (sharded gradients; none for DDP's replicas),
// the clip coefficient (pow, add, div, clamp) and a multiply of every gradient by it, which
// PyTorch does whatever the norm (clamp(max=1.0), no branch). FSDP1's own clip_grad_norm_
// (fully_sharded_data_parallel.py) loops over the tensors (`per_tensor`); torch.nn.utils'
// (FSDP2, DDP) uses _foreach_norm and _foreach_mul_.
struct ClipGradNorm {
  std::int64_t numel = 0;
  std::int64_t tensors = 1;
  Dtype dtype = Dtype::FP32;  // the gradients'
  bool per_tensor = false;
  std::optional<CommId> comm;
};
void launch_clip_grad_norm(ProgramBuilder& b, StreamId s, const ClipGradNorm& c);
// Whether a PyTorch training loop clips: training.clip_grad_norm, else the workload
// implementation's loop (torchtitan: training.max_norm defaults to 1.0, config_manager.py, and
// train.py always calls clip_grad_norm_; the others do not by default).
bool loop_clips_grad_norm(const Experiment& e);

// Every training knob as it applies, defaults resolved (the `training` line of the text report,
// beside `strategy` and `workload`; issue 48): grad_accum, no_sync (DDP/FSDP only: ZeRO
// accumulates its own way), optimizer, optimizer_impl, master_dtype, clip_grad_norm (the loop's;
// DeepSpeed's gradient_clipping is the strategy's), allocator, torch_version.
nlohmann::json effective_training(const Experiment& e);

// Optimizer state bytes for `numel` parameters in `dtype` (AdamW: two states; Muon: its momentum
// buffer; SGD without momentum: none; AdamW8bit, one tensor of `numel`: its uint8 moments and
// their absmax, or float32 moments below min_8bit_size). Adafactor's depend on the shape:
// adafactor_state_bytes.
Bytes optimizer_state_bytes(Optimizer opt, std::int64_t numel, Dtype dtype);

// torch.optim's state for one tensor the optimizer steps (`name`, `numel` elements of `dtype`):
// AdamW's exp_avg and exp_avg_sq, each a zeros_like created at the first step() (adamw.py
// _init_group), as two lazy allocations (Alloc::lazy); Muon's momentum_buffer (_muon.py
// _init_group, zeros_like(p.grad)), one; nothing for SGD; AdamW8bit's state1, state2 and (8-bit)
// absmax1, absmax2 of one tensor (Adamw8bitStep).
void alloc_optimizer_state(ProgramBuilder& b, Optimizer opt, const std::string& name, std::int64_t numel, Dtype dtype,
                           StreamId s);
// Adafactor's state of one parameter: row_var and col_var (rows + cols elements) for a matrix,
// variance (numel) for a vector, created at the first step() (_adafactor.py _init_group).
Bytes adafactor_state_bytes(const Param& p, Dtype dtype);
// The state of `p` of `l` whole (DDP's replicas), under `opt`: Muon's for the blocks' matrices
// and AdamW's for the rest; Adafactor's by the parameter's shape; else alloc_optimizer_state.
void alloc_param_optimizer_state(ProgramBuilder& b, Optimizer opt, const Layer& l, const Param& p, Dtype dtype, StreamId s);

// The forward pass of a model whose parameters are all resident (DDP, ZeRO-1/2): per layer,
// allocate its saved activations and launch its forward ops on `s`. Returns the activation
// buffers of each layer (none where it saves none), freed by the caller's backward.
std::vector<SavedActivations> replicated_forward(ProgramBuilder& b, const Workload& w, StreamId s, int micro,
                                                KeptOutput* kept = nullptr);

// The transients of `l`'s backward (recomputed activations, the head's loss gradients), allocated
// on `s` as the tensors Layer::backward_transients lists, else as one buffer.
BufferIds alloc_backward_transients(ProgramBuilder& b, const Layer& l, StreamId s);

// One layer's backward on `s`: the recomputed activations of a checkpointed layer (and the
// head's loss-gradient transients) are allocated first, `before_launch` runs (a strategy's own
// allocations, e.g. FSDP2's unsharded grads), the backward ops launch, then the recomputed and
// the saved activations (`saved`) are freed: each op's own tensor after its module's backward,
// the layer's block at the end.
void layer_backward(ProgramBuilder& b, const Layer& l, int micro, StreamId s, SavedActivations& saved,
                    const std::function<void()>& before_launch = {});

}  // namespace stepsim
