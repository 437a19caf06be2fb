#include "sim/config/foreign_keys.hpp"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace stepsim {

using Json = nlohmann::json;
using Use = ForeignKey::Use;

const ForeignKey* ForeignObject::find(const std::string& key) const {
  for (const auto& k : keys)
    if (k.key.name == key) return &k;
  return nullptr;
}

const ForeignKey& ForeignObject::at(const std::string& key) const {
  if (const ForeignKey* k = find(key)) return *k;
  throw std::logic_error("foreign config key \"" + key + "\" read but not declared in " + name + " (foreign_keys.cpp)");
}

const ForeignKey& ForeignObject::reading(const std::string& becomes) const {
  for (const auto& k : keys)
    if (k.use == Use::Read && k.becomes == becomes) return k;
  throw std::logic_error("no key of " + name + " is read as \"" + becomes + "\" (foreign_keys.cpp)");
}

namespace foreign_keys {

namespace {

constexpr double kMaxDim = static_cast<double>(std::int64_t{1} << 40);  // HfReader's bound on a dimension

ForeignKey read(ConfigKey k, std::string becomes) { return {std::move(k), Use::Read, std::move(becomes), std::nullopt, ""}; }

ForeignKey checked(ConfigKey k, std::optional<Json> neutral, std::string accepts) {
  return {std::move(k), Use::Checked, "", std::move(neutral), std::move(accepts)};
}

// Keys stepsim does not read still carry their JSON type (DeepSpeed's or transformers'), checked
// as the file is read: a value the framework itself would fail on is refused (issue 50, F15).
ForeignKey no_effect(ConfigKey k) { return {std::move(k), Use::NoEffect, "", std::nullopt, ""}; }
ForeignKey no_effect(std::string name, unsigned types, std::string doc, std::string since = "unknown") {
  return no_effect({.name = std::move(name), .types = types, .doc = std::move(doc), .since = std::move(since)});
}

ForeignKey not_modelled(ConfigKey k) { return {std::move(k), Use::NotModelled, "", std::nullopt, ""}; }
ForeignKey not_modelled(std::string name, unsigned types, std::string doc, std::string since = "unknown") {
  return not_modelled({.name = std::move(name), .types = types, .doc = std::move(doc), .since = std::move(since)});
}

// A model dimension of a config.json: a positive integer (at most 2^40).
ConfigKey dim(std::string name, std::string doc, std::string since, std::optional<Json> def = std::nullopt, std::string def_text = "") {
  ConfigKey k{.name = std::move(name), .types = kInteger, .min = 1, .max = kMaxDim, .doc = std::move(doc), .since = std::move(since)};
  k.default_value = std::move(def);
  k.default_text = std::move(def_text);
  return k;
}

ConfigKey flag(std::string name, bool def, std::string doc, std::string since) {
  return {.name = std::move(name), .types = kBoolean | kNull, .default_value = Json(def), .doc = std::move(doc), .since = std::move(since)};
}

// A DeepSpeed precision block: {"enabled": true | false | "auto"}.
ForeignKey precision(std::string name, std::string doc, std::string since) {
  return read({.name = std::move(name), .types = kObject, .doc = std::move(doc), .since = std::move(since)}, "workload.dtype");
}

// A zero_optimization key with the zero strategy's own name (its type and range are those of
// strategy.zero); `auto_rule` says how the HF Trainer resolves "auto" ("": "auto" is refused).
ForeignKey zero_key(std::string name, std::string doc, std::string auto_rule = "") {
  ConfigKey k{.name = name, .doc = std::move(doc), .since = "as strategy.zero"};
  if (!auto_rule.empty()) {
    k.types = kString;
    k.choices = {"auto"};
    k.doc += " \"auto\": " + auto_rule + " (transformers integrations/deepspeed.py, trainer_config_finalize).";
  }
  return read(std::move(k), "strategy." + name);
}

ConfigKey nullable(ConfigKey k) {
  k.types |= kNull;
  return k;
}

}  // namespace

const ForeignObject& deepspeed() {
  static const ForeignObject o{
      "deepspeed",
      "DeepSpeed config",
      "/",
      "The file `\"strategy\": {\"deepspeed_config\": ...}` names; its keys become the experiment's (framework zero).",
      ForeignObject::Unlisted::Rejected,
      {
          read({.name = "train_batch_size", .types = kInteger | kString, .choices = {"auto"}, .min = 1,
                .doc = "Global batch = micro batch x accumulation x world size; any two of the three determine the third, "
                       "alone it means accumulation 1 (runtime/config.py _set_batch_related_parameters).",
                .since = "unknown"},
               "workload.micro_batch, training.grad_accum"),
          read({.name = "train_micro_batch_size_per_gpu", .types = kInteger | kString, .choices = {"auto"}, .min = 1,
                .doc = "Sequences per micro-batch per rank; \"auto\" takes workload.micro_batch (HF Trainer).", .since = "unknown"},
               "workload.micro_batch"),
          read({.name = "gradient_accumulation_steps", .types = kInteger | kString, .choices = {"auto"}, .min = 1,
                .doc = "Micro-batches per optimizer step; \"auto\" takes training.grad_accum (HF Trainer).", .since = "unknown"},
               "training.grad_accum"),
          read({.name = "zero_optimization", .types = kObject, .objects = {"deepspeed.zero_optimization"},
                .doc = "The ZeRO stage and its options (required: a stage).", .since = "DeepSpeed 0.1"},
               "strategy (framework zero)"),
          precision("bf16", "{\"enabled\": true | false | \"auto\"}: bf16 compute; \"auto\" keeps workload.dtype.", "unknown"),
          precision("bfloat16", "The older spelling of bf16 (DeepSpeed-Chat writes it); not both.", "unknown"),
          precision("fp16", "{\"enabled\": true | false | \"auto\"}: fp16 compute; not with bf16 enabled.", "unknown"),
          read({.name = "optimizer", .types = kObject, .doc = "{\"type\": Adam, AdamW, FusedAdam, Lion or SGD, ...}; other types are exit 2.",
                .since = "unknown"},
               "training.optimizer"),
          read({.name = "communication_data_type", .types = kString | kNull, .doc = "The dtype gradients are reduced in; null: unset.",
                .since = "unknown"},
               "strategy.communication_data_type"),
          read({.name = "data_types", .types = kObject, .doc = "{\"grad_accum_dtype\": ...} only; other keys are exit 2.", .since = "unknown"},
               "strategy.grad_accum_dtype"),
          checked({.name = "hybrid_engine", .types = kObject | kNull, .doc = "DeepSpeed-Chat's RLHF inference engine.", .since = "unknown"},
                  std::nullopt, "\"enabled\": false (or absent)"),
          checked({.name = "amp", .types = kObject | kNull, .doc = "NVIDIA Apex AMP.", .since = "unknown"}, std::nullopt,
                  "\"enabled\": false (or absent)"),
          checked({.name = "activation_checkpointing", .types = kObject | kNull,
                   .doc = "DeepSpeed's activation checkpointing (set workload.activation_checkpointing instead).", .since = "unknown"},
                  std::nullopt, "partition_activations and cpu_checkpointing false (or absent)"),
          no_effect({.name = "gradient_clipping", .types = kNumber | kString, .choices = {"auto"},
                     .doc = "Clip the gradient norm: DeepSpeed computes the norm and multiplies the fp32 gradient partition by the "
                    "combined scale every step whatever the limit (unscale_and_clip_grads), and both are modelled. \"auto\": the HF "
                            "Trainer's max_grad_norm.",
                     .since = "unknown"}),
          not_modelled("prescale_gradients", kBoolean, "true: divide gradients before the reduction instead of after (one elementwise pass moves)."),
          not_modelled({.name = "gradient_predivide_factor", .types = kNumber, .min = 0, .min_exclusive = true,
                        .doc = "Part of the averaging division done before the reduction (an elementwise pass).", .since = "unknown"}),
          not_modelled("wall_clock_breakdown", kBoolean,
                       "true: DeepSpeed's timers around forward, backward and step (CUDA events or device synchronizations, "
                       "by release)."),
          not_modelled("memory_breakdown", kBoolean, "true: DeepSpeed prints memory usage during the step (host time)."),
          no_effect({.name = "steps_per_print", .types = kInteger | kNull, .min = 1,
                     .doc = "Logging (DeepSpeed takes global_steps modulo it).", .since = "unknown"}),
          no_effect("dump_state", kBoolean, "Prints the engine's state at start."),
          read({.name = "tensorboard", .types = kObject,
                .doc = "{\"enabled\": true, ...}: DeepSpeed's monitor: at each accumulation boundary rank 0 reads the loss back and "
                       "writes it before the backward (runtime/engine.py v0.12.6 l.1934-1944, v0.16.5 l.2104-2115; "
                       "monitor/tensorboard.py write_events flushes), for host.monitor_write_us; its write at engine.step is part "
                       "of host.step_end_us.",
                .since = "DeepSpeed 0.6.6 (#2013)"},
               "strategy.monitor"),
          read({.name = "wandb", .types = kObject, .doc = "{\"enabled\": true, ...}: as tensorboard.", .since = "DeepSpeed 0.6.6 (#2013)"},
               "strategy.monitor"),
          read({.name = "csv_monitor", .types = kObject, .doc = "{\"enabled\": true, ...}: as tensorboard.", .since = "DeepSpeed 0.6.6 (#2013)"},
               "strategy.monitor"),
          read({.name = "comet", .types = kObject, .doc = "{\"enabled\": true, ...}: as tensorboard.", .since = "unknown"},
               "strategy.monitor"),
          no_effect("monitor_config", kObject | kNull, "Not read by DeepSpeed: runtime/config.py builds its MonitorConfig from the blocks above."),
          no_effect("timers", kObject, "Throughput timer settings (logging)."),
          no_effect("flops_profiler", kObject, "Profiles one step (profile_step), not the steady state."),
          no_effect("scheduler", kObject | kNull, "The learning-rate schedule: host arithmetic per step."),
          no_effect({.name = "seed", .types = kInteger, .min = 0, .doc = "Random seed.", .since = "unknown"}),
          no_effect("checkpoint", kObject, "Checkpoint saving and loading."),
          no_effect("zero_allow_untested_optimizer", kBoolean, "Allows a client optimizer with ZeRO; the optimizer is training.optimizer."),
          no_effect("zero_force_ds_cpu_optimizer", kBoolean, "Only with CPU offload (which is refused)."),
          no_effect("sparse_gradients", kBoolean, "Sparse all-reduce for sparse embedding gradients; the models stepsim builds have dense ones."),
          no_effect("disable_allgather", kBoolean, "Kept from stepsim's first list; its effect on ZeRO 1-3 is not re-verified."),
      }};
  return o;
}

const ForeignObject& deepspeed_zero() {
  static const ForeignObject o{
      "deepspeed.zero_optimization",
      "DeepSpeed config",
      "/zero_optimization",
      "ZeRO's options: most become the zero strategy's keys of the same name.",
      ForeignObject::Unlisted::Rejected,
      {
          zero_key("stage", "The ZeRO stage (required)."),
          zero_key("reduce_bucket_size", "Elements per gradient (IPG) bucket.", "hidden^2"),
          zero_key("allgather_bucket_size", "Elements per post-step all-gather."),
          zero_key("overlap_comm", "Reduce gradients on a side stream."),
          zero_key("contiguous_gradients", "Copy reduced gradients into one contiguous buffer."),
          zero_key("reduce_scatter", "Reduce by reduce-scatter (else all-reduce)."),
          zero_key("use_multi_rank_bucket_allreduce", "One all-reduce per IPG bucket."),
          zero_key("sub_group_size", "Stage 3: optimizer step sub-group elements."),
          zero_key("stage3_prefetch_bucket_size", "Stage 3: parameter elements prefetched ahead.", "0.9 x hidden^2"),
          zero_key("prefetch_bucket_size", "Alias of stage3_prefetch_bucket_size.", "0.9 x hidden^2"),
          zero_key("stage3_max_live_parameters", "Stage 3: gathered parameter elements kept live."),
          zero_key("max_live_parameters", "Alias of stage3_max_live_parameters."),
          zero_key("stage3_max_reuse_distance", "Stage 3: a parameter reused within this distance is not released."),
          zero_key("max_reuse_distance", "Alias of stage3_max_reuse_distance."),
          zero_key("stage3_param_persistence_threshold", "Stage 3: parameters this small stay gathered.", "10 x hidden"),
          zero_key("param_persistence_threshold", "Alias of stage3_param_persistence_threshold.", "10 x hidden"),
          zero_key("stage3_model_persistence_threshold", "Stage 3: at most this many persistent elements."),
          zero_key("model_persistence_threshold", "Alias of stage3_model_persistence_threshold."),
          checked({.name = "offload_param", .types = kObject | kNull, .doc = "Stage 3 parameter offload to CPU/NVMe.", .since = "unknown"},
                  std::nullopt, "null or {\"device\": \"none\", ...}: offload is not modelled"),
          checked({.name = "offload_optimizer", .types = kObject | kNull, .doc = "Optimizer state offload to CPU/NVMe.", .since = "unknown"},
                  std::nullopt, "null or {\"device\": \"none\", ...}: offload is not modelled"),
          checked({.name = "allgather_partitions", .types = kBoolean, .default_value = Json(true),
                   .doc = "Stages 1/2: all-gather the updated partitions (false: broadcasts).", .since = "unknown"},
                  Json(true), "true"),
          checked({.name = "legacy_stage1", .types = kBoolean, .default_value = Json(false), .doc = "The old stage 1 optimizer.",
                   .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "cpu_offload", .types = kBoolean, .default_value = Json(false), .doc = "The old spelling of optimizer offload.",
                   .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "cpu_offload_param", .types = kBoolean, .default_value = Json(false),
                   .doc = "The old spelling of parameter offload.", .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "zero_quantized_weights", .types = kBoolean, .default_value = Json(false), .doc = "ZeRO++ qwZ.",
                   .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "zero_quantized_gradients", .types = kBoolean, .default_value = Json(false), .doc = "ZeRO++ qgZ.",
                   .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "zero_quantized_nontrainable_weights", .types = kBoolean, .default_value = Json(false),
                   .doc = "ZeRO++ quantized frozen weights.", .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "zeropp_loco_param", .types = kBoolean, .default_value = Json(false), .doc = "ZeRO++ LoCo.", .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "use_all_reduce_for_fetch_params", .types = kBoolean, .default_value = Json(false),
                   .doc = "Stage 3: fetch parameters by all-reduce.", .since = "unknown"},
                  Json(false), "false"),
          checked({.name = "zero_hpz_partition_size", .types = kInteger, .default_value = Json(1), .doc = "ZeRO++ hpZ secondary partition.",
                   .since = "unknown"},
                  Json(1), "1"),
          checked({.name = "mics_shard_size", .types = kInteger, .max = 0, .default_value = Json(-1), .doc = "MiCS shard size.",
                   .since = "unknown"},
                  std::nullopt, "an integer <= 0 (MiCS off)"),
          checked({.name = "module_granularity_threshold", .types = kInteger, .default_value = Json(0),
                   .doc = "Stage 3: fetch small modules as one unit.", .since = "unknown"},
                  Json(0), "0"),
          not_modelled("memory_efficient_linear", kBoolean,
                       "Stage 3: nn.Linear through LinearFunctionForZeroStage3 (DeepSpeed's default true is what stepsim "
                       "builds; false is not modelled); no effect at stages 1/2."),
          not_modelled("round_robin_gradients", kBoolean,
                       "Stages 1/2: reorders parameters across the ranks' partitions (meant for CPU offload); stepsim "
                       "partitions in model order."),
          no_effect("load_from_fp32_weights", kBoolean, "Checkpoint loading."),
          no_effect("elastic_checkpoint", kBoolean, "Checkpoint format."),
          no_effect("stage3_gather_16bit_weights_on_model_save", kBoolean, "Checkpoint saving."),
          no_effect("stage3_gather_fp16_weights_on_model_save", kBoolean, "Checkpoint saving (old spelling)."),
          no_effect("gather_16bit_weights_on_model_save", kBoolean, "Checkpoint saving."),
          no_effect("pipeline_loading_checkpoint", kBoolean, "Checkpoint loading."),
          no_effect("ignore_unused_parameters", kBoolean, "Only with unused parameters; the models stepsim builds use every parameter."),
          no_effect("override_module_apply", kBoolean, "Stage 3: module.apply at initialisation."),
          no_effect("log_trace_cache_warnings", kBoolean, "Logging."),
          no_effect("cpu_offload_use_pin_memory", kBoolean, "Only with CPU offload (which is refused)."),
      }};
  return o;
}

namespace {

const std::string kLlama = "transformers 4.28 (Llama), 4.34 (Mistral), 4.37 (Qwen2)";

// Keys that make a config.json describe a model stepsim does not build, whatever its
// model_type: transformers' llama (gpt2, ...) classes ignore them and build the dense model, but
// a file that has them was written for a mixture of experts (Mixtral's num_local_experts,
// Qwen2-MoE's num_experts, DeepSeek's n_routed_experts, ...), for custom code, or for a quantized
// checkpoint, so pricing the dense model would answer another question (issue 50, F22). Each is
// accepted only as null or absent; the message says how to get the dense model.
std::vector<ForeignKey> unmodelled_structure() {
  std::vector<ForeignKey> keys;
  const std::string moe = "null or absent (a mixture of experts is not modelled; this model_type's transformers class ignores "
                          "the key and builds the dense model: remove the key to predict that)";
  for (const auto& [name, doc] : std::vector<std::pair<std::string, std::string>>{
           {"num_local_experts", "Experts per MoE layer (Mixtral)."},
           {"num_experts", "Experts per MoE layer (Qwen2-MoE, OLMoE)."},
           {"n_routed_experts", "Routed experts per MoE layer (DeepSeek)."},
           {"n_shared_experts", "Shared experts per MoE layer (DeepSeek)."},
           {"num_experts_per_tok", "Experts each token is routed to."},
           {"moe_intermediate_size", "An expert's MLP inner size."},
           {"shared_expert_intermediate_size", "The shared expert's MLP inner size (Qwen2-MoE)."}})
    keys.push_back({{.name = name, .types = kInteger | kNull, .doc = doc, .since = "unknown"}, Use::Checked, "", Json(), moe});
  keys.push_back({{.name = "quantization_config", .types = kObject | kNull,
                   .doc = "A quantized checkpoint (bitsandbytes, GPTQ, AWQ...): its weights train frozen, with adapters (QLoRA).",
                   .since = "transformers 4.20 (bitsandbytes)"},
                  Use::Checked, "", Json(),
                  "null or absent (training a quantized checkpoint, frozen weights with adapters, is not modelled)"});
  return keys;
}

ForeignObject hf_object(std::string name, std::string doc, std::vector<ForeignKey> keys) {
  for (auto& k : unmodelled_structure()) keys.push_back(std::move(k));
  return {std::move(name), "Hugging Face config.json", "/", std::move(doc), ForeignObject::Unlisted::Ignored, std::move(keys)};
}

ForeignKey name_or_path() {
  return read({.name = "_name_or_path", .types = kString | kNull,
               .doc = "The model's name in reports (default: \"MODEL_TYPE (FILE)\"); the experiment's model.name overrides it.",
               .since = "unknown"},
              "workload name");
}

ForeignKey model_type(std::vector<std::string> values) {
  return read({.name = "model_type", .types = kString, .choices = std::move(values),
               .doc = "Picks this table (llama, mistral, qwen2, opt, gpt2, gpt_neox, mpt); any other is exit 2.", .since = "unknown"},
              "the family");
}

ForeignKey tied(bool def, std::string since) {
  return read(flag("tie_word_embeddings", def, "The output head shares the embedding's weight.", std::move(since)), "tied_embeddings");
}

const ForeignObject& hf_llama() {
  static const ForeignObject o = hf_object(
      "hf.llama", "model_type llama, mistral or qwen2: a pre-norm decoder with a SwiGLU MLP and rotary positions.",
      {
          model_type({"llama", "mistral", "qwen2"}),
          name_or_path(),
          read(dim("hidden_size", "Hidden size.", kLlama), "hidden"),
          read(dim("num_hidden_layers", "Decoder layers.", kLlama), "layers"),
          read(dim("num_attention_heads", "Attention heads.", kLlama), "heads"),
          read(dim("num_key_value_heads", "Key/value heads (grouped-query attention).", "transformers 4.31 (Llama 2); Mistral, Qwen2 from the start",
                   std::nullopt, "num_attention_heads"),
               "kv_heads"),
          read(dim("intermediate_size", "MLP inner size.", kLlama), "ffn"),
          read(dim("vocab_size", "Vocabulary.", kLlama), "vocab"),
          tied(false, kLlama),
          checked({.name = "hidden_act", .types = kString | kNull, .default_value = Json("silu"), .doc = "The MLP activation.", .since = kLlama},
                  Json("silu"), "\"silu\" (the SwiGLU MLP stepsim models)"),
          checked(flag("attention_bias", false, "Biases on q/k/v/o projections.", "unknown"), Json(false), "false (attention biases are not modelled)"),
          checked(flag("mlp_bias", false, "Biases on the MLP projections.", "unknown"), Json(false), "false (MLP biases are not modelled)"),
          checked(nullable(dim("head_dim", "A head dimension of its own.", "unknown", std::nullopt, "hidden_size / num_attention_heads")), std::nullopt,
                  "null or hidden_size / num_attention_heads"),
          checked(nullable(dim("sliding_window",
                               "Sliding-window attention span where it applies: every layer of mistral; for qwen2 only with "
                               "use_sliding_window, on layers >= max_window_layers. Absent: 4096 (MistralConfig, Qwen2Config "
                               "configuration_qwen2.py:75); null: none.",
                               "transformers 4.34 (Mistral), 4.37 (Qwen2)", std::nullopt, "4096 (mistral, qwen2); none (llama)")),
                  std::nullopt, "null or at least the experiment's seq_len where it applies (a shorter window is not modelled)"),
          read(flag("use_sliding_window", false,
                    "Qwen2 only: whether sliding_window applies; default false as in transformers' Qwen2Config "
                    "(models/qwen2/configuration_qwen2.py:74, commit 008e5743; __post_init__ :84 drops the window "
                    "unless it). Mistral and Llama do not read it.",
                    "transformers 4.37 (Qwen2)"),
               "whether sliding_window applies (qwen2)"),
          read({.name = "max_window_layers", .types = kInteger | kNull, .min = 0, .max = kMaxDim, .default_value = Json(28),
                .doc = "Qwen2 only: the first this many layers use full attention, the rest the window "
                       "(configuration_qwen2.py:76, :88-94).",
                .since = "transformers 4.37 (Qwen2)"},
               "whether sliding_window applies (qwen2)"),
          read({.name = "layer_types", .types = kArray | kNull, .items = "string",
                .doc = "Qwen2 only: per layer \"full_attention\" or \"sliding_attention\"; when written it decides which "
                       "layers slide instead of max_window_layers (configuration_qwen2.py:88).",
                .since = "unknown"},
               "whether sliding_window applies (qwen2)"),
          not_modelled({.name = "pretraining_tp", .types = kInteger | kNull, .min = 1, .max = kMaxDim,
                        .doc = "> 1: HF splits each projection into this many matmuls (same FLOPs, more kernels); stepsim builds one.",
                        .since = "transformers 4.31 (Llama 2)"}),
          not_modelled({.name = "attention_dropout", .types = kNumber, .min = 0, .max = 1,
                        .doc = "Not read: the experiment's workload.attention_dropout applies.", .since = "unknown"}),
          no_effect("torch_dtype", kString | kNull, "The checkpoint's dtype; the experiment's workload.dtype is the compute dtype."),
      });
  return o;
}

const ForeignObject& hf_opt() {
  static const ForeignObject o = hf_object(
      "hf.opt", "model_type opt: Meta's OPT (learned positions, ReLU MLP).",
      {
          model_type({"opt"}),
          name_or_path(),
          read(dim("hidden_size", "Hidden size.", "transformers 4.19 (OPTConfig)"), "hidden"),
          read(dim("num_hidden_layers", "Decoder layers.", "transformers 4.19 (OPTConfig)"), "layers"),
          read(dim("num_attention_heads", "Attention heads.", "transformers 4.19 (OPTConfig)"), "heads"),
          read(dim("ffn_dim", "MLP inner size.", "transformers 4.19 (OPTConfig)"), "ffn"),
          read(dim("vocab_size", "Vocabulary.", "transformers 4.19 (OPTConfig)"), "vocab"),
          read(dim("max_position_embeddings",
                   "Learned positions; the table has 2 more rows (OPTLearnedPositionalEmbedding's offset: 2048 -> 2050).",
                   "transformers 4.19 (OPTConfig)"),
               "max_positions"),
          tied(true, "transformers 4.19 (OPTConfig)"),
          checked(dim("word_embed_proj_dim", "The embedding's own width, projected to hidden_size (opt-350m).", "transformers 4.19 (OPTConfig)",
                      std::nullopt, "hidden_size"),
                  std::nullopt, "hidden_size (OPT's input/output projections are not modelled)"),
          checked(flag("do_layer_norm_before", true, "Pre-LayerNorm (false: post-LayerNorm, opt-350m).", "transformers 4.19 (OPTConfig)"),
                  Json(true), "true (post-LayerNorm OPT is not modelled)"),
          checked({.name = "activation_function", .types = kString | kNull, .default_value = Json("relu"), .doc = "The MLP activation.",
                   .since = "transformers 4.19 (OPTConfig)"},
                  std::nullopt, "\"relu\" or \"gelu\""),
          not_modelled("enable_bias", kBoolean, "false: OPT without linear biases (a fraction of a percent of the parameters); stepsim builds them."),
          no_effect("torch_dtype", kString | kNull, "The checkpoint's dtype; the experiment's workload.dtype is the compute dtype."),
      });
  return o;
}

const ForeignObject& hf_gpt2() {
  static const ForeignObject o = hf_object(
      "hf.gpt2", "model_type gpt2: GPT-2 (learned positions, GELU MLP).",
      {
          model_type({"gpt2"}),
          name_or_path(),
          read(dim("n_embd", "Hidden size.", "unknown"), "hidden"),
          read(dim("n_layer", "Decoder layers.", "unknown"), "layers"),
          read(dim("n_head", "Attention heads.", "unknown"), "heads"),
          read(nullable(dim("n_inner", "MLP inner size; null: 4 x n_embd.", "unknown", std::nullopt, "4 x n_embd")), "ffn"),
          read(dim("vocab_size", "Vocabulary.", "unknown"), "vocab"),
          read(dim("n_positions", "Learned position table rows.", "unknown"), "max_positions"),
          tied(true, "unknown"),
          not_modelled("reorder_and_upcast_attn", kBoolean, "true: eager attention's scores in fp32 (more bytes); stepsim's attention kernels are workload.attention's."),
          no_effect("torch_dtype", kString | kNull, "The checkpoint's dtype; the experiment's workload.dtype is the compute dtype."),
      });
  return o;
}

const ForeignObject& hf_neox() {
  static const ForeignObject o = hf_object(
      "hf.gpt_neox", "model_type gpt_neox: GPT-NeoX / Pythia (LayerNorm with bias, biased linears, GELU MLP, rotary positions).",
      {
          model_type({"gpt_neox"}),
          name_or_path(),
          read(dim("hidden_size", "Hidden size.", "unknown"), "hidden"),
          read(dim("num_hidden_layers", "Decoder layers.", "unknown"), "layers"),
          read(dim("num_attention_heads", "Attention heads.", "unknown"), "heads"),
          read(dim("intermediate_size", "MLP inner size.", "unknown"), "ffn"),
          read(dim("vocab_size", "Vocabulary.", "unknown"), "vocab"),
          tied(false, "unknown"),
          no_effect("torch_dtype", kString | kNull, "The checkpoint's dtype; the experiment's workload.dtype is the compute dtype."),
      });
  return o;
}

const ForeignObject& hf_mpt() {
  static const ForeignObject o = hf_object(
      "hf.mpt", "model_type mpt: MosaicML MPT as llm-foundry's benchmarks ran it (MPTConfig defaults of 2023; embeddings tied).",
      {
          model_type({"mpt"}),
          name_or_path(),
          read(dim("d_model", "Hidden size.", "unknown"), "hidden"),
          read(dim("n_layers", "Decoder layers.", "unknown"), "layers"),
          read(dim("n_heads", "Attention heads (and key/value heads).", "unknown"), "heads"),
          read(dim("expansion_ratio", "MLP inner size = expansion_ratio x d_model.", "unknown", Json(4)), "ffn"),
          read(dim("vocab_size", "Vocabulary.", "unknown"), "vocab"),
          checked(flag("no_bias", false, "Bias-free linears and norms (the MPT-7B release).", "unknown"), Json(false),
                  "false (bias-free MPT is not modelled yet)"),
          checked(flag("learned_pos_emb", true, "A learned position table (false: ALiBi only).", "unknown"), Json(true),
                  "true (ALiBi-only MPT is not modelled yet)"),
          checked({.name = "attn_config", .types = kObject | kNull,
                   .doc = "Attention options; only alibi is read (attn_impl and the rest are not: workload.attention picks the kernels).",
                   .since = "unknown"},
                  std::nullopt,
                  "alibi false or absent (ALiBi MPT is not modelled yet)"),
          no_effect("torch_dtype", kString | kNull, "The checkpoint's dtype; the experiment's workload.dtype is the compute dtype."),
      });
  return o;
}

}  // namespace

const ForeignObject* hf_family(const std::string& type) {
  if (type == "llama" || type == "mistral" || type == "qwen2") return &hf_llama();
  if (type == "opt") return &hf_opt();
  if (type == "gpt2") return &hf_gpt2();
  if (type == "gpt_neox") return &hf_neox();
  if (type == "mpt") return &hf_mpt();
  return nullptr;
}

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types{"llama", "mistral", "qwen2", "opt", "gpt2", "gpt_neox", "mpt"};
  return types;
}

std::vector<const ForeignObject*> objects() {
  std::vector<const ForeignObject*> out{&deepspeed(), &deepspeed_zero()};
  for (const char* t : {"llama", "opt", "gpt2", "gpt_neox", "mpt"}) out.push_back(hf_family(t));
  return out;
}

}  // namespace foreign_keys

namespace {

std::string type_text(const ForeignKey& k) {
  std::string t = k.key.types ? describe_type(k.key) : "";
  if (k.becomes.rfind("strategy.", 0) == 0 && k.key.since == "as strategy.zero")
    return fmt::format("as `strategy.zero` `{}`{}", k.key.name, t.empty() ? "" : " | " + t);
  return t.empty() ? "any (not read)" : t;
}

std::string use_text(const ForeignKey& k) {
  switch (k.use) {
    case Use::Read: return "read: " + k.becomes;
    case Use::Checked: return "checked: " + k.accepts;
    case Use::NoEffect: return "accepted, no effect";
    case Use::NotModelled: return "accepted, **not modelled**";
  }
  return "";
}

}  // namespace

std::string foreign_markdown_reference() {
  std::ostringstream out;
  out << "# Foreign configuration keys\n\n"
         "<!-- Generated from the declaration in sim/config/foreign_keys.cpp by `stepsim schema --foreign`;\n"
         "     do not edit. A unit test checks this file equals the output: after changing the declaration run\n"
         "     `stepsim schema --foreign > docs/configuration-foreign-keys.md`. -->\n\n"
         "Every key stepsim reads from a DeepSpeed config JSON (`\"strategy\": {\"deepspeed_config\": ...}`) and\n"
         "from a Hugging Face `config.json` (`\"workload\": {\"model\": {\"hf_config\": ...}}`), one table per\n"
         "JSON object; docs/configuration-foreign.md explains the translation. The \"stepsim\" column says\n"
         "what stepsim does with the key:\n\n"
         "- **read**: translated into the experiment key or model dimension named;\n"
         "- **checked**: accepted only at the values named, any other value is exit 2 naming the file and key;\n"
         "- **accepted, no effect**: not read, and it does not change one step's schedule or GPU memory;\n"
         "- **accepted, not modelled**: not read although it can change the step; the meaning says how.\n\n"
         "Every key's value must have the type the table gives, read or not (a value the framework itself\n"
         "would fail on, such as `\"gradient_clipping\": \"banana\"`, is exit 2 naming the file and key).\n"
         "A key a table does not list: in a DeepSpeed config it is exit 2 naming the file and the key (any\n"
         "DeepSpeed option may change the schedule or memory); in a config.json it is ignored (the file holds\n"
         "token ids, RoPE and initialisation settings and more that do not change a step's cost; the keys\n"
         "that do are listed). \"Since\" is the DeepSpeed or transformers release that introduced the key\n"
         "(\"unknown\": not traced yet; \"as strategy.zero\": see that table in configuration-keys.md).\n";
  for (const ForeignObject* o : foreign_keys::objects()) {
    out << fmt::format("\n## `{}`\n\n{}, at `{}`: {} Keys not listed: {}.\n\n", o->name, o->file, o->path, o->doc,
                       o->unlisted == ForeignObject::Unlisted::Rejected ? "exit 2" : "ignored");
    out << "| key | type | default | since | stepsim | meaning |\n|---|---|---|---|---|---|\n";
    for (const auto& k : o->keys)
      out << fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", k.key.name, markdown_cell(type_text(k)), markdown_cell(describe_default(k.key)),
                         markdown_cell(k.key.since), markdown_cell(use_text(k)), markdown_cell(k.key.doc));
  }
  return out.str();
}

}  // namespace stepsim
