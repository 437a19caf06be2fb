#pragma once
// A model as the frameworks see it: an ordered list of layers (embedding, blocks, final norm,
// head), each a list of modules owning parameters, with the kernels of its forward and
// backward pass and the activation bytes it saves for backward.
//
// The strategies wrap these: FSDP's `block` policy makes each Block a unit and leaves the
// rest to the root; DDP buckets the parameters in gradient-ready order; ZeRO-3 fetches each
// module's direct parameters.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "sim/core/release.hpp"
#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

struct Param {
  std::string name;
  std::int64_t numel = 0;
  std::int64_t dim0 = 0;  // rows (FSDP2 shards dim 0 and pads it to a multiple of the group)
  bool operator==(const Param&) const = default;
};

// One aten-level op as the framework launches it: one Launch in the host program, `kernels` CUDA
// kernels on the GPU. Memory-bound ops carry the bytes they read and write (by the dtypes they
// really use: fp32 upcasts, bool dropout masks, int64 indices); GEMMs their shapes (the batched
// attention matmuls of eager attention included, priced through the GEMM model); fused attention
// its FLOPs. `saved` is what autograd keeps from this op until its backward (forward ops only;
// a tensor shared by several consumers is counted once, on the first).
struct Op {
  std::string name;             // "q_proj", "attn.mask_add", "ln_1.bwd"
  KernelClass cls = KernelClass::Elementwise;
  int kernels = 1;
  KernelWork work;              // gemms / memory_bytes (= read + written) / attention
  Bytes read, written;
  Bytes saved;
  // The model output the training loop keeps (WorkloadOptions::loop_keeps_output): this op
  // creates it (its size), and/or the model's forward returns after this op, where the loop's
  // assignment (`outputs = model(...)`) releases the previous micro-batch's output.
  Bytes kept_output;
  bool model_returns = false;
  // The op's Python first copies a host value to the device from pageable memory
  // (`torch.tensor(x, device=cuda)`: cudaMemcpyAsync then cudaStreamSynchronize, since a pageable
  // source cannot be copied asynchronously): the host waits for the stream to drain before it
  // launches the op, and the GPU idles while the host issues it.
  bool host_sync_before = false;
  // A further kernel of the previous op's aten call (HostDispatch::Continue): an op whose kernels
  // are of two classes is two Ops, the second paying only its launch.
  bool continues_previous = false;
  // Its saved tensor is an allocation of its own, made as the op is issued, not part of the
  // layer's block of saved activations allocated as the forward starts (a logits-sized tensor of
  // the loss: the caching allocator serves a request by its size, so how the bytes are cut into
  // tensors decides which cached blocks it can reuse).
  bool own_saved_tensor = false;
  // Its output when nothing saves it and the step's allocator traffic is shaped by it (a
  // logits-sized temporary): allocated as the op is issued, freed once `transient_consumers`
  // more forward ops of the layer have been issued (the last one that reads it).
  Bytes transient;
  int transient_consumers = 1;
  // A backward op that writes a parameter's gradient (weight-gradient GEMMs, bias sums, the
  // embedding's gradient): the strategy allocates that (.grad, buckets); every other backward op
  // writes an activation gradient (BackwardTemporaries, sim/strategies/common.hpp).
  bool param_grad = false;
  // Its (cls, kernels, work) numbered among the workload's (name_launches): the ops of a model's
  // blocks repeat a few dozen works, which the engine then prices once each (Kernel::work_id).
  std::uint16_t work_id = 0;
  bool operator==(const Op&) const = default;
};

// Which of a layer's op lists a launch comes from: Module::forward, Module::backward,
// Layer::recompute.
enum class LaunchPass { Forward, Backward, Recompute };

// A list of ops that the copies of a layer share: a transformer's blocks are its first block
// renamed, and their op lists (names relative to their module: "linear", "attn.mask_add") are
// the same. A copy takes a reference; the first change through a non-const member (push_back,
// insert, a non-const iterator or element) gives this holder a list of its own. Reading goes
// through the const members, which never copy. Copying every block's lists was a third of a
// transformer's build, which a sweep over sequence lengths or micro-batches pays at nearly every
// point (issue 49).
class OpList {
 public:
  using value_type = Op;
  using iterator = std::vector<Op>::iterator;
  using const_iterator = std::vector<Op>::const_iterator;

  OpList() = default;
  OpList(std::initializer_list<Op> ops) : ops_(std::make_shared<std::vector<Op>>(ops)) {}
  OpList(std::vector<Op> ops) : ops_(ops.empty() ? nullptr : std::make_shared<std::vector<Op>>(std::move(ops))) {}  // NOLINT

  std::size_t size() const { return ops_ ? ops_->size() : 0; }
  bool empty() const { return size() == 0; }
  const_iterator begin() const { return ops_ ? ops_->cbegin() : const_iterator{}; }
  const_iterator end() const { return ops_ ? ops_->cend() : const_iterator{}; }
  const Op* data() const { return ops_ ? ops_->data() : nullptr; }
  const Op& operator[](std::size_t i) const { return (*ops_)[i]; }
  const Op& front() const { return ops_->front(); }
  const Op& back() const { return ops_->back(); }
  // The list read as a vector (for code that takes one); never copies.
  const std::vector<Op>& vector() const { return ops_ ? *ops_ : empty_list(); }
  operator const std::vector<Op>&() const { return vector(); }  // NOLINT: reads like the vector
  // Whether two lists are the one list (tests/unit/workload/test_block_copies.cpp holds the
  // blocks to it).
  bool shares(const OpList& o) const { return ops_ != nullptr && ops_ == o.ops_; }

  // Changes: the list becomes this holder's own first.
  std::vector<Op>& mut() {
    if (!ops_) ops_ = std::make_shared<std::vector<Op>>();
    else if (ops_.use_count() > 1) ops_ = std::make_shared<std::vector<Op>>(*ops_);
    return *ops_;
  }
  // The ops of every holder, changed in place without making the list this holder's own: only
  // for what is a function of each op alone and so the same in every holder (Op::work_id).
  std::vector<Op>& every_holders() { return mut_shared(); }
  iterator begin() { return mut().begin(); }
  iterator end() { return mut().end(); }
  Op& operator[](std::size_t i) { return mut()[i]; }
  Op& front() { return mut().front(); }
  Op& back() { return mut().back(); }
  void push_back(Op op) { mut().push_back(std::move(op)); }
  template <class It>
  iterator insert(const_iterator at, It first, It last) {
    const auto k = at - begin_of_const();
    std::vector<Op>& v = mut();
    return v.insert(v.begin() + k, first, last);
  }
  iterator insert(const_iterator at, std::initializer_list<Op> ops) { return insert(at, ops.begin(), ops.end()); }
  iterator insert(const_iterator at, Op op) {
    const auto k = at - begin_of_const();
    std::vector<Op>& v = mut();
    return v.insert(v.begin() + k, std::move(op));
  }

 private:
  const_iterator begin_of_const() const { return begin(); }
  std::vector<Op>& mut_shared() {
    if (!ops_) ops_ = std::make_shared<std::vector<Op>>();
    return *ops_;
  }
  static const std::vector<Op>& empty_list() {
    static const std::vector<Op> none;
    return none;
  }
  std::shared_ptr<std::vector<Op>> ops_;
};

// renamed_block (transformer.cpp) copies a block's modules field by field: a field added here
// is added there too.
struct Module {
  std::string name;             // "block.3.attn.q_proj"
  std::vector<Param> params;    // direct parameters
  OpList forward;               // in launch order
  OpList backward;              // in launch order (input grad, weight grad, bias grad, ...)
  // Where its launches' names start in its layer's (Layer::launch_names): its forward ops', then
  // its backward ops'.
  std::uint32_t first_launch = 0;
  std::int64_t numel() const;
};

enum class LayerKind { Embedding, Block, Norm, Head };
std::string to_string(LayerKind k);

struct Layer {
  std::string name;             // "embed", "block.3", "norm", "head"
  LayerKind kind = LayerKind::Block;
  std::vector<Module> modules;
  Bytes saved_activations;      // held from this layer's forward to its backward
  OpList recompute;             // forward ops re-run at the start of backward (checkpointing)
  Bytes recompute_activations;  // transient during backward when recomputing
  // recompute_activations as the tensors the allocator meets (their sum), allocated in this order
  // as the layer's backward starts; empty: one allocation (the head's loss gradients are
  // logits-sized tensors of their own: nll_loss's gradient and log_softmax's).
  std::vector<Bytes> backward_transients;
  HostDispatch forward_dispatch = HostDispatch::Eager;    // Launch when compiled
  HostDispatch backward_dispatch = HostDispatch::Autograd;
  // The nodes this layer's forward adds to the autograd graph, besides one AccumulateGrad per
  // parameter: every node the engine visits, the views, transposes, casts and adds that launch
  // no kernel included (block_autograd_nodes and the other layers' counts in transformer.cpp; 0 for
  // toy layers).
  std::int64_t autograd_nodes = 0;
  // The pool of its ops' launch names and of `unit` (its name), shared by the workload's layers:
  // a sweep or a loop of calls builds many programs of one cached workload, and forming every
  // kernel's name at every build was a fifth of the build (name_launches).
  std::shared_ptr<const TextPool> text;
  Text unit;
  // The names of its launches, made once with the workload (name_launches, in `text`), in the
  // order of its modules' forward and backward ops (Module::first_launch), then its recompute:
  // "fwd block.3", "fwd block.3.attn q_proj", "bwd ...", "recompute block.3 q_proj". Empty in a
  // workload built by hand; the strategies then form them as they launch (op_kernel).
  std::vector<Text> launch_names;
  // Where the names of the launches of `m`'s `pass` list start in launch_names (`m` unused for
  // Recompute): its i-th op is named launch_name_at(first_launch(m, pass) + i).
  std::size_t first_launch(const Module& m, LaunchPass pass) const {
    if (pass == LaunchPass::Forward) return m.first_launch;
    if (pass == LaunchPass::Backward) return m.first_launch + m.forward.size();
    return launch_names.size() - std::min(launch_names.size(), recompute.size());
  }
  // The i-th name, or an empty Text (a workload built by hand has none).
  Text launch_name_at(std::size_t i) const { return i < launch_names.size() ? launch_names[i] : Text{}; }
  // The name of `op` of `m`'s `pass` list, found by its address (empty for an op not of it).
  Text launch_name(const Module& m, const Op& op, LaunchPass pass) const;

  std::int64_t numel() const;
  KernelWork forward() const;   // sum over the forward ops
  // Its parameters in module order, inline up to a transformer block's (DDP and ZeRO walk them
  // two or three times a build: a heap vector each was 489 of the DDP example's 4,200
  // allocations a call).
  using ParamList = boost::container::small_vector<const Param*, 12>;
  ParamList params() const;
  std::int64_t param_count() const;  // params().size(), without building the list
  int forward_kernels() const;
  int backward_kernels() const;  // recompute included
};

// Activation checkpointing policies (per block):
//  none       every op's saved tensors are kept
//  full       only the block input is kept; backward re-runs the whole block forward
//  selective  Korthikanti et al. 2022: the attention core (QK^T, mask, softmax, dropout, PV or
//             the fused attention kernel) is recomputed, everything else kept
//  op_sac     torchtitan's selective op policy (torchtitan/models/llama/parallelize_llama.py,
//             _save_list): outputs of every other matmul and of the attention kernel are saved,
//             everything else recomputed
//  every_k    torchtitan's `selective_ac_option: "k"`: every k-th block fully checkpointed, the
//             others not; counted from 1, as its wrapper counts the blocks it is handed
//             (`ptd_checkpoint_wrapper._count += 1` before `_count % ac_freq == 0`,
//             torchtitan/parallelisms/parallelize_llama.py at 9dec370 l.280-283): blocks k-1,
//             2k-1, ... (0-based)
enum class Checkpointing { None, Selective, Full, OpSac, EveryK };
std::string to_string(Checkpointing c);

// The implementation a layer mirrors (which ops it launches).
//  hf         HF transformers modeling_opt/gpt2/llama (eager modules; attention per `attention`)
//  torchtitan torchtitan models/llama/model.py (RMSNorm in fp32, complex rotary, sdpa)
//  llm_foundry llm-foundry MPT (fused Wqkv, low-precision LayerNorm, triton flash attention)
//  megatron   Megatron-LM GPT (apex fused LayerNorm, fused bias-gelu and bias-dropout-add, flash)
//  modded_nanogpt  KellerJordan/modded-nanogpt's GPT of October 2024 (family nanogpt): fp32
//             parameters under bf16 autocast, the whole model and its loss one torch.compile graph
enum class Implementation { Hf, Torchtitan, LlmFoundry, Megatron, ModdedNanogpt };
std::string to_string(Implementation i);

// flash: FlashAttention-2's fused CUDA kernels (the flash_attn 2.x package), causal work halved;
// sdpa_flash: PyTorch sdpa's flash backend (its vendored FlashAttention-2); flash_triton: the
// Triton FlashAttention (flash_attn_triton.py, llm-foundry's attn_impl triton); flash3:
// FlashAttention-3 (Hopper); sdpa_efficient: memory-efficient sdpa (xformers cutlass kernel);
// sdpa_cudnn: sdpa's cuDNN backend (which PyTorch releases pick it: docs/workload-ops.md).
// Each fused kernel runs at its own measured rate (the profile's compute.attention). eager: full
// s^2 matmuls through the GEMM model plus the s^2 elementwise passes.
// The fused kernels in AttentionKernel's order, then eager: a fused choice converts to its kernel.
enum class Attention { Flash, SdpaFlash, FlashTriton, Flash3, SdpaEfficient, SdpaCudnn, Eager };
inline constexpr int kAttentionCount = kAttentionKernelCount + 1;
inline AttentionKernel attention_kernel(Attention a) { return static_cast<AttentionKernel>(a); }  // not Eager
std::string to_string(Attention a);
// Every `attention` value, in enum order ("flash" ... "eager").
const std::vector<std::string>& attention_names();

// The training loop around the model, for what it keeps alive across backward:
//  hf_trainer      transformers' Trainer: training_step does `loss = self.compute_loss(model,
//                  inputs)`, and compute_loss holds `outputs = model(**inputs)` in a local and
//                  returns only the loss (unless return_outputs), so the logits are gone before
//                  `self.accelerator.backward(loss)` (transformers src/transformers/trainer.py,
//                  compute_loss / training_step, same shape 4.36 to 4.5x)
//  hf_script       a script's own loop over an HF model, `outputs = model(**batch); loss =
//                  outputs.loss; backward(loss)`: DeepSpeed-Chat's step 1 (main.py) and
//                  transformers' examples/pytorch/*_no_trainer.py; `outputs` lives until the next
//                  forward returns
//  composer        Composer's Trainer (llm-foundry): `self.state.outputs = self.state.model(
//                  self.state.batch)` kept through backward (composer v0.14.1
//                  composer/trainer/trainer.py l.2276, l.2298, l.2340)
//  torchtitan      train.py: `del pred` before `loss.backward()` since torchtitan #391
//                  (e29b6b4d4, 2024-06); earlier runs state loop_keeps_output true
//  megatron        Megatron-LM's forward_step returns the loss only
//  modded_nanogpt  modded-nanogpt's train_gpt2.py: `_, loss = model(x, y, return_logits=False)`
enum class TrainingLoop { HfTrainer, HfScript, Composer, Torchtitan, Megatron, ModdedNanogpt };
std::string to_string(TrainingLoop l);
// Every `training_loop` value, in enum order.
const std::vector<std::string>& training_loop_names();
// The loop an implementation's runs use unless the config implies another: hf -> hf_script,
// llm_foundry -> composer, torchtitan -> torchtitan, megatron -> megatron, modded_nanogpt -> its own. A DeepSpeed config
// with "auto" values implies hf_trainer (the HF Trainer resolves them; foreign_configs.cpp).
TrainingLoop default_training_loop(Implementation i);
// Whether the loop keeps the model's output through backward (hf_script, composer).
bool training_loop_keeps_output(TrainingLoop l);

struct WorkloadOptions {
  Implementation impl = Implementation::Torchtitan;
  Attention attention = Attention::Flash;
  double dropout = 0;           // residual (hidden) dropout probability
  double attention_dropout = 0; // dropout on the attention probabilities
  bool compile = false;         // torch.compile: runs of memory-bound ops fused into one kernel
  // The training loop (TrainingLoop). Unset: the implementation's (default_training_loop).
  std::optional<TrainingLoop> loop;
  TrainingLoop training_loop() const { return loop.value_or(default_training_loop(impl)); }
  // Whether the training loop keeps the model's output (the logits) through backward until the
  // next forward replaces it: DeepSpeed-Chat's and the HF examples' `outputs = model(**batch)`,
  // Composer's `self.state.outputs`, torchtitan's `pred` before its #391 (`del pred`, 2024-06).
  // Unset: the training loop's (training_loop_keeps_output).
  std::optional<bool> loop_keeps_output;
  // The flash_attn package of the run (`flash`'s kernel widths by release,
  // attention_kernel_head_dim). Unset: kDefaultFlashAttnRelease.
  std::optional<Release> flash_attn_version;
  Release flash_attn() const { return flash_attn_version.value_or(kDefaultFlashAttnRelease); }
  Checkpointing checkpointing = Checkpointing::None;
  int checkpoint_every = 1;     // every_k: k
  // Whether a checkpointed block's recompute stops at the last tensor its backward needs
  // (checkpoint_stops_early). Unset: the implementation's, at torch_version.
  std::optional<bool> checkpoint_early_stop;
  std::optional<Release> torch_version;  // the run's PyTorch (TrainingConfig::torch_version)
  // The family nanogpt-2025's sliding windows: its schedule's `ws_long` in blocks of 128 tokens
  // (the short window is half of it, rounded down); 0 for every other family.
  int window_blocks = 0;
  Release torch() const { return torch_version.value_or(kDefaultTorchRelease); }
  bool operator==(const WorkloadOptions&) const = default;
};

// The first PyTorch whose non-reentrant checkpointing stops early (checkpoint_stops_early).
inline constexpr Release kCheckpointEarlyStopSince{2, 1};

// Non-reentrant torch.utils.checkpoint from PyTorch 2.1 stops its recompute once it has packed
// every tensor the forward saved (torch/utils/checkpoint.py: _recomputation_hook's pack_hook
// raises _StopRecomputationError when recomp_counter reaches len(weak_holders); #90105 rewrote
// the non-reentrant variant, #96866 made early stop the default, after 2.0's branch cut). The
// reentrant variant re-runs the whole forward. Unset, the implementation decides:
//  hf          reentrant, no early stop: the transformers whose modeling code the hf op lists
//              mirror (4.36) called torch.utils.checkpoint without use_reentrant (PyTorch's
//              default: True), and gradient_checkpointing_enable passed True explicitly from #28538
//              (2024-01); huggingface/transformers#43203 (2026-01) made it False, so a run of a
//              later transformers states true
//  megatron    its own CheckpointFunction (tensor_parallel/random.py), reentrant: no early stop
//  llm_foundry reentrant, no early stop: Composer's default is reentrant
//              (`fsdp_config.setdefault('activation_checkpointing_reentrant', True)`, composer
//              v0.15.0 composer/trainer/dist_strategy.py l.129; v0.24.0
//              composer/utils/parallelism.py l.16), and llm-foundry's train.py at c6cfb4284
//              (scripts/train/train.py l.71-83) even forces a yaml's false back to true for
//              plain MPT (`if fc_type == 'te' or 'te' not in ffn_type`, true for 'mptmlp').
//              Non-reentrant comes from the yaml (`activation_checkpointing_reentrant: false`,
//              HEAD 8c8dd48f7 scripts/train/yamls/pretrain/mpt-7b.yaml l.95;
//              scripts/train/benchmarking/submit_benchmarks.py l.303) with a train.py that
//              honours it (HEAD llmfoundry/command_utils/train.py l.107-128): such a run at
//              PyTorch >= 2.1 states "checkpoint_early_stop": true
//  torchtitan  FullAC and SelectiveAC pass early_stop=False since torchtitan #1580 (2025-08,
//              torchtitan/distributed/activation_checkpoint.py); earlier torchtitan took
//              PyTorch's default (a run of that era states "checkpoint_early_stop": true)
bool checkpoint_stops_early(const WorkloadOptions& o);

// The implementation a preset or a model family runs by default: opt-* / gpt2* = HF eager with
// dropout 0.1 (the HF configs' dropout / resid_pdrop; OPT's attention_dropout is 0, GPT-2's
// attn_pdrop 0.1); llama* = torchtitan (sdpa_flash, no dropout); mpt-* = llm-foundry (flash_triton,
// pdrop 0 as MPTConfig's defaults); gpt3-* = Megatron-style (flash, dropout 0.1).
WorkloadOptions default_options(const std::string& family);

struct Workload {
  std::string name;
  Dtype dtype = Dtype::BF16;    // compute dtype
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 1;
  std::int64_t hidden = 0;      // model width (0 for toy workloads), for throughput conventions
  bool toy = false;             // fixed-time layers (textbook cases)
  // The options a transformer was built with, as they applied (none for toy workloads):
  // loop_keeps_output and checkpoint_early_stop resolved, the latter true under compile (whose
  // partitioner stops the recompute whatever the eager setting). The training loop's defaults
  // follow its implementation (the optimizer's code path, gradient clipping).
  std::optional<WorkloadOptions> options;
  // Its activation checkpointing policy (none for toy workloads).
  Checkpointing checkpointing() const { return options ? options->checkpointing : Checkpointing::None; }
  std::vector<Layer> layers;
  Bytes kept_output;            // the output the training loop keeps (0: none); see Op::kept_output
  // The dtype of the scalar loss the model returns: HF's CrossEntropyLoss over the compute-dtype
  // logits returns it in that dtype; the upcast and fused losses in fp32 (DeepSpeed's
  // `loss.float()` launches a copy only when they differ).
  Dtype loss_dtype = Dtype::FP32;

  std::int64_t numel() const;
  std::int64_t param_count() const;  // parameter tensors over all layers
  std::int64_t tokens() const { return micro_batch * seq_len; }
  // The nodes one backward's autograd graph holds: the layers' autograd_nodes and an
  // AccumulateGrad per parameter. The engine walks all of them before it runs the first
  // (Engine::execute -> compute_dependencies, torch/csrc/autograd/engine.cpp). 0 for toy workloads.
  std::int64_t autograd_nodes() const;
};

// Transformer dimensions, enough to build a preset.
struct ModelDims {
  std::string family;           // "llama", "gpt", "opt", "mpt"
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  std::int64_t max_positions = 0;  // learned positional embeddings (gpt, opt); 0 for rotary
  bool tied_embeddings = false;
};

// The named presets ("llama3-8b", "opt-1.3b", ...). Throws std::out_of_range for an unknown name.
const ModelDims& preset_dims(const std::string& name);
std::vector<std::string> preset_names();
// The preset's default implementation options (see default_options); gpt3-* are Megatron-style.
WorkloadOptions preset_options(const std::string& name);

// With `recycled` (a workload built before by this function, which the caller no longer needs),
// the build takes its names where they are the ones it would form, checked name by name, instead
// of forming them: a block's layer, module and parameter names and every launch's name, which do
// not change with the sequence length, micro-batch, dtype or most options, and were most of a
// build and of freeing a workload (a sweep over sequence lengths builds one at nearly every
// point: issue 49). The result is the workload built without it; `recycled` is left in a valid
// but unspecified state, to be dropped.
Workload build_transformer(const std::string& name, const ModelDims& dims, std::int64_t micro_batch,
                           std::int64_t seq_len, Dtype dtype, const WorkloadOptions& options, Workload* recycled = nullptr);
// The family's default options with `ckpt`.
Workload build_transformer(const std::string& name, const ModelDims& dims, std::int64_t micro_batch,
                           std::int64_t seq_len, Dtype dtype, Checkpointing ckpt);

// Textbook form: `layers` identical layers of fixed forward/backward time, `params` elements
// each, `activation_bytes` saved each; no embedding, head or norm (the FSDP root holds no
// parameters).
struct ToyLayerSpec {
  Time forward, backward;
  std::int64_t params = 0;
  Bytes activations;
};
Workload build_toy(const std::vector<ToyLayerSpec>& layers, Dtype dtype);

// The name of op's launch, stored in `pool`: the first op of a layer's forward (backward), or the
// one op of a one-op layer, carries the layer's name alone ("fwd block.3"), so the start of a
// layer's pass is found by name; the others name their module and op ("fwd block.3.attn q_proj");
// a recomputed op its layer and op ("recompute block.3 q_proj"). `m` is unused for Recompute.
Text form_launch_name(TextPool& pool, const Layer& l, const Module& m, const Op& op, LaunchPass pass);

// Names every op's launch (Layer::launch_names) and every layer's unit once, in one pool the layers
// share (Layer::text), as form_launch_name does, and numbers each distinct (cls, kernels, work)
// of the workload's ops from 1 (Op::work_id; past 65,535 distinct ones, 0: priced one by one).
// The builders above call it last; a workload changed after it must call it again.
void name_launches(Workload& w);
// name_launches with the names of `old`, a workload whose launches the caller found to be named as
// this one's would be (build_transformer's `recycled`: the names form_launch_name reads and the
// lengths of the op lists are the same, layer by layer): each layer takes the names of `old`'s
// layer at its index, with its pool; the works are numbered afresh. False, and nothing taken,
// where `old` does not hold one name per launch in one pool.
bool adopt_launch_names(Workload& w, Workload& old);

inline Text Layer::launch_name(const Module& m, const Op& op, LaunchPass pass) const {
  const OpList& list = pass == LaunchPass::Forward ? m.forward : pass == LaunchPass::Backward ? m.backward : recompute;
  // An address outside the list wraps to a large index.
  const std::size_t k = (reinterpret_cast<std::uintptr_t>(&op) - reinterpret_cast<std::uintptr_t>(list.data())) / sizeof(Op);
  return k < list.size() ? launch_name_at(first_launch(m, pass) + k) : Text{};
}

}  // namespace stepsim
