#include "sim/config/experiment_keys.hpp"

#include "sim/config/experiment.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

using Json = nlohmann::json;
using namespace limits;

const std::vector<std::string>& dtype_choices() {
  // parse_dtype (sim/core/units.cpp) accepts these names and aliases.
  static const std::vector<std::string> names{"fp32", "float32", "tf32", "bf16", "bfloat16", "fp16", "float16", "fp8", "fp8_e4m3"};
  return names;
}

namespace experiment_keys {

namespace {

constexpr const char* kStepsim = "stepsim";  // a modelling choice of this tool, not a framework option

ConfigKey dtype_key(std::string name, std::string def, std::string doc, std::string since = kStepsim) {
  ConfigKey k;
  k.name = std::move(name);
  k.types = kString;
  k.choices = dtype_choices();
  k.default_value = Json(def);
  k.doc = std::move(doc);
  k.since = std::move(since);
  return k;
}

}  // namespace

const ConfigObject& root() {
  static const ConfigObject o{
      "experiment",
      "/",
      "One training step to predict: workload x cluster x strategy x training.",
      {
          {.name = "$schema", .types = kString, .doc = "The JSON Schema an editor checks this file against (`stepsim schema`); ignored.", .since = kStepsim},
          {.name = "name", .types = kString, .doc = "A name for the experiment; free text.", .since = kStepsim},
          {.name = "description", .types = kString, .doc = "Free text.", .since = kStepsim},
          {.name = "notes", .types = kArray, .items = "string", .doc = "Free-text notes (stepsim init writes what it guessed here).", .since = kStepsim},
          {.name = "workload", .types = kObject, .objects = {"workload"}, .doc = "The model and its inputs (required).", .since = kStepsim},
          {.name = "cluster", .types = kObject, .objects = {"cluster"}, .doc = "The hardware (required).", .since = kStepsim},
          {.name = "strategy", .types = kObject, .objects = {"strategy.ddp", "strategy.fsdp1", "strategy.fsdp2", "strategy.zero"},
           .doc = "The framework and its options (required); the object is chosen by \"framework\".", .since = kStepsim},
          {.name = "training", .types = kObject, .objects = {"training"}, .doc = "Gradient accumulation, optimizer and allocator.", .since = kStepsim},
      }};
  return o;
}

const ConfigObject& workload() {
  static const ConfigObject o = [] {
    ConfigObject w{"workload", "/workload", "The model: a \"preset\", a \"model\" (dimensions or a Hugging Face config) or a \"toy\".", {}};
    ConfigKey preset{.name = "preset", .types = kString, .doc = "A model preset (docs/workload-ops.md).", .since = kStepsim};
    preset.choices = preset_names();
    w.keys = {
        {.name = "toy", .types = kObject, .objects = {"workload.toy"}, .doc = "Fixed-time layers for textbook cases (excludes the other keys but dtype).", .since = kStepsim},
        {.name = "micro_batch", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxMicroBatch), .default_value = Json(1),
         .doc = "Sequences per micro-batch per rank.", .since = kStepsim},
        {.name = "seq_len", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxSeqLen), .default_value = Json(2048),
         .doc = "Tokens per sequence.", .since = kStepsim},
        dtype_key("dtype", "bf16", "The compute dtype of activations and (for DeepSpeed) the bit16 model."),
        {.name = "activation_checkpointing", .types = kString,
         .choices = {"none", "selective", "full", "op_sac", "every_k", "megatron_selective", "torchtitan_selective_op"},
         .default_value = Json("none"),
         .doc = "Which activations are recomputed in backward (docs/workload-ops.md). \"selective\" is Megatron's "
                "(--recompute-granularity selective: core attention), also spelled \"megatron_selective\"; torchtitan's "
                "mode = \"selective\" with selective_ac_option = \"op\" is \"op_sac\", also spelled "
                "\"torchtitan_selective_op\" (its integer option k is \"every_k\").",
         .since = kStepsim, .tune = {"none", "selective", "op_sac", "full"}},
        preset,
        {.name = "model", .types = kObject, .objects = {"workload.model", "workload.model.hf"},
         .doc = "Dimensions, or {\"hf_config\": FILE} (a Hugging Face config.json).", .since = kStepsim},
        {.name = "implementation", .types = kString, .choices = {"hf", "torchtitan", "llm_foundry", "megatron", "modded_nanogpt"},
         .default_text = "the preset's (llama*: torchtitan, opt-*/gpt2*: hf, mpt-*: llm_foundry, gpt3-*: megatron, "
                         "nanogpt-124m, nanogpt-2025-10: modded_nanogpt)",
         .doc = "Whose model code launches the ops (modded_nanogpt: the families nanogpt and nanogpt-2025 only, and their only "
                "implementation; compiled whole, without activation checkpointing).",
         .since = kStepsim},
        {.name = "attention", .types = kString, .choices = attention_names(),
         .default_text = "the implementation's (torchtitan: sdpa_flash, llm_foundry: flash_triton, hf: eager, megatron: flash)",
         .doc = "The attention kernel: flash (flash_attn's FlashAttention-2), sdpa_flash (PyTorch sdpa's), flash_triton, flash3 "
                "(Hopper), sdpa_efficient, sdpa_cudnn (sdpa's cuDNN backend: the default of some PyTorch releases on "
                "Hopper, docs/workload-ops.md), eager.",
         .since = kStepsim},
        {.name = "dropout", .types = kNumber, .min = 0, .max = 1, .default_text = "the implementation's (hf, megatron: 0.1; else 0)",
         .doc = "Dropout probability in [0, 1).", .since = kStepsim},
        {.name = "attention_dropout", .types = kNumber, .min = 0, .max = 1, .default_text = "the implementation's",
         .doc = "Attention-probability dropout in [0, 1).", .since = kStepsim},
        {.name = "compile", .types = kBoolean, .default_text = "false (modded_nanogpt: true)",
         .doc = "torch.compile fusion of the elementwise ops.", .since = "PyTorch 2.0"},
        {.name = "training_loop", .types = kString, .choices = training_loop_names(),
         .default_text = "hf_trainer for a DeepSpeed config with \"auto\" values, else the implementation's (hf: hf_script, "
                         "llm_foundry: composer, torchtitan: torchtitan, megatron: megatron, modded_nanogpt: modded_nanogpt)",
         .doc = "The training loop around the model: hf_trainer (transformers' Trainer, whose compute_loss returns only the "
                "loss), hf_script (DeepSpeed-Chat, the *_no_trainer examples: `outputs = model(**batch)`), composer, "
                "torchtitan, megatron, modded_nanogpt (`_, loss = model(x, y, return_logits=False)`). Decides "
                "loop_keeps_output's default (docs/memory.md).",
         .since = kStepsim},
        {.name = "loop_keeps_output", .types = kBoolean,
         .default_text = "the training loop's (hf_script, composer: true; hf_trainer, torchtitan, megatron, modded_nanogpt: false)",
         .doc = "The training loop keeps the model's output (the logits) until the next forward replaces it "
                "(`outputs = model(**batch)`; docs/memory.md).",
         .since = kStepsim},
        {.name = "checkpoint_early_stop", .types = kBoolean,
         .default_text = "false (hf, megatron, llm_foundry/Composer: reentrant by default; torchtitan: early_stop=False since #1580)",
         .doc = "A checkpointed block's recompute stops at the last tensor its backward needs, before the MLP's down projection "
                "(non-reentrant torch.utils.checkpoint from PyTorch 2.1; docs/workload-ops.md).",
         .since = "PyTorch 2.1"},
        {.name = "flash_attn_version", .types = kString, .default_text = "2.8.3 (the current flash_attn release)",
         .doc = "The flash_attn package of the run: `flash` runs the head widths its release compiles (224 gone from 2.6.2, "
                "160 from 2.8.0; docs/workload-ops.md). A 2.x release.",
         .since = kStepsim},
        {.name = "window_blocks", .types = kInteger, .min = 1, .max = 64, .default_text = "3 (the family nanogpt-2025 only)",
         .doc = "The family nanogpt-2025's sliding attention windows at the step: its schedule's ws_long (get_ws: 3, 7, 11, then "
                "13) in blocks of 128 tokens; the short windows are half of it, rounded down (docs/workload-ops.md).",
         .since = kStepsim},
        {.name = "activation_checkpointing_every", .types = kInteger, .min = 1,
         .doc = "With \"every_k\": every k-th block is fully checkpointed (required then, refused otherwise).", .since = kStepsim},
    };
    return w;
  }();
  return o;
}

const ConfigObject& model() {
  static const ConfigObject o{
      "workload.model",
      "/workload/model",
      "A transformer by its dimensions.",
      {
          {.name = "name", .types = kString, .default_value = Json("custom"), .doc = "The model's name in reports.", .since = kStepsim},
          {.name = "family", .types = kString, .choices = {"llama", "gpt", "opt", "mpt", "nanogpt", "nanogpt-2025"}, .default_value = Json("llama"),
           .doc = "The architecture family (norms, activation, positions; nanogpt: modded-nanogpt's GPT of 2024-10, nanogpt-2025: "
                  "its GPT of 2025-10, 12 layers only, "
                  "docs/workload-ops.md).",
           .since = kStepsim},
          {.name = "hidden", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxHidden), .doc = "Hidden size (required).", .since = kStepsim},
          {.name = "layers", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxLayers), .doc = "Transformer blocks (required).", .since = kStepsim},
          {.name = "heads", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxHidden), .doc = "Attention heads, a divisor of hidden (required).",
           .since = kStepsim},
          {.name = "kv_heads", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxHidden), .default_text = "heads",
           .doc = "Key/value heads (grouped-query attention), a divisor of heads.", .since = kStepsim},
          {.name = "ffn", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxFfn), .doc = "MLP intermediate size (required).", .since = kStepsim},
          {.name = "vocab", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxVocab), .doc = "Vocabulary size (required).", .since = kStepsim},
          {.name = "max_positions", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxSeqLen), .default_value = Json(0),
           .doc = "Learned position embeddings (0: rotary or none).", .since = kStepsim},
          {.name = "tied_embeddings", .types = kBoolean, .default_text = "false for llama, else true",
           .doc = "The LM head shares the embedding weight.", .since = kStepsim},
      }};
  return o;
}

const ConfigObject& hf_model() {
  static const ConfigObject o{
      "workload.model.hf",
      "/workload/model",
      "A model read from a Hugging Face config.json (docs/configuration-foreign.md).",
      {
          {.name = "hf_config", .types = kString, .doc = "Path of the config.json (required).", .since = kStepsim},
          {.name = "name", .types = kString, .default_text = "the config's model type", .doc = "The model's name in reports.", .since = kStepsim},
      }};
  return o;
}

const ConfigObject& toy() {
  static const ConfigObject o{
      "workload.toy",
      "/workload/toy",
      "Identical fixed-time layers, or a \"layer_list\" of them.",
      {
          {.name = "layer_list", .types = kArray, .items = "workload.toy.layer", .doc = "One object per layer (instead of the keys below).",
           .since = kStepsim},
          {.name = "layers", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxLayers), .doc = "Number of layers (required without layer_list).",
           .since = kStepsim},
          {.name = "forward_ms", .types = kNumber, .min = 0, .max = kMaxToyLayerMs, .default_value = Json(0), .doc = "Forward time of each layer.",
           .since = kStepsim},
          {.name = "backward_ms", .types = kNumber, .min = 0, .max = kMaxToyLayerMs, .default_value = Json(0), .doc = "Backward time of each layer.",
           .since = kStepsim},
          {.name = "params_per_layer", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxWorkloadBytes / 32), .default_value = Json(0),
           .doc = "Parameters of each layer.", .since = kStepsim},
          {.name = "activation_bytes_per_layer", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxWorkloadBytes),
           .default_value = Json(0), .doc = "Saved activation bytes of each layer.", .since = kStepsim},
      }};
  return o;
}

const ConfigObject& toy_layer() {
  static const ConfigObject o{
      "workload.toy.layer",
      "/workload/toy/layer_list/N",
      "One fixed-time layer.",
      {
          {.name = "forward_ms", .types = kNumber, .min = 0, .max = kMaxToyLayerMs, .default_value = Json(0), .doc = "Forward time.", .since = kStepsim},
          {.name = "backward_ms", .types = kNumber, .min = 0, .max = kMaxToyLayerMs, .default_value = Json(0), .doc = "Backward time.", .since = kStepsim},
          {.name = "params", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxWorkloadBytes / 32), .default_value = Json(0),
           .doc = "Parameters.", .since = kStepsim},
          {.name = "activation_bytes", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxWorkloadBytes), .default_value = Json(0),
           .doc = "Saved activation bytes.", .since = kStepsim},
      }};
  return o;
}

const ConfigObject& cluster() {
  static const ConfigObject o{
      "cluster",
      "/cluster",
      "The GPUs and their hardware profile.",
      {
          {.name = "nodes", .types = kInteger, .min = 1, .max = kMaxNodes, .default_value = Json(1),
           .doc = "Nodes; nodes x gpus_per_node is the world size (at most 2^20).", .since = kStepsim},
          {.name = "gpus_per_node", .types = kInteger, .min = 1, .max = kMaxGpusPerNode, .default_value = Json(8), .doc = "GPUs per node.",
           .since = kStepsim},
          {.name = "profile", .types = kString | kObject,
           .doc = "A hardware profile file (configs/hardware/*.json) or an inline profile (its keys: docs/profile-keys.md, `stepsim schema --profile`).",
           .since = kStepsim},
      }};
  return o;
}

const ConfigObject& training() {
  static const ConfigObject o{
      "training",
      "/training",
      "What one optimizer step does besides the strategy.",
      {
          {.name = "grad_accum", .types = kInteger, .min = 1, .max = kMaxGradAccum, .default_value = Json(1), .doc = "Micro-batches per optimizer step.",
           .since = kStepsim},
          {.name = "no_sync", .types = kBoolean, .default_value = Json(true),
           .doc = "Accumulate without gradient sync (the DDP/FSDP no_sync context) until the last micro-batch.", .since = "unknown"},
          {.name = "optimizer", .types = kString, .choices = {"adamw", "adam", "sgd", "muon", "adafactor", "lion", "adamw8bit", "normuon", "none"},
           .default_value = Json("adamw"),
           .doc = "The optimizer step (adam is priced as adamw; muon: torch.optim.Muon over the blocks' 2-D weights and AdamW "
                  "over the rest, DDP and PyTorch >= 2.9 only; adafactor: torch.optim.Adafactor's for-loop, DDP and PyTorch "
                  ">= 2.5 only; lion: Composer's DecoupledLionW (for_loop) or DeepSpeed's FusedLion (fused); adamw8bit: "
                  "bitsandbytes' AdamW8bit (blockwise 8-bit moments, a kernel and a torch.cuda.synchronize() per parameter), "
                  "DDP, and FSDP1 without use_orig_params; normuon: modded-nanogpt's NorMuon and DistAdam of 2025, which "
                  "reduce-scatter the gradients and all-gather the parameters themselves, an odd step of its record (both "
                  "step), the family nanogpt-2025 under ddp only: docs/configuration.md).",
           .since = kStepsim},
          dtype_key("master_dtype", "fp32", "The dtype of the parameters the optimizer updates (fp32 master weights)."),
          {.name = "optimizer_impl", .types = kString, .choices = {"fused", "foreach", "for_loop"},
           .default_text = "ZeRO: fused (DeepSpeed's FusedAdam); else the implementation's loop (llm_foundry: for_loop, "
                           "Composer's DecoupledAdamW; megatron: fused; hf, torchtitan: foreach)",
           .doc = "torch.optim's code path: fused=True, foreach=True (PyTorch's default on CUDA), foreach=False.",
           .since = "PyTorch 2.0"},
          {.name = "muon_impl", .types = kString, .choices = muon_impl_names(),
           .default_value = Json("torch"),
           .doc = "With optimizer muon, whose Muon: torch (torch.optim.Muon, PyTorch >= 2.9), modded_nanogpt "
                  "(KellerJordan/modded-nanogpt's of 2024-10-14: every rank orthogonalizes every block matrix, Newton-Schulz "
                  "compiled), modded_nanogpt_distributed (its of 2024-10-17: each rank a share of the matrices, then a bf16 "
                  "all_reduce of all updates); docs/workload-ops.md.",
           .since = kStepsim},
          {.name = "normuon_step", .types = kString, .choices = {"odd", "even"}, .default_value = Json("odd"),
           .doc = "With optimizer normuon, which of the record's two steps: odd (DistAdam and NorMuon step, DistAdam's "
                  "gradients added to the even step's) or even (NorMuon alone: no DistAdam collective); the record's "
                  "step_avg is their mean (docs/workload-ops.md).",
           .since = kStepsim},
          {.name = "clip_grad_norm", .types = kNumber | kNull, .min = 0, .min_exclusive = true,
           .default_text = "the implementation's loop (torchtitan: 1.0; the others: null)",
           .doc = "clip_grad_norm_(max_norm) before each step; null: no clipping. No effect under ZeRO: DeepSpeed computes the "
                  "norm and scales the gradients every step whatever its gradient_clipping.",
           .since = kStepsim},
          {.name = "allocator", .types = kObject, .objects = {"training.allocator"}, .doc = "PYTORCH_CUDA_ALLOC_CONF of the run.", .since = kStepsim},
          {.name = "torch_version", .types = kString,
           .default_text = "2.9; under ZeRO with a deepspeed_version up to 0.16.4, a release before 2.8 (that DeepSpeed's time)",
           .doc = "The PyTorch release of the run, for the rules that changed: before 2.8 ProcessGroupNCCL records its NCCL stream on "
                  "every collective's tensors (recordStream), so a tensor freed while its collective is queued is reused only once the "
                  "collective has run (pytorch#148590; a run of an older release with TORCH_NCCL_AVOID_RECORD_STREAMS=1 behaves as 2.8).",
           .since = kStepsim},
      }};
  return o;
}

const ConfigObject& allocator() {
  static const ConfigObject o{
      "training.allocator",
      "/training/allocator",
      "The CUDA caching allocator's options (PYTORCH_CUDA_ALLOC_CONF).",
      {
          {.name = "expandable_segments", .types = kBoolean, .default_value = Json(false), .doc = "Segments grow in place instead of new cudaMallocs.",
           .since = "PyTorch 2.1"},
          {.name = "max_split_size_mb", .types = kNull | kNumber, .min = 20, .max = 1048576, .min_exclusive = true, .default_value = Json(nullptr),
           .doc = "Blocks above this size (an integer MiB > 20) are never split; null: no limit.", .since = "PyTorch 1.10"},
      }};
  return o;
}

const ConfigObject& strategy_common() {
  static const ConfigObject o{
      "strategy",
      "/strategy",
      "The keys every strategy object holds.",
      {
          {.name = "framework", .types = kString, .choices = {"ddp", "fsdp1", "fsdp2", "zero"}, .doc = "The framework (required).", .since = kStepsim},
          {.name = "world_size", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxWorldSize),
           .default_text = "nodes x gpus_per_node", .doc = "Optional check: must equal the cluster's world size.", .since = kStepsim},
      }};
  return o;
}

std::vector<const ConfigObject*> objects() {
  return {&root(), &workload(), &model(), &hf_model(), &toy(), &toy_layer(), &cluster(), &training(), &allocator()};
}

}  // namespace experiment_keys
}  // namespace stepsim
