// Rendering of `analyze` results: the versioned JSON (stepsim.analyze/1) and the text report.

#include <fmt/format.h>

#include <map>

#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

namespace {

nlohmann::json record_json(const CollectiveRecord& r) {
  return {{"step", r.step},
          {"kind", to_string(r.kind)},
          {"dtype", r.dtype},
          {"group_size", r.group_size},
          {"group_size_assumed", r.group_assumed},
          {"bytes", r.bytes.count},
          {"start_ns", r.start.ns},
          {"duration_ns", r.duration.ns},
          {"exposed_ns", r.exposed.ns},
          {"params_from", r.source}};
}

nlohmann::json trace_json(const TraceAnalysis& a) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : a.steps)
    steps.push_back({{"step", s.number},
                     {"metrics", metrics_to_json(s.metrics)},
                     {"kernels", s.kernels},
                     {"collectives", s.collectives},
                     {"memory_ops", s.memory_ops},
                     {"classes", breakdown_to_json(s.classes)},
                     {"memory_op_time_ns", s.memory_op_time.ns}});
  nlohmann::json table = nlohmann::json::array();
  for (const auto& r : a.table)
    table.push_back({{"kind", to_string(r.kind)},
                     {"dtype", r.dtype},
                     {"group_size", r.group_size},
                     {"group_size_assumed", r.group_assumed},
                     {"bytes", r.bytes.count},
                     {"count", r.count},
                     {"median_ns", r.median.ns},
                     {"min_ns", r.min.ns},
                     {"max_ns", r.max.ns},
                     {"total_ns", r.total.ns},
                     {"algbw_gbps", r.algbw_gbps},
                     {"busbw_gbps", r.busbw_gbps}});
  nlohmann::json top = nlohmann::json::array();
  for (const auto& r : a.top_exposed) top.push_back(record_json(r));
  std::map<std::string, std::size_t> counts;
  for (const auto& r : a.collectives) ++counts[to_string(r.kind)];
  return {{"file", a.file},
          {"rank", a.rank},
          {"world_size", a.world_size},
          {"device", a.device},
          {"steps_in_trace", a.steps_in_trace},
          {"unattributed_gpu_ops", a.unattributed_gpu_ops},
          {"steps", steps},
          {"mean", {{"metrics", metrics_to_json(a.mean)}}},
          {"collective_counts", counts},
          {"collectives", table},
          {"top_exposed", top}};
}

std::string ms(Time t) { return fmt::format("{:.3f}", t.ms()); }

std::string human_bytes(Bytes b) {
  if (b.count < 0) return "?";
  double v = static_cast<double>(b.count);
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b.count);
}

void metrics_row(std::string& out, const std::string& label, const Metrics& m) {
  out += fmt::format("  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8.1f} {:>10} {:>9} {:>9} {:>9} {:>10} {:>12}\n", label,
                     ms(m.overlap.step_time), ms(m.overlap.compute_time), ms(m.overlap.comm_time),
                     ms(m.overlap.overlapped_comm), ms(m.overlap.exposed_comm), m.overlap.overlap_pct,
                     ms(m.overlap.idle), ms(m.forward), ms(m.backward), ms(m.optimizer),
                     m.peak_memory.count > 0 ? fmt::format("{:.2f}", m.peak_memory.gib()) : std::string("-"),
                     m.peak_reserved.count > 0 ? fmt::format("{:.2f}", m.peak_reserved.gib()) : std::string("-"));
}

void trace_text(std::string& out, const TraceAnalysis& a) {
  std::string who = a.rank >= 0 ? fmt::format("rank {} of {}", a.rank, a.world_size) : std::string("rank unknown");
  out += fmt::format("{}\n  {}, {}; {} step(s) in the trace, {} shown\n", a.file, who,
                     a.device.empty() ? "device unknown" : a.device, a.steps_in_trace, a.steps.size());
  out += fmt::format("  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>10} {:>12}\n", "step",
                     "step ms", "compute", "comm", "overlap", "exposed", "ovl %", "idle", "fwd", "bwd", "opt",
                     "peak GiB", "reserved GiB");
  for (const auto& s : a.steps) metrics_row(out, fmt::format("#{}", s.number), s.metrics);
  if (a.steps.size() > 1) metrics_row(out, "mean", a.mean);
  // A step whose kernels kept the GPU busy longer than its span: compute (or comm) above the
  // step time is that, not a sum over streams (issue 50, F21).
  for (const auto& s : a.steps) {
    const OverlapMetrics& o = s.metrics.overlap;
    const Time busy = o.compute_time + o.comm_time - o.overlapped_comm;
    if (busy <= o.step_time) continue;
    out += fmt::format("  #{}: its kernels ran until {} ms after its span (the GPU behind the host): compute U comm = {} ms "
                       "exceeds the {} ms step, and idle is 0\n",
                       s.number, ms(s.kernels_end - s.span_end), ms(busy), ms(o.step_time));
  }
  if (!a.steps.empty()) {
    // Per class, the mean over the shown steps.
    ClassBreakdown mean = empty_breakdown();
    for (const auto& s : a.steps)
      for (std::size_t i = 0; i < mean.rows.size() && i < s.classes.rows.size(); ++i) {
        mean.rows[i].kernels += s.classes.rows[i].kernels;
        mean.rows[i].time += s.classes.rows[i].time;
      }
    const auto n = static_cast<std::int64_t>(a.steps.size());
    for (auto& r : mean.rows) {
      r.kernels = (r.kernels + n / 2) / n;
      r.time = Time{(r.time.ns + n / 2) / n};
    }
    out += "\n" + breakdown_to_text(mean, a.mean.overlap.step_time);
  }
  out += "\n  collectives (S per nccl-tests; busbw from the median)\n";
  out += fmt::format("  {:<15} {:>6} {:>6} {:>12} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "kind", "dtype", "group",
                     "S", "count", "median us", "min us", "max us", "algbw", "busbw");
  for (const auto& r : a.table)
    out += fmt::format("  {:<15} {:>6} {:>6} {:>12} {:>6} {:>10.1f} {:>10.1f} {:>10.1f} {:>9.2f} {:>9.2f}\n",
                       to_string(r.kind), r.dtype.substr(0, 6),
                       fmt::format("{}{}", r.group_size, r.group_assumed ? "*" : ""), human_bytes(r.bytes), r.count,
                       r.median.us(), r.min.us(), r.max.us(), r.algbw_gbps, r.busbw_gbps);
  bool any_assumed = false;
  for (const auto& r : a.table) any_assumed = any_assumed || r.group_assumed;
  if (any_assumed) out += "  * group size not recorded in the trace: the world size is assumed\n";
  if (!a.top_exposed.empty()) {
    out += "\n  top exposed collectives\n";
    out += fmt::format("  {:>6} {:<15} {:>12} {:>12} {:>12}  {}\n", "step", "kind", "S", "duration us", "exposed us",
                       "start (ms into step)");
    for (const auto& r : a.top_exposed) {
      Time step_start;
      for (const auto& s : a.steps)
        if (s.number == r.step) step_start = s.span_start;
      out += fmt::format("  {:>6} {:<15} {:>12} {:>12.1f} {:>12.1f}  {}\n", r.step, to_string(r.kind),
                         human_bytes(r.bytes), r.duration.us(), r.exposed.us(), ms(r.start - step_start));
    }
  }
  out += "\n";
}

}  // namespace

nlohmann::json job_to_json(const JobAnalysis& job) {
  nlohmann::json traces = nlohmann::json::array();
  for (const auto& a : job.ranks) traces.push_back(trace_json(a));
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& [n, m] : job.steps) steps.push_back({{"step", n}, {"metrics", metrics_to_json(m)}});
  nlohmann::json out = {{"schema", "stepsim.analyze/1"},
                        {"traces", traces},
                        {"steps", steps},
                        {"mean", {{"metrics", metrics_to_json(job.mean)}}}};
  if (job.ranks.size() > 1) {
    nlohmann::json st = nlohmann::json::array();
    for (const auto& s : job.stragglers)
      st.push_back({{"step", s.step},
                    {"min_step_time_ns", s.min_step.ns},
                    {"max_step_time_ns", s.max_step.ns},
                    {"step_time_spread_ns", (s.max_step - s.min_step).ns},
                    {"compute_spread_ns", s.compute_spread.ns},
                    {"most_compute_rank", s.slowest_compute_rank},
                    {"least_exposed_comm_rank", s.least_exposed_rank}});
    out["stragglers"] = st;
    nlohmann::json waits = nlohmann::json::array();
    for (const auto& w : job.rank_waits)
      waits.push_back({{"step", w.step},
                       {"collectives", w.collectives},
                       {"wait_ns", w.wait.ns},
                       {"largest_wait_ns", w.largest_wait.ns},
                       {"largest_index", w.largest_index},
                       {"largest_kind", to_string(w.largest_kind)},
                       {"largest_bytes", w.largest_bytes.count},
                       {"end_spread_ns", w.end_spread.ns}});
    out["rank_waits"] = waits;
  }
  return out;
}

std::string job_to_text(const JobAnalysis& job) {
  std::string out;
  for (const auto& a : job.ranks) trace_text(out, a);
  if (job.ranks.size() > 1) {
    out += "per rank (mean over the shown steps)\n";
    out += fmt::format("  {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>10}\n", "rank",
                       "step ms", "compute", "comm", "overlap", "exposed", "ovl %", "idle", "fwd", "bwd", "opt",
                       "peak GiB");
    for (const auto& a : job.ranks) metrics_row(out, std::to_string(a.rank), a.mean);
    metrics_row(out, "job", job.mean);
    out += "\nstraggler spread (steps present in every trace)\n";
    out += fmt::format("  {:>6} {:>12} {:>12} {:>12} {:>14} {:>14} {:>14}\n", "step", "min step ms", "max step ms",
                       "spread ms", "compute spr ms", "most compute", "least exposed");
    for (const auto& s : job.stragglers)
      out += fmt::format("  {:>6} {:>12} {:>12} {:>12} {:>14} {:>14} {:>14}\n", s.step, ms(s.min_step),
                         ms(s.max_step), ms(s.max_step - s.min_step), ms(s.compute_spread),
                         fmt::format("rank {}", s.slowest_compute_rank), fmt::format("rank {}", s.least_exposed_rank));
    out += "  (the rank with the most compute and the least exposed communication is the one the others wait for)\n";
    out += "\nslowest-rank wait at the collectives (steps whose collectives match on every trace)\n";
    if (job.rank_waits.empty()) out += "  none: no step's collectives match on every trace (different groups or a different count)\n";
    else {
      out += fmt::format("  {:>6} {:>12} {:>10} {:>16}  {:<32} {:>16}\n", "step", "collectives", "wait ms", "largest wait ms",
                         "at", "ends aligned us");
      for (const auto& w : job.rank_waits)
        out += fmt::format("  {:>6} {:>12} {:>10} {:>16}  {:<32} {:>16.1f}\n", w.step, w.collectives, ms(w.wait),
                           ms(w.largest_wait),
                           fmt::format("#{} {} {}", w.largest_index + 1, to_string(w.largest_kind), human_bytes(w.largest_bytes)),
                           w.end_spread.us());
      out += "  (wait: the latest arrival minus the mean arrival at each collective, summed over the step, as simulate's\n"
             "  slowest-rank wait; each rank's clock aligned on the collectives' ends, which the ranks reach together:\n"
             "  'ends aligned' is the median spread of the ends left after that)\n";
    }
  }
  return out;
}

}  // namespace stepsim::trace
