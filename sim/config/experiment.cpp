#include "sim/config/experiment.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/config/experiment_keys.hpp"
#include "sim/config/foreign_configs.hpp"
#include "sim/core/checked.hpp"
#include "sim/core/data_dir.hpp"
#include "sim/hardware/profile_cache.hpp"
#include "sim/program/builder.hpp"

namespace stepsim {

namespace fs = std::filesystem;

using namespace limits;

static Checkpointing parse_ckpt(ObjectReader& r) {
  std::string c = r.declared_choice("activation_checkpointing");
  if (c == "full") return Checkpointing::Full;
  // Megatron's and torchtitan's "selective" are different policies: each has a name of its own.
  if (c == "selective" || c == "megatron_selective") return Checkpointing::Selective;
  if (c == "op_sac" || c == "torchtitan_selective_op") return Checkpointing::OpSac;
  if (c == "every_k") return Checkpointing::EveryK;
  return Checkpointing::None;
}

// The implementation knobs over the preset's (or family's) defaults.
static void parse_options(ObjectReader& w, WorkloadOptions& o) {
  if (w.has("implementation")) {
    std::string i = w.declared_choice("implementation");  // experiment_keys.cpp lists them
    o.impl = i == "hf" ? Implementation::Hf : i == "torchtitan" ? Implementation::Torchtitan
           : i == "llm_foundry" ? Implementation::LlmFoundry : i == "megatron" ? Implementation::Megatron
           : Implementation::ModdedNanogpt;
  }
  if (w.has("attention")) {
    const auto& names = attention_names();
    const std::string a = w.declared_choice("attention");  // one of attention_names() (experiment_keys.cpp)
    o.attention = static_cast<Attention>(std::find(names.begin(), names.end(), a) - names.begin());
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
  if (w.has("training_loop")) {
    const auto& names = training_loop_names();
    const std::string l = w.declared_choice("training_loop");  // one of training_loop_names() (experiment_keys.cpp)
    o.loop = static_cast<TrainingLoop>(std::find(names.begin(), names.end(), l) - names.begin());
  }
  if (w.has("loop_keeps_output")) o.loop_keeps_output = w.boolean("loop_keeps_output", false);
  if (w.has("flash_attn_version")) {
    o.flash_attn_version = w.release("flash_attn_version", "a flash_attn 2.x release such as \"2.5.8\" or \"2.8.3\"");
    if (o.flash_attn_version->major != 2)
      w.fail("flash_attn_version", "a flash_attn 2.x release such as \"2.5.8\" or \"2.8.3\" (`flash` is FlashAttention-2)");
  }
  if (w.has("checkpoint_early_stop")) {
    o.checkpoint_early_stop = w.boolean("checkpoint_early_stop", false);
    if (*o.checkpoint_early_stop && o.torch() < kCheckpointEarlyStopSince)
      w.fail("checkpoint_early_stop", fmt::format("false with training.torch_version {} (early stop came with PyTorch {})",
                                                  o.torch().text(), kCheckpointEarlyStopSince.text()));
  }
  if (w.has("window_blocks")) o.window_blocks = static_cast<int>(w.declared_integer("window_blocks"));
  if (o.checkpointing == Checkpointing::EveryK)
    o.checkpoint_every = static_cast<int>(w.positive_integer("activation_checkpointing_every"));
  else if (w.has("activation_checkpointing_every"))
    w.fail("activation_checkpointing_every", "only with \"activation_checkpointing\": \"every_k\"");
}

static Workload parse_toy(ObjectReader& w) {
  ObjectReader t = w.object("toy", experiment_keys::toy());
  Dtype dt = w.dtype("dtype", Dtype::BF16);
  std::vector<ToyLayerSpec> specs;
  if (t.has("layer_list")) {
    for (auto& l : t.objects("layer_list", experiment_keys::toy_layer())) {
      ToyLayerSpec s;
      s.forward = Time::from_ms(l.declared_number("forward_ms"));
      s.backward = Time::from_ms(l.declared_number("backward_ms"));
      s.params = l.declared_integer("params");
      s.activations = Bytes{l.declared_integer("activation_bytes")};
      l.finish();
      specs.push_back(s);
    }
  } else {
    std::int64_t n = t.declared_integer("layers");
    ToyLayerSpec s;
    s.forward = Time::from_ms(t.declared_number("forward_ms"));
    s.backward = Time::from_ms(t.declared_number("backward_ms"));
    s.params = t.declared_integer("params_per_layer");
    s.activations = Bytes{t.declared_integer("activation_bytes_per_layer")};
    specs.assign(static_cast<std::size_t>(n), s);
  }
  if (specs.size() > static_cast<std::size_t>(kMaxLayers))
    t.fail("layer_list", fmt::format("at most {} layers", kMaxLayers));
  // Summed over layers, parameter states (<= 32 B per element) and activations must stay
  // countable: overflow is an input error, not a result.
  std::optional<std::int64_t> params = 0, acts = 0;
  for (const auto& sp : specs) {
    params = checked_add(params, std::optional<std::int64_t>(sp.params));
    acts = checked_add(acts, std::optional<std::int64_t>(sp.activations.count));
  }
  auto state_bytes = checked_mul(params, std::optional<std::int64_t>(32));
  if (!state_bytes || *state_bytes > kMaxWorkloadBytes || !acts || *acts > kMaxWorkloadBytes)
    w.fail("toy", fmt::format("a model whose parameters x 32 B and activations sum to at most 2^56 bytes (64 PiB)"));
  t.finish();
  return build_toy(specs, dt);
}

// The largest sizes build_transformer forms (sim/workload/transformer.cpp), bounded from above
// in checked arithmetic before it runs: parameters (embedding, head, per-layer projections)
// x 32 B of states, and per-token activation bytes (at most 4 B per element, x 5 for the
// backward working set, over all layers plus embedding and head). Overflow or more than
// 2^56 B is an input error naming the key that made it so.
static void check_transformer_sizes(ObjectReader& w, const ModelDims& d, std::int64_t mb, std::int64_t seq) {
  using O = std::optional<std::int64_t>;
  const std::int64_t h = d.hidden, I = d.ffn, L = d.layers;
  O per_layer = checked_add(checked_add(checked_product({4, h, h}), checked_product({3, h, I})), O(8 * h));
  O embed = checked_mul(checked_add(checked_mul(O(2), O(d.vocab)), O(d.max_positions)), O(h));
  O params = checked_add(checked_mul(O(L), per_layer), embed);
  O states = checked_mul(params, O(32));
  const std::string model_key = w.has("preset") ? "preset" : "model";
  if (!states || *states > kMaxWorkloadBytes)
    w.fail_value(model_key, Json(params ? fmt::format("{} parameters", *params) : std::string("more than 2^63 parameters")),
                 "a model whose parameter states (32 B per parameter) fit in 2^56 bytes (64 PiB)");
  O tokens = checked_mul(O(mb), O(seq));
  O per_token = checked_add(checked_add(checked_product({16, h}), checked_product({8, I})), checked_product({12, d.vocab}));
  O act = checked_mul(checked_mul(checked_mul(tokens, per_token), O(4 * 5)), O(L + 2));
  // The attention score FLOPs grow with seq^2: bound b * s * s * h * layers too (as FLOPs).
  const double attn = 5.0 * static_cast<double>(mb) * static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(h) *
                      static_cast<double>(L);
  if (!act || *act > kMaxWorkloadBytes || attn > 1e27) {
    const std::string key = w.has("micro_batch") ? "micro_batch" : w.has("seq_len") ? "seq_len" : model_key;
    w.fail_value(key, key == model_key ? Json(model_key) : Json(key == "micro_batch" ? mb : seq),
                 fmt::format("a size whose activations fit in 2^56 bytes and whose attention work stays below 1e27 FLOPs "
                             "(micro_batch {} x seq_len {} x per-token bytes x {} layers overflows)",
                             mb, seq, L));
  }
}

// modded-nanogpt's GPT is modelled as its records run it (transformer.cpp, namespace nanogpt): its
// implementation and family only together, the whole model compiled, nothing checkpointed.
static void check_nanogpt(ObjectReader& w, const ModelDims& dims, const WorkloadOptions& o) {
  const bool of_2025 = dims.family == "nanogpt-2025";
  const bool family = dims.family == "nanogpt" || of_2025, impl = o.impl == Implementation::ModdedNanogpt;
  if (family && !impl)
    w.fail("implementation", fmt::format("modded_nanogpt for the family {} (the only code of that model stepsim models)", dims.family));
  if (impl && !family)
    w.fail("implementation", fmt::format("one of hf, torchtitan, llm_foundry, megatron for the family {} (modded_nanogpt "
                                         "is the families nanogpt's and nanogpt-2025's)", dims.family));
  if (w.has("window_blocks") && !of_2025)
    w.fail("window_blocks", fmt::format("no window_blocks for the family {} (the sliding windows of the family nanogpt-2025)", dims.family));
  if (!impl) return;
  if (of_2025) {
    // The record's layer pattern (which blocks attend, which windows are long, where the value
    // embeddings and skips go) is written for its 12 blocks, and FlashAttention-3 is its kernel.
    const char* model = w.has("preset") ? "preset" : "model";
    if (dims.layers != 12)
      w.fail(model, fmt::format("12 layers for the family nanogpt-2025, not {} (its layer pattern is the record's, written for "
                                "12 blocks)", dims.layers));
    if (dims.hidden != dims.heads * 128)
      w.fail(model, fmt::format("a hidden size of heads x 128 for the family nanogpt-2025, not {} (its heads are 128 wide)", dims.hidden));
    if (o.attention != Attention::Flash3)
      w.fail("attention", "flash3 with the family nanogpt-2025 (its attention is FlashAttention-3's varlen kernel)");
  }
  if (!o.compile) w.fail("compile", "true with modded_nanogpt (its records compile the whole model; eager is not modelled)");
  if (o.checkpointing != Checkpointing::None)
    w.fail("activation_checkpointing", "none with modded_nanogpt (its records checkpoint nothing; not modelled)");
  if (o.attention == Attention::Eager)
    w.fail("attention", "a fused attention kernel with modded_nanogpt (it calls F.scaled_dot_product_attention)");
}

// `torch_version`: the run's PyTorch (training.torch_version), for the implementation defaults
// that depend on it.
// `recycled`: a workload no longer needed, which the build may take names from
// (build_transformer).
static Workload parse_workload(ObjectReader w, std::optional<Release> torch_version, Workload* recycled) {
  if (w.has("toy")) {
    Workload out = parse_toy(w);
    w.finish();
    return out;
  }
  std::int64_t mb = w.declared_integer("micro_batch");
  std::int64_t seq = w.declared_integer("seq_len");
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
    ObjectReader m = w.object("model", experiment_keys::hf_model());
    std::string file = m.string("hf_config");
    const std::string named_in = m.sources().file_for(m.path_of("hf_config"));
    fs::path path = resolve_config_path(file, named_in);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) m.fail("hf_config", "an existing Hugging Face config.json " + not_found_where(file, named_in));
    dims = dims_from_hf_config(path, name, seq);
    name = m.string("name", name);
    m.finish();
  } else if (w.has("model")) {
    ObjectReader m = w.object("model", experiment_keys::model());
    name = m.string("name", "custom");
    dims.family = m.declared_choice("family");
    dims.hidden = m.declared_integer("hidden");
    dims.layers = m.declared_integer("layers");
    dims.heads = m.declared_integer("heads");
    dims.kv_heads = m.integer_in("kv_heads", 1, kMaxHidden, dims.heads);
    dims.ffn = m.declared_integer("ffn");
    dims.vocab = m.declared_integer("vocab");
    dims.max_positions = m.declared_integer("max_positions");
    dims.tied_embeddings = m.boolean("tied_embeddings", dims.family != "llama");
    if (dims.hidden % dims.heads != 0) m.fail("heads", fmt::format("a divisor of hidden ({})", dims.hidden));
    if (dims.heads % dims.kv_heads != 0) m.fail("kv_heads", fmt::format("a divisor of heads ({})", dims.heads));
    m.finish();
  } else {
    w.fail("preset", "a model: \"preset\" (e.g. llama3-8b), \"model\" (dimensions) or \"toy\"");
  }
  WorkloadOptions opts = w.has("preset") && !w.has("model") ? preset_options(name) : default_options(dims.family);
  opts.checkpointing = ckpt;
  opts.torch_version = torch_version;
  parse_options(w, opts);
  check_nanogpt(w, dims, opts);
  // A config.json model in an HF training loop (the Trainer, or a script's own loop over an HF
  // model) is the transformers model, unless the experiment names another implementation. The
  // DeepSpeed translation says the same for a config.json model under ZeRO (foreign_configs.cpp).
  const bool from_hf_config = w.has("model") && w.raw("model").is_object() && w.raw("model").contains("hf_config");
  if (from_hf_config && !w.has("implementation") && opts.loop &&
      (*opts.loop == TrainingLoop::HfTrainer || *opts.loop == TrainingLoop::HfScript))
    opts.impl = Implementation::Hf;
  w.finish();
  check_transformer_sizes(w, dims, mb, seq);
  return build_transformer(name, dims, mb, seq, dt, opts, recycled);
}

static ClusterConfig parse_cluster(ObjectReader c, ProfileCache* profiles) {
  ClusterConfig out;
  out.nodes = c.declared_int("nodes");
  out.gpus_per_node = c.declared_int("gpus_per_node");
  if (static_cast<std::int64_t>(out.nodes) * out.gpus_per_node > kMaxWorldSize)
    c.fail("nodes", fmt::format("a world size (nodes x gpus_per_node = {} x {}) of at most {}", out.nodes,
                                out.gpus_per_node, kMaxWorldSize));
  if (c.has("profile") && c.raw("profile").is_object()) {
    ObjectReader p = c.object("profile");
    if (profiles) {
      // The same object read from the same file (a sweep's points) is parsed once.
      const std::string key = c.sources().file_for(c.path_of("profile")) + '\n' + c.raw("profile").dump();
      out.profile = profiles->inline_profile(key, [&] { return parse_profile(p); });
    } else {
      out.profile = parse_profile(p);
    }
    out.profile_path = "(inline)";
  } else {
    std::string name = c.string("profile");
    const std::string named_in = c.sources().file_for(c.path_of("profile"));
    fs::path path = resolve_config_path(name, named_in);
    std::error_code ec;  // a name the OS rejects (too long, ...) is not found either
    if (!fs::exists(path, ec)) c.fail("profile", "an existing hardware profile file " + not_found_where(name, named_in));
    out.profile_path = name;
    out.profile = profiles ? profiles->load(path) : load_shared_profile(path);
  }
  c.finish();
  return out;
}

std::string to_string(Optimizer o) {
  switch (o) {
    case Optimizer::AdamW: return "adamw";
    case Optimizer::SGD: return "sgd";
    case Optimizer::None: return "none";
    case Optimizer::Muon: return "muon";
    case Optimizer::Adafactor: return "adafactor";
    case Optimizer::Lion: return "lion";
    case Optimizer::AdamW8bit: return "adamw8bit";
    case Optimizer::NorMuon: return "normuon";
  }
  return "adamw";
}

std::string to_string(OptimizerImpl i) {
  return i == OptimizerImpl::Fused ? "fused" : i == OptimizerImpl::Foreach ? "foreach" : "for_loop";
}

const std::vector<std::string>& muon_impl_names() {
  static const std::vector<std::string> names{"torch", "modded_nanogpt", "modded_nanogpt_distributed"};
  return names;
}

std::string to_string(MuonImpl i) { return muon_impl_names()[static_cast<std::size_t>(i)]; }

static TrainingConfig parse_training(ObjectReader t) {
  TrainingConfig out;
  out.grad_accum = t.declared_int("grad_accum");
  out.no_sync = t.declared_boolean("no_sync");
  std::string opt = t.declared_choice("optimizer");
  // A declared choice: adam (priced as adamw) or one of the names.
  for (Optimizer o : {Optimizer::SGD, Optimizer::None, Optimizer::Muon, Optimizer::Adafactor, Optimizer::Lion, Optimizer::AdamW8bit,
                       Optimizer::NorMuon})
    if (opt == to_string(o)) out.optimizer = o;
  out.master_dtype = t.dtype("master_dtype", Dtype::FP32);
  if (t.has("optimizer_impl")) {
    const std::string i = t.declared_choice("optimizer_impl");
    out.optimizer_impl = i == "fused" ? OptimizerImpl::Fused : i == "foreach" ? OptimizerImpl::Foreach : OptimizerImpl::ForLoop;
  }
  if (t.has("muon_impl")) {
    const auto& names = muon_impl_names();
    const std::string i = t.declared_choice("muon_impl");  // one of muon_impl_names() (experiment_keys.cpp)
    if (out.optimizer != Optimizer::Muon) t.fail("muon_impl", "no muon_impl unless the optimizer is muon");
    out.muon_impl = static_cast<MuonImpl>(std::find(names.begin(), names.end(), i) - names.begin());
  }
  if (t.has("normuon_step")) {
    out.normuon_odd_step = t.declared_choice("normuon_step") == "odd";
    if (out.optimizer != Optimizer::NorMuon) t.fail("normuon_step", "no normuon_step unless the optimizer is normuon");
  }
  if (t.has("clip_grad_norm"))
    out.clip_grad_norm = t.raw("clip_grad_norm").is_null() ? std::optional<double>() : std::optional<double>(t.positive("clip_grad_norm"));
  if (t.has("torch_version")) out.torch_version = t.release("torch_version", "a PyTorch release such as \"2.1\" or \"2.9.0\"");
  if (t.has("allocator")) {
    ObjectReader a = t.object("allocator", experiment_keys::allocator());
    out.allocator.expandable_segments = a.declared_boolean("expandable_segments");
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

namespace {

// The entry of `m` used longest ago.
template <typename Map>
typename Map::iterator least_recent(Map& m) {
  return std::min_element(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
}

}  // namespace

std::shared_ptr<const Workload> WorkloadCache::find(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      ++hits_;
      it->second.last_use = ++uses_;
      return it->second.workload;
    }
    // Full and dropping the least recent, it drops that one before the caller builds another,
    // which may be built from it (take_recyclable). A thread's own cache so frees the workload it
    // holds before the caller builds another: the build then reuses the memory just freed, still
    // in the core's caches (held until the new one was added, it made a sweep whose every point
    // builds its own 7 % slower).
    if (when_full_ == WhenFull::DropLeastRecent && by_key_.size() >= capacity_ && !by_key_.empty()) {
      auto lru = least_recent(by_key_);
      recyclable_.reset();
      if (lru->second.workload.use_count() == 1) recyclable_ = std::move(lru->second.workload);
      by_key_.erase(lru);
    }
    if (!parent_) {
      ++misses_;
      return nullptr;
    }
  }
  auto found = parent_->find(key);
  std::lock_guard lock(mutex_);
  ++(found ? hits_ : misses_);
  return found;
}

std::uint64_t WorkloadCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::uint64_t WorkloadCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

// KeepFirst: full, it keeps what it holds and takes nothing more. A sweep whose innermost axis
// cycles through more workloads than the capacity (sweep_bench: 625 sequence lengths) would
// otherwise evict each one before its next use and pay a copy per point for nothing; this way
// the first `capacity` workloads are shared and the others cost what they did without a cache
// (or, grouped by the runner, are shared by the points of a worker's run: the parent above).
std::shared_ptr<Workload> WorkloadCache::take_recyclable() {
  std::lock_guard lock(mutex_);
  return std::move(recyclable_);
}

void WorkloadCache::add(const std::string& key, std::shared_ptr<Workload> w) {
  if (parent_) parent_->add(key, w);
  std::lock_guard lock(mutex_);
  if (by_key_.contains(key)) return;  // two threads built it: keep the first
  if (by_key_.size() >= capacity_) {
    if (when_full_ == WhenFull::KeepFirst || by_key_.empty()) return;
    by_key_.erase(least_recent(by_key_));
  }
  by_key_.emplace(key, Entry{std::move(w), ++uses_});
}

WorkloadCache& process_workload_cache() {
  static WorkloadCache cache(8, WorkloadCache::WhenFull::DropLeastRecent);
  return cache;
}

Experiment read_experiment(nlohmann::json doc, const SourceMap& sources, const StrategyReader& read_strategy,
                           ProfileCache* profiles, const std::string& root_path, WorkloadCache* workloads) {
  // A DeepSpeed config named by the strategy becomes the experiment's own keys first.
  const bool ds = doc.is_object() && doc.contains("strategy") && doc["strategy"].is_object() &&
                  doc["strategy"].contains("deepspeed_config");
  if (ds && root_path.empty()) {
    SourceMap expanded_sources = sources;
    expand_deepspeed_config(doc, expanded_sources);
    return read_experiment(std::move(doc), expanded_sources, read_strategy, profiles, root_path, workloads);
  }
  if (ds) {
    // Embedded (validate): expand a standalone copy whose paths are relative to the embedding.
    SourceMap local;
    local.root_file = sources.file_for(root_path);
    for (const auto& [prefix, file] : sources.file_of_prefix)
      if (prefix.rfind(root_path, 0) == 0 && prefix.size() > root_path.size()) local.file_of_prefix[prefix.substr(root_path.size())] = file;
    expand_deepspeed_config(doc, local);
    return read_experiment(std::move(doc), local, read_strategy, profiles, "", workloads);
  }
  Experiment e;
  e.file = root_path.empty() ? sources.root_file : sources.file_for(root_path);
  e.resolved = std::move(doc);
  const Json& resolved = e.resolved;
  ObjectReader root(resolved, sources, root_path, &experiment_keys::root());
  // The training section first: the workload's defaults read its torch_version.
  e.training = root.has("training") ? parse_training(root.object("training", experiment_keys::training())) : TrainingConfig{};
  {
    ObjectReader w = root.object("workload", experiment_keys::workload());
    // The workload is a function of its object and torch_version alone; a cached one was
    // validated when it was built (errors are never cached: an invalid object is read again).
    // Read from the document, not through `w`: a key `w` is asked about joins the keys its errors
    // say this configuration reads.
    const Json& wj = resolved.at("workload");
    const auto model = wj.find("model");
    const bool model_from_file = model != wj.end() && model->is_object() && model->contains("hf_config");
    WorkloadCache* cache = model_from_file && workloads && !workloads->keeps_file_models() ? nullptr : workloads;
    std::string key;
    if (cache) {
      key = wj.dump();
      key += '\n';
      if (e.training.torch_version) key += e.training.torch_version->text();
    }
    if (auto cached = cache ? cache->find(key) : nullptr) {
      e.workload = std::move(cached);
    } else {
      const std::shared_ptr<Workload> recycled = cache ? cache->take_recyclable() : nullptr;
      auto built = std::make_shared<Workload>(parse_workload(std::move(w), e.training.torch_version, recycled.get()));
      if (cache) cache->add(key, built);
      e.workload = std::move(built);
    }
  }
  e.cluster = parse_cluster(root.object("cluster", experiment_keys::cluster()), profiles);
  // Every layer runs at least a forward and a backward kernel per micro-batch: refuse here,
  // before any build, a step whose program must exceed the instruction limit (builder.hpp).
  const std::int64_t min_instructions = 2 * static_cast<std::int64_t>(e.workload->layers.size()) * e.training.grad_accum;
  if (min_instructions > static_cast<std::int64_t>(kMaxProgramInstructions))
    throw_input_error(sources.file_for("/training/grad_accum"), "/training/grad_accum", Json(e.training.grad_accum),
                      fmt::format("at most {} micro-batches for {} layers (the step's program would exceed {} instructions: "
                                  "docs/limits.md)",
                                  static_cast<std::int64_t>(kMaxProgramInstructions) / (2 * static_cast<std::int64_t>(e.workload->layers.size())),
                                  e.workload->layers.size(), kMaxProgramInstructions));
  if (root.has("$schema")) root.string("$schema");  // for editors (stepsim schema)
  if (root.has("name")) root.string("name");
  if (root.has("description")) root.string("description");
  // Free-text notes (stepsim init writes what it guessed here); strings only.
  if (root.has("notes"))
    for (const auto& n : root.array("notes"))
      if (!n.is_string()) root.fail("notes", "an array of strings");
  ObjectReader s = root.object("strategy", experiment_keys::strategy_common());
  if (s.has("world_size")) {
    std::int64_t ws = s.integer_in("world_size", 1, kMaxWorldSize);
    if (ws != e.cluster.world_size())
      s.fail("world_size", fmt::format("the cluster's world size {} ({} nodes x {} GPUs)", e.cluster.world_size(),
                                       e.cluster.nodes, e.cluster.gpus_per_node));
  }
  // NorMuon and DistAdam are the 2025 record's own, written for its model's parameters (their
  // groups, shapes and labels); that model runs under no other optimizer stepsim models.
  const bool of_2025 = e.workload && e.workload->options && e.workload->options->window_blocks > 0;
  if ((e.training.optimizer == Optimizer::NorMuon) != of_2025)
    throw_input_error(sources.file_for("/training/optimizer"), "/training/optimizer", Json(to_string(e.training.optimizer)),
                      of_2025 ? "normuon with the family nanogpt-2025 (its record's NorMuon and DistAdam, which reduce the gradients "
                                "themselves)"
                              : "an optimizer other than normuon (modded-nanogpt's NorMuon and DistAdam of 2025 are written for the "
                                "family nanogpt-2025's parameters)");
  e.strategy = read_strategy(s, e);
  if (e.training.optimizer == Optimizer::Muon && e.training.muon_impl == MuonImpl::Torch && e.training.torch() < kTorchMuonSince)
    throw_input_error(sources.file_for("/training/optimizer"), "/training/optimizer", Json("muon"),
                      fmt::format("adamw, sgd or none with PyTorch {} (torch.optim.Muon is in PyTorch 2.9 and later)",
                                  e.training.torch().text()));
  // Lion's implementations are a for-loop (Composer's DecoupledLionW, llm-foundry's
  // decoupled_lionw) and a fused kernel (DeepSpeed's FusedLion); none runs foreach.
  if (e.training.optimizer == Optimizer::Lion && e.training.optimizer_impl == OptimizerImpl::Foreach)
    throw_input_error(sources.file_for("/training/optimizer_impl"), "/training/optimizer_impl", Json("foreach"),
                      "for_loop or fused with lion (Composer's DecoupledLionW loops over the parameters, DeepSpeed's "
                      "FusedLion is fused; " + not_modelled("a foreach Lion") + ")");
  // bitsandbytes' 8-bit optimizers have one code path: a Python loop over the parameters, one
  // kernel each (bitsandbytes/optim/optimizer.py, Optimizer8bit.step).
  if (e.training.optimizer == Optimizer::AdamW8bit && e.training.optimizer_impl && *e.training.optimizer_impl != OptimizerImpl::ForLoop)
    throw_input_error(sources.file_for("/training/optimizer_impl"), "/training/optimizer_impl",
                      Json(to_string(*e.training.optimizer_impl)),
                      "for_loop with adamw8bit (bitsandbytes' AdamW8bit steps parameter after parameter, one kernel each; "
                      "it has no fused or foreach path)");
  if (e.training.optimizer == Optimizer::Adafactor) {
    if (e.training.torch() < kTorchAdafactorSince)
      throw_input_error(sources.file_for("/training/optimizer"), "/training/optimizer", Json("adafactor"),
                        fmt::format("adamw, sgd or none with PyTorch {} (torch.optim.Adafactor is in PyTorch 2.5 and later)",
                                    e.training.torch().text()));
    // Adafactor runs its for-loop unless foreach=True, and has no fused path; its foreach path
    // (_multi_tensor_adafactor) is not modelled.
    if (e.training.optimizer_impl && *e.training.optimizer_impl != OptimizerImpl::ForLoop)
      throw_input_error(sources.file_for("/training/optimizer_impl"), "/training/optimizer_impl",
                        Json(to_string(*e.training.optimizer_impl)),
                        "for_loop with adafactor (torch.optim.Adafactor's default; it has no fused path, and " +
                            not_modelled("its foreach path") + ")");
  }
  root.finish();
  return e;
}

Json effective_workload(const Workload& w) {
  if (!w.options) return nullptr;
  const WorkloadOptions& o = *w.options;
  Json out = {{"implementation", to_string(o.impl)},
              {"attention", to_string(o.attention)},
              {"dropout", o.dropout},
              {"attention_dropout", o.attention_dropout},
              {"compile", o.compile},
              {"training_loop", to_string(o.training_loop())},
              {"loop_keeps_output", o.loop_keeps_output.value_or(false)},
              {"activation_checkpointing", to_string(o.checkpointing)}};
  if (o.attention == Attention::Flash) out["flash_attn_version"] = o.flash_attn().text();
  if (o.checkpointing == Checkpointing::EveryK) out["activation_checkpointing_every"] = o.checkpoint_every;
  if (o.window_blocks > 0) out["window_blocks"] = o.window_blocks;
  if (o.checkpointing != Checkpointing::None) out["checkpoint_early_stop"] = o.checkpoint_early_stop.value_or(false);
  return out;
}

Json load_experiment_document(const fs::path& file, const std::vector<std::string>& overrides, SourceMap& sources) {
  Json doc = load_with_includes(resolve_input_path(file), sources);
  for (const auto& o : overrides) apply_override(doc, o, &sources);
  return doc;
}

Json experiment_document_of(Json doc, const std::string& as_file, const std::vector<std::string>& overrides, SourceMap& sources) {
  doc = resolve_includes_of(std::move(doc), as_file, sources);
  for (const auto& o : overrides) apply_override(doc, o, &sources);
  return doc;
}

}  // namespace stepsim
