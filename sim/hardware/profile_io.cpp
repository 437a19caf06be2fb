#include <fmt/format.h>

#include "sim/core/json_reader.hpp"
#include "sim/core/overloaded.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim {

std::string model_name(const ScopeModel& m) {
  return std::visit(Overloaded{
                        [](const AlphaBetaModel&) { return "alpha_beta"; },
                        [](const RingModel&) { return "ring"; },
                        [](const TreeModel&) { return "tree"; },
                        [](const NcclModel&) { return "nccl"; },
                        [](const TableModel&) { return "table"; },
                    },
                    m);
}

// Physical ranges of profile numbers (docs/limits.md): generous bounds around any GPU,
// interconnect or host that exists, so a typo (1e300, 2^63) is an input error, not a
// negative capacity or a cost that silently vanishes in an int64 overflow.
namespace limits {
constexpr double kMaxCapacityGiB = 65536;   // 64 TiB per device
constexpr double kMaxTflops = 1e6;          // 1 EFLOP/s per device
constexpr double kMaxGBps = 1e6;            // 1 PB/s (HBM, links, busbw)
constexpr double kMaxLatencyUs = 1e6;       // 1 s for one latency, overhead or minimum
constexpr double kMaxSlowdown = 100;        // contention: 1/(1+s) of the solo rate
constexpr double kMaxTableTimeUs = 1e9;     // 1000 s for one measured collective
constexpr double kMaxTableBytes = 281474976710656.0;  // 2^48 bytes for one measured collective
constexpr std::int64_t kMaxGemmDim = 1 << 24;
constexpr int kMaxGroup = 1 << 20;
}  // namespace limits

// A positive number at most `hi`.
static double positive_at_most(ObjectReader& r, const std::string& key, double hi) {
  double d = r.positive(key);
  if (d > hi) r.fail(key, fmt::format("a positive number of at most {:g}", hi));
  return d;
}

static const char* kKindKeys[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"};

static std::vector<AlphaBetaRange> parse_ranges(ObjectReader& r, const std::string& key) {
  std::vector<AlphaBetaRange> out;
  for (auto& item : r.objects(key)) {
    AlphaBetaRange range;
    if (item.has("max_bytes")) range.max_bytes = Bytes{item.positive_integer("max_bytes")};
    range.alpha = Time::from_us(item.number_in("alpha_us", 0, limits::kMaxLatencyUs, 0));
    range.beta = Bandwidth::from_gbps(positive_at_most(item, "beta_GBps", limits::kMaxGBps));
    // Optional fit diagnostics written by `stepsim fit`; kept in the file, not used here.
    if (item.has("r2")) item.number("r2");
    if (item.has("max_rel_error")) item.number("max_rel_error");
    if (item.has("points")) item.integer("points");
    if (item.has("min_bytes")) item.integer("min_bytes");
    item.finish();
    if (!out.empty() && range.max_bytes <= out.back().max_bytes)
      r.fail(key, "ranges sorted by increasing max_bytes");
    out.push_back(range);
  }
  if (out.empty()) r.fail(key, "at least one range");
  return out;
}

static AlphaBetaModel parse_alpha_beta(ObjectReader& r) {
  AlphaBetaModel m;
  for (const char* k : kKindKeys)
    if (r.has(k)) m.ranges[parse_collective_kind(k)] = parse_ranges(r, k);
  if (r.has("default")) m.default_ranges = parse_ranges(r, "default");
  if (r.has("ranks")) {
    ObjectReader ranks = r.object("ranks");
    for (const char* k : kKindKeys)
      if (ranks.has(k)) {
        std::int64_t n = ranks.integer_in(k, 2, limits::kMaxGroup);
        m.ranks[parse_collective_kind(k)] = static_cast<int>(n);
      }
    ranks.finish();
  }
  if (r.has("groups")) {
    ObjectReader groups = r.object("groups");
    for (const char* k : kKindKeys) {
      if (!groups.has(k)) continue;
      CollectiveKind kind = parse_collective_kind(k);
      if (!m.ranges.count(kind) || !m.ranks.count(kind))
        groups.fail(k, fmt::format("\"{}\" ranges and \"ranks\": {{\"{}\": N}} next to \"groups\"", k, k));
      ObjectReader by_size = groups.object(k);
      for (const auto& [ranks_text, value] : by_size.raw_object_items()) {
        (void)value;
        int ranks = 0;
        try { ranks = std::stoi(ranks_text); } catch (...) { ranks = 0; }
        if (ranks < 2 || std::to_string(ranks) != ranks_text) by_size.fail(ranks_text, "a group size >= 2 as the key");
        if (ranks == m.ranks.at(kind))
          by_size.fail(ranks_text, fmt::format("a group size other than ranks.{} ({}), whose ranges are \"{}\"", k, ranks, k));
        m.groups[kind][ranks] = parse_ranges(by_size, ranks_text);
      }
      by_size.finish();
    }
    groups.finish();
  }
  if (m.ranges.empty() && m.default_ranges.empty()) r.fail("model", "alpha_beta ranges under \"default\" or a collective name");
  return m;
}

static TableModel parse_table(ObjectReader& r) {
  TableModel m;
  for (const char* k : kKindKeys) {
    if (!r.has(k)) continue;
    ObjectReader by_size = r.object(k);
    auto& dst = m.points[parse_collective_kind(k)];
    for (const auto& [ranks_text, pts] : by_size.raw_object_items()) {
      int ranks = 0;
      try { ranks = std::stoi(ranks_text); } catch (...) { ranks = 0; }
      if (ranks < 2 || ranks > limits::kMaxGroup) by_size.fail(ranks_text, "a group size from 2 to 2^20 as the key");
      const Json& arr = by_size.raw(ranks_text);
      if (!arr.is_array() || arr.empty()) by_size.fail(ranks_text, "an array of [bytes, time_us] pairs");
      std::vector<MeasuredCollective> points;
      for (std::size_t i = 0; i < arr.size(); ++i) {
        const Json& p = arr[i];
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number() || !(p[0].get<double>() >= 1) ||
            !(p[1].get<double>() > 0) || p[0].get<double>() > limits::kMaxTableBytes || p[1].get<double>() > limits::kMaxTableTimeUs)
          by_size.fail_value(ranks_text + "/" + std::to_string(i), p,
                             "a [bytes, time_us] pair: bytes from 1 to 2^48, time_us above 0 and at most 1e9");
        points.push_back({Bytes{static_cast<std::int64_t>(p[0].get<double>())}, Time::from_us(p[1].get<double>())});
        if (points.size() > 1 && points.back().bytes <= points[points.size() - 2].bytes)
          by_size.fail_value(ranks_text + "/" + std::to_string(i), p, "points sorted by increasing bytes");
      }
      dst[ranks] = std::move(points);
    }
    by_size.finish();
  }
  if (m.points.empty()) r.fail("model", "a table with at least one collective");
  return m;
}

static RingModel parse_ring(ObjectReader& r) {
  RingModel m;
  m.busbw = Bandwidth::from_gbps(positive_at_most(r, "busbw_GBps", limits::kMaxGBps));
  m.step_latency = Time::from_us(r.number_in("step_latency_us", 0, limits::kMaxLatencyUs, 0));
  m.base_latency = Time::from_us(r.number_in("base_latency_us", 0, limits::kMaxLatencyUs, 0));
  return m;
}

static TreeConstants parse_tree_constants(ObjectReader& r) {
  TreeConstants t;
  t.busbw = Bandwidth::from_gbps(r.number_in("tree_busbw_GBps", 0, limits::kMaxGBps, 0));
  t.step_latency = Time::from_us(r.number_in("tree_step_latency_us", 0, limits::kMaxLatencyUs, 0));
  return t;
}

static ScopeModel parse_scope(ObjectReader r) {
  ScopeModel m;
  std::string kind = r.choice("model", {"alpha_beta", "ring", "tree", "nccl", "table"});
  if (kind == "alpha_beta") m = parse_alpha_beta(r);
  else if (kind == "table") m = parse_table(r);
  else if (kind == "ring") m = parse_ring(r);
  else if (kind == "tree") m = TreeModel{parse_ring(r), parse_tree_constants(r)};
  else m = NcclModel{parse_ring(r), parse_tree_constants(r)};
  if (r.has("note")) r.string("note");
  r.finish();
  return m;
}


std::string to_string(NcclArch a) {
  switch (a) {
    case NcclArch::Volta: return "volta";
    case NcclArch::Ampere: return "ampere";
    case NcclArch::Hopper: return "hopper";
    case NcclArch::Blackwell: return "blackwell";
  }
  return "hopper";
}

// "collectives.topology": the topology-aware NCCL model (docs/collectives.md).
static NcclTopology parse_topology(ObjectReader r) {
  NcclTopology t;
  std::string arch = r.choice("arch", "hopper", {"volta", "ampere", "hopper", "blackwell"});
  t.arch = arch == "volta" ? NcclArch::Volta : arch == "ampere" ? NcclArch::Ampere : arch == "blackwell" ? NcclArch::Blackwell : NcclArch::Hopper;
  t.gpus_per_node = static_cast<int>(r.positive_integer("gpus_per_node"));
  {
    ObjectReader n = r.object("nvlink");
    t.nvlink_busbw = Bandwidth::from_gbps(n.positive("busbw_GBps"));
    t.nvls_bw = Bandwidth::from_gbps(n.non_negative("nvls_GBps", 0));
    t.nvlink_all_to_all_busbw = Bandwidth::from_gbps(n.non_negative("all_to_all_busbw_GBps", 0));
    t.nvlink_latency_scale = n.non_negative("latency_scale", 1);
    if (n.has("note")) n.string("note");
    n.finish();
  }
  {
    ObjectReader n = r.object("network");
    t.nics_per_node = static_cast<int>(n.positive_integer("nics_per_node"));
    t.nic_bw = Bandwidth::from_gbps(n.positive("nic_GBps"));
    t.nic_all_to_all_bw = Bandwidth::from_gbps(n.non_negative("all_to_all_nic_GBps", 0));
    t.net_latency_scale = n.non_negative("latency_scale", 1);
    if (n.has("note")) n.string("note");
    n.finish();
  }
  t.channels = static_cast<int>(r.positive_integer("channels", 16));
  t.tree = r.boolean("tree", true);
  t.ll128 = r.boolean("ll128", true);
  if (r.has("fitted")) {
    ObjectReader f = r.object("fitted");
    auto range = [&f](const char* key, int& lo, int& hi) {
      const Json& v = f.raw(key);
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() || v[0].get<int>() < 1 ||
          v[1].get<int>() < v[0].get<int>())
        f.fail_value(key, v, "[min, max] positive integers with min <= max");
      lo = v[0].get<int>();
      hi = v[1].get<int>();
    };
    range("ranks", t.fitted.min_ranks, t.fitted.max_ranks);
    range("nodes", t.fitted.min_nodes, t.fitted.max_nodes);
    range("gpus_per_node", t.fitted.min_gpus_per_node, t.fitted.max_gpus_per_node);
    if (f.has("errors")) f.raw("errors");
    if (f.has("note")) f.string("note");
    f.finish();
  }
  if (r.has("note")) r.string("note");
  r.finish();
  return t;
}

static Json topology_to_json(const NcclTopology& t) {
  Json nvlink{{"busbw_GBps", t.nvlink_busbw.gbps()}, {"latency_scale", t.nvlink_latency_scale}};
  if (t.nvls_bw.bytes_per_s > 0) nvlink["nvls_GBps"] = t.nvls_bw.gbps();
  if (t.nvlink_all_to_all_busbw.bytes_per_s > 0) nvlink["all_to_all_busbw_GBps"] = t.nvlink_all_to_all_busbw.gbps();
  Json net{{"nics_per_node", t.nics_per_node}, {"nic_GBps", t.nic_bw.gbps()}, {"latency_scale", t.net_latency_scale}};
  if (t.nic_all_to_all_bw.bytes_per_s > 0) net["all_to_all_nic_GBps"] = t.nic_all_to_all_bw.gbps();
  Json o{{"arch", to_string(t.arch)}, {"gpus_per_node", t.gpus_per_node}, {"nvlink", nvlink}, {"network", net},
         {"channels", t.channels}, {"tree", t.tree}, {"ll128", t.ll128}};
  if (!t.fitted.empty())
    o["fitted"] = {{"ranks", {t.fitted.min_ranks, t.fitted.max_ranks}},
                   {"nodes", {t.fitted.min_nodes, t.fitted.max_nodes}},
                   {"gpus_per_node", {t.fitted.min_gpus_per_node, t.fitted.max_gpus_per_node}}};
  return o;
}

HardwareProfile parse_profile(ObjectReader& r) {
  HardwareProfile p;
  p.name = r.string("name");
  p.description = r.string("description", "");
  p.memory_capacity = Bytes{static_cast<std::int64_t>(positive_at_most(r, "memory_capacity_GiB", limits::kMaxCapacityGiB) * 1024.0 * 1024.0 * 1024.0)};
  {
    ObjectReader c = r.object("compute");
    ObjectReader peak = c.object("peak_tflops");
    for (const char* d : {"fp32", "tf32", "bf16", "fp16", "fp8"})
      if (peak.has(d)) p.compute.peak[parse_dtype(d)] = FlopRate::from_tflops(positive_at_most(peak, d, limits::kMaxTflops));
    peak.finish();
    if (p.compute.peak.empty()) c.fail("peak_tflops", "at least one dtype (bf16, fp16, fp32, tf32, fp8)");
    p.compute.hbm = Bandwidth::from_gbps(positive_at_most(c, "hbm_bandwidth_GBps", limits::kMaxGBps));
    p.compute.memory_efficiency = c.fraction("memory_efficiency", 0.8);
    p.compute.gemm_efficiency = c.fraction("gemm_efficiency", 0.7);
    p.compute.attention_efficiency = c.fraction("attention_efficiency", 0.5);
    p.compute.efficient_attention_efficiency = c.fraction("efficient_attention_efficiency", 0);
    p.compute.gemm_in_training_factor = c.fraction("gemm_in_training_factor", 1.0);
    if (p.compute.gemm_in_training_factor <= 0) c.fail("gemm_in_training_factor", "a fraction in (0, 1]");
    if (c.has("memory_bandwidth_GBps")) {
      ObjectReader bw = c.object("memory_bandwidth_GBps");
      for (const char* k : {"elementwise", "elementwise_strided", "reduction", "norm", "copy", "embedding", "optimizer"})
        if (bw.has(k)) p.compute.class_bandwidth[parse_kernel_class(k)] = Bandwidth::from_gbps(bw.positive(k));
      bw.finish();
    }
    p.compute.model_memory_kernels = c.boolean("model_memory_bound_kernels", true);
    p.compute.min_kernel_time = Time::from_us(c.number_in("min_kernel_time_us", 0, limits::kMaxLatencyUs, 0));
    p.compute.kernel_gap = Time::from_us(c.number_in("kernel_gap_us", 0, limits::kMaxLatencyUs, 0));
    if (c.has("gemm_table")) {
      for (auto& e : c.objects("gemm_table")) {
        GemmMeasurement g;
        g.shape.m = e.integer_in("m", 1, limits::kMaxGemmDim);
        g.shape.n = e.integer_in("n", 1, limits::kMaxGemmDim);
        g.shape.k = e.integer_in("k", 1, limits::kMaxGemmDim);
        g.shape.batch = e.integer_in("batch", 1, limits::kMaxGemmDim, 1);
        g.shape.dtype = e.dtype("dtype", Dtype::BF16);
        g.rate = FlopRate::from_tflops(positive_at_most(e, "tflops", limits::kMaxTflops));
        if (e.has("spread_pct")) e.number("spread_pct");
        if (e.has("source")) e.string("source");
        e.finish();
        p.compute.gemm_table.push_back(g);
      }
    }
    c.finish();
  }
  {
    ObjectReader coll = r.object("collectives");
    if (coll.has("topology")) p.topology = parse_topology(coll.object("topology"));
    // With a topology model the scope models are optional (and unused).
    if (p.topology && !coll.has("intra_node")) {
      p.intra_node = RingModel{.busbw = p.topology->nvlink_busbw};
      p.inter_node = RingModel{.busbw = p.topology->nic_bw};
    } else {
      p.intra_node = parse_scope(coll.object("intra_node"));
      p.inter_node = coll.has("inter_node") ? parse_scope(coll.object("inter_node")) : p.intra_node;
    }
    coll.finish();
  }
  if (r.has("contention")) {
    ObjectReader c = r.object("contention");
    p.contention.compute_slowdown = c.number_in("compute_slowdown", 0, limits::kMaxSlowdown, 0);
    p.contention.comm_slowdown = c.number_in("comm_slowdown", 0, limits::kMaxSlowdown, 0);
    c.finish();
  }
  if (r.has("host")) {
    ObjectReader h = r.object("host");
    p.host.launch_overhead = Time::from_us(h.number_in("launch_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.eager_op_overhead = Time::from_us(h.number_in("eager_op_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.autograd_op_overhead = Time::from_us(h.number_in("autograd_op_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.kernel_launch_overhead = Time::from_us(h.number_in("kernel_launch_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.collective_overhead = Time::from_us(h.number_in("collective_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.event_overhead = Time::from_us(h.number_in("event_overhead_us", 0, limits::kMaxLatencyUs, 0));
    p.host.alloc_overhead = Time::from_us(h.number_in("alloc_overhead_us", 0, limits::kMaxLatencyUs, 0));
    h.finish();
  }
  if (r.has("sources")) {
    p.sources = r.raw("sources");
    if (!p.sources.is_object()) r.fail("sources", "an object mapping a field path to where its number came from");
  }
  if (r.has("memory_outside_allocator")) {
    // Every number here needs its own source ("sources": {"memory_outside_allocator.KEY": ...}):
    // these are measured (nvidia-smi minus torch.cuda.memory_reserved()), never guessed.
    ObjectReader m = r.object("memory_outside_allocator");
    auto mib = [&](const char* key, Bytes& out) {
      if (!m.has(key)) return;
      double v = m.non_negative(key, 0);
      if (v > 1024.0 * 1024.0) m.fail(key, "at most 1048576 MiB");
      std::string src = std::string("memory_outside_allocator.") + key;
      if (!p.sources.is_object() || !p.sources.contains(src) || !p.sources[src].is_string())
        m.fail(key, fmt::format("a source for it: \"sources\": {{\"{}\": \"where the number came from\"}}", src));
      out = Bytes{static_cast<std::int64_t>(v * 1024.0 * 1024.0)};
    };
    mib("cuda_context_MiB", p.outside_allocator.cuda_context);
    mib("nccl_per_communicator_MiB", p.outside_allocator.nccl_per_communicator);
    m.finish();
  }
  if (r.has("provenance")) p.provenance = r.raw("provenance");
  r.finish();
  return p;
}

HardwareProfile load_profile(const std::filesystem::path& file) {
  SourceMap sources;
  sources.root_file = file.string();
  // A profile may include another and override some of its numbers (a GPU variant such as
  // the A100 40GB over the 80GB profile), with the usual "include" rules.
  Json doc = load_with_includes(file, sources);
  ObjectReader r(doc, sources, "");
  return parse_profile(r);
}

static Json ranges_to_json(const std::vector<AlphaBetaRange>& ranges) {
  Json arr = Json::array();
  for (const auto& r : ranges) {
    Json o{{"alpha_us", r.alpha.us()}, {"beta_GBps", r.beta.gbps()}};
    if (r.max_bytes.count != std::numeric_limits<std::int64_t>::max()) o["max_bytes"] = r.max_bytes.count;
    arr.push_back(o);
  }
  return arr;
}

static void ring_to_json(const RingModel& m, Json& o) {
  o["busbw_GBps"] = m.busbw.gbps();
  o["step_latency_us"] = m.step_latency.us();
  o["base_latency_us"] = m.base_latency.us();
}

static void tree_to_json(const RingModel& ring, const TreeConstants& tree, Json& o) {
  ring_to_json(ring, o);
  if (tree.busbw.bytes_per_s > 0) o["tree_busbw_GBps"] = tree.busbw.gbps();
  if (tree.step_latency.ns > 0) o["tree_step_latency_us"] = tree.step_latency.us();
}

static Json scope_to_json(const ScopeModel& model) {
  Json o{{"model", model_name(model)}};
  std::visit(Overloaded{
                 [&](const AlphaBetaModel& m) {
                   for (const auto& [k, ranges] : m.ranges) o[to_string(k)] = ranges_to_json(ranges);
                   if (!m.default_ranges.empty()) o["default"] = ranges_to_json(m.default_ranges);
                   if (!m.ranks.empty()) {
                     Json ranks = Json::object();
                     for (const auto& [k, n] : m.ranks) ranks[to_string(k)] = n;
                     o["ranks"] = ranks;
                   }
                   if (!m.groups.empty()) {
                     Json groups = Json::object();
                     for (const auto& [k, by_size] : m.groups)
                       for (const auto& [n, ranges] : by_size) groups[to_string(k)][std::to_string(n)] = ranges_to_json(ranges);
                     o["groups"] = groups;
                   }
                 },
                 [&](const TableModel& m) {
                   for (const auto& [k, by_size] : m.points) {
                     Json t = Json::object();
                     for (const auto& [n, pts] : by_size) {
                       Json arr = Json::array();
                       for (const auto& p : pts) arr.push_back(Json::array({p.bytes.count, p.time.us()}));
                       t[std::to_string(n)] = arr;
                     }
                     o[to_string(k)] = t;
                   }
                 },
                 [&](const RingModel& m) { ring_to_json(m, o); },
                 [&](const TreeModel& m) { tree_to_json(m.ring, m.tree, o); },
                 [&](const NcclModel& m) { tree_to_json(m.ring, m.tree, o); },
             },
             model);
  return o;
}

static Json collectives_to_json(const HardwareProfile& p) {
  if (p.topology) return {{"topology", topology_to_json(*p.topology)}};
  return {{"intra_node", scope_to_json(p.intra_node)}, {"inter_node", scope_to_json(p.inter_node)}};
}

Json profile_to_json(const HardwareProfile& p) {
  Json peak = Json::object();
  for (const auto& [d, r] : p.compute.peak) peak[to_string(d)] = r.tflops();
  Json table = Json::array();
  for (const auto& g : p.compute.gemm_table)
    table.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"batch", g.shape.batch},
                     {"dtype", to_string(g.shape.dtype)}, {"tflops", g.rate.tflops()}});
  Json class_bw = Json::object();
  for (const auto& [k, bw] : p.compute.class_bandwidth) class_bw[to_string(k)] = bw.gbps();
  Json out{{"name", p.name},
           {"description", p.description},
           {"memory_capacity_GiB", p.memory_capacity.gib()},
           {"compute",
            {{"peak_tflops", peak},
             {"hbm_bandwidth_GBps", p.compute.hbm.gbps()},
             {"memory_efficiency", p.compute.memory_efficiency},
             {"gemm_efficiency", p.compute.gemm_efficiency},
             {"attention_efficiency", p.compute.attention_efficiency},
             {"efficient_attention_efficiency", p.compute.efficient_attention_efficiency},
             {"gemm_in_training_factor", p.compute.gemm_in_training_factor},
             {"memory_bandwidth_GBps", class_bw},
             {"model_memory_bound_kernels", p.compute.model_memory_kernels},
             {"min_kernel_time_us", p.compute.min_kernel_time.us()},
             {"kernel_gap_us", p.compute.kernel_gap.us()},
             {"gemm_table", table}}},
           {"collectives", collectives_to_json(p)},
           {"contention", {{"compute_slowdown", p.contention.compute_slowdown}, {"comm_slowdown", p.contention.comm_slowdown}}},
           {"host",
            {{"launch_overhead_us", p.host.launch_overhead.us()},
             {"eager_op_overhead_us", p.host.eager_op_overhead.us()},
             {"autograd_op_overhead_us", p.host.autograd_op_overhead.us()},
             {"kernel_launch_overhead_us", p.host.kernel_launch_overhead.us()},
             {"collective_overhead_us", p.host.collective_overhead.us()},
             {"event_overhead_us", p.host.event_overhead.us()},
             {"alloc_overhead_us", p.host.alloc_overhead.us()}}}};
  if (p.outside_allocator.cuda_context.count > 0 || p.outside_allocator.nccl_per_communicator.count > 0)
    out["memory_outside_allocator"] = {
        {"cuda_context_MiB", static_cast<double>(p.outside_allocator.cuda_context.count) / (1024.0 * 1024.0)},
        {"nccl_per_communicator_MiB", static_cast<double>(p.outside_allocator.nccl_per_communicator.count) / (1024.0 * 1024.0)}};
  if (!p.sources.is_null()) out["sources"] = p.sources;
  if (!p.provenance.is_null()) out["provenance"] = p.provenance;
  return out;
}

}  // namespace stepsim
