#include "sim/strategies/strategy_keys.hpp"

#include <cstdint>
#include <limits>

#include "sim/config/experiment_keys.hpp"

namespace stepsim {

using Json = nlohmann::json;

namespace strategy_keys {

namespace {

constexpr const char* kStepsim = "stepsim";
constexpr std::int64_t kMiB = 1024 * 1024;
const std::vector<Json> kOnOff{true, false};
// DeepSpeed-style element counts tune tries for a bucket size.
const std::vector<Json> kElementBuckets{50'000'000, 200'000'000, 500'000'000};

// A framework's table: the keys every strategy holds (framework, world_size), then its own.
ConfigObject framework_object(std::string framework, std::string doc, std::vector<ConfigKey> keys) {
  ConfigObject o;
  o.name = "strategy." + framework;
  o.path = "/strategy";
  o.doc = std::move(doc);
  o.keys = experiment_keys::strategy_common().keys;
  o.keys.insert(o.keys.end(), keys.begin(), keys.end());
  o.discriminator = "framework";
  o.discriminator_value = std::move(framework);
  return o;
}

ConfigKey dtype_key(std::string name, std::string default_text, std::string doc, std::string since) {
  ConfigKey k;
  k.name = std::move(name);
  k.types = kString;
  k.choices = dtype_choices();
  k.default_text = std::move(default_text);
  k.doc = std::move(doc);
  k.since = std::move(since);
  return k;
}

ConfigKey reported(std::string name, unsigned types, std::string doc) {
  ConfigKey k;
  k.name = std::move(name);
  k.types = types;
  k.doc = std::move(doc);
  k.since = kStepsim;
  k.reported_only = true;
  return k;
}

// A positive DeepSpeed element count (5e8 or 500000000).
ConfigKey elements(std::string name, std::int64_t def, std::string doc, std::string since, std::vector<Json> tune = {}) {
  ConfigKey k;
  k.name = std::move(name);
  k.types = kInteger;
  k.min = 0;  // DeepSpeed's config.py: Field(..., ge=0) for every element count
  k.default_value = Json(def);
  k.doc = std::move(doc);
  k.since = std::move(since);
  k.tune = std::move(tune);
  return k;
}

}  // namespace

const ConfigObject& ddp() {
  static const ConfigObject o = framework_object(
      "ddp", "torch.nn.parallel.DistributedDataParallel (framework-semantics.md section 3).",
      {
          {.name = "bucket_cap_mb", .types = kNumber, .min = 0, .min_exclusive = true, .default_value = Json(25),
           .doc = "Gradient bucket size in MiB (D3.2); not with bucket_cap_bytes.", .since = "PyTorch 1.0",
           .same_as = "bucket_cap_bytes", .same_as_scale = static_cast<double>(kMiB)},
          {.name = "bucket_cap_bytes", .types = kInteger, .min = 0, .min_exclusive = true, .default_value = Json(25 * kMiB),
           .doc = "The bucket size in bytes (what results report); not with bucket_cap_mb.", .since = kStepsim,
           .tune = {1 * kMiB, 5 * kMiB, 25 * kMiB, 100 * kMiB, 250 * kMiB}},
          {.name = "first_bucket_bytes", .types = kInteger, .min = 0, .min_exclusive = true,
           .default_text = "1048576 (1 MiB), or the cap when the cap is set (recent distributed.py)",
           .doc = "The first (last-layer) bucket's cap (dist._DEFAULT_FIRST_BUCKET_BYTES).", .since = "unknown",
           .tune = {1 * kMiB, 5 * kMiB, 25 * kMiB, 100 * kMiB, 250 * kMiB}},
          {.name = "gradient_as_bucket_view", .types = kBoolean, .default_value = Json(false),
           .doc = "Gradients are views into the buckets: no copy into them, no separate grad memory (D3.6).", .since = "PyTorch 1.7",
           .tune = kOnOff},
          dtype_key("param_dtype", "\"fp32\"", "The model weights' dtype (fp32 under autocast; bf16 for model.bfloat16()).", kStepsim),
      });
  return o;
}

const ConfigObject& fsdp1() {
  static const ConfigObject o = framework_object(
      "fsdp1", "FullyShardedDataParallel, FlatParameter FSDP (framework-semantics.md section 1).",
      {
          {.name = "sharding", .types = kString, .choices = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2"},
           .default_value = Json("full_shard"), .doc = "ShardingStrategy; a world size of 1 becomes no_shard.",
           .since = "PyTorch 1.11 (no_shard 1.12, hybrid_shard and _hybrid_shard_zero2 2.0)",
           .tune = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard"}},
          {.name = "backward_prefetch", .types = kString, .choices = {"backward_pre", "backward_post", "none"}, .default_value = Json("backward_pre"),
           .doc = "BackwardPrefetch: when the next unit's all-gather is issued in backward.", .since = "PyTorch 1.11",
           .tune = {"none", "backward_post", "backward_pre"}},
          {.name = "forward_prefetch", .types = kBoolean, .default_value = Json(false), .doc = "Issue the next unit's all-gather before this unit's forward.",
           .since = "PyTorch 1.12", .tune = kOnOff},
          {.name = "limit_all_gathers", .types = kBoolean, .default_value = Json(true),
           .doc = "The rate limiter: at most two all-gathers in flight (default true since PyTorch 2.1, PR #104900).", .since = "PyTorch 1.13 (PR #83917)",
           .tune = kOnOff},
          {.name = "wrap", .types = kString, .choices = {"block", "size", "none"}, .default_value = Json("block"),
           .doc = "auto_wrap_policy: block = transformer_auto_wrap_policy, size = size_based_auto_wrap_policy, none = the root alone.",
           .since = kStepsim, .tune = {"block", "size", "none"}},
          {.name = "min_num_params", .types = kInteger, .min = 0, .min_exclusive = true, .default_value = Json(100'000'000),
           .doc = "With wrap \"size\": a layer with at least this many parameters is a unit.", .since = "PyTorch 1.11"},
          {.name = "use_orig_params", .types = kBoolean, .default_value = Json(false),
           .doc = "Original parameters as views: 16-byte aligned flat parameters (F1.2).",
           .since = "unknown: 1.13 or 2.0 (PR #84911, autumn 2022)"},
          {.name = "mixed_precision", .types = kNull | kString | kObject, .choices = {"none"}, .objects = {"strategy.fsdp1.mixed_precision"},
           .default_value = Json(nullptr), .doc = "MixedPrecision(param_dtype, reduce_dtype); null or \"none\": full precision.",
           .since = "PyTorch 1.12"},
          reported("requested_sharding", kString, "The sharding asked for (before world size 1 -> no_shard)."),
          reported("param_dtype", kString, "The dtype parameters are gathered and computed in."),
          reported("reduce_dtype", kString, "The dtype gradients are reduced in."),
      });
  return o;
}

const ConfigObject& fsdp1_mixed_precision() {
  static const ConfigObject o{"strategy.fsdp1.mixed_precision",
                              "/strategy/mixed_precision",
                              "FSDP1 MixedPrecision (F1.22).",
                              {
                                  dtype_key("param_dtype", "the master dtype", "The dtype parameters are gathered and computed in.", "PyTorch 1.12"),
                                  dtype_key("reduce_dtype", "param_dtype", "The dtype gradients are reduced in.", "PyTorch 1.12"),
                                  dtype_key("buffer_dtype", "the master dtype",
                                            "The dtype of module buffers: accepted for PyTorch's MixedPrecision, no effect here "
                                            "(buffers, such as rotary inv_freq, are a few KiB and not modelled).",
                                            "PyTorch 1.12"),
                                  dtype_key("param", "the master dtype", "Alias of param_dtype (stepsim's first name for it).", kStepsim),
                                  dtype_key("reduce", "param", "Alias of reduce_dtype (stepsim's first name for it).", kStepsim),
                              }};
  return o;
}

const ConfigObject& fsdp2() {
  static const ConfigObject o = framework_object(
      "fsdp2", "fully_shard, per-parameter-sharding FSDP (framework-semantics.md section 2).",
      {
          {.name = "wrap", .types = kString, .choices = {"block", "none"}, .default_value = Json("block"),
           .doc = "block: fully_shard on every block and the root; none: the root alone.", .since = kStepsim, .tune = {"block", "none"}},
          {.name = "mesh", .types = kObject, .objects = {"strategy.fsdp2.mesh"}, .default_text = "1-D over the world",
           .doc = "The device mesh: {replicate, shard} is HSDP (F2.3).", .since = "PyTorch 2.4"},
          {.name = "reshard_after_forward", .types = kNull | kBoolean | kInteger, .default_value = Json(nullptr),
           .doc = "null/true: reshard non-root groups after forward; false: keep; k: keep a 1/k slice (1 < k < shard, dividing it) (F2.4).",
           .since = "PyTorch 2.4", .tune = kOnOff},
          {.name = "forward_prefetch", .types = kInteger, .min = 0, .max = 1024, .default_value = Json(0),
           .doc = "Groups unsharded ahead in forward (set_modules_to_forward_prefetch); 0: implicit.", .since = "unknown"},
          {.name = "backward_prefetch", .types = kInteger, .min = 1, .max = 1024, .default_value = Json(1),
           .doc = "Groups unsharded ahead in backward; 1: the implicit one-ahead prefetch (set_modules_to_backward_prefetch for more).",
           .since = "unknown"},
          {.name = "mixed_precision", .types = kObject, .objects = {"strategy.fsdp2.mixed_precision"},
           .doc = "MixedPrecisionPolicy (F2.5).", .since = "PyTorch 2.4"},
          {.name = "unset_reduce_dtype", .types = kString, .choices = {"param_dtype", "orig_dtype"}, .default_value = Json("param_dtype"),
           .doc = "Version knob (section 10): an unset reduce_dtype reduces in the param dtype (<= 2.9) or the original dtype (newer main).",
           .since = kStepsim},
          {.name = "reduce_scatter_max_input_buffers", .types = kInteger, .min = 1, .max = 1024, .default_value = Json(1),
           .doc = "Version knob (section 10, PR #186000): reduce-scatter inputs in flight before compute waits on the oldest.",
           .since = kStepsim},
          {.name = "root_reshard_after_forward", .types = kBoolean,
           .default_text = "true when reshard_after_forward is given and training.torch_version is 2.8 or later (pytorch#154704, "
                           "#155319), else false",
           .doc = "Whether the root group (embedding, final norm, head) reshards after forward and all-gathers again at backward "
                  "start (F2.4); before PyTorch 2.8 _lazy_init never resharded the root, and true is refused there.",
           .since = "PyTorch 2.4"},
          {.name = "reshard_last_block_after_forward", .types = kBoolean, .default_text = "as reshard_after_forward",
           .doc = "Whether the last block group reshards after forward: torchtitan passes false (\"do not reshard after forward for "
                  "the last transformer block since FSDP would prefetch it immediately\").",
           .since = kStepsim},
          reported("effective_reduce_dtype", kString, "The dtype gradients are reduced in."),
          reported("orig_dtype", kString, "The parameters' original (master) dtype."),
      });
  return o;
}

const ConfigObject& fsdp2_mesh() {
  static const ConfigObject o{
      "strategy.fsdp2.mesh",
      "/strategy/mesh",
      "A 2-D device mesh: replicate x shard = the world size.",
      {
          {.name = "replicate", .types = kInteger, .min = 1, .default_value = Json(1), .doc = "Replicas (dim 0), at most the world size.",
           .since = "PyTorch 2.4"},
          {.name = "shard", .types = kInteger, .min = 1, .default_text = "world size / replicate",
           .doc = "Ranks each parameter is sharded over (dim 1).", .since = "PyTorch 2.4"},
      }};
  return o;
}

const ConfigObject& fsdp2_mixed_precision() {
  static const ConfigObject o{
      "strategy.fsdp2.mixed_precision",
      "/strategy/mixed_precision",
      "FSDP2 MixedPrecisionPolicy (F2.5).",
      {
          dtype_key("param_dtype", "the master dtype", "The dtype parameters are gathered and computed in.", "PyTorch 2.4"),
          dtype_key("reduce_dtype", "unset (see unset_reduce_dtype)", "The dtype gradients are reduced in.", "PyTorch 2.4"),
      }};
  return o;
}

const ConfigObject& zero() {
  static const ConfigObject o = framework_object(
      "zero", "DeepSpeed ZeRO stages 1-3 with DeepSpeed's key names and 0.19 defaults (Z4.1); sizes are element counts.",
      {
          {.name = "deepspeed_config", .types = kString,
           .doc = "A DeepSpeed config JSON whose keys become this object's (docs/configuration-foreign.md).", .since = kStepsim,
           .pre_parse = true},
          {.name = "deepspeed_version", .types = kString, .default_value = Json("0.19.6"),
           .doc = "The DeepSpeed release whose rules apply where they changed: before 0.13.0 stage 1 ignores overlap_comm and "
                  "contiguous_gradients (#4887); before 0.18.3 the IPG buffers are allocated at the start of backward (#7665).",
           .since = kStepsim},
          {.name = "monitor", .types = kBoolean, .default_value = Json(false),
           .doc = "DeepSpeed's monitor is on (a tensorboard, wandb, csv_monitor or comet block enabled in the ds config): at each "
                  "accumulation boundary rank 0 reads the loss back (a host synchronization) and writes it before the backward, "
                  "for host.monitor_write_us; the other ranks wait for it at the next collective.",
           .since = "DeepSpeed 0.6.6 (MonitorMaster, #2013)", .tune = kOnOff},
          {.name = "stage", .types = kInteger, .min = 1, .max = 3, .doc = "The ZeRO stage (required).",
           .since = "DeepSpeed 0.1 (stage 1), 0.2 (stage 2), 0.3.13 (stage 3: v0.3.13 release notes, ZeRO 3 Offload #834)", .tune = {1, 2, 3}},
          elements("reduce_bucket_size", 500'000'000, "Elements per gradient (IPG) bucket.", "DeepSpeed 0.2", kElementBuckets),
          elements("allgather_bucket_size", 500'000'000, "Elements per post-step all-gather (with all_gather_into_tensor false).", "unknown",
                   kElementBuckets),
          {.name = "overlap_comm", .types = kBoolean, .default_text = "true at stage 3, else false",
           .doc = "Reduce gradients on a side stream, overlapping backward.", .since = "DeepSpeed 0.2", .tune = kOnOff},
          {.name = "contiguous_gradients", .types = kBoolean, .default_value = Json(true), .doc = "Copy reduced gradients into one contiguous buffer.",
           .since = "DeepSpeed 0.2", .tune = kOnOff},
          {.name = "reduce_scatter", .types = kBoolean, .default_value = Json(true), .doc = "Reduce gradients by reduce-scatter (else all-reduce).",
           .since = "DeepSpeed 0.2"},
          {.name = "use_multi_rank_bucket_allreduce", .types = kBoolean, .default_value = Json(true),
           .doc = "One all-reduce per IPG bucket; false: the older per-owner-rank reduce.", .since = "DeepSpeed 0.12.4 (PR #4695)"},
          {.name = "all_gather_into_tensor", .types = kBoolean, .default_value = Json(true),
           .doc = "Stages 1/2 gather the flat buffer with one all_gather_into_tensor; false: bucketed all_gather.",
           .since = "PyTorch 1.13 (all_gather_into_tensor)"},
          elements("stage3_prefetch_bucket_size", 50'000'000, "Stage 3: parameter elements prefetched ahead.", "DeepSpeed 0.3.13 (ZeRO-3, #834)", kElementBuckets),
          elements("prefetch_bucket_size", 50'000'000, "Alias of stage3_prefetch_bucket_size (not both).", "unknown"),
          elements("stage3_max_live_parameters", 1'000'000'000, "Stage 3: gathered parameter elements kept live.", "DeepSpeed 0.3.13 (ZeRO-3, #834)"),
          elements("max_live_parameters", 1'000'000'000, "Alias of stage3_max_live_parameters (not both).", "unknown"),
          elements("stage3_max_reuse_distance", 1'000'000'000, "Stage 3: a parameter reused within this distance is not released.",
                   "DeepSpeed 0.3.13 (ZeRO-3, #834)"),
          elements("max_reuse_distance", 1'000'000'000, "Alias of stage3_max_reuse_distance (not both).", "unknown"),
          elements("stage3_param_persistence_threshold", 100'000, "Stage 3: parameters this small stay gathered.", "DeepSpeed 0.3.13 (ZeRO-3, #834)"),
          elements("param_persistence_threshold", 100'000, "Alias of stage3_param_persistence_threshold (not both).", "unknown"),
          elements("stage3_model_persistence_threshold", std::numeric_limits<std::int64_t>::max(),
                   "Stage 3: at most this many persistent elements (sys.maxsize).", "unknown"),
          elements("model_persistence_threshold", std::numeric_limits<std::int64_t>::max(),
                   "Alias of stage3_model_persistence_threshold (not both).", "unknown"),
          elements("sub_group_size", 1'000'000'000, "Stage 3: optimizer step sub-group elements.", "DeepSpeed 0.3.13 (ZeRO-3, #834)"),
          {.name = "param_groups", .types = kString, .choices = {"decay_no_decay", "one"}, .default_value = Json("decay_no_decay"),
           .doc = "Stages 1/2: the optimizer's parameter groups (weights / 1-D params, or one group).", .since = kStepsim},
          dtype_key("communication_data_type", "the workload dtype", "The dtype gradients are reduced in.", "unknown"),
          dtype_key("grad_accum_dtype", "the workload dtype", "The dtype gradients accumulate in (stages 1/2: the workload dtype only).",
                    "unknown"),
          reported("model_dtype", kString, "The bit16 model's dtype (the workload dtype)."),
      });
  return o;
}

const ConfigObject* for_framework(const std::string& framework) {
  if (framework == "ddp") return &ddp();
  if (framework == "fsdp1") return &fsdp1();
  if (framework == "fsdp2") return &fsdp2();
  if (framework == "zero") return &zero();
  return nullptr;
}

}  // namespace strategy_keys

const ConfigCatalog& experiment_catalog() {
  static const ConfigCatalog c = [] {
    ConfigCatalog out;
    out.objects = experiment_keys::objects();
    for (const ConfigObject* o : {&strategy_keys::ddp(), &strategy_keys::fsdp1(), &strategy_keys::fsdp1_mixed_precision(), &strategy_keys::fsdp2(),
                                  &strategy_keys::fsdp2_mesh(), &strategy_keys::fsdp2_mixed_precision(), &strategy_keys::zero()})
      out.objects.push_back(o);
    return out;
  }();
  return c;
}

}  // namespace stepsim
