#include "sim/config/foreign_configs.hpp"

#include <cctype>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace stepsim {

namespace fs = std::filesystem;

namespace {

// ---- Hugging Face config.json -------------------------------------------------------------

class HfReader {
 public:
  HfReader(const Json& doc, std::string file) : doc_(doc), file_(std::move(file)) {}

  std::int64_t positive(const std::string& key) const {
    if (!doc_.contains(key)) missing(key);
    return positive_value(key);
  }
  std::int64_t positive(const std::string& key, std::int64_t fallback) const {
    if (!doc_.contains(key) || doc_[key].is_null()) return fallback;
    return positive_value(key);
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!doc_.contains(key) || doc_[key].is_null()) return fallback;
    if (!doc_[key].is_boolean()) fail(key, "true or false");
    return doc_[key].get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!doc_.contains(key) || doc_[key].is_null()) return fallback;
    if (!doc_[key].is_string()) fail(key, "a string");
    return doc_[key].get<std::string>();
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    throw_input_error(file_, "/" + key, doc_.contains(key) ? doc_[key] : Json(), expected);
  }
  [[noreturn]] void missing(const std::string& key) const {
    throw InputError(fmt::format("{}: /: missing required key \"{}\"", file_, key));
  }
  const Json& doc() const { return doc_; }

 private:
  std::int64_t positive_value(const std::string& key) const {
    const Json& v = doc_[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 || v.get<std::int64_t>() > (std::int64_t{1} << 40))
      fail(key, "a positive integer");
    return v.get<std::int64_t>();
  }
  const Json& doc_;
  std::string file_;
};

// The keys a family names its dimensions by (its HF configuration class's attributes); an empty
// kv_heads key means multi-head attention.
struct DimKeys {
  const char* family;
  const char* hidden;
  const char* layers;
  const char* heads;
  const char* kv_heads;
  const char* ffn;
  const char* vocab;
  bool tied_by_default;
  bool ffn_defaults_to_4h = false;  // GPT-2: n_inner null means 4 x n_embd
};

ModelDims read_dims(const HfReader& r, const DimKeys& k) {
  ModelDims d;
  d.family = k.family;
  d.hidden = r.positive(k.hidden);
  d.layers = r.positive(k.layers);
  d.heads = r.positive(k.heads);
  d.kv_heads = *k.kv_heads ? r.positive(k.kv_heads, d.heads) : d.heads;
  d.ffn = k.ffn_defaults_to_4h ? r.positive(k.ffn, 4 * d.hidden) : r.positive(k.ffn);
  d.vocab = r.positive(k.vocab);
  d.tied_embeddings = r.boolean("tie_word_embeddings", k.tied_by_default);
  return d;
}

ModelDims llama_like(const HfReader& r, const std::string& model_type, std::int64_t seq_len) {
  ModelDims d = read_dims(r, {"llama", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                              "intermediate_size", "vocab_size", false});
  if (r.string("hidden_act", "silu") != "silu") r.fail("hidden_act", "\"silu\" (the SwiGLU MLP stepsim models for " + model_type + ")");
  if (r.boolean("attention_bias", false)) r.fail("attention_bias", "false (attention biases are not modelled)");
  if (r.boolean("mlp_bias", false)) r.fail("mlp_bias", "false (MLP biases are not modelled)");
  if (r.doc().contains("head_dim") && !r.doc()["head_dim"].is_null() && r.positive("head_dim") * d.heads != d.hidden)
    r.fail("head_dim", fmt::format("hidden_size / num_attention_heads = {} (a head dimension of its own is not modelled)",
                                   d.hidden / d.heads));
  if (r.doc().contains("sliding_window") && !r.doc()["sliding_window"].is_null() &&
      (!r.doc().contains("use_sliding_window") || r.boolean("use_sliding_window", true)) &&
      r.positive("sliding_window") < seq_len)
    r.fail("sliding_window", fmt::format("null or at least the sequence length {} (sliding-window attention over a "
                                         "shorter window is not modelled)", seq_len));
  return d;
}

ModelDims opt_dims(const HfReader& r) {
  ModelDims d = read_dims(r, {"opt", "hidden_size", "num_hidden_layers", "num_attention_heads", "", "ffn_dim", "vocab_size", true});
  // OPTLearnedPositionalEmbedding keeps 2 extra rows (its offset): 2048 -> 2050.
  d.max_positions = r.positive("max_position_embeddings") + 2;
  if (r.positive("word_embed_proj_dim", d.hidden) != d.hidden)
    r.fail("word_embed_proj_dim", fmt::format("hidden_size ({}): OPT's input/output projections are not modelled", d.hidden));
  if (!r.boolean("do_layer_norm_before", true)) r.fail("do_layer_norm_before", "true (post-LayerNorm OPT is not modelled)");
  std::string act = r.string("activation_function", "relu");
  if (act != "relu" && act != "gelu") r.fail("activation_function", "\"relu\" or \"gelu\"");
  return d;
}

ModelDims gpt2_dims(const HfReader& r) {
  ModelDims d = read_dims(r, {"gpt", "n_embd", "n_layer", "n_head", "", "n_inner", "vocab_size", true, true});
  d.max_positions = r.positive("n_positions");
  return d;
}

// GPT-NeoX: LayerNorm with bias, biased linears, GELU MLP, rotary positions (no table).
ModelDims neox_dims(const HfReader& r) {
  return read_dims(r, {"gpt", "hidden_size", "num_hidden_layers", "num_attention_heads", "", "intermediate_size",
                       "vocab_size", false});
}

ModelDims mpt_dims(const HfReader& r) {
  ModelDims d;
  d.family = "mpt";
  d.hidden = r.positive("d_model");
  d.layers = r.positive("n_layers");
  d.heads = d.kv_heads = r.positive("n_heads");
  d.ffn = r.positive("expansion_ratio", 4) * d.hidden;
  d.vocab = r.positive("vocab_size");
  d.tied_embeddings = true;
  // stepsim's MPT is the one llm-foundry's benchmarks ran (MPTConfig defaults of 2023).
  if (r.boolean("no_bias", false)) r.fail("no_bias", "false (bias-free MPT, as in the MPT-7B release, is not modelled yet)");
  if (!r.boolean("learned_pos_emb", true)) r.fail("learned_pos_emb", "true (ALiBi-only MPT is not modelled yet)");
  const Json& attn = r.doc().contains("attn_config") ? r.doc()["attn_config"] : Json();
  if (attn.is_object() && attn.value("alibi", false)) r.fail("attn_config", "attn_config.alibi false (ALiBi MPT is not modelled yet)");
  return d;
}

}  // namespace

ModelDims dims_from_hf_config(const fs::path& file, std::string& model_name, std::int64_t seq_len) {
  Json doc = read_json_file(file);
  if (!doc.is_object()) throw_input_error(file.string(), "", doc, "a Hugging Face config.json object");
  HfReader r(doc, file.string());
  std::string type = r.string("model_type", "");
  ModelDims d;
  if (type == "llama" || type == "mistral" || type == "qwen2") d = llama_like(r, type, seq_len);
  else if (type == "opt") d = opt_dims(r);
  else if (type == "gpt2") d = gpt2_dims(r);
  else if (type == "gpt_neox") d = neox_dims(r);
  else if (type == "mpt") d = mpt_dims(r);
  else r.fail("model_type", "a model family stepsim models: llama, mistral, qwen2, opt, gpt2, gpt_neox, mpt");
  if (d.hidden % d.heads != 0) r.fail("num_attention_heads", fmt::format("a divisor of the hidden size {}", d.hidden));
  if (d.heads % d.kv_heads != 0) r.fail("num_key_value_heads", fmt::format("a divisor of the head count {}", d.heads));
  model_name = r.string("_name_or_path", "");
  if (model_name.empty()) model_name = type + " (" + file.filename().string() + ")";
  return d;
}

// ---- DeepSpeed config ---------------------------------------------------------------------

namespace {

// zero_optimization keys that map one to one onto the zero strategy's (DeepSpeed's own names).
const std::set<std::string> kZeroTranslated = {
    "stage", "reduce_bucket_size", "allgather_bucket_size", "overlap_comm", "contiguous_gradients", "reduce_scatter",
    "use_multi_rank_bucket_allreduce", "sub_group_size", "stage3_prefetch_bucket_size", "prefetch_bucket_size",
    "stage3_max_live_parameters", "max_live_parameters", "stage3_max_reuse_distance", "max_reuse_distance",
    "stage3_param_persistence_threshold", "param_persistence_threshold", "stage3_model_persistence_threshold",
    "model_persistence_threshold"};
// zero_optimization keys that do not change one training step (checkpointing, model loading,
// logging), accepted and ignored.
const std::set<std::string> kZeroNoEffect = {
    "load_from_fp32_weights", "elastic_checkpoint", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "gather_16bit_weights_on_model_save", "ignore_unused_parameters",
    "round_robin_gradients", "memory_efficient_linear", "pipeline_loading_checkpoint", "override_module_apply",
    "log_trace_cache_warnings", "cpu_offload_use_pin_memory"};
// Top-level keys that do not change one step's schedule or memory on the GPU.
const std::set<std::string> kTopNoEffect = {
    "steps_per_print", "wall_clock_breakdown", "dump_state", "tensorboard", "wandb", "csv_monitor", "comet",
    "flops_profiler", "memory_breakdown", "scheduler", "gradient_clipping", "prescale_gradients",
    "gradient_predivide_factor", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "seed", "checkpoint",
    "sparse_gradients", "disable_allgather", "timers", "monitor_config"};

class DsReader {
 public:
  DsReader(const Json& doc, std::string file) : doc_(doc), file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const Json& v, const std::string& expected) const {
    throw_input_error(file_, path, v, expected);
  }
  const std::string& file() const { return file_; }

 private:
  const Json& doc_;
  std::string file_;
};

bool is_auto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

std::optional<std::int64_t> batch_value(const Json& ds, const std::string& key, const DsReader& r) {
  if (!ds.contains(key) || is_auto(ds[key])) return std::nullopt;
  const Json& v = ds[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) r.fail("/" + key, v, "a positive integer or \"auto\"");
  return v.get<std::int64_t>();
}

// Sets doc[section][key] = value unless the experiment already says otherwise (an error naming
// both); records that the value came from the DeepSpeed file.
void put(Json& doc, SourceMap& sources, const std::string& section, const std::string& key, const Json& value,
         const std::string& ds_file, const std::string& ds_path) {
  Json& obj = doc[section];
  if (obj.contains(key) && obj[key] != value)
    throw InputError(fmt::format("{}: /{}/{}: {}: expected the value of {} {} ({}), or remove one of them",
                                 sources.file_for("/" + section + "/" + key), section, key,
                                 json_value_for_message(obj[key]), ds_file, ds_path, json_value_for_message(value)));
  obj[key] = value;
  sources.file_of_prefix["/" + section + "/" + key] = ds_file;
}

std::int64_t hidden_size_of(const Json& doc) {
  const Json& w = doc.value("workload", Json::object());
  if (w.contains("preset") && w["preset"].is_string()) {
    try {
      return preset_dims(w["preset"].get<std::string>()).hidden;
    } catch (const std::out_of_range&) {
    }
  }
  if (w.contains("model") && w["model"].is_object()) {
    const Json& m = w["model"];
    if (m.contains("hidden") && m["hidden"].is_number_integer()) return m["hidden"].get<std::int64_t>();
  }
  return 0;
}

}  // namespace

void expand_deepspeed_config(Json& doc, SourceMap& sources) {
  if (!doc.is_object() || !doc.contains("strategy") || !doc["strategy"].is_object() ||
      !doc["strategy"].contains("deepspeed_config"))
    return;
  Json& strategy = doc["strategy"];
  const Json& name = strategy["deepspeed_config"];
  const std::string where = sources.file_for("/strategy/deepspeed_config");
  if (!name.is_string()) throw_input_error(where, "/strategy/deepspeed_config", name, "the path of a DeepSpeed config JSON file");
  fs::path file = resolve_config_path(name.get<std::string>(), where);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw_input_error(where, "/strategy/deepspeed_config", name, "an existing DeepSpeed config file (not found)");
  const std::string ds_file = file.string();
  Json ds = read_json_file(file);
  DsReader r(ds, ds_file);
  if (!ds.is_object()) r.fail("", ds, "a DeepSpeed config object");
  strategy.erase("deepspeed_config");
  if (strategy.contains("framework") && strategy["framework"] != "zero")
    throw_input_error(where, "/strategy/framework", strategy["framework"], "\"zero\" (or none) with a deepspeed_config");
  strategy["framework"] = "zero";

  // Everything in the file must be translated, known to have no effect, or rejected.
  std::set<std::string> handled = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                   "zero_optimization", "bf16", "bfloat16", "fp16", "optimizer", "communication_data_type",
                                   "data_types", "hybrid_engine", "amp", "activation_checkpointing"};
  for (auto it = ds.begin(); it != ds.end(); ++it)
    if (!handled.count(it.key()) && !kTopNoEffect.count(it.key()))
      r.fail("/" + it.key(), it.value(),
             "a DeepSpeed key stepsim translates or knows to leave the step unchanged (unsupported or unknown key; see "
             "docs/configuration.md)");

  // Precision: bf16 / fp16 blocks ("enabled": true | false | "auto").
  auto enabled = [&](const std::string& key) -> std::optional<bool> {
    if (!ds.contains(key)) return false;
    const Json& b = ds[key];
    if (!b.is_object()) r.fail("/" + key, b, "an object {\"enabled\": ...}");
    if (!b.contains("enabled")) return false;
    if (is_auto(b["enabled"])) return std::nullopt;
    if (!b["enabled"].is_boolean()) r.fail("/" + key + "/enabled", b["enabled"], "true, false or \"auto\"");
    return b["enabled"].get<bool>();
  };
  // DeepSpeed reads "bf16" and its older spelling "bfloat16" (runtime/config.py), which
  // DeepSpeed-Chat still writes.
  if (ds.contains("bf16") && ds.contains("bfloat16")) r.fail("/bfloat16", ds["bfloat16"], "either bf16 or bfloat16, not both");
  auto bf16 = enabled(ds.contains("bfloat16") ? "bfloat16" : "bf16"), fp16 = enabled("fp16");
  if (bf16.value_or(false) && fp16.value_or(false)) r.fail("/fp16/enabled", ds["fp16"]["enabled"], "false when bf16 is enabled");
  if (bf16.value_or(false)) put(doc, sources, "workload", "dtype", "bf16", ds_file, "/bf16/enabled");
  else if (fp16.value_or(false)) put(doc, sources, "workload", "dtype", "fp16", ds_file, "/fp16/enabled");
  else if (bf16 && fp16) put(doc, sources, "workload", "dtype", "fp32", ds_file, "/bf16/enabled");
  // "auto": the HF Trainer takes it from TrainingArguments, here the experiment's workload.dtype.
  for (const char* off : {"hybrid_engine", "amp"})
    if (ds.contains(off) && ds[off].is_object() && ds[off].value("enabled", false))
      r.fail(std::string("/") + off + "/enabled", ds[off]["enabled"], "false (not modelled)");
  if (ds.contains("activation_checkpointing") && ds["activation_checkpointing"].is_object() &&
      (ds["activation_checkpointing"].value("partition_activations", false) ||
       ds["activation_checkpointing"].value("cpu_checkpointing", false)))
    r.fail("/activation_checkpointing", ds["activation_checkpointing"],
           "no partition_activations or cpu_checkpointing (set workload.activation_checkpointing instead)");

  // The batch triangle (DeepSpeed runtime/config.py _set_batch_related_parameters).
  const Json& cluster = doc.value("cluster", Json::object());
  std::int64_t world = cluster.value("nodes", 1) * cluster.value("gpus_per_node", 8);
  auto tbs = batch_value(ds, "train_batch_size", r);
  auto micro = batch_value(ds, "train_micro_batch_size_per_gpu", r);
  auto ga = batch_value(ds, "gradient_accumulation_steps", r);
  const Json& w = doc.value("workload", Json::object());
  const Json& t = doc.value("training", Json::object());
  // "auto" (HF Trainer): the experiment's own value.
  if (!micro && ds.contains("train_micro_batch_size_per_gpu") && w.contains("micro_batch") && w["micro_batch"].is_number_integer())
    micro = w["micro_batch"].get<std::int64_t>();
  if (!ga && ds.contains("gradient_accumulation_steps") && t.contains("grad_accum") && t["grad_accum"].is_number_integer())
    ga = t["grad_accum"].get<std::int64_t>();
  if (tbs && micro && ga) {
    if (*tbs != *micro * *ga * world)
      r.fail("/train_batch_size", ds["train_batch_size"],
             fmt::format("train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size = {} x {} x {} = {}", *micro,
                         *ga, world, *micro * *ga * world));
  } else if (tbs && micro) {
    if (*tbs % (*micro * world) != 0)
      r.fail("/train_batch_size", ds["train_batch_size"], fmt::format("a multiple of micro batch x world size ({})", *micro * world));
    ga = *tbs / (*micro * world);
  } else if (tbs && ga) {
    if (*tbs % (*ga * world) != 0)
      r.fail("/train_batch_size", ds["train_batch_size"], fmt::format("a multiple of accumulation x world size ({})", *ga * world));
    micro = *tbs / (*ga * world);
  } else if (tbs) {
    if (*tbs % world != 0) r.fail("/train_batch_size", ds["train_batch_size"], fmt::format("a multiple of the world size {}", world));
    ga = 1;
    micro = *tbs / world;
  } else if (micro) {
    if (!ga) ga = 1;
  } else if (!w.contains("micro_batch")) {
    r.fail("/train_micro_batch_size_per_gpu", ds.value("train_micro_batch_size_per_gpu", Json()),
           "a number, or train_batch_size (DeepSpeed needs one of them; \"auto\" takes workload.micro_batch)");
  }
  if (micro) put(doc, sources, "workload", "micro_batch", *micro, ds_file, "/train_micro_batch_size_per_gpu");
  if (ga) put(doc, sources, "training", "grad_accum", *ga, ds_file, "/gradient_accumulation_steps");

  if (ds.contains("optimizer")) {
    const Json& o = ds["optimizer"];
    if (!o.is_object() || !o.contains("type") || !o["type"].is_string()) r.fail("/optimizer", o, "{\"type\": \"AdamW\", ...}");
    std::string type = o["type"].get<std::string>();
    std::string lower;
    for (char c : type) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "adam" || lower == "adamw" || lower == "fusedadam") put(doc, sources, "training", "optimizer", "adamw", ds_file, "/optimizer/type");
    else if (lower == "sgd") put(doc, sources, "training", "optimizer", "sgd", ds_file, "/optimizer/type");
    else r.fail("/optimizer/type", o["type"], "Adam, AdamW or SGD (the optimizers stepsim models)");
  }
  if (ds.contains("communication_data_type") && !ds["communication_data_type"].is_null())
    strategy["communication_data_type"] = ds["communication_data_type"];
  if (ds.contains("data_types")) {
    const Json& dt = ds["data_types"];
    if (!dt.is_object()) r.fail("/data_types", dt, "an object");
    for (auto it = dt.begin(); it != dt.end(); ++it) {
      if (it.key() != "grad_accum_dtype") r.fail("/data_types/" + it.key(), it.value(), "only grad_accum_dtype");
      if (!it.value().is_null()) strategy["grad_accum_dtype"] = it.value();
    }
  }

  const Json zero = ds.value("zero_optimization", Json::object());
  if (!zero.is_object()) r.fail("/zero_optimization", zero, "an object");
  if (!zero.contains("stage")) r.fail("/zero_optimization", zero, "a ZeRO stage (zero_optimization.stage 1, 2 or 3)");
  const std::int64_t hidden = hidden_size_of(doc);
  for (auto it = zero.begin(); it != zero.end(); ++it) {
    const std::string& key = it.key();
    const std::string path = "/zero_optimization/" + key;
    const Json& v = it.value();
    if (kZeroTranslated.count(key)) {
      if (is_auto(v)) {
        // The HF Trainer's "auto" (transformers integrations/deepspeed.py, trainer_config_finalize).
        if (hidden <= 0) r.fail(path, v, "a number (\"auto\" needs the model's hidden size: a preset or model dimensions)");
        if (key == "reduce_bucket_size") strategy[key] = hidden * hidden;
        else if (key == "stage3_prefetch_bucket_size" || key == "prefetch_bucket_size")
          strategy[key] = static_cast<std::int64_t>(0.9 * static_cast<double>(hidden * hidden));
        else if (key == "stage3_param_persistence_threshold" || key == "param_persistence_threshold") strategy[key] = 10 * hidden;
        else r.fail(path, v, "a number (\"auto\" is resolved only for the buckets and persistence threshold)");
      } else {
        if (strategy.contains(key) && strategy[key] != v)
          throw InputError(fmt::format("{}: /strategy/{}: {}: expected the value of {} {} ({}), or remove one of them",
                                       where, key, json_value_for_message(strategy[key]), ds_file, path,
                                       json_value_for_message(v)));
        strategy[key] = v;
      }
      sources.file_of_prefix["/strategy/" + key] = ds_file;
    } else if (kZeroNoEffect.count(key)) {
      continue;
    } else if (key == "offload_param" || key == "offload_optimizer") {
      if (!v.is_null() && !(v.is_object() && v.value("device", "none") == "none"))
        r.fail(path, v, "no offload (device \"none\"): CPU/NVMe offload is not modelled");
    } else if (key == "allgather_partitions" || key == "legacy_stage1" || key == "cpu_offload" ||
               key == "cpu_offload_param" || key == "zero_quantized_weights" || key == "zero_quantized_gradients" ||
               key == "zero_quantized_nontrainable_weights" || key == "zeropp_loco_param" ||
               key == "use_all_reduce_for_fetch_params") {
      bool want = key == "allgather_partitions";
      if (!v.is_boolean() || v.get<bool>() != want)
        r.fail(path, v, fmt::format("{} (the other setting is not modelled)", want ? "true" : "false"));
    } else if (key == "zero_hpz_partition_size" || key == "mics_shard_size" || key == "module_granularity_threshold") {
      std::int64_t neutral = key == "zero_hpz_partition_size" ? 1 : key == "mics_shard_size" ? -1 : 0;
      if (!v.is_number_integer() || (v.get<std::int64_t>() != neutral && !(key == "mics_shard_size" && v.get<std::int64_t>() <= 0)))
        r.fail(path, v, fmt::format("{} (ZeRO++ hpZ, MiCS and module granularity are not modelled)", neutral));
    } else {
      r.fail(path, v, "a zero_optimization key stepsim translates or knows to leave the step unchanged (unknown key)");
    }
  }
}

}  // namespace stepsim
