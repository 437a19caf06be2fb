#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/format.hpp"
#include "sim/core/input_files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/overloaded.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/hardware/profile_disk_cache.hpp"
#include "sim/hardware/profile_keys.hpp"

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

// Profile numbers are read with the type, range and default their key declares
// (profile_keys.cpp), so the parser, docs/profile-keys.md and the JSON Schema share one range.
static const ConfigKey& key_of(const ObjectReader& r, const std::string& key) {
  const ConfigKey* k = r.declaration() ? r.declaration()->find(key) : nullptr;
  if (!k) throw std::logic_error(fmt::format("{}: \"{}\" is read but not declared in profile_keys.cpp", r.path_of(key), key));
  return *k;
}

// A number within its declared range; the declared default when absent (no default: required).
// The messages name the range: "a positive number of at most HI" for (0, HI], "a fraction
// between 0 and 1" for [0, 1], "a number from LO to HI".
static double read_number(ObjectReader& r, const std::string& key) {
  const ConfigKey& k = key_of(r, key);
  if (!r.has(key)) {
    if (k.default_value) return k.default_value->get<double>();
    r.raw(key);  // "missing required key"
  }
  if (k.min_exclusive) {  // (0, max]: a size or a rate
    if (k.max && *k.max == 1) {
      double d = r.fraction(key, 0);
      if (d <= 0) r.fail(key, "a fraction in (0, 1]");
      return d;
    }
    double d = r.positive(key);
    if (k.max && d > *k.max) r.fail(key, fmt::format("a positive number of at most {:g}", *k.max));
    return d;
  }
  if (k.min && k.max && *k.min == 0 && *k.max == 1) return r.fraction(key, 0);
  if (k.min && k.max) return r.number_in(key, *k.min, *k.max);
  if (k.min && *k.min == 0) return r.non_negative(key, 0);
  return r.number(key);
}

// An integer within its declared range; the declared default when absent (no default: required).
static std::int64_t read_integer(ObjectReader& r, const std::string& key) {
  const ConfigKey& k = key_of(r, key);
  if (!r.has(key)) {
    if (k.default_value) return k.default_value->get<std::int64_t>();
    r.raw(key);
  }
  if (k.min && k.max) return r.integer_in(key, static_cast<std::int64_t>(*k.min), static_cast<std::int64_t>(*k.max));
  if (k.min && *k.min == 1) return r.positive_integer(key);
  return r.integer(key);
}

// A value kept in the file but not used (fit diagnostics, notes): its declared JSON type.
static void skip(ObjectReader& r, const std::string& key) {
  if (!r.has(key)) return;
  const ConfigKey& k = key_of(r, key);
  if (k.types == kString) r.string(key);
  else if (k.types == kNumber) r.number(key);
  else if (k.types == kInteger) r.integer(key);
  else r.raw(key);
}

static const char* kKindKeys[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"};

static std::vector<AlphaBetaRange> parse_ranges(ObjectReader& r, const std::string& key) {
  std::vector<AlphaBetaRange> out;
  for (auto& item : r.objects(key, profile_keys::alpha_beta_range())) {
    AlphaBetaRange range;
    if (item.has("max_bytes")) range.max_bytes = Bytes{read_integer(item, "max_bytes")};
    range.alpha = Time::from_us(read_number(item, "alpha_us"));
    range.beta = Bandwidth::from_gbps(read_number(item, "beta_GBps"));
    // Fit diagnostics written by `stepsim fit`: carried, not used (AlphaBetaRange::fit). All four
    // or none: a range that has some but not all of them was not written by fit.
    const int diagnostics = item.has("r2") + item.has("max_rel_error") + item.has("points") + item.has("min_bytes");
    if (diagnostics == 4) {
      range.fit = AlphaBetaRange::FitQuality{read_integer(item, "min_bytes"), read_integer(item, "points"), read_number(item, "r2"),
                                             read_number(item, "max_rel_error")};
    } else {
      for (const char* diagnostic : {"r2", "max_rel_error", "points", "min_bytes"}) skip(item, diagnostic);
    }
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
    ObjectReader ranks = r.object("ranks", profile_keys::alpha_beta_ranks());
    for (const char* k : kKindKeys)
      if (ranks.has(k)) m.ranks[parse_collective_kind(k)] = static_cast<int>(read_integer(ranks, k));
    ranks.finish();
  }
  if (r.has("groups")) {
    ObjectReader groups = r.object("groups", profile_keys::alpha_beta_groups());
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
  m.busbw = Bandwidth::from_gbps(read_number(r, "busbw_GBps"));
  m.step_latency = Time::from_us(read_number(r, "step_latency_us"));
  m.base_latency = Time::from_us(read_number(r, "base_latency_us"));
  return m;
}

static TreeConstants parse_tree_constants(ObjectReader& r) {
  TreeConstants t;
  t.busbw = Bandwidth::from_gbps(read_number(r, "tree_busbw_GBps"));
  t.step_latency = Time::from_us(read_number(r, "tree_step_latency_us"));
  return t;
}

static ScopeModel parse_scope(ObjectReader r) {
  ScopeModel m;
  // The object's keys are those of its "model" (profile_keys.cpp): an unknown key's error lists them.
  const ConfigKey& model_key = *profile_keys::scope_model("ring")->find("model");
  const Json& model = r.raw("model");
  const ConfigObject* decl = model.is_string() ? profile_keys::scope_model(model.get<std::string>()) : nullptr;
  if (!decl) {
    std::string expected = "one of ";
    for (std::size_t i = 0; i < model_key.choices.size(); ++i) expected += (i ? ", " : "") + model_key.choices[i];
    r.fail("model", expected);
  }
  r.declare(*decl);
  const std::string& kind = decl->discriminator_value;
  if (kind == "alpha_beta") m = parse_alpha_beta(r);
  else if (kind == "table") m = parse_table(r);
  else if (kind == "ring") m = parse_ring(r);
  else if (kind == "tree") m = TreeModel{parse_ring(r), parse_tree_constants(r)};
  else m = NcclModel{parse_ring(r), parse_tree_constants(r)};
  skip(r, "note");
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
  std::string arch = r.declared_choice("arch");
  t.arch = arch == "volta" ? NcclArch::Volta : arch == "ampere" ? NcclArch::Ampere : arch == "blackwell" ? NcclArch::Blackwell : NcclArch::Hopper;
  t.gpus_per_node = static_cast<int>(read_integer(r, "gpus_per_node"));
  {
    ObjectReader n = r.object("nvlink", profile_keys::nvlink());
    t.nvlink_busbw = Bandwidth::from_gbps(read_number(n, "busbw_GBps"));
    t.nvls_bw = Bandwidth::from_gbps(read_number(n, "nvls_GBps"));
    t.nvlink_all_to_all_busbw = Bandwidth::from_gbps(read_number(n, "all_to_all_busbw_GBps"));
    t.nvlink_latency_scale = read_number(n, "latency_scale");
    t.nvlink_local_bw = Bandwidth::from_gbps(read_number(n, "local_GBps"));
    skip(n, "note");
    n.finish();
  }
  {
    ObjectReader n = r.object("network", profile_keys::network());
    t.nics_per_node = static_cast<int>(read_integer(n, "nics_per_node"));
    t.nic_bw = Bandwidth::from_gbps(read_number(n, "nic_GBps"));
    t.nic_all_to_all_bw = Bandwidth::from_gbps(read_number(n, "all_to_all_nic_GBps"));
    t.net_latency_scale = read_number(n, "latency_scale");
    t.leaf_nodes = static_cast<int>(read_integer(n, "leaf_nodes"));
    t.oversubscription = read_number(n, "oversubscription");
    skip(n, "note");
    n.finish();
  }
  t.channels = static_cast<int>(read_integer(r, "channels"));
  t.tree = r.declared_boolean("tree");
  t.ll128 = r.declared_boolean("ll128");
  if (r.has("fitted")) {
    ObjectReader f = r.object("fitted", profile_keys::fitted());
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
    skip(f, "errors");
    skip(f, "note");
    f.finish();
  }
  skip(r, "note");
  r.finish();
  return t;
}

static Json topology_to_json(const NcclTopology& t) {
  Json nvlink{{"busbw_GBps", t.nvlink_busbw.gbps()}, {"latency_scale", t.nvlink_latency_scale}};
  if (t.nvls_bw.bytes_per_s > 0) nvlink["nvls_GBps"] = t.nvls_bw.gbps();
  if (t.nvlink_all_to_all_busbw.bytes_per_s > 0) nvlink["all_to_all_busbw_GBps"] = t.nvlink_all_to_all_busbw.gbps();
  if (t.nvlink_local_bw.bytes_per_s > 0) nvlink["local_GBps"] = t.nvlink_local_bw.gbps();
  Json net{{"nics_per_node", t.nics_per_node}, {"nic_GBps", t.nic_bw.gbps()}, {"latency_scale", t.net_latency_scale}};
  if (t.nic_all_to_all_bw.bytes_per_s > 0) net["all_to_all_nic_GBps"] = t.nic_all_to_all_bw.gbps();
  if (t.leaf_nodes > 0) net["leaf_nodes"] = t.leaf_nodes;
  if (t.oversubscription != 1) net["oversubscription"] = t.oversubscription;
  Json o{{"arch", to_string(t.arch)}, {"gpus_per_node", t.gpus_per_node}, {"nvlink", nvlink}, {"network", net},
         {"channels", t.channels}, {"tree", t.tree}, {"ll128", t.ll128}};
  if (!t.fitted.empty())
    o["fitted"] = {{"ranks", {t.fitted.min_ranks, t.fitted.max_ranks}},
                   {"nodes", {t.fitted.min_nodes, t.fitted.max_nodes}},
                   {"gpus_per_node", {t.fitted.min_gpus_per_node, t.fitted.max_gpus_per_node}}};
  return o;
}

// A measured GEMM rate above its dtype's dense peak on the part it was measured on (the
// table's part: peak_tflops scaled by gemm_table_peak_bf16_tflops / peak_tflops.bf16) did not
// time the GEMM kernel: XLA's sm_90 fp8 rows reach 1.31 x the 1,979 TFLOP/s dense peak, and
// twice Azure's sustained cuBLASLt fp8 rate at 4096^3 (docs/calibration.md). Such a table, or
// the profile's peak, is wrong; a prediction from it would run GEMMs faster than the chip can.
static void check_below_peak(ObjectReader& e, const ComputeProfile& c, const GemmMeasurement& g) {
  if (!c.peak.count(g.shape.dtype)) return;  // no peak declared for this dtype: nothing to hold it to
  const double peak = gemm_table_part_peak_tflops(c, g.shape.dtype);
  if (g.rate.tflops() <= peak * (1 + 1e-9)) return;
  e.fail_value("tflops", e.raw("tflops"),
               fmt::format("at most the {} dense peak of the part it was measured on, {:.1f} TFLOP/s (compute.peak_tflops{}): "
                           "a measured rate above it did not time the GEMM kernel alone",
                           to_string(g.shape.dtype), peak,
                           c.gemm_table_peak.flops_per_s > 0 ? " x gemm_table_peak_bf16_tflops / peak_tflops.bf16" : ""));
}

static ComputeProfile parse_compute(ObjectReader c) {
  ComputeProfile out;
  {
    ObjectReader peak = c.object("peak_tflops", profile_keys::peak_tflops());
    for (const char* d : {"fp32", "tf32", "bf16", "fp16", "fp8"})
      if (peak.has(d)) out.peak[parse_dtype(d)] = FlopRate::from_tflops(read_number(peak, d));
    peak.finish();
    if (out.peak.empty()) c.fail("peak_tflops", "at least one dtype (bf16, fp16, fp32, tf32, fp8)");
  }
  out.hbm = Bandwidth::from_gbps(read_number(c, "hbm_bandwidth_GBps"));
  out.memory_efficiency = read_number(c, "memory_efficiency");
  out.gemm_efficiency = read_number(c, "gemm_efficiency");
  out.attention_efficiency = read_number(c, "attention_efficiency");
  out.efficient_attention_efficiency = read_number(c, "efficient_attention_efficiency");
  out.gemm_in_training_factor = read_number(c, "gemm_in_training_factor");
  if (c.has("gemm_table_rates"))
    out.gemm_table_rates = c.declared_choice("gemm_table_rates") == "in_training" ? GemmRates::InTraining : GemmRates::Microbenchmark;
  if (c.has("gemm_table_peak_bf16_tflops")) out.gemm_table_peak = FlopRate::from_tflops(read_number(c, "gemm_table_peak_bf16_tflops"));
  if (c.has("attention")) {
    ObjectReader a = c.object("attention", profile_keys::attention());
    for (int i = 0; i < kAttentionKernelCount; ++i) {
      const std::string k = to_string(static_cast<AttentionKernel>(i));
      if (!a.has(k)) continue;
      ObjectReader r = a.object(k, profile_keys::attention_kernel());
      AttentionRate rate;
      rate.forward = read_number(r, "forward");
      rate.backward = read_number(r, "backward");
      rate.half_rate_seq = read_integer(r, "half_rate_seq");
      skip(r, "note");
      r.finish();
      out.attention_rates[static_cast<std::size_t>(i)] = rate;
    }
    a.finish();
  }
  if (c.has("clock")) {
    ObjectReader k = c.object("clock", profile_keys::clock());
    out.clock.boost_mhz = read_number(k, "boost_MHz");
    out.clock.full_load_mhz = read_number(k, "full_load_MHz");
    out.clock.power_limit_w = read_number(k, "power_limit_W");
    if (out.clock.full_load_mhz > out.clock.boost_mhz)
      k.fail_value("full_load_MHz", k.raw("full_load_MHz"), "at most boost_MHz (a power limit only lowers the clock)");
    skip(k, "note");
    k.finish();
  }
  if (c.has("memory_bandwidth_GBps")) {
    ObjectReader bw = c.object("memory_bandwidth_GBps", profile_keys::memory_bandwidth());
    for (const char* k : {"elementwise", "elementwise_strided", "reduction", "norm", "copy", "embedding", "optimizer"})
      if (bw.has(k)) out.class_bandwidth[parse_kernel_class(k)] = Bandwidth::from_gbps(read_number(bw, k));
    if (bw.has("inductor_reduction")) out.inductor_reduction = Bandwidth::from_gbps(read_number(bw, "inductor_reduction"));
    bw.finish();
  }
  out.strided_element_ns = read_number(c, "elementwise_strided_ns_per_element");
  out.strided_cast_element_ns = read_number(c, "elementwise_strided_cast_ns_per_element");
  out.l2_bytes = read_number(c, "l2_cache_MiB") * 1024 * 1024;
  out.dram_stream = Bandwidth::from_gbps(read_number(c, "dram_stream_GBps"));
  out.model_memory_kernels = c.declared_boolean("model_memory_bound_kernels");
  out.min_kernel_time = Time::from_us(read_number(c, "min_kernel_time_us"));
  out.kernel_gap = Time::from_us(read_number(c, "kernel_gap_us"));
  out.memcpy = Bandwidth::from_gbps(read_number(c, "memcpy_GBps"));
  if (c.has("gemm_table")) {
    for (auto& e : c.objects("gemm_table", profile_keys::gemm())) {
      GemmMeasurement g;
      g.shape.m = read_integer(e, "m");
      g.shape.n = read_integer(e, "n");
      g.shape.k = read_integer(e, "k");
      g.shape.batch = read_integer(e, "batch");
      g.shape.dtype = e.dtype("dtype", parse_dtype(key_of(e, "dtype").default_value->get<std::string>()));
      if (e.has("layout")) g.shape.layout = parse_gemm_layout(e.declared_choice("layout"));
      g.rate = FlopRate::from_tflops(read_number(e, "tflops"));
      check_below_peak(e, out, g);
      skip(e, "spread_pct");
      skip(e, "source");
      e.finish();
      out.gemm_table.push_back(g);
    }
  }
  c.finish();
  return out;
}

static void parse_collectives(ObjectReader coll, HardwareProfile& p) {
  if (coll.has("topology")) p.topology = parse_topology(coll.object("topology", profile_keys::topology()));
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

static RankVariation parse_rank_variation(ObjectReader v) {
  RankVariation out;
  if (v.has("kernel_cv")) {
    ObjectReader k = v.object("kernel_cv");
    for (const auto& [name, value] : k.raw_object_items()) {
      KernelClass cls;
      try {
        cls = parse_kernel_class(name);
      } catch (const std::out_of_range&) {
        k.fail(name, "a kernel class (gemm, attention, compute, elementwise, elementwise_strided, reduction, norm, copy, "
                     "embedding, optimizer)");
      }
      out.kernel_cv[static_cast<std::size_t>(cls)] = k.number_in(name, 0, 1);
    }
    k.finish();
  }
  out.persistent_cv = read_number(v, "persistent_cv");
  out.host_cv = read_number(v, "host_cv");
  out.source = v.string("source", "");
  v.finish();
  return out;
}

static HostProfile parse_host(ObjectReader h) {
  HostProfile out;
  out.launch_overhead = Time::from_us(read_number(h, "launch_overhead_us"));
  out.eager_op_overhead = Time::from_us(read_number(h, "eager_op_overhead_us"));
  out.autograd_op_overhead = Time::from_us(read_number(h, "autograd_op_overhead_us"));
  out.autograd_engine_per_node = Time::from_us(read_number(h, "autograd_engine_per_node_us"));
  out.kernel_launch_overhead = Time::from_us(read_number(h, "kernel_launch_overhead_us"));
  out.collective_overhead = Time::from_us(read_number(h, "collective_overhead_us"));
  out.event_overhead = Time::from_us(read_number(h, "event_overhead_us"));
  out.alloc_overhead = Time::from_us(read_number(h, "alloc_overhead_us"));
  out.step_start = Time::from_us(read_number(h, "step_start_us"));
  out.step_end = Time::from_us(read_number(h, "step_end_us"));
  out.monitor_write = Time::from_us(read_number(h, "monitor_write_us"));
  h.finish();
  return out;
}

// Every number here needs its own source ("sources": {"memory_outside_allocator.KEY": ...}):
// these are measured (nvidia-smi minus torch.cuda.memory_reserved()), never guessed.
static OutsideAllocatorMemory parse_outside_allocator(ObjectReader m, const Json& sources) {
  OutsideAllocatorMemory out;
  auto mib = [&](const char* key, Bytes& dst) {
    if (!m.has(key)) return;
    const ConfigKey& k = key_of(m, key);
    double v = m.non_negative(key, 0);
    if (v > *k.max) m.fail(key, fmt::format("at most {:.0f} MiB", *k.max));
    std::string src = std::string("memory_outside_allocator.") + key;
    if (!sources.is_object() || !sources.contains(src) || !sources[src].is_string())
      m.fail(key, fmt::format("a source for it: \"sources\": {{\"{}\": \"where the number came from\"}}", src));
    dst = Bytes{static_cast<std::int64_t>(v * 1024.0 * 1024.0)};
  };
  mib("cuda_context_MiB", out.cuda_context);
  mib("nccl_per_communicator_MiB", out.nccl_per_communicator);
  mib("cublas_workspace_MiB", out.cublas_workspace);
  if (m.has("nccl_channels")) {
    if (m.has("nccl_per_communicator_MiB"))
      m.fail("nccl_channels", "no nccl_per_communicator_MiB beside it (a measured size replaces the channel model)");
    const std::string src = "memory_outside_allocator.nccl_channels";
    if (!sources.is_object() || !sources.contains(src) || !sources[src].is_string())
      m.fail("nccl_channels", fmt::format("a source for it: \"sources\": {{\"{}\": \"where the number came from\"}}", src));
    out.nccl_channels = m.int_in("nccl_channels", 1, 64);
  }
  m.finish();
  return out;
}

std::vector<NonPytorchPart> HardwareProfile::non_pytorch_parts(std::size_t communicators) const {
  std::vector<NonPytorchPart> parts;
  const OutsideAllocatorMemory& oa = outside_allocator;
  if (oa.cuda_context.count > 0) parts.push_back({"CUDA context", "driver, kernels' code, lazily loaded modules", oa.cuda_context});
  const auto n = static_cast<std::int64_t>(communicators);
  if (oa.nccl_channels > 0 && n > 0) {
    parts.push_back({"NCCL buffers",
                     fmt::format("{} communicator{} x {} channels x {} (LL + LL128 + Simple)", n, n == 1 ? "" : "s", oa.nccl_channels,
                                 format_bytes(Bytes{kNcclBuffersPerChannel})),
                     Bytes{n * oa.nccl_channels * kNcclBuffersPerChannel}});
  } else if (oa.nccl_per_communicator.count > 0 && n > 0) {
    parts.push_back({"NCCL buffers", fmt::format("{} communicator{} x {} (measured)", n, n == 1 ? "" : "s", format_bytes(oa.nccl_per_communicator)),
                     Bytes{n * oa.nccl_per_communicator.count}});
  }
  return parts;
}

HardwareProfile parse_profile(ObjectReader& r) {
  // The document's keys are declared in profile_keys.cpp: an unknown key is an error naming
  // the nearest declared key and every key the object takes.
  r.declare(profile_keys::root());
  HardwareProfile p;
  skip(r, "$schema");
  p.name = r.string("name");
  p.description = r.string("description", key_of(r, "description").default_value->get<std::string>());
  p.memory_capacity = Bytes{static_cast<std::int64_t>(read_number(r, "memory_capacity_GiB") * 1024.0 * 1024.0 * 1024.0)};
  p.compute = parse_compute(r.object("compute", profile_keys::compute()));
  parse_collectives(r.object("collectives", profile_keys::collectives()), p);
  if (r.has("contention")) {
    ObjectReader c = r.object("contention", profile_keys::contention());
    p.contention.compute_slowdown = read_number(c, "compute_slowdown");
    p.contention.comm_slowdown = read_number(c, "comm_slowdown");
    p.contention.gpu_sms = static_cast<int>(read_integer(c, "gpu_sms"));
    p.contention.collective_sms = static_cast<int>(read_integer(c, "collective_sms"));
    if (p.contention.collective_sms > 0 && p.contention.gpu_sms > 0 && p.contention.collective_sms >= p.contention.gpu_sms)
      c.fail("collective_sms", fmt::format("fewer SMs than contention.gpu_sms ({})", p.contention.gpu_sms));
    c.finish();
  }
  if (r.has("host")) p.host = parse_host(r.object("host", profile_keys::host()));
  if (r.has("rank_variation")) p.rank_variation = parse_rank_variation(r.object("rank_variation", profile_keys::rank_variation()));
  if (r.has("sources")) {
    p.sources = r.raw("sources");
    if (!p.sources.is_object()) r.fail("sources", "an object mapping a field path to where its number came from");
  }
  if (r.has("memory_outside_allocator"))
    p.outside_allocator = parse_outside_allocator(r.object("memory_outside_allocator", profile_keys::outside_allocator()), p.sources);
  if (r.has("provenance")) {
    p.provenance = r.raw("provenance");
    if (!p.provenance.is_object()) r.fail("provenance", "an object (the commands and inputs that produced the profile)");
  }
  r.finish();
  return p;
}

namespace {

// The profiles this process has read, each with the size and modification time each of its
// files had. The Python API and a C++ loop read the same profile at every call, and decoding
// the disk cache's entry was 1.25 M of the DDP example's 11.9 M instructions a call and 900 of
// its 4,200 heap allocations (issue 51). A kept profile is used while every file it was read from
// (the profile and its includes) has the size and nanosecond modification time it had, as
// Python's own .pyc check does; a profile whose files were modified within the last two
// seconds is not kept (an edit within the same clock tick would not show: git's "racily clean"
// rule), so it is read again until its files are older. Eight profiles, the least recently used
// dropped. Thread-safe: sweep threads read through here.
class ProcessProfileMemo {
 public:
  std::shared_ptr<const HardwareProfile> find(const std::string& key) {
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
      if (!unchanged(it->files)) {
        entries_.erase(it);
        return nullptr;
      }
      std::rotate(entries_.begin(), it, it + 1);  // most recently used first
      for (const auto& f : entries_.front().files) note_input_file(f.path);  // as a read would
      return entries_.front().profile;
    }
    return nullptr;
  }

  void add(const std::string& key, const std::vector<std::filesystem::path>& read, std::shared_ptr<const HardwareProfile> p) {
    std::vector<FileStamp> files;
    const auto settled = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(2);
    for (const auto& path : read) {
      auto s = stamp(path);
      if (!s || s->mtime > settled) return;
      files.push_back(std::move(*s));
    }
    if (files.empty()) return;
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
    if (entries_.size() == kCapacity) entries_.pop_back();
    entries_.insert(entries_.begin(), Entry{key, std::move(files), std::move(p)});
  }

 private:
  struct FileStamp {
    std::filesystem::path path;
    std::uintmax_t size = 0;
    std::filesystem::file_time_type mtime;
  };
  struct Entry {
    std::string key;
    std::vector<FileStamp> files;
    std::shared_ptr<const HardwareProfile> profile;
  };
  static constexpr std::size_t kCapacity = 8;

  static std::optional<FileStamp> stamp(const std::filesystem::path& path) {
    std::error_code ec;
    FileStamp s{path, std::filesystem::file_size(path, ec), {}};
    if (ec) return std::nullopt;
    s.mtime = std::filesystem::last_write_time(path, ec);
    if (ec) return std::nullopt;
    return s;
  }
  static bool unchanged(const std::vector<FileStamp>& files) {
    for (const auto& f : files) {
      const auto now = stamp(f.path);
      if (!now || now->size != f.size || now->mtime != f.mtime) return false;
    }
    return true;
  }

  std::mutex mutex_;
  std::vector<Entry> entries_;
};

ProcessProfileMemo& process_profiles() {
  static ProcessProfileMemo memo;
  return memo;
}

// The profile from the disk cache when every file it was read from is unchanged
// (profile_disk_cache.hpp; the cache never decides an error), else parsed. `read` gets the
// files it came from.
HardwareProfile read_profile(const std::filesystem::path& file, std::vector<std::filesystem::path>& read) {
  const auto cache = profile_cache_dir();
  std::optional<std::string> text;
  if (cache) {
    if (auto p = read_cached_profile(*cache, file, &read)) return std::move(*p);
    text = read_regular_file(file);  // what the entry will be checked against
  }
  SourceMap sources;
  sources.root_file = file.string();
  // A profile may include another and override some of its numbers (a GPU variant such as
  // the A100 40GB over the 80GB profile), with the usual "include" rules.
  Json doc = load_with_includes(file, sources);
  ObjectReader r(doc, sources, "");
  HardwareProfile p = parse_profile(r);
  if (text) write_cached_profile(*cache, file, sources, p, content_hash(*text), text->size());
  read.push_back(file);
  for (const auto& inc : sources.includes) read.emplace_back(inc.target);
  return p;
}

}  // namespace

std::shared_ptr<const HardwareProfile> load_shared_profile(const std::filesystem::path& file) {
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(file, ec);
  const std::string key = ec ? file.string() : canonical.string();
  if (auto kept = process_profiles().find(key)) return kept;
  std::vector<std::filesystem::path> read;
  auto p = std::make_shared<const HardwareProfile>(read_profile(file, read));
  process_profiles().add(key, read, p);
  return p;
}

HardwareProfile load_profile(const std::filesystem::path& file) { return *load_shared_profile(file); }

static Json ranges_to_json(const std::vector<AlphaBetaRange>& ranges) {
  Json arr = Json::array();
  for (const auto& r : ranges) {
    Json o{{"alpha_us", r.alpha.us()}, {"beta_GBps", r.beta.gbps()}};
    if (r.max_bytes.count != std::numeric_limits<std::int64_t>::max()) o["max_bytes"] = r.max_bytes.count;
    if (r.fit) {
      o["min_bytes"] = r.fit->min_bytes;
      o["points"] = r.fit->points;
      o["r2"] = r.fit->r2;
      o["max_rel_error"] = r.fit->max_rel_error;
    }
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
  for (const auto& g : p.compute.gemm_table) {
    table.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"batch", g.shape.batch},
                     {"dtype", to_string(g.shape.dtype)}, {"tflops", g.rate.tflops()}});
    if (g.shape.layout != GemmLayout::Any) table.back()["layout"] = std::string(to_string(g.shape.layout));
  }
  Json class_bw = Json::object();
  for (const auto& [k, bw] : p.compute.class_bandwidth) class_bw[to_string(k)] = bw.gbps();
  if (p.compute.inductor_reduction.bytes_per_s > 0) class_bw["inductor_reduction"] = p.compute.inductor_reduction.gbps();
  Json attention = Json::object();
  for (int i = 0; i < kAttentionKernelCount; ++i)
    if (const auto& r = p.compute.attention_rates[static_cast<std::size_t>(i)])
      attention[to_string(static_cast<AttentionKernel>(i))] = {{"forward", r->forward}, {"backward", r->backward},
                                                               {"half_rate_seq", r->half_rate_seq}};
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
             {"gemm_table_rates", to_string(p.compute.gemm_table_rates)},
             {"attention", attention},
             {"memory_bandwidth_GBps", class_bw},
             {"model_memory_bound_kernels", p.compute.model_memory_kernels},
             {"min_kernel_time_us", p.compute.min_kernel_time.us()},
             {"kernel_gap_us", p.compute.kernel_gap.us()},
             {"gemm_table", table}}},
           {"collectives", collectives_to_json(p)},
           {"contention", {{"compute_slowdown", p.contention.compute_slowdown}, {"comm_slowdown", p.contention.comm_slowdown}, {"gpu_sms", p.contention.gpu_sms}, {"collective_sms", p.contention.collective_sms}}},
           {"host",
            {{"launch_overhead_us", p.host.launch_overhead.us()},
             {"eager_op_overhead_us", p.host.eager_op_overhead.us()},
             {"autograd_op_overhead_us", p.host.autograd_op_overhead.us()},
             {"kernel_launch_overhead_us", p.host.kernel_launch_overhead.us()},
             {"collective_overhead_us", p.host.collective_overhead.us()},
             {"event_overhead_us", p.host.event_overhead.us()},
             {"alloc_overhead_us", p.host.alloc_overhead.us()}}}};
  if (p.host.step_start.ns > 0) out["host"]["step_start_us"] = p.host.step_start.us();
  if (p.host.step_end.ns > 0) out["host"]["step_end_us"] = p.host.step_end.us();
  if (p.host.monitor_write.ns > 0) out["host"]["monitor_write_us"] = p.host.monitor_write.us();
  if (p.host.autograd_engine_per_node.ns > 0) out["host"]["autograd_engine_per_node_us"] = p.host.autograd_engine_per_node.us();
  if (p.compute.memcpy.bytes_per_s > 0) out["compute"]["memcpy_GBps"] = p.compute.memcpy.gbps();
  if (p.compute.strided_element_ns > 0) out["compute"]["elementwise_strided_ns_per_element"] = p.compute.strided_element_ns;
  if (p.compute.strided_cast_element_ns > 0)
    out["compute"]["elementwise_strided_cast_ns_per_element"] = p.compute.strided_cast_element_ns;
  if (p.compute.l2_bytes > 0) out["compute"]["l2_cache_MiB"] = p.compute.l2_bytes / (1024.0 * 1024.0);
  if (p.compute.dram_stream.bytes_per_s > 0) out["compute"]["dram_stream_GBps"] = p.compute.dram_stream.gbps();
  if (p.compute.gemm_table_peak.flops_per_s > 0) out["compute"]["gemm_table_peak_bf16_tflops"] = p.compute.gemm_table_peak.tflops();
  if (p.compute.clock.active())
    out["compute"]["clock"] = {{"boost_MHz", p.compute.clock.boost_mhz},
                               {"full_load_MHz", p.compute.clock.full_load_mhz},
                               {"power_limit_W", p.compute.clock.power_limit_w}};
  const OutsideAllocatorMemory& oa = p.outside_allocator;
  if (oa.cuda_context.count > 0 || oa.nccl_per_communicator.count > 0 || oa.nccl_channels > 0 || oa.cublas_workspace.count > 0) {
    auto mib = [](Bytes b) { return static_cast<double>(b.count) / (1024.0 * 1024.0); };
    Json m = Json::object();
    m["cuda_context_MiB"] = mib(oa.cuda_context);
    if (oa.nccl_channels > 0) m["nccl_channels"] = oa.nccl_channels;
    else m["nccl_per_communicator_MiB"] = mib(oa.nccl_per_communicator);
    if (oa.cublas_workspace.count > 0) m["cublas_workspace_MiB"] = mib(oa.cublas_workspace);
    out["memory_outside_allocator"] = m;
  }
  if (p.rank_variation.enabled()) {
    Json cv = Json::object();
    for (int c = 0; c < kKernelClassCount; ++c)
      if (p.rank_variation.kernel_cv[c] > 0) cv[to_string(static_cast<KernelClass>(c))] = p.rank_variation.kernel_cv[c];
    out["rank_variation"] = {{"kernel_cv", cv}, {"persistent_cv", p.rank_variation.persistent_cv}, {"host_cv", p.rank_variation.host_cv}};
    if (!p.rank_variation.source.empty()) out["rank_variation"]["source"] = p.rank_variation.source;
  }
  if (!p.sources.is_null()) out["sources"] = p.sources;
  if (!p.provenance.is_null()) out["provenance"] = p.provenance;
  return out;
}

std::string to_string(GemmRates r) { return r == GemmRates::InTraining ? "in_training" : "microbenchmark"; }

GemmRateSource gemm_rate_source(const ComputeProfile& c) {
  GemmRateSource s;
  s.in_training_factor = c.gemm_in_training_factor;
  if (c.gemm_table.empty()) {
    s.table = "none";
    s.text = fmt::format("roofline: {:.0f} % of peak (gemm_efficiency; no measured GEMM table)", 100 * c.gemm_efficiency);
    return s;
  }
  const auto bf16 = c.peak.find(Dtype::BF16);
  if (c.gemm_table_peak.flops_per_s > 0 && bf16 != c.peak.end()) s.peak_scale = bf16->second.flops_per_s / c.gemm_table_peak.flops_per_s;
  const std::string scaled = s.peak_scale != 1 ? fmt::format(", x {:.3f} for this part's peak", s.peak_scale) : "";
  s.table = to_string(c.gemm_table_rates);
  if (c.gemm_table_rates == GemmRates::InTraining) {
    s.text = fmt::format("measured inside a training step ({} shapes{})", c.gemm_table.size(), scaled);
  } else if (c.clock.active()) {
    s.text = fmt::format("microbenchmark table ({} shapes{}) at the clock the {:g} W limit sustains (compute.clock: {:g} MHz at "
                         "full tensor load, boost {:g})",
                         c.gemm_table.size(), scaled, c.clock.power_limit_w, c.clock.full_load_mhz, c.clock.boost_mhz);
  } else if (c.gemm_in_training_factor < 1) {
    s.text = fmt::format("microbenchmark table ({} shapes{}) x in-training factor {:.3f}", c.gemm_table.size(), scaled,
                         c.gemm_in_training_factor);
  } else {
    s.corrected = false;
    s.text = fmt::format("microbenchmark table ({} shapes{}), not corrected to in-training rates (gemm_in_training_factor 1): "
                         "a training step runs GEMMs slower",
                         c.gemm_table.size(), scaled);
  }
  return s;
}

}  // namespace stepsim
