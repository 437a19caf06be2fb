#include "sim/report/text_report.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/analysis/throughput.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

namespace {

// The experiment file, the run in one line and the effective strategy config.
void write_run_description(std::ostream& out, const Experiment& e) {
  const Workload& w = *e.workload;
  out << fmt::format("stepsim simulate: {}\n", e.file);
  out << fmt::format("  {} | {} ({:.2f} B params) | {} x {} GPUs ({}) | micro-batch {} x seq {} | grad_accum {}\n",
                     e.strategy->framework(), w.name, static_cast<double>(w.numel()) / 1e9, e.cluster.nodes,
                     e.cluster.gpus_per_node, e.cluster.profile->name, w.micro_batch, w.seq_len, e.training.grad_accum);
  out << fmt::format("  strategy: {}\n", e.strategy->effective_config().dump());
  if (w.options) out << fmt::format("  workload: {}\n", effective_workload(w).dump());
  out << fmt::format("  training: {}\n", effective_training(e).dump());
  // An uncorrected microbenchmark GEMM table predicts GEMMs faster than a step runs them: say so.
  const GemmRateSource g = gemm_rate_source(e.cluster.profile->compute);
  if (!g.corrected) out << fmt::format("  note: GEMM rates: {}\n", g.text);
  out << "\n";
}

// The step's times, each with its share of the step, and the throughput at that step time.
void write_time_table(std::ostream& out, const Experiment& e, const Metrics& m) {
  auto pct = [&](Time t) {
    return m.overlap.step_time.ns > 0 ? 100.0 * static_cast<double>(t.ns) / m.overlap.step_time.ns : 0.0;
  };
  out << fmt::format("  {:<22}{:>14}{:>9}\n", "metric", "value", "% step");
  auto row = [&](const char* name, Time t) { out << fmt::format("  {:<22}{:>14}{:>8.1f}%\n", name, format_time(t), pct(t)); };
  row("step time", m.overlap.step_time);
  row("  forward", m.forward);
  row("  backward", m.backward);
  row("  optimizer", m.optimizer);
  row("compute", m.overlap.compute_time);
  row("communication", m.overlap.comm_time);
  row("  overlapped", m.overlap.overlapped_comm);
  row("  exposed", m.overlap.exposed_comm);
  if (m.rank_wait.ns > 0) row("  slowest-rank wait", m.rank_wait);
  row("idle", m.overlap.idle);
  out << fmt::format("  {:<22}{:>13.1f}%\n", "overlap (of comm)", m.overlap.overlap_pct);
  const Throughput tp = throughput(e, m.overlap.step_time);
  if (tp.tokens_per_s > 0) {
    out << fmt::format("  {:<22}{:>14}\n", "tokens/s per GPU", fmt::format("{:.0f}", tp.tokens_per_s_per_gpu));
    if (tp.mfu_pct > 0) out << fmt::format("  {:<22}{:>13.1f}%   (HFU {:.1f}%)\n", "MFU", tp.mfu_pct, tp.hfu_pct);
  }
}

// Collectives: totals per kind, and the most exposed ones with their unit labels.
void write_collective_tables(std::ostream& out, const Timeline& t) {
  const CollectiveSummary c = collective_summary(t);
  if (c.by_kind.empty()) return;
  out << fmt::format("\n  {:<34}{:>7}{:>12}{:>14}{:>14}\n", "collectives", "count", "bytes", "time", "exposed");
  for (const auto& a : c.by_kind)
    out << fmt::format("  {:<34}{:>7}{:>12}{:>14}{:>14}\n", a.kind, a.count, format_bytes(a.bytes), format_time(a.time),
                       format_time(a.exposed));
  out << "\n  most exposed collectives:\n";
  for (const auto& [op, exposed] : c.most_exposed)
    out << fmt::format("    {:<30} {:>10} start {:>12}  took {:>12}  exposed {:>12}\n", op->name, format_bytes(op->bytes),
                       format_time(op->start), format_time(op->duration()), format_time(exposed));
}

}  // namespace

CollectiveSummary collective_summary(const Timeline& t) {
  auto exposed = exposed_per_op(t);
  std::map<std::string, CollectiveTotals> by_kind;
  std::vector<std::size_t> colls;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.kind != TimelineOp::Kind::Collective) continue;
    const std::string kind = fmt::format("{} on {}", to_string(op.collective), t.comms[op.comm.value().index()].name);
    auto& a = by_kind[kind];
    a.kind = kind;
    ++a.count;
    a.bytes += op.bytes;
    a.time += op.duration();
    a.exposed += exposed[i];
    colls.push_back(i);
  }
  CollectiveSummary out;
  for (auto& [k, a] : by_kind) out.by_kind.push_back(a);
  std::stable_sort(colls.begin(), colls.end(), [&](std::size_t a, std::size_t b) { return exposed[a] > exposed[b]; });
  for (std::size_t k = 0; k < std::min<std::size_t>(5, colls.size()) && exposed[colls[k]].ns > 0; ++k)
    out.most_exposed.push_back({&t.ops[colls[k]], exposed[colls[k]]});
  return out;
}

// The peak (allocated and reserved), what it is made of, and what persists after the step.
void write_memory_lines(std::ostream& out, const Metrics& m) {
  out << fmt::format("\n  peak memory {} at {} ({}){}\n", format_bytes(m.peak_memory), format_time(m.peak_time), m.peak_phase,
                     m.capacity.count ? fmt::format(" of {}: {}", format_bytes(m.capacity), memory_verdict(m)) : "");
  for (const auto& [cat, b] : m.peak_breakdown)
    if (b.count > 0) out << fmt::format("    {:<24}{:>12}\n", cat, format_bytes(b));
  out << fmt::format("  persistent (end of step) {}\n", format_bytes(m.persistent_memory));
  if (m.peak_reserved.count > 0)
    out << fmt::format("  peak reserved {} (caching allocator) + {} outside PyTorch = {}{}\n", format_bytes(m.peak_reserved),
                       format_bytes(m.non_pytorch), format_bytes(m.peak_reserved + m.non_pytorch),
                       m.capacity.count ? fmt::format(" of {}", format_bytes(m.capacity)) : "");
  for (const auto& p : m.non_pytorch_parts)
    out << fmt::format("    {:<24}{:>12}   {}\n", p.name, format_bytes(p.bytes), p.detail);
  if (m.capacity.count) {
    const Bytes h = m.headroom();
    out << fmt::format("  headroom {}{}{}\n", h.count < 0 ? "-" : "", format_bytes(Bytes{h.count < 0 ? -h.count : h.count}),
                       " (capacity - peak reserved - outside PyTorch)");
  }
}

void write_text_report(std::ostream& out, const Experiment& e, const SimulationResult& r) {
  const Metrics& m = r.metrics;
  write_run_description(out, e);
  write_time_table(out, e, m);
  out << "\n" << breakdown_to_text(class_breakdown(r.timeline, m.overlap.comm_time, m.overlap.idle), m.overlap.step_time);
  write_memory_lines(out, m);
  write_collective_tables(out, r.timeline);
  // Every communicator priced outside the shapes the profile's collectives were fitted on.
  const auto outside = collective_extrapolations(e.cluster.profile, r.program.comms);
  if (!outside.empty()) {
    out << "\n  note: collective costs extrapolated beyond the profile's measurements (docs/scale.md):\n";
    for (const auto& line : outside) out << "    " << line << "\n";
  }
}

}  // namespace stepsim
