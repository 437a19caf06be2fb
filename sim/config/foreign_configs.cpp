#include "sim/config/foreign_configs.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "sim/config/experiment_keys.hpp"
#include "sim/config/foreign_keys.hpp"
#include "sim/core/checked.hpp"
#include "sim/core/error.hpp"

namespace stepsim {

namespace fs = std::filesystem;

namespace {

// ---- Hugging Face config.json -------------------------------------------------------------

// Reads a config.json through its family's declaration (foreign_keys.cpp): ranges and defaults
// are the declared ones, and reading an undeclared key is a programmer error. Keys the
// declaration does not list are ignored (its header says why).
class HfReader {
 public:
  HfReader(const Json& doc, std::string file, const ForeignObject& decl) : doc_(doc), file_(std::move(file)), decl_(decl) {}

  const ForeignObject& decl() const { return decl_; }
  bool present(const std::string& key) const {
    (void)decl_.at(key);
    return doc_.contains(key) && !doc_[key].is_null();
  }

  // The model dimension `becomes` ("hidden", "layers", ...) from the key the family names it by.
  std::int64_t dim(const std::string& becomes) const { return positive(decl_.reading(becomes).key.name); }
  std::int64_t dim(const std::string& becomes, std::int64_t fallback) const {
    return positive(decl_.reading(becomes).key.name, fallback);
  }
  std::int64_t positive(const std::string& key) const {
    if (!doc_.contains(key)) missing(key);
    return positive_value(key);
  }
  std::int64_t positive(const std::string& key, std::int64_t fallback) const {
    if (!present(key)) return fallback;
    return positive_value(key);
  }
  // A boolean with the declared default.
  bool boolean(const std::string& key) const {
    const ConfigKey& k = decl_.at(key).key;
    if (!present(key)) return k.default_value->get<bool>();
    if (!doc_[key].is_boolean()) fail(key, "true or false");
    return doc_[key].get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!present(key)) return fallback;
    if (!doc_[key].is_string()) fail(key, "a string");
    return doc_[key].get<std::string>();
  }
  // Written as null (not absent): HF configs distinguish null (no value) from a missing key
  // (the class default).
  bool is_null(const std::string& key) const {
    (void)decl_.at(key);
    return doc_.contains(key) && doc_[key].is_null();
  }
  const Json& raw(const std::string& key) const {
    static const Json null;
    return present(key) ? doc_[key] : null;
  }
  // A Checked key with one accepted value: absent, null or that value, else an error naming
  // what the declaration accepts.
  void check_neutral(const std::string& key) const {
    const ForeignKey& k = decl_.at(key);
    if (present(key) && doc_[key] != *k.neutral) fail(key, k.accepts + " (see " + kNotModelledTable + ")");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    // An absent key (failing on its default) is named without a value.
    throw_input_error(file_, "/" + key, doc_.contains(key) ? doc_[key] : Json(Json::value_t::discarded), expected);
  }
  [[noreturn]] void missing(const std::string& key) const {
    throw InputError(fmt::format("{}: /: missing required key \"{}\"", file_, key));
  }

 private:
  std::int64_t positive_value(const std::string& key) const {
    const ConfigKey& k = decl_.at(key).key;
    const Json& v = doc_[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() < *k.min || static_cast<double>(v.get<std::int64_t>()) > *k.max)
      fail(key, *k.min > 0 ? "a positive integer" : "a non-negative integer");
    return v.get<std::int64_t>();
  }
  const Json& doc_;
  std::string file_;
  const ForeignObject& decl_;
};

// The dimensions every family names: hidden, layers, heads, vocab; multi-head attention unless
// the family reads kv_heads.
ModelDims common_dims(const HfReader& r, const std::string& family) {
  ModelDims d;
  d.family = family;
  d.hidden = r.dim("hidden");
  d.layers = r.dim("layers");
  d.heads = r.dim("heads");
  d.kv_heads = d.heads;
  return d;
}

// The sliding window transformers applies to some layer of a llama-like config, if any.
// stepsim models full causal attention only, so a window shorter than the sequence is refused.
// - mistral: MistralConfig.__init__ defaults sliding_window to 4096 (null: none) and has no
//   use_sliding_window; MistralAttention passes config.sliding_window on every layer.
// - qwen2: Qwen2Config (configuration_qwen2.py:74-76, transformers 008e5743) defaults
//   use_sliding_window to False, sliding_window to 4096 and max_window_layers to 28;
//   __post_init__ drops the window unless use_sliding_window (:84), and then slides only the
//   layers i >= max_window_layers (:88-94), or those an explicit layer_types names
//   "sliding_attention".
// - llama: LlamaConfig has no window; a sliding_window key someone wrote is checked anyway.
std::optional<std::int64_t> sliding_window(const HfReader& r, const std::string& model_type, std::int64_t layers) {
  const std::optional<std::int64_t> none;
  if (model_type == "qwen2") {
    if (!r.boolean("use_sliding_window")) return none;
    const Json& types = r.raw("layer_types");
    if (!types.is_null()) {
      if (!types.is_array()) r.fail("layer_types", "an array of \"full_attention\" / \"sliding_attention\"");
      if (std::find(types.begin(), types.end(), Json("sliding_attention")) == types.end()) return none;
    } else if (r.positive("max_window_layers", r.decl().at("max_window_layers").key.default_value->get<std::int64_t>()) >= layers) {
      return none;
    }
  }
  if (r.present("sliding_window")) return r.positive("sliding_window");
  if (model_type == "llama" || r.is_null("sliding_window")) return none;
  return 4096;  // an absent key: MistralConfig's and Qwen2Config's default (:75)
}

ModelDims llama_like(const HfReader& r, const std::string& model_type, std::int64_t seq_len) {
  ModelDims d = common_dims(r, "llama");
  d.kv_heads = r.dim("kv_heads", d.heads);
  d.ffn = r.dim("ffn");
  d.vocab = r.dim("vocab");
  d.tied_embeddings = r.boolean("tie_word_embeddings");
  if (r.present("hidden_act") && r.raw("hidden_act") != "silu")
    r.fail("hidden_act", "\"silu\" (the SwiGLU MLP stepsim models for " + model_type + ")");
  r.check_neutral("attention_bias");
  r.check_neutral("mlp_bias");
  if (r.present("head_dim") && r.positive("head_dim") * d.heads != d.hidden)
    r.fail("head_dim", fmt::format("hidden_size / num_attention_heads = {} ({})", d.hidden / d.heads,
                                   not_modelled("a head dimension of its own")));
  if (std::optional<std::int64_t> window = sliding_window(r, model_type, d.layers); window && *window < seq_len)
    r.fail("sliding_window", fmt::format("null or at least the sequence length {} ({}){}", seq_len,
                                         not_modelled("sliding-window attention over a shorter window"),
                                         r.present("sliding_window") ? "" : fmt::format("; the key is absent, so {}'s default {} applies",
                                                                                       model_type, *window)));
  return d;
}

ModelDims opt_dims(const HfReader& r) {
  ModelDims d = common_dims(r, "opt");
  d.ffn = r.dim("ffn");
  d.vocab = r.dim("vocab");
  d.tied_embeddings = r.boolean("tie_word_embeddings");
  // OPTLearnedPositionalEmbedding keeps 2 extra rows (its offset): 2048 -> 2050.
  d.max_positions = r.dim("max_positions") + 2;
  if (r.positive("word_embed_proj_dim", d.hidden) != d.hidden)
    r.fail("word_embed_proj_dim", fmt::format("hidden_size ({}): {}", d.hidden, not_modelled("OPT's input/output projections")));
  r.check_neutral("do_layer_norm_before");
  std::string act = r.string("activation_function", "relu");
  if (act != "relu" && act != "gelu") r.fail("activation_function", r.decl().at("activation_function").accepts);
  return d;
}

ModelDims gpt2_dims(const HfReader& r) {
  ModelDims d = common_dims(r, "gpt");
  d.ffn = r.dim("ffn", 4 * d.hidden);  // n_inner null: 4 x n_embd
  d.vocab = r.dim("vocab");
  d.tied_embeddings = r.boolean("tie_word_embeddings");
  d.max_positions = r.dim("max_positions");
  return d;
}

// GPT-NeoX: LayerNorm with bias, biased linears, GELU MLP, rotary positions (no table).
ModelDims neox_dims(const HfReader& r) {
  ModelDims d = common_dims(r, "gpt");
  d.ffn = r.dim("ffn");
  d.vocab = r.dim("vocab");
  d.tied_embeddings = r.boolean("tie_word_embeddings");
  return d;
}

ModelDims mpt_dims(const HfReader& r) {
  ModelDims d = common_dims(r, "mpt");
  d.ffn = r.dim("ffn", r.decl().reading("ffn").key.default_value->get<std::int64_t>()) * d.hidden;  // expansion_ratio
  d.vocab = r.dim("vocab");
  d.tied_embeddings = true;
  // stepsim's MPT is the one llm-foundry's benchmarks ran (MPTConfig defaults of 2023).
  r.check_neutral("no_bias");
  r.check_neutral("learned_pos_emb");
  const Json& attn = r.raw("attn_config");
  if (attn.is_object() && attn.contains("alibi") && !attn["alibi"].is_boolean())
    r.fail("attn_config", "attn_config.alibi true or false");  // a type_error otherwise (issue 50, F4)
  if (attn.is_object() && attn.value("alibi", false)) r.fail("attn_config", "attn_config.alibi false (" + not_modelled("ALiBi MPT") + ")");
  return d;
}

}  // namespace

ModelDims dims_from_hf_config(const fs::path& file, std::string& model_name, std::int64_t seq_len) {
  return dims_from_hf_config_json(read_json_file(file), file, model_name, seq_len);
}

ModelDims dims_from_hf_config_json(const Json& doc, const fs::path& file, std::string& model_name, std::int64_t seq_len) {
  if (!doc.is_object()) throw_input_error(file.string(), "", doc, "a Hugging Face config.json object");
  const Json& type_value = doc.contains("model_type") ? doc["model_type"] : Json();
  if (!type_value.is_null() && !type_value.is_string()) throw_input_error(file.string(), "/model_type", type_value, "a string");
  const std::string type = type_value.is_string() ? type_value.get<std::string>() : "";
  const ForeignObject* family = foreign_keys::hf_family(type);
  if (!family) {
    std::string all;
    for (const auto& t : foreign_keys::hf_model_types()) all += (all.empty() ? "" : ", ") + t;
    throw_input_error(file.string(), "/model_type", type_value,
                      "a model family stepsim models: " + all + " (mixture-of-experts and other families: " +
                          not_modelled("such a model") + ")");
  }
  HfReader r(doc, file.string(), *family);
  // Every declared key has its type, also those stepsim does not read (F15), and the keys that
  // describe an unmodelled structure are absent or null (F22): before the dimensions, so a
  // Mixtral-style file is refused for its experts, not for a dimension.
  for (const ForeignKey& k : family->keys) {
    if (!doc.contains(k.key.name)) continue;
    if (k.use == ForeignKey::Use::Checked && k.neutral && k.neutral->is_null()) r.check_neutral(k.key.name);
    else if ((k.use == ForeignKey::Use::NoEffect || k.use == ForeignKey::Use::NotModelled) && k.key.types != 0 &&
             !matches_declaration(k.key, doc[k.key.name]))
      r.fail(k.key.name, describe_type(k.key));
  }
  ModelDims d;
  if (type == "llama" || type == "mistral" || type == "qwen2") d = llama_like(r, type, seq_len);
  else if (type == "opt") d = opt_dims(r);
  else if (type == "gpt2") d = gpt2_dims(r);
  else if (type == "gpt_neox") d = neox_dims(r);
  else d = mpt_dims(r);
  if (d.hidden % d.heads != 0) r.fail(family->reading("heads").key.name, fmt::format("a divisor of the hidden size {}", d.hidden));
  if (d.heads % d.kv_heads != 0) r.fail(family->reading("kv_heads").key.name, fmt::format("a divisor of the head count {}", d.heads));
  if (d.max_positions > 0) {
    // A learned position table (GPT-2, OPT): one row per position, so the sequence must fit it
    // (Hugging Face raises an index error past it), and its size is bounded like the
    // experiment's own model.max_positions. OPT keeps 2 extra rows (its offset).
    const std::string key = family->reading("max_positions").key.name;
    const std::int64_t rows = type == "opt" ? d.max_positions - 2 : d.max_positions;
    if (rows > limits::kMaxSeqLen)
      r.fail(key, fmt::format("at most {} positions (the limit of model.max_positions)", limits::kMaxSeqLen));
    if (seq_len > rows)
      r.fail(key, fmt::format("at least workload.seq_len {} (a learned position table has one row per position; Hugging "
                              "Face fails past its end)",
                              seq_len));
  }
  // The name goes into report headers: control characters (a newline, a terminal escape) are
  // shown as '?', and a long name is cut.
  model_name = r.string("_name_or_path", "");
  for (char& c : model_name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (model_name.size() > 120) model_name = model_name.substr(0, 117) + "...";
  if (model_name.empty()) model_name = type + " (" + file.filename().string() + ")";
  return d;
}

// ---- DeepSpeed config ---------------------------------------------------------------------

namespace {

class DsReader {
 public:
  explicit DsReader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const Json& v, const std::string& expected) const {
    throw_input_error(file_, path, v, expected);
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

bool is_auto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// A batch key: a positive integer up to `max` (the experiment's own range for the value it
// becomes), or "auto" (nullopt).
std::optional<std::int64_t> batch_value(const Json& ds, const std::string& key, std::int64_t max, const DsReader& r) {
  if (!ds.contains(key) || is_auto(ds[key])) return std::nullopt;
  const Json& v = ds[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) ||
      v.get<std::int64_t>() <= 0 || v.get<std::int64_t>() > max)
    r.fail("/" + key, v, fmt::format("a positive integer up to {} or \"auto\"", max));
  return v.get<std::int64_t>();
}

// A boolean flag of a DeepSpeed block (absent: `fallback`); anything else names the key.
bool ds_flag(const Json& block, const std::string& path, const std::string& key, bool fallback, const DsReader& r) {
  if (!block.contains(key)) return fallback;
  const Json& v = block[key];
  if (!v.is_boolean()) r.fail(path + "/" + key, v, "true or false");
  return v.get<bool>();
}

// An integer of the experiment that the translation needs before the experiment's own checks
// run (cluster.nodes for the batch triangle): checked here with the experiment's range, so the
// message names the experiment's file and key, never a derived DeepSpeed value.
std::int64_t experiment_integer(const Json& doc, const SourceMap& sources, const std::string& section,
                                const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!doc.contains(section) || doc[section].is_null()) return fallback;
  const Json& obj = doc[section];
  if (!obj.is_object()) throw_input_error(sources.file_for("/" + section), "/" + section, obj, "an object");
  if (!obj.contains(key)) return fallback;
  const Json& v = obj[key];
  const std::string path = "/" + section + "/" + key;
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) ||
      v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    throw_input_error(sources.file_for(path), path, v, fmt::format("an integer from {} to {}", lo, hi));
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
  // A later message about the value names the DeepSpeed key it came from (F15).
  if (ds_path.rfind('/', 0) == 0) sources.path_in_file_of["/" + section + "/" + key] = ds_path;
}

std::int64_t hidden_size_of(const Json& doc, const SourceMap& sources) {
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
    // The HF Trainer's usual pairing: the model from its config.json, ZeRO's buckets "auto".
    if (m.contains("hf_config") && m["hf_config"].is_string()) {
      const fs::path path = resolve_config_path(m["hf_config"].get<std::string>(), sources.file_for("/workload/model/hf_config"));
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) {
        std::string name;
        return dims_from_hf_config(path, name, /*seq_len=*/0).hidden;  // the experiment checks the sequence later
      }
    }
  }
  return 0;
}

}  // namespace

namespace {

// One DeepSpeed config translated into the experiment's keys, one function per part of the
// file; every key goes through the declaration (foreign_keys.cpp).
class DeepSpeedTranslation {
 public:
  DeepSpeedTranslation(Json& doc, SourceMap& sources, const Json& ds, std::string ds_file, std::string where)
      : doc_(doc), sources_(sources), strategy_(doc["strategy"]), ds_(ds), ds_file_(std::move(ds_file)), where_(std::move(where)),
        r_(ds_file_) {}

  void run() {
    check_declared();
    precision();
    unmodelled_features();
    monitor();
    batch();
    optimizer();
    reduction_dtypes();
    zero_optimization();
    training_loop();
    implementation();
  }

 private:
  // A top-level key read below, through the declaration (an undeclared one is a programmer error).
  bool has(const std::string& key) const { return (void)top_.at(key), ds_.contains(key); }
  void put_key(const std::string& section, const std::string& key, const Json& value, const std::string& ds_path) {
    put(doc_, sources_, section, key, value, ds_file_, ds_path);
  }

  // Every key of the file is declared: read, checked, or accepted.
  void check_declared() {
    for (auto it = ds_.begin(); it != ds_.end(); ++it) {
      const ForeignKey* k = top_.find(it.key());
      if (!k)
        r_.fail("/" + it.key(), it.value(),
                "a DeepSpeed key stepsim translates or knows to leave the step unchanged (unsupported or unknown key; see "
                "docs/configuration-foreign-keys.md; tensor/pipeline parallelism and other features stepsim does not model: " +
                    std::string(kNotModelledTable) + ")");
      // The checked top-level keys are objects (hybrid_engine, amp, activation_checkpointing):
      // anything else would pass their checks unread.
      if (k->use == ForeignKey::Use::Checked && !it.value().is_object() && !it.value().is_null())
        r_.fail("/" + it.key(), it.value(), "an object with " + k->accepts);
      check_type(*k, "/" + it.key(), it.value());
    }
    if (has("scheduler")) scheduler();
  }

  // Every value of the file has its declared JSON type and range, also where stepsim does not
  // read it (a key with no effect on the step): DeepSpeed itself fails on "gradient_clipping":
  // "banana" (F15), so a prediction for such a file would be for a run that never starts.
  void check_type(const ForeignKey& k, const std::string& path, const Json& v) const {
    if (k.key.types != 0 && !matches_declaration(k.key, v)) r_.fail(path, v, describe_type(k.key));
  }

  // DeepSpeed builds the scheduler named by "type" from its own lr_schedules, else from
  // torch.optim.lr_scheduler, with "params" as keyword arguments (runtime/engine.py
  // _scheduler_from_config; any other name fails its assert); no "type": no scheduler.
  void scheduler() const {
    const Json& sch = ds_["scheduler"];
    if (!sch.is_object()) return;  // null; check_type refused anything else
    if (sch.contains("type")) {
      static const std::vector<std::string> names = {
          // deepspeed/runtime/lr_schedules.py
          "LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
          // torch.optim.lr_scheduler (PyTorch 2.x)
          "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "SequentialLR",
          "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
          "PolynomialLR"};
      const Json& type = sch["type"];
      if (!type.is_string() || std::find(names.begin(), names.end(), type.get<std::string>()) == names.end()) {
        std::string all;
        for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
        r_.fail("/scheduler/type", type, "a scheduler DeepSpeed builds: " + all);
      }
    }
    if (sch.contains("params") && !sch["params"].is_object())
      r_.fail("/scheduler/params", sch["params"], "an object (the scheduler's keyword arguments)");
  }

  // "auto" values are the HF Trainer's (transformers integrations/deepspeed.py,
  // HfTrainerDeepSpeedConfig.trainer_config_finalize fills them; DeepSpeed itself reads none):
  // a file that has one implies its loop, whose compute_loss returns only the loss
  // (workload.hpp TrainingLoop::HfTrainer). A training_loop the experiment states wins
  // (Accelerate's own loop resolves "auto" too).
  void training_loop() {
    if (!contains_auto(ds_)) return;
    Json& w = doc_["workload"];
    if (!w.is_object() || w.contains("training_loop") || w.contains("toy")) return;  // a toy has no loop
    w["training_loop"] = "hf_trainer";
    sources_.file_of_prefix["/workload/training_loop"] = ds_file_;
  }
  // A model from a Hugging Face config.json that DeepSpeed trains is the transformers model
  // (modeling_llama.py and kin), not torchtitan's: DeepSpeed wraps the module it is given, and
  // the HF Trainer, Accelerate and DeepSpeed-Chat all give it AutoModelForCausalLM's. An
  // implementation the experiment states wins.
  void implementation() {
    Json& w = doc_["workload"];
    if (!w.is_object() || w.contains("implementation") || !w.contains("model") || !w["model"].is_object() ||
        !w["model"].contains("hf_config"))
      return;
    w["implementation"] = "hf";
    sources_.file_of_prefix["/workload/implementation"] = ds_file_;
  }
  static bool contains_auto(const Json& v) {
    if (is_auto(v)) return true;
    if (v.is_object() || v.is_array())
      for (const auto& x : v)
        if (contains_auto(x)) return true;
    return false;
  }

  // A bf16 / fp16 block's "enabled": true | false | "auto" (nullopt).
  std::optional<bool> enabled(const std::string& key) const {
    if (!has(key)) return false;
    const Json& b = ds_[key];
    if (!b.is_object()) r_.fail("/" + key, b, "an object {\"enabled\": ...}");
    if (!b.contains("enabled")) return false;
    if (is_auto(b["enabled"])) return std::nullopt;
    if (!b["enabled"].is_boolean()) r_.fail("/" + key + "/enabled", b["enabled"], "true, false or \"auto\"");
    return b["enabled"].get<bool>();
  }

  void precision() {
    // DeepSpeed reads "bf16" and its older spelling "bfloat16" (runtime/config.py), which
    // DeepSpeed-Chat still writes.
    if (has("bf16") && has("bfloat16")) r_.fail("/bfloat16", ds_["bfloat16"], "either bf16 or bfloat16, not both");
    auto bf16 = enabled(has("bfloat16") ? "bfloat16" : "bf16"), fp16 = enabled("fp16");
    if (bf16.value_or(false) && fp16.value_or(false)) r_.fail("/fp16/enabled", ds_["fp16"]["enabled"], "false when bf16 is enabled");
    if (bf16.value_or(false)) put_key("workload", "dtype", "bf16", "/bf16/enabled");
    else if (fp16.value_or(false)) put_key("workload", "dtype", "fp16", "/fp16/enabled");
    else if (bf16 && fp16)
      // Both off: name the block that says so, or say that the file has neither.
      put_key("workload", "dtype", "fp32",
              has("bfloat16") ? "/bfloat16/enabled"
              : has("bf16")   ? "/bf16/enabled"
              : has("fp16")   ? "/fp16/enabled"
                              : "(no bf16 or fp16 block: DeepSpeed trains in fp32)");
    // "auto": the HF Trainer takes it from TrainingArguments, here the experiment's workload.dtype.
  }

  // DeepSpeed's MonitorMaster is on when any of its monitors is enabled (monitor/config.py:
  // get_monitor_config; each block's "enabled" defaults to false).
  void monitor() {
    for (const char* m : {"tensorboard", "wandb", "csv_monitor", "comet"}) {
      if (!has(m)) continue;
      if (!ds_[m].is_object()) r_.fail(std::string("/") + m, ds_[m], "an object {\"enabled\": true | false, ...}");
      if (!ds_[m].contains("enabled")) continue;
      const Json& on = ds_[m]["enabled"];
      if (!on.is_boolean()) r_.fail(std::string("/") + m + "/enabled", on, "true or false");
      if (on.get<bool>()) return put_key("strategy", "monitor", true, std::string("/") + m + "/enabled");
    }
  }

  void unmodelled_features() {
    for (const char* off : {"hybrid_engine", "amp"})
      if (has(off) && ds_[off].is_object() && ds_flag(ds_[off], std::string("/") + off, "enabled", false, r_))
        r_.fail(std::string("/") + off + "/enabled", ds_[off]["enabled"], "false (" + not_modelled(std::string("DeepSpeed's ") + off) + ")");
    if (!has("activation_checkpointing") || !ds_["activation_checkpointing"].is_object()) return;
    const Json& ac = ds_["activation_checkpointing"];
    if (ds_flag(ac, "/activation_checkpointing", "partition_activations", false, r_) ||
        ds_flag(ac, "/activation_checkpointing", "cpu_checkpointing", false, r_))
      r_.fail("/activation_checkpointing", ac,
              "no partition_activations or cpu_checkpointing (set workload.activation_checkpointing instead; " +
                  not_modelled("partitioned or CPU activation checkpointing") + ")");
  }

  // The batch triangle (DeepSpeed runtime/config.py _set_batch_related_parameters).
  void batch() {
    const std::int64_t nodes = experiment_integer(doc_, sources_, "cluster", "nodes", 1, 1, limits::kMaxNodes);
    const std::int64_t gpus = experiment_integer(doc_, sources_, "cluster", "gpus_per_node", 8, 1, limits::kMaxGpusPerNode);
    const std::int64_t world = nodes * gpus;  // at most 2^26: no overflow
    // Each value is bounded by the experiment's range and the products below by int64 (checked):
    // a product that wraps could pass the consistency check or divide by zero.
    auto tbs = batch_value(ds_, "train_batch_size", std::numeric_limits<std::int64_t>::max(), r_);
    auto micro = batch_value(ds_, "train_micro_batch_size_per_gpu", limits::kMaxMicroBatch, r_);
    auto ga = batch_value(ds_, "gradient_accumulation_steps", limits::kMaxGradAccum, r_);
    const Json w = doc_.contains("workload") && doc_["workload"].is_object() ? doc_["workload"] : Json::object();
    const Json t = doc_.contains("training") && doc_["training"].is_object() ? doc_["training"] : Json::object();
    // The DeepSpeed key each value comes from (messages name it), or how it was derived in
    // parentheses; "" for the experiment's own.
    const std::string kFromTbs = "(train_batch_size / the other two)";
    std::string micro_from = "/train_micro_batch_size_per_gpu", ga_from = "/gradient_accumulation_steps";
    // "auto" (HF Trainer): the experiment's own value.
    if (!micro && has("train_micro_batch_size_per_gpu") && w.contains("micro_batch")) {
      micro = experiment_integer(doc_, sources_, "workload", "micro_batch", 1, 1, limits::kMaxMicroBatch);
      micro_from.clear();
    }
    if (!ga && has("gradient_accumulation_steps") && t.contains("grad_accum")) {
      ga = experiment_integer(doc_, sources_, "training", "grad_accum", 1, 1, limits::kMaxGradAccum);
      ga_from.clear();
    }
    const Json& tbs_value = ds_.value("train_batch_size", Json());
    if (tbs && micro && ga) {
      // micro <= 2^20, ga <= 2^16, world <= 2^26: the product fits.
      if (*tbs != *micro * *ga * world)
        r_.fail("/train_batch_size", tbs_value,
                fmt::format("train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size = {} x {} x {} = {}", *micro,
                            *ga, world, *micro * *ga * world));
    } else if (tbs && micro) {
      if (*tbs % (*micro * world) != 0)
        r_.fail("/train_batch_size", tbs_value, fmt::format("a multiple of micro batch x world size ({})", *micro * world));
      ga = *tbs / (*micro * world);
      ga_from = kFromTbs;
    } else if (tbs && ga) {
      if (*tbs % (*ga * world) != 0)
        r_.fail("/train_batch_size", tbs_value, fmt::format("a multiple of accumulation x world size ({})", *ga * world));
      micro = *tbs / (*ga * world);
      micro_from = kFromTbs;
    } else if (tbs) {
      if (*tbs % world != 0) r_.fail("/train_batch_size", tbs_value, fmt::format("a multiple of the world size {}", world));
      ga = 1;
      ga_from = "(train_batch_size without gradient_accumulation_steps: 1)";
      micro = *tbs / world;
      micro_from = kFromTbs;
    } else if (micro) {
      if (!ga) {
        ga = 1;
        ga_from = "(no gradient_accumulation_steps: DeepSpeed's default 1)";
      }
    } else if (!w.contains("micro_batch")) {
      r_.fail("/train_micro_batch_size_per_gpu", ds_.value("train_micro_batch_size_per_gpu", Json()),
              "a number, or train_batch_size (DeepSpeed needs one of them; \"auto\" takes workload.micro_batch)");
    }
    // A value derived from train_batch_size is held to the experiment's range here, naming the
    // key the file has (the experiment's check would name /workload/micro_batch, a key the
    // DeepSpeed file does not have).
    if (micro_from == kFromTbs && *micro > limits::kMaxMicroBatch)
      r_.fail("/train_batch_size", tbs_value,
              fmt::format("at most micro-batch {} x accumulation {} x world size {} (it gives a micro-batch of {})",
                          limits::kMaxMicroBatch, *ga, world, *micro));
    if (ga_from == kFromTbs && *ga > limits::kMaxGradAccum)
      r_.fail("/train_batch_size", tbs_value,
              fmt::format("at most micro-batch {} x accumulation {} x world size {} (it gives an accumulation of {})", *micro,
                          limits::kMaxGradAccum, world, *ga));
    if (micro && !micro_from.empty()) put_key("workload", "micro_batch", *micro, micro_from);
    if (ga && !ga_from.empty()) put_key("training", "grad_accum", *ga, ga_from);
  }

  void optimizer() {
    if (!has("optimizer")) return;
    const Json& o = ds_["optimizer"];
    if (!o.is_object() || !o.contains("type") || !o["type"].is_string()) r_.fail("/optimizer", o, "{\"type\": \"AdamW\", ...}");
    // DeepSpeed passes "params" as keyword arguments (runtime/engine.py _configure_basic_optimizer).
    if (o.contains("params") && !o["params"].is_object()) r_.fail("/optimizer/params", o["params"], "an object (the optimizer's keyword arguments)");
    std::string lower;
    for (char c : o["type"].get<std::string>()) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "adam" || lower == "adamw" || lower == "fusedadam") put_key("training", "optimizer", "adamw", "/optimizer/type");
    else if (lower == "sgd") put_key("training", "optimizer", "sgd", "/optimizer/type");
    // runtime/config.py LION_OPTIMIZER: engine.py _configure_basic_optimizer builds FusedLion.
    else if (lower == "lion") put_key("training", "optimizer", "lion", "/optimizer/type");
    else r_.fail("/optimizer/type", o["type"], "Adam, AdamW, Lion or SGD (the optimizers stepsim models with DeepSpeed)");
  }

  void reduction_dtypes() {
    if (has("communication_data_type") && !ds_["communication_data_type"].is_null())
      put_strategy("communication_data_type", ds_["communication_data_type"], "/communication_data_type");
    if (!has("data_types")) return;
    const Json& dt = ds_["data_types"];
    if (!dt.is_object()) r_.fail("/data_types", dt, "an object");
    for (auto it = dt.begin(); it != dt.end(); ++it) {
      if (it.key() != "grad_accum_dtype") r_.fail("/data_types/" + it.key(), it.value(), "only grad_accum_dtype");
      if (!it.value().is_null()) put_strategy("grad_accum_dtype", it.value(), "/data_types/grad_accum_dtype");
    }
  }

  // The zero strategy's key `key` = `v`, from the DeepSpeed file's `path`: the strategy's table
  // checks the value, and its messages name the file and `path` (SourceMap::path_in_file_of).
  void put_strategy(const std::string& key, const Json& v, const std::string& path) {
    if (strategy_.contains(key) && strategy_[key] != v)
      throw InputError(fmt::format("{}: /strategy/{}: {}: expected the value of {} {} ({}), or remove one of them", where_, key,
                                   json_value_for_message(strategy_[key]), ds_file_, path, json_value_for_message(v)));
    strategy_[key] = v;
    sources_.file_of_prefix["/strategy/" + key] = ds_file_;
    sources_.path_in_file_of["/strategy/" + key] = path;
  }

  void zero_optimization() {
    const Json zero = ds_.value("zero_optimization", Json::object());
    if (!zero.is_object()) r_.fail("/zero_optimization", zero, "an object");
    if (!zero.contains("stage")) r_.fail("/zero_optimization", zero, "a ZeRO stage (zero_optimization.stage 1, 2 or 3)");
    const ForeignObject& decl = foreign_keys::deepspeed_zero();
    for (auto it = zero.begin(); it != zero.end(); ++it) {
      const std::string path = "/zero_optimization/" + it.key();
      const ForeignKey* k = decl.find(it.key());
      if (!k)
        r_.fail(path, it.value(), "a zero_optimization key stepsim translates or knows to leave the step unchanged (unknown key)");
      if (k->use == ForeignKey::Use::Read) zero_key(it.key(), path, it.value(), *k);  // the strategy's table checks it
      else if (k->use == ForeignKey::Use::Checked) check_zero_key(it.key(), path, it.value(), *k);
      else check_type(*k, path, it.value());  // NoEffect, NotModelled: not read, but of the declared type
    }
  }

  // The zero strategy's key of the same name (its table checks the value).
  void zero_key(const std::string& key, const std::string& path, const Json& v, const ForeignKey& k) {
    if (is_auto(v)) {
      // The HF Trainer's "auto", for the keys the declaration says take it: transformers
      // src/transformers/integrations/deepspeed.py (02348331),
      // HfTrainerDeepSpeedConfig.trainer_config_finalize l.222-246 takes model.config.hidden_size
      // and fills reduce_bucket_size = hidden^2 (l.236), stage3_prefetch_bucket_size =
      // 0.9 hidden^2 (l.239-242; DeepSpeed's field is an int, runtime/zero/config.py, so the
      // fraction is dropped) and stage3_param_persistence_threshold = 10 hidden (l.243-246);
      // fill_match (l.104-128) replaces only an "auto". The batch keys come from the trainer's
      // arguments (trainer_config_process l.139-156), here the experiment's (batch() above).
      const std::int64_t hidden = hidden_size_of(doc_, sources_);
      if (k.key.choices.empty()) r_.fail(path, v, "a number (\"auto\" is resolved only for the buckets and persistence threshold)");
      if (hidden <= 0) r_.fail(path, v, "a number (\"auto\" needs the model's hidden size: a preset, model dimensions or an hf_config)");
      if (key == "reduce_bucket_size") strategy_[key] = hidden * hidden;
      else if (key == "stage3_prefetch_bucket_size" || key == "prefetch_bucket_size")
        strategy_[key] = static_cast<std::int64_t>(0.9 * static_cast<double>(hidden * hidden));
      else strategy_[key] = 10 * hidden;  // (stage3_)param_persistence_threshold
      sources_.file_of_prefix["/strategy/" + key] = ds_file_;
      sources_.path_in_file_of["/strategy/" + key] = path;
    } else {
      put_strategy(key, v, path);
    }
  }

  void check_zero_key(const std::string& key, const std::string& path, const Json& v, const ForeignKey& k) const {
    if (key == "offload_param" || key == "offload_optimizer") {
      // A device that is not a string (null, 5) is not "none" either: refused, naming the key.
      const bool no_offload = v.is_null() || (v.is_object() && (!v.contains("device") ||
                                                               (v["device"].is_string() && v["device"] == "none")));
      if (!no_offload)
        r_.fail(path, v, "no offload (device \"none\"): " + not_modelled("CPU/NVMe offload"));
    } else if (k.neutral) {
      // One accepted value, of the declared type (an integral 1.0 is not 1; stepsim asks for the plain value).
      const bool typed = k.key.types == kBoolean ? v.is_boolean() : v.is_number_integer();
      if (!typed || v != *k.neutral) r_.fail(path, v, fmt::format("{} ({})", k.accepts, not_modelled("the other setting")));
    } else {  // mics_shard_size: any integer up to the declared maximum (MiCS off)
      if (!v.is_number_integer() || static_cast<double>(v.get<std::int64_t>()) > *k.key.max)
        r_.fail(path, v, fmt::format("{} ({})", k.accepts, not_modelled("MiCS")));
    }
  }

  Json& doc_;
  SourceMap& sources_;
  Json& strategy_;
  const Json& ds_;
  std::string ds_file_, where_;
  DsReader r_;
  const ForeignObject& top_ = foreign_keys::deepspeed();
};

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
    throw_input_error(where, "/strategy/deepspeed_config", name,
                      "an existing DeepSpeed config file " + not_found_where(name.get<std::string>(), where));
  const Json ds = read_json_file(file);
  if (!ds.is_object()) throw_input_error(file.string(), "", ds, "a DeepSpeed config object");
  strategy.erase("deepspeed_config");
  if (strategy.contains("framework") && strategy["framework"] != "zero")
    throw_input_error(where, "/strategy/framework", strategy["framework"], "\"zero\" (or none) with a deepspeed_config");
  strategy["framework"] = "zero";
  DeepSpeedTranslation(doc, sources, ds, file.string(), where).run();
}

}  // namespace stepsim
