#include "sim/hardware/profile_keys.hpp"

#include "sim/core/config_keys.hpp"
#include "sim/program/program.hpp"

#include <optional>
#include <utility>
#include <vector>

namespace stepsim {

using Json = nlohmann::json;
using namespace limits;

namespace profile_keys {

namespace {

// A number in (0, hi] (a size, a rate: zero would divide by zero); no default: required
// unless the owner says otherwise in the doc line.
ConfigKey positive_at_most(std::string name, double hi, std::string doc) {
  return {.name = std::move(name), .types = kNumber, .min = 0, .max = hi, .min_exclusive = true, .doc = std::move(doc)};
}

// A number in (0, +inf), no default.
ConfigKey positive(std::string name, std::string doc) {
  return {.name = std::move(name), .types = kNumber, .min = 0, .min_exclusive = true, .doc = std::move(doc)};
}

// A number in [lo, hi] with a default.
ConfigKey number_in(std::string name, double lo, double hi, double def, std::string doc) {
  return {.name = std::move(name), .types = kNumber, .min = lo, .max = hi, .default_value = Json(def), .doc = std::move(doc)};
}

// A number >= 0 with a default.
ConfigKey non_negative(std::string name, double def, std::string doc) {
  return {.name = std::move(name), .types = kNumber, .min = 0, .default_value = Json(def), .doc = std::move(doc)};
}

// A latency or overhead in microseconds, 0 .. 1 s, default 0.
ConfigKey latency_us(std::string name, std::string doc) { return number_in(std::move(name), 0, kMaxLatencyUs, 0, std::move(doc)); }

ConfigKey text(std::string name, std::string doc) { return {.name = std::move(name), .types = kString, .doc = std::move(doc)}; }

ConfigKey note() { return text("note", "Free text."); }

ConfigKey object(std::string name, std::vector<std::string> objects, std::string doc) {
  return {.name = std::move(name), .types = kObject, .objects = std::move(objects), .doc = std::move(doc)};
}

// The collective kinds a scope model lists, in the parser's order.
const std::vector<std::string> kCollectiveKeys{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"};
const std::vector<std::string> kScopeModels{"alpha_beta", "ring", "tree", "nccl", "table"};
constexpr const char* kScopePath = "/collectives/intra_node (or inter_node)";

std::vector<std::string> scope_object_names() {
  std::vector<std::string> out;
  for (const auto& m : kScopeModels) out.push_back("profile.scope." + m);
  return out;
}

ConfigKey model_key(const std::string& model) {
  return {.name = "model", .types = kString, .choices = kScopeModels, .doc = "The collective model; \"" + model + "\" here."};
}

// A scope model object: "model", then its own keys, then "note".
ConfigObject scope_object(const std::string& model, std::string doc, std::vector<ConfigKey> keys) {
  ConfigObject o;
  o.name = "profile.scope." + model;
  o.path = kScopePath;
  o.doc = std::move(doc);
  o.keys.push_back(model_key(model));
  o.keys.insert(o.keys.end(), keys.begin(), keys.end());
  o.keys.push_back(note());
  o.discriminator = "model";
  o.discriminator_value = model;
  return o;
}

std::vector<ConfigKey> ring_keys() {
  return {positive_at_most("busbw_GBps", kMaxGBps, "Bus bandwidth (nccl-tests busbw) per GPU; required."),
          latency_us("step_latency_us", "Latency of one ring step (a hop); on a scope spanning nodes the network hop, NVLink hops at a tenth."),
          latency_us("base_latency_us", "Fixed latency of one collective.")};
}

std::vector<ConfigKey> tree_keys() {
  std::vector<ConfigKey> keys = ring_keys();
  keys.push_back(number_in("tree_busbw_GBps", 0, kMaxGBps, 0, "The tree's bus bandwidth; 0: busbw_GBps."));
  keys.push_back(latency_us("tree_step_latency_us", "Latency of one tree level; 0: step_latency_us."));
  return keys;
}

}  // namespace

const ConfigObject& rank_variation() {
  static const ConfigObject o{
      "profile.rank_variation",
      "/rank_variation",
      "Ranks are not identical: relative standard deviations between the ranks of a job, fitted by `stepsim fit --trace` from "
      "the traces of several ranks (docs/scale.md). A collective starts when its slowest rank arrives: the expected maximum of "
      "N ranks' arrivals, from the variance accumulated since the ranks last met. None by default.",
      {
          {.name = "kernel_cv", .types = kObject,
           .doc = "Per kernel class (gemm, attention, elementwise, ..., compute, optimizer): relative standard deviation of one "
                  "kernel's time between ranks, independent from kernel to kernel, in [0, 1]."},
          number_in("persistent_cv", 0, 1, 0, "Relative standard deviation of a rank's speed, held through a step."),
          number_in("host_cv", 0, 1, 0, "Relative standard deviation of one host instruction's CPU time between ranks."),
          {.name = "source", .types = kString, .default_value = Json(""), .doc = "Where the numbers came from (fit writes it)."},
      }};
  return o;
}

const ConfigObject& root() {
  static const ConfigObject o{
      "profile",
      "/",
      "A hardware profile: every cost constant of one GPU type and its interconnect, each with a source.",
      {
          text("$schema", "The JSON Schema an editor checks this file against (`stepsim schema --profile`); ignored."),
          text("name", "The profile's name, printed with every result; required."),
          {.name = "description", .types = kString, .default_value = Json(""), .doc = "Free text."},
          positive_at_most("memory_capacity_GiB", kMaxCapacityGiB, "Device memory per GPU (GiB); required."),
          object("compute", {"profile.compute"}, "Kernel costs (required)."),
          object("collectives", {"profile.collectives"}, "Collective costs (required)."),
          object("contention", {"profile.contention"}, "Slowdown of overlapping compute and communication (none by default)."),
          object("host", {"profile.host"}, "CPU cost per host instruction (none by default)."),
          object("memory_outside_allocator", {"profile.memory_outside_allocator"},
                 "Device memory held outside PyTorch's caching allocator (docs/memory.md); none by default."),
          object("rank_variation", {"profile.rank_variation"}, "How much ranks differ (docs/scale.md); none by default."),
          {.name = "sources", .types = kObject,
           .doc = "Where each number came from: {\"JSON path of a number\": \"datasheet, log or calibration run\"}."},
          {.name = "provenance", .types = kObject, .doc = "How the profile was produced (commands, inputs, fit quality); written by `stepsim fit`."},
      }};
  return o;
}

const ConfigObject& compute() {
  static const ConfigObject o{
      "profile.compute",
      "/compute",
      "Kernel costs: peak rates, the roofline fallback, measured GEMMs and per-class bandwidths.",
      {
          object("peak_tflops", {"profile.compute.peak_tflops"}, "Dense peak per dtype (required, at least one dtype)."),
          positive_at_most("hbm_bandwidth_GBps", kMaxGBps, "Datasheet HBM bandwidth (GB/s); required."),
          number_in("memory_efficiency", 0, 1, 0.8, "Fraction of hbm_bandwidth_GBps reached by memory-bound kernels."),
          number_in("gemm_efficiency", 0, 1, 0.7, "Roofline fallback: fraction of peak of a GEMM without a gemm_table entry."),
          number_in("attention_efficiency", 0, 1, 0.5, "Fraction of peak of a fused attention kernel without a compute.attention rate."),
          number_in("efficient_attention_efficiency", 0, 1, 0,
                    "Fraction of peak of the memory-efficient sdpa kernel without a rate; 0: attention_efficiency."),
          object("attention", {"profile.compute.attention"},
                 "Measured rate of each fused attention kernel, per direction, over the sequence length (docs/workload-ops.md)."),
          {.name = "gemm_table_peak_bf16_tflops", .types = kNumber, .min = 0, .max = kMaxTflops, .min_exclusive = true,
           .default_text = "peak_tflops.bf16 (the table was measured on this part)",
           .doc = "bf16 peak of the part gemm_table was measured on; table rates scale by peak_tflops.bf16 / this "
                  "(a power- or clock-limited variant of the measured chip)."},
          {.name = "gemm_in_training_factor", .types = kNumber, .min = 0, .max = 1, .min_exclusive = true, .default_value = Json(1.0),
           .doc = "In-training / microbenchmark GEMM rate, applied to gemm_table lookups (1: the table is in-training already)."},
          {.name = "gemm_table_rates", .types = kString, .choices = {"microbenchmark", "in_training"}, .default_value = Json("microbenchmark"),
           .doc = "What gemm_table's rates are: an isolated microbenchmark (calibrate gemm, an imported table) or rates achieved "
                  "inside a training step (fit --trace); results report which a prediction used."},
          object("clock", {"profile.compute.clock"},
                 "Power-limited sustained clock of compute-bound kernels (docs/workload-ops.md, \"Sustained clocks\"); "
                 "none: every kernel at the rates measured."),
          object("memory_bandwidth_GBps", {"profile.compute.memory_bandwidth_GBps"},
                 "Achieved bandwidth per memory-bound kernel class (bytes read + written over time; stepsim calibrate membw and fit --trace measure it); a class not listed runs at hbm_bandwidth_GBps x memory_efficiency."),
          number_in("elementwise_strided_ns_per_element", 0, 10, 0,
                    "Time per element of PyTorch's non-vectorized elementwise kernels (elementwise_strided): such a kernel "
                    "takes the longer of its bytes at that class's bandwidth and its elements at this time, so a bool-output "
                    "comparison is not priced cheaper per element than a bf16 op (docs/workload-ops.md); fit --trace measures "
                    "it. 0: bytes alone."),
          number_in("l2_cache_MiB", 0, 4096, 0,
                    "The GPU's L2 cache. A memory-bound kernel whose largest tensor is larger runs at most at "
                    "dram_stream_GBps: the class bandwidths are measured on kernels whose inputs the L2 still held from "
                    "the kernel before (docs/workload-ops.md). 0: no such cap."),
          number_in("dram_stream_GBps", 0, kMaxGBps, 0,
                    "Read + write rate of a kernel streaming tensors many times the L2 (BabelStream's Add): the most a "
                    "memory-bound kernel over tensors larger than l2_cache_MiB reaches. 0: no such cap."),
          number_in("elementwise_strided_cast_ns_per_element", 0, 10, 0,
                    "The same for the elements such a kernel computes through a dtype cast (operands of mixed dtypes, "
                    "e.g. OPT's torch.max of bf16 scores against a float 0-dim tensor and its backward comparisons): "
                    "PyTorch's dynamic-casting loads cost more per element; fit --trace measures it from the kernels "
                    "whose operands' dtypes differ. 0: elementwise_strided_ns_per_element."),
          {.name = "model_memory_bound_kernels", .types = kBoolean, .default_value = Json(true),
           .doc = "false: memory-bound kernels take no time (textbook cases)."},
          latency_us("min_kernel_time_us", "Floor for any non-empty kernel (per CUDA kernel)."),
          latency_us("kernel_gap_us", "Device-side gap between two queued kernels of a stream, paid per CUDA kernel."),
          number_in("memcpy_GBps", 0, kMaxGBps, 0,
                    "Achieved read + write bandwidth of a device-to-device cudaMemcpyAsync (a same-dtype contiguous copy_); "
                    "0: the copy class's. stepsim calibrate membw measures it."),
          {.name = "gemm_table", .types = kArray, .items = "profile.compute.gemm_table.N",
           .doc = "Measured GEMMs, interpolated by shape (docs/calibration.md)."},
      }};
  return o;
}

const ConfigObject& peak_tflops() {
  static const ConfigObject o = [] {
    ConfigObject p{"profile.compute.peak_tflops", "/compute/peak_tflops", "Dense peak TFLOP/s per dtype; at least one.", {}};
    for (const char* d : {"fp32", "tf32", "bf16", "fp16", "fp8"})
      p.keys.push_back(positive_at_most(d, kMaxTflops, std::string("Dense ") + d + " peak (TFLOP/s)."));
    return p;
  }();
  return o;
}

const ConfigObject& memory_bandwidth() {
  static const ConfigObject o = [] {
    ConfigObject m{"profile.compute.memory_bandwidth_GBps", "/compute/memory_bandwidth_GBps",
                   "Achieved bandwidth (read + written bytes / kernel time) per memory-bound kernel class (docs/workload-ops.md).", {}};
    for (const char* k : {"elementwise", "elementwise_strided", "reduction", "norm", "copy", "embedding", "optimizer"}) {
      ConfigKey key = positive(k, std::string("Achieved bandwidth of ") + k + " kernels (GB/s).");
      key.default_text = "hbm_bandwidth_GBps x memory_efficiency";
      m.keys.push_back(key);
    }
    ConfigKey inductor = positive("inductor_reduction",
                                  "Achieved bandwidth of the reductions torch.compile generates (Inductor's Triton kernels: fused "
                                  "norms and their backward, softmax and loss reductions), which run faster than aten's and apex's "
                                  "(GB/s; docs/workload-ops.md).");
    inductor.default_text = "the norm and reduction classes' rates";
    m.keys.push_back(inductor);
    return m;
  }();
  return o;
}

const ConfigObject& attention() {
  static const ConfigObject o = [] {
    ConfigObject a{"profile.compute.attention", "/compute/attention",
                   "Measured rates of the fused attention kernels; a kernel not listed runs at attention_efficiency.", {}};
    for (int i = 0; i < kAttentionKernelCount; ++i) {
      const std::string k = to_string(static_cast<AttentionKernel>(i));
      a.keys.push_back(object(k, {"profile.compute.attention.kernel"}, "The " + k + " kernel's rate."));
    }
    return a;
  }();
  return o;
}

const ConfigObject& clock() {
  static const ConfigObject o{
      "profile.compute.clock",
      "/compute/clock",
      "A compute-bound kernel reaching a fraction u of the dense peak at boost_MHz sustains min(boost_MHz, "
      "full_load_MHz x u^(-1/3)) under the board's power limit (power ~ u x f^3), and its rate scales by that clock "
      "over boost_MHz: GEMMs priced from a microbenchmark table or the roofline, and fused attention.",
      {
          {.name = "boost_MHz", .types = kNumber, .min = 0, .max = 10000, .min_exclusive = true,
           .doc = "The clock the GEMM table and attention rates were measured at (a short microbenchmark runs at the "
                  "boost clock); required."},
          {.name = "full_load_MHz", .types = kNumber, .min = 0, .max = 10000, .min_exclusive = true,
           .doc = "The clock at which a kernel issuing tensor-core work every cycle meets the power limit; at most "
                  "boost_MHz; required."},
          {.name = "power_limit_W", .types = kNumber, .min = 0, .max = 10000, .min_exclusive = true,
           .doc = "The board power limit full_load_MHz belongs to; required (reported with results)."},
          note(),
      }};
  return o;
}

const ConfigObject& attention_kernel() {
  static const ConfigObject o{
      "profile.compute.attention.kernel",
      "/compute/attention/KERNEL",
      "A fused attention kernel's rate: efficiency(s) = forward (or backward) x s / (s + half_rate_seq), a fraction "
      "of the bf16 peak for causal FLOPs (QK^T and PV halved).",
      {
          {.name = "forward", .types = kNumber, .min = 0, .max = 1, .min_exclusive = true,
           .doc = "Forward kernel's fraction of peak for long sequences; required."},
          {.name = "backward", .types = kNumber, .min = 0, .max = 1, .min_exclusive = true,
           .doc = "Backward kernels' fraction of peak for long sequences; required."},
          {.name = "half_rate_seq", .types = kInteger, .min = 0, .max = static_cast<double>(kMaxGemmDim), .default_value = Json(0),
           .doc = "Sequence length at which the kernel reaches half its long-sequence rate; 0: the same rate at any length."},
          note(),
      }};
  return o;
}

const ConfigObject& gemm() {
  // The dtype names parse_dtype accepts (sim/core/units.cpp).
  static const std::vector<std::string> dtypes{"fp32", "float32", "tf32", "bf16", "bfloat16", "fp16", "float16", "fp8", "fp8_e4m3"};
  static const ConfigObject o{
      "profile.compute.gemm_table.N",
      "/compute/gemm_table/N",
      "One measured GEMM: C[m x n] = A[m x k] B[k x n], batch times.",
      {
          {.name = "m", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGemmDim), .doc = "Rows of A and C; required."},
          {.name = "n", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGemmDim), .doc = "Columns of B and C; required."},
          {.name = "k", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGemmDim), .doc = "The reduction dimension; required."},
          {.name = "batch", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGemmDim), .default_value = Json(1),
           .doc = "Batched GEMMs in one kernel."},
          {.name = "dtype", .types = kString, .choices = dtypes, .default_value = Json("bf16"), .doc = "The inputs' dtype."},
          {.name = "layout", .types = kString, .choices = {"nn", "nt", "tn"},
           .doc = "cuBLAS operand layout (its kernel names' suffix): PyTorch's linear runs tn forward, nn for the input gradient, nt "
                  "for the weight gradient; absent: any (a lookup of a known layout prefers entries of its own)."},
          positive_at_most("tflops", kMaxTflops, "Measured rate (TFLOP/s); required."),
          {.name = "spread_pct", .types = kNumber, .doc = "Measurement spread (percent); kept, not used."},
          text("source", "Where the number came from."),
      }};
  return o;
}

const ConfigObject& collectives() {
  static const ConfigObject o{
      "profile.collectives",
      "/collectives",
      "Collective costs: a topology-aware NCCL model for every communicator, or one model per scope.",
      {
          object("topology", {"profile.topology"}, "The topology-aware NCCL model (docs/collectives.md); when present it prices every communicator."),
          object("intra_node", scope_object_names(),
                 "The model of communicators inside one node, chosen by \"model\"; required without topology."),
          {.name = "inter_node", .types = kObject, .objects = scope_object_names(), .default_text = "intra_node",
           .doc = "The model of communicators spanning nodes."},
      }};
  return o;
}

const ConfigObject* scope_model(const std::string& model) {
  static const std::vector<ConfigObject> objects = [] {
    std::vector<ConfigObject> out;
    std::vector<ConfigKey> ab;
    for (const auto& k : kCollectiveKeys)
      ab.push_back({.name = k, .types = kArray, .items = "profile.alpha_beta_range.N",
                    .doc = "This collective's ranges, by increasing max_bytes."});
    ab.push_back({.name = "default", .types = kArray, .items = "profile.alpha_beta_range.N",
                  .doc = "The ranges of every collective not listed."});
    ab.push_back(object("ranks", {"profile.scope.alpha_beta.ranks"}, "The group size each collective's ranges were measured on."));
    ab.push_back(object("groups", {"profile.scope.alpha_beta.groups"}, "Ranges measured on further group sizes (`stepsim fit`)."));
    out.push_back(scope_object("alpha_beta",
                               "Raw t = alpha + S / beta per size range (S per the nccl-tests convention); at least one range list.",
                               ab));
    out.push_back(scope_object("ring", "Ring (C6.2): t = base + steps x step latency + factor(n) x S / busbw.", ring_keys()));
    out.push_back(scope_object("tree", "Double binary tree for all-reduce (C6.3), the ring for other collectives.", tree_keys()));
    out.push_back(scope_object("nccl", "The faster of ring and tree (C6.4); the tree only for all-reduce.", tree_keys()));
    std::vector<ConfigKey> table;
    for (const auto& k : kCollectiveKeys)
      table.push_back({.name = k, .types = kObject,
                       .doc = "{\"group size\": [[bytes, time_us], ...]} sorted by bytes; bytes 1 .. 2^48, time_us > 0 .. 1e9, group size 2 .. 2^20."});
    out.push_back(scope_object("table",
                               "Measured points, interpolated log-log, carried across group sizes through bus bandwidth; at least one collective.",
                               table));
    return out;
  }();
  for (const auto& o : objects)
    if (o.discriminator_value == model) return &o;
  return nullptr;
}

const ConfigObject& alpha_beta_range() {
  static const ConfigObject o{
      "profile.alpha_beta_range.N",
      "/collectives/intra_node/KIND/N",
      "One size range of an alpha-beta model: t = alpha + S / beta for S <= max_bytes.",
      {
          {.name = "max_bytes", .types = kInteger, .min = 1, .default_text = "no bound (the last range)",
           .doc = "The largest S this range covers."},
          latency_us("alpha_us", "Latency (us)."),
          positive_at_most("beta_GBps", kMaxGBps, "Bandwidth on S (GB/s); required."),
          {.name = "r2", .types = kNumber, .doc = "Fit diagnostic written by `stepsim fit` (all four or none); not used by the model, carried through refits that keep the range."},
          {.name = "max_rel_error", .types = kNumber, .doc = "Fit diagnostic written by `stepsim fit` (all four or none); not used by the model, carried through refits that keep the range."},
          {.name = "points", .types = kInteger, .doc = "Fit diagnostic written by `stepsim fit` (all four or none); not used by the model, carried through refits that keep the range."},
          {.name = "min_bytes", .types = kInteger, .doc = "Fit diagnostic written by `stepsim fit` (all four or none); not used by the model, carried through refits that keep the range."},
      }};
  return o;
}

const ConfigObject& alpha_beta_ranks() {
  static const ConfigObject o = [] {
    ConfigObject r{"profile.scope.alpha_beta.ranks", "/collectives/intra_node/ranks",
                   "Group size each collective's ranges were measured on: another size rescales the bandwidth term by the busbw "
                   "factor ratio. A collective not listed is used as measured, whatever the group size.",
                   {}};
    for (const auto& k : kCollectiveKeys)
      r.keys.push_back({.name = k, .types = kInteger, .min = 2, .max = static_cast<double>(kMaxGroup), .doc = "Group size measured."});
    return r;
  }();
  return o;
}

const ConfigObject& alpha_beta_groups() {
  static const ConfigObject o = [] {
    ConfigObject g{"profile.scope.alpha_beta.groups", "/collectives/intra_node/groups",
                   "Ranges measured on further group sizes, for collectives listed in ranks: a communicator uses the measured "
                   "size nearest its own.",
                   {}};
    for (const auto& k : kCollectiveKeys)
      g.keys.push_back({.name = k, .types = kObject,
                        .doc = "{\"group size\": ranges}, sizes 2 .. 2^20 other than ranks' (needs this collective's ranges and ranks)."});
    return g;
  }();
  return o;
}

const ConfigObject& topology() {
  static const ConfigObject o{
      "profile.topology",
      "/collectives/topology",
      "NCCL's tuner structure (docs/collectives.md): ring, tree and NVLS algorithms, LL/LL128/Simple, per-level bandwidth.",
      {
          {.name = "arch", .types = kString, .choices = {"volta", "ampere", "hopper", "blackwell"}, .default_value = Json("hopper"),
           .doc = "GPU generation: the row of NCCL's constant tables (src/graph/tuning.cc)."},
          {.name = "gpus_per_node", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGroup), .doc = "GPUs of one NVLink domain; required."},
          object("nvlink", {"profile.topology.nvlink"}, "The NVLink / NVSwitch level (required)."),
          object("network", {"profile.topology.network"}, "The network level (required)."),
          {.name = "channels", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGroup), .default_value = Json(16), .doc = "NCCL channels, for the ring plateau rule."},
          {.name = "tree", .types = kBoolean, .default_value = Json(true), .doc = "Tree all-reduce allowed (NCCL_ALGO default)."},
          {.name = "ll128", .types = kBoolean, .default_value = Json(true), .doc = "LL128 protocol enabled."},
          object("fitted", {"profile.topology.fitted"}, "The group shapes a fit saw; absent: datasheet numbers, no extrapolation flag."),
          note(),
      }};
  return o;
}

const ConfigObject& nvlink() {
  static const ConfigObject o{
      "profile.topology.nvlink",
      "/collectives/topology/nvlink",
      "The NVLink / NVSwitch level.",
      {
          positive("busbw_GBps", "Ring bus bandwidth per GPU (nccl-tests busbw of a one-node ring); required."),
          non_negative("nvls_GBps", 0, "NVLink SHARP per-GPU bandwidth; 0: no NVLS on this hardware."),
          non_negative("all_to_all_busbw_GBps", 0, "All-to-all bandwidth over NVLink; 0: busbw_GBps."),
          non_negative("latency_scale", 1, "Multiplies NCCL's NVLink hop latencies (tuning.cc hwLatencies)."),
          non_negative("local_GBps", 0,
                       "A ring's local pass: each rank's own S/n bytes at this rate, not hidden by the wire steps "
                       "(docs/collectives.md); 0: none."),
          note(),
      }};
  return o;
}

const ConfigObject& network() {
  static const ConfigObject o{
      "profile.topology.network",
      "/collectives/topology/network",
      "The network level: NICs per node, each nic_GBps per direction (achieved).",
      {
          {.name = "nics_per_node", .types = kInteger, .min = 1, .max = static_cast<double>(kMaxGroup), .doc = "NICs per node; required."},
          positive("nic_GBps", "Achieved bandwidth of one NIC per direction (GB/s); required."),
          non_negative("all_to_all_nic_GBps", 0, "All-to-all bandwidth per NIC; 0: nic_GBps."),
          non_negative("latency_scale", 1, "Multiplies NCCL's network hop latencies (tuning.cc hwLatencies)."),
          {.name = "leaf_nodes", .types = kInteger, .min = 0, .max = 1e6, .default_value = Json(0),
           .doc = "Nodes under one leaf (per rail on a rail-optimized fabric): a communicator across more nodes crosses "
                  "the spine and gets nic_GBps / oversubscription per NIC; 0: every communicator across nodes does."},
          {.name = "oversubscription", .types = kNumber, .min = 1, .max = 64, .default_value = Json(1),
           .doc = "The spine's taper: downlink over uplink bandwidth of a leaf (1: non-blocking, 2: 2:1)."},
          note(),
      }};
  return o;
}

const ConfigObject& fitted() {
  static const ConfigObject o{
      "profile.topology.fitted",
      "/collectives/topology/fitted",
      "The group shapes a topology fit saw (closed ranges); a communicator outside them is flagged as an extrapolation.",
      {
          {.name = "ranks", .types = kArray, .items = "integer", .doc = "[min, max] ranks, positive integers, min <= max; required."},
          {.name = "nodes", .types = kArray, .items = "integer", .doc = "[min, max] nodes; required."},
          {.name = "gpus_per_node", .types = kArray, .items = "integer", .doc = "[min, max] GPUs per node; required."},
          {.name = "errors", .types = kObject | kArray | kString | kNumber, .doc = "Fit quality written by `stepsim fit`; not used."},
          note(),
      }};
  return o;
}

const ConfigObject& contention() {
  static const ConfigObject o{
      "profile.contention",
      "/contention",
      "Fluid contention: while a collective and a kernel overlap, the kernel runs at 1/(1+compute_slowdown) of its solo rate and "
      "the collective at 1/(1+comm_slowdown); with gpu_sms and collective_sms, GEMM and attention kernels run on the SMs the "
      "collectives leave and memory-bound kernels share HBM with them (docs/collectives.md).",
      {
          number_in("compute_slowdown", 0, kMaxSlowdown, 0, "Slowdown of a kernel beside a collective."),
          number_in("comm_slowdown", 0, kMaxSlowdown, 0, "Slowdown of a collective beside a kernel."),
          {.name = "gpu_sms", .types = kInteger, .min = 0, .max = 1024, .default_value = Json(0), .doc = "SMs of the GPU (deviceProperties numSms in a Kineto trace); 0: not declared."},
          {.name = "collective_sms", .types = kInteger, .min = 0, .max = 256, .default_value = Json(0),
           .doc = "SMs a running collective's NCCL kernel holds (its grid: one CTA per channel, each alone on an SM). With gpu_sms, a GEMM or "
                  "attention kernel beside n collectives runs at (gpu_sms - n x collective_sms) / gpu_sms of its solo rate (at most half the "
                  "SMs taken), and a memory-bound kernel and the collectives share HBM in proportion to demand (both at 1/(1+share), share = "
                  "3 x bus bytes / solo time / HBM bandwidth); compute_slowdown is then unused. 0: every kernel at 1/(1+compute_slowdown)."},
      }};
  return o;
}

const ConfigObject& host() {
  static const ConfigObject o{
      "profile.host",
      "/host",
      "CPU cost per host instruction (the framework's Python and CUDA API overhead), microseconds.",
      {
          latency_us("launch_overhead_us", "Per kernel launch issued without eager dispatch."),
          latency_us("eager_op_overhead_us", "Per aten op dispatched from Python in forward; 0: launch_overhead_us."),
          latency_us("autograd_op_overhead_us", "Per op run by the autograd engine in backward; 0: launch_overhead_us."),
          latency_us("kernel_launch_overhead_us", "Per further kernel of a multi-kernel op; 0: launch_overhead_us."),
          latency_us("autograd_engine_per_node_us",
                     "The autograd engine's start per node of the backward graph (compute_dependencies walks every node, "
                     "views and casts included, before the first runs): paid once per backward; 0: not modelled."),
          latency_us("collective_overhead_us", "Per collective (c10d + NCCL enqueue)."),
          latency_us("event_overhead_us", "Per event record or wait."),
          latency_us("alloc_overhead_us", "Per caching-allocator alloc or free."),
          latency_us("step_start_us",
                     "The training loop's host time from the step's start to its first GPU work (data loading, "
                     "input copies); fit --trace measures it on your job."),
          latency_us("step_end_us",
                     "The training loop's host time from the step's last GPU work to its end, after its "
                     "synchronize (logging, metrics); fit --trace measures it."),
          latency_us("monitor_write_us",
                     "One write of DeepSpeed's monitor on rank 0 (add_scalar and flush of tensorboard, wandb, csv_monitor or "
                     "comet), paid before the backward at each accumulation boundary under the zero strategy's monitor; fit "
                     "--trace measures it from a trace with Python stacks (with_stack=True)."),
      }};
  return o;
}

const ConfigObject& outside_allocator() {
  static const ConfigObject o{
      "profile.memory_outside_allocator",
      "/memory_outside_allocator",
      "Device memory outside PyTorch's caching allocator (docs/memory.md). Each number needs its source: "
      "\"sources\": {\"memory_outside_allocator.KEY\": \"...\"}.",
      {
          number_in("cuda_context_MiB", 0, kMaxOutsideAllocatorMiB, 0, "The CUDA context (driver, kernels' code, modules) per process."),
          number_in("nccl_per_communicator_MiB", 0, kMaxOutsideAllocatorMiB, 0,
                    "NCCL's buffers per communicator a rank is in, measured (excludes nccl_channels)."),
          {.name = "nccl_channels", .types = kInteger, .min = 1, .max = 64,
           .doc = "NCCL's collective channels per communicator (the \"N coll channels\" of NCCL_DEBUG=INFO): the buffers are "
                     "N x (LL + LL128 + Simple) = N x 9.19 MiB per communicator of more than one rank (docs/memory.md)."},
          number_in("cublas_workspace_MiB", 0, kMaxOutsideAllocatorMiB, 0,
                    "One cuBLAS workspace (PyTorch's default: 32 MiB on sm90, else 8.125 MiB); taken from the caching allocator "
                    "by each cuBLAS handle that runs GEMMs on a stream: forward's and backward's (docs/memory.md)."),
      }};
  return o;
}

}  // namespace profile_keys

const ConfigCatalog& profile_catalog() {
  static const ConfigCatalog c = [] {
    namespace k = profile_keys;
    ConfigCatalog out{{&k::root(), &k::compute(), &k::peak_tflops(), &k::memory_bandwidth(), &k::attention(), &k::attention_kernel(), &k::clock(),
                       &k::gemm(), &k::collectives()}};
    for (const auto& m : k::kScopeModels) out.objects.push_back(k::scope_model(m));
    for (const ConfigObject* o : {&k::alpha_beta_range(), &k::alpha_beta_ranks(), &k::alpha_beta_groups(), &k::topology(), &k::nvlink(),
                                  &k::network(), &k::fitted(), &k::contention(), &k::host(), &k::outside_allocator(),
                                  &k::rank_variation()})
      out.objects.push_back(o);
    return out;
  }();
  return c;
}

std::string profile_markdown_reference() {
  return markdown_reference(
      profile_catalog(),
      "# Hardware profile reference\n\n"
      "<!-- Generated from the key tables (sim/hardware/profile_keys.cpp) by `stepsim schema --profile --markdown`;\n"
      "     do not edit. A unit test checks this file equals the output: after changing a table run\n"
      "     `stepsim schema --profile --markdown > docs/profile-keys.md`. -->\n\n"
      "Every key of a hardware profile (configs/hardware/*.json), one table per JSON object, in the order the\n"
      "parser reads them. Any object may also hold `include` (a file it extends; see docs/configuration.md). A key\n"
      "not listed is an error (exit 2) naming the keys the object takes. A key without a default is required\n"
      "where its line says so, optional otherwise. The ranges are the physical bounds of docs/limits.md.\n"
      "`stepsim schema --profile` prints the same tables as a JSON Schema for editors.\n");
}

}  // namespace stepsim
