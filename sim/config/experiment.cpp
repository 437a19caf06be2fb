#include "sim/config/experiment.hpp"

#include <fmt/format.h>

#include "sim/config/foreign_configs.hpp"
#include "sim/hardware/profile_cache.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

namespace fs = std::filesystem;

static Checkpointing parse_ckpt(ObjectReader& r) {
  std::string c = r.choice("activation_checkpointing", "none", {"none", "selective", "full", "op_sac", "every_k"});
  if (c == "full") return Checkpointing::Full;
  if (c == "selective") return Checkpointing::Selective;
  if (c == "op_sac") return Checkpointing::OpSac;
  if (c == "every_k") return Checkpointing::EveryK;
  return Checkpointing::None;
}

// The implementation knobs over the preset's (or family's) defaults.
static void parse_options(ObjectReader& w, WorkloadOptions& o) {
  if (w.has("implementation")) {
    std::string i = w.choice("implementation", {"hf", "torchtitan", "llm_foundry", "megatron"});
    o.impl = i == "hf" ? Implementation::Hf : i == "torchtitan" ? Implementation::Torchtitan
           : i == "llm_foundry" ? Implementation::LlmFoundry : Implementation::Megatron;
  }
  if (w.has("attention")) {
    std::string a = w.choice("attention", {"flash", "sdpa_efficient", "eager"});
    o.attention = a == "flash" ? Attention::Flash : a == "eager" ? Attention::Eager : Attention::SdpaEfficient;
  }
  if (w.has("dropout")) {
    o.dropout = w.fraction("dropout", o.dropout);
    if (o.dropout >= 1) w.fail("dropout", "a probability in [0, 1)");
  }
  if (w.has("attention_dropout")) {
    o.attention_dropout = w.fraction("attention_dropout", o.attention_dropout);
    if (o.attention_dropout >= 1) w.fail("attention_dropout", "a probability in [0, 1)");
  }
  o.compile = w.boolean("compile", o.compile);
  if (o.checkpointing == Checkpointing::EveryK)
    o.checkpoint_every = static_cast<int>(w.positive_integer("activation_checkpointing_every"));
  else if (w.has("activation_checkpointing_every"))
    w.fail("activation_checkpointing_every", "only with \"activation_checkpointing\": \"every_k\"");
}

static Workload parse_toy(ObjectReader& w) {
  ObjectReader t = w.object("toy");
  Dtype dt = w.dtype("dtype", Dtype::BF16);
  std::vector<ToyLayerSpec> specs;
  if (t.has("layer_list")) {
    for (auto& l : t.objects("layer_list")) {
      ToyLayerSpec s;
      s.forward = Time::from_ms(l.non_negative("forward_ms", 0));
      s.backward = Time::from_ms(l.non_negative("backward_ms", 0));
      s.params = l.non_negative_integer("params", 0);
      s.activations = Bytes{l.non_negative_integer("activation_bytes", 0)};
      l.finish();
      specs.push_back(s);
    }
  } else {
    std::int64_t n = t.positive_integer("layers");
    ToyLayerSpec s;
    s.forward = Time::from_ms(t.non_negative("forward_ms", 0));
    s.backward = Time::from_ms(t.non_negative("backward_ms", 0));
    s.params = t.non_negative_integer("params_per_layer", 0);
    s.activations = Bytes{t.non_negative_integer("activation_bytes_per_layer", 0)};
    specs.assign(static_cast<std::size_t>(n), s);
  }
  t.finish();
  return build_toy(specs, dt);
}

static Workload parse_workload(ObjectReader w) {
  if (w.has("toy")) {
    Workload out = parse_toy(w);
    w.finish();
    return out;
  }
  std::int64_t mb = w.positive_integer("micro_batch", 1);
  std::int64_t seq = w.positive_integer("seq_len", 2048);
  Dtype dt = w.dtype("dtype", Dtype::BF16);
  Checkpointing ckpt = parse_ckpt(w);
  ModelDims dims;
  std::string name;
  if (w.has("preset")) {
    name = w.string("preset");
    try {
      dims = preset_dims(name);
    } catch (const std::out_of_range&) {
      std::string all;
      for (const auto& n : preset_names()) all += (all.empty() ? "" : ", ") + n;
      w.fail("preset", "a known model preset (" + all + ")");
    }
  } else if (w.has("model") && w.raw("model").is_object() && w.raw("model").contains("hf_config")) {
    // A Hugging Face config.json the user already has (sim/config/foreign_configs.hpp).
    ObjectReader m = w.object("model");
    std::string file = m.string("hf_config");
    fs::path path = resolve_config_path(file, m.sources().file_for(m.path_of("hf_config")));
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) m.fail("hf_config", "an existing Hugging Face config.json (not found)");
    dims = dims_from_hf_config(path, name, seq);
    name = m.string("name", name);
    m.finish();
  } else if (w.has("model")) {
    ObjectReader m = w.object("model");
    name = m.string("name", "custom");
    dims.family = m.choice("family", "llama", {"llama", "gpt", "opt", "mpt"});
    dims.hidden = m.positive_integer("hidden");
    dims.layers = m.positive_integer("layers");
    dims.heads = m.positive_integer("heads");
    dims.kv_heads = m.positive_integer("kv_heads", dims.heads);
    dims.ffn = m.positive_integer("ffn");
    dims.vocab = m.positive_integer("vocab");
    dims.max_positions = m.non_negative_integer("max_positions", 0);
    dims.tied_embeddings = m.boolean("tied_embeddings", dims.family != "llama");
    if (dims.hidden % dims.heads != 0) m.fail("heads", fmt::format("a divisor of hidden ({})", dims.hidden));
    if (dims.heads % dims.kv_heads != 0) m.fail("kv_heads", fmt::format("a divisor of heads ({})", dims.heads));
    m.finish();
  } else {
    w.fail("preset", "a model: \"preset\" (e.g. llama3-8b), \"model\" (dimensions) or \"toy\"");
  }
  WorkloadOptions opts = w.has("preset") && !w.has("model") ? preset_options(name) : default_options(dims.family);
  opts.checkpointing = ckpt;
  parse_options(w, opts);
  w.finish();
  return build_transformer(name, dims, mb, seq, dt, opts);
}

static ClusterConfig parse_cluster(ObjectReader c, ProfileCache* profiles) {
  ClusterConfig out;
  out.nodes = static_cast<int>(c.positive_integer("nodes", 1));
  out.gpus_per_node = static_cast<int>(c.positive_integer("gpus_per_node", 8));
  if (c.has("profile") && c.raw("profile").is_object()) {
    ObjectReader p = c.object("profile");
    out.profile = parse_profile(p);
    out.profile_path = "(inline)";
  } else {
    std::string name = c.string("profile");
    fs::path path = resolve_config_path(name, c.sources().file_for(c.path_of("profile")));
    if (!fs::exists(path)) c.fail("profile", "an existing hardware profile file (not found)");
    out.profile_path = name;
    out.profile = profiles ? *profiles->load(path) : load_profile(path);
  }
  c.finish();
  return out;
}

static TrainingConfig parse_training(ObjectReader t) {
  TrainingConfig out;
  out.grad_accum = static_cast<int>(t.positive_integer("grad_accum", 1));
  out.no_sync = t.boolean("no_sync", true);
  std::string opt = t.choice("optimizer", "adamw", {"adamw", "adam", "sgd", "none"});
  out.optimizer = opt == "sgd" ? Optimizer::SGD : opt == "none" ? Optimizer::None : Optimizer::AdamW;
  out.master_dtype = t.dtype("master_dtype", Dtype::FP32);
  if (t.has("allocator")) {
    ObjectReader a = t.object("allocator");
    out.allocator.expandable_segments = a.boolean("expandable_segments", false);
    // CUDAAllocatorConfig::parseMaxSplitSize: a size in MiB, which must exceed kLargeBuffer
    // (20 MiB) upstream ("CachingAllocator option max_split_size_mb too small, must be > 20");
    // null is the default: no limit.
    if (a.has("max_split_size_mb") && !a.raw("max_split_size_mb").is_null()) {
      double mb = a.positive("max_split_size_mb");
      if (mb != static_cast<double>(static_cast<std::int64_t>(mb)) || mb <= 20 || mb > 1024.0 * 1024.0)
        a.fail("max_split_size_mb", "null or an integer number of MiB > 20 and <= 1048576 (PyTorch rejects <= 20)");
      out.allocator.max_split_size = Bytes::from_mib(static_cast<std::int64_t>(mb));
    }
    a.finish();
  }
  t.finish();
  return out;
}

Experiment experiment_from_json(const nlohmann::json& doc, const SourceMap& sources, ProfileCache* profiles,
                                const std::string& root_path) {
  // A DeepSpeed config named by the strategy becomes the experiment's own keys first.
  const bool ds = doc.is_object() && doc.contains("strategy") && doc["strategy"].is_object() &&
                  doc["strategy"].contains("deepspeed_config");
  if (ds && root_path.empty()) {
    Json expanded = doc;
    SourceMap expanded_sources = sources;
    expand_deepspeed_config(expanded, expanded_sources);
    return experiment_from_json(expanded, expanded_sources, profiles, root_path);
  }
  if (ds) {
    // Embedded (validate): expand a standalone copy whose paths are relative to the embedding.
    SourceMap local;
    local.root_file = sources.file_for(root_path);
    for (const auto& [prefix, file] : sources.file_of_prefix)
      if (prefix.rfind(root_path, 0) == 0 && prefix.size() > root_path.size()) local.file_of_prefix[prefix.substr(root_path.size())] = file;
    Json expanded = doc;
    expand_deepspeed_config(expanded, local);
    return experiment_from_json(expanded, local, profiles, "");
  }
  Experiment e;
  e.file = root_path.empty() ? sources.root_file : sources.file_for(root_path);
  e.resolved = doc;
  ObjectReader root(doc, sources, root_path);
  e.workload = parse_workload(root.object("workload"));
  e.cluster = parse_cluster(root.object("cluster"), profiles);
  e.training = root.has("training") ? parse_training(root.object("training")) : TrainingConfig{};
  if (root.has("name")) root.string("name");
  if (root.has("description")) root.string("description");
  // Free-text notes (stepsim init writes what it guessed here); strings only.
  if (root.has("notes"))
    for (const auto& n : root.array("notes"))
      if (!n.is_string()) root.fail("notes", "an array of strings");
  ObjectReader s = root.object("strategy");
  if (s.has("world_size")) {
    std::int64_t ws = s.positive_integer("world_size");
    if (ws != e.cluster.world_size())
      s.fail("world_size", fmt::format("the cluster's world size {} ({} nodes x {} GPUs)", e.cluster.world_size(),
                                       e.cluster.nodes, e.cluster.gpus_per_node));
  }
  e.strategy = parse_strategy(s, e);
  root.finish();
  return e;
}

Experiment load_experiment(const fs::path& file, const std::vector<std::string>& overrides) {
  SourceMap sources;
  nlohmann::json doc = load_with_includes(file, sources);
  for (const auto& o : overrides) apply_override(doc, o);
  return experiment_from_json(doc, sources);
}

}  // namespace stepsim
