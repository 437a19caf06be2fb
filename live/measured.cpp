#include "live/measured.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/report/result_json.hpp"

namespace stepsim::live {

std::vector<Phase> instruction_phases(const Program& p) {
  std::vector<Phase> out(p.instructions.size(), Phase::Setup);
  Phase cur = Phase::Setup;
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    if (const auto* m = std::get_if<Mark>(&p.instructions[i]); m && m->phase) cur = *m->phase;
    out[i] = cur;
  }
  return out;
}

namespace {

// One measured Launch or Collective as a Timeline op: the Program's names, its measured times
// (`phases`: instruction_phases(p)).
TimelineOp measured_op(const Program& p, const MeasuredOp& mo, const std::vector<Phase>& phases, TextPool& text) {
  if (mo.instruction >= p.instructions.size())
    throw std::logic_error(fmt::format("measured op for instruction {} of {}", mo.instruction, p.instructions.size()));
  TimelineOp op;
  op.instruction = mo.instruction;
  op.phase = phases[mo.instruction];
  op.issue = mo.issue;
  op.start = mo.start;
  op.end = std::max(mo.start, mo.end);
  op.solo_duration = op.end - op.start;
  if (const auto* l = std::get_if<Launch>(&p.instructions[mo.instruction])) {
    op.kind = TimelineOp::Kind::Kernel;
    op.name = text.add(l->kernel.name);
    op.unit = text.add(l->kernel.unit);
    op.stream = l->stream;
    op.cls = l->kernel.cls;
  } else if (const auto* c = std::get_if<Collective>(&p.instructions[mo.instruction])) {
    op.kind = TimelineOp::Kind::Collective;
    op.name = text.add(c->name);
    op.unit = text.add(c->unit);
    op.stream = c->stream;
    op.comm = c->comm;
    op.collective = c->kind;
    op.bytes = c->bytes;
    op.dtype = c->dtype;
  } else {
    throw std::logic_error(fmt::format("measured op for instruction {}, which is neither a Launch nor a Collective",
                                       mo.instruction));
  }
  return op;
}

// Memory: replay the changes in time order (stable: host order breaks ties) over the
// Program's buffer sizes and categories.
std::vector<MemorySample> replay_memory(const Program& p, const MeasuredStep& m) {
  std::vector<Bytes> size(p.buffer_count);
  std::vector<MemCategory> cat(p.buffer_count, MemCategory::Other);
  for (const auto& ins : p.instructions)
    if (const auto* a = std::get_if<Alloc>(&ins)) {
      size.at(a->buffer.index()) = a->bytes;
      cat.at(a->buffer.index()) = a->category;
    }
  std::vector<MemoryChange> changes = m.memory;
  std::stable_sort(changes.begin(), changes.end(), [](const MemoryChange& a, const MemoryChange& b) { return a.time < b.time; });
  std::array<Bytes, kMemCategoryCount> live{};
  std::vector<MemorySample> samples{MemorySample{Time::zero(), Bytes{}, live}};
  for (const auto& c : changes) {
    const std::size_t b = c.buffer.index();
    Bytes delta = c.alloc ? size.at(b) : Bytes{} - size.at(b);
    live[static_cast<std::size_t>(cat.at(b))] += delta;
    MemorySample s{c.time, Bytes{}, live};
    for (const auto& x : live) s.total += x;
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace

Timeline build_measured_timeline(const Program& p, const MeasuredStep& m, const std::string& device, Bytes capacity) {
  Timeline t;
  t.streams = p.streams;
  t.comms = p.comms;
  t.device = device;
  t.capacity = capacity;
  t.start = Time::zero();
  t.end = m.end;
  if (m.text) t.text = m.text;  // the host intervals' names
  t.host = m.host;
  t.marks = m.marks;
  const auto phases = instruction_phases(p);
  for (const MeasuredOp& mo : m.ops) {
    TimelineOp op = measured_op(p, mo, phases, *t.text);
    t.end = std::max(t.end, op.end);
    t.ops.push_back(std::move(op));
  }
  for (const auto& h : t.host) t.end = std::max(t.end, h.end);
  t.memory = replay_memory(p, m);
  return t;
}

StepStats step_stats(const std::vector<Time>& v) {
  if (v.empty()) throw std::invalid_argument("step_stats: no steps");
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  const std::size_t n = v.size();
  StepStats s;
  s.median_index = idx[(n - 1) / 2];
  s.median = v[s.median_index];
  s.min = v[idx.front()];
  s.max = v[idx.back()];
  // Nearest-rank percentiles: the smallest value with at least p% of the steps at or below it.
  auto pct = [&](double p) {
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
    return v[idx[std::clamp<std::size_t>(rank, 1, n) - 1]];
  };
  s.p10 = pct(10);
  s.p90 = pct(90);
  double mean = 0;
  for (Time t : v) mean += static_cast<double>(t.ns);
  mean /= static_cast<double>(n);
  double var = 0;
  for (Time t : v) var += (static_cast<double>(t.ns) - mean) * (static_cast<double>(t.ns) - mean);
  s.mean = Time{std::llround(mean)};
  s.stddev = Time{std::llround(n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0)};
  s.spread_pct = s.median.ns > 0 ? 100.0 * static_cast<double>((s.max - s.min).ns) / static_cast<double>(s.median.ns) : 0.0;
  return s;
}

SimulationResult live_simulation_result(const Program& p, const LiveRun& run) {
  if (run.steps.empty() || run.steps.size() != run.step_times.size())
    throw std::logic_error(fmt::format("live run with {} steps and {} step times", run.steps.size(), run.step_times.size()));
  StepStats st = step_stats(run.step_times);
  SimulationResult r;
  r.program = p;
  r.timeline = build_measured_timeline(p, run.steps[st.median_index], run.device, run.capacity);
  r.metrics = compute_metrics(r.timeline);
  // The real high-water mark of the allocations, not the accounting.
  Bytes used_high;
  for (const auto& s : run.steps) used_high = std::max(used_high, s.pool_used_high);
  r.metrics.peak_memory = used_high;
  r.metrics.fits = run.capacity.count == 0 || used_high <= run.capacity;
  return r;
}

nlohmann::json live_result_json(const Experiment& e, const Program& p, const LiveRun& run) {
  SimulationResult r = live_simulation_result(p, run);
  StepStats st = step_stats(run.step_times);
  Bytes accounted = compute_metrics(r.timeline).peak_memory;
  Bytes reserved_high;
  nlohmann::json used = nlohmann::json::array(), reserved = nlohmann::json::array(), times = nlohmann::json::array();
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    used.push_back(run.steps[i].pool_used_high.count);
    reserved.push_back(run.steps[i].pool_reserved_high.count);
    reserved_high = std::max(reserved_high, run.steps[i].pool_reserved_high);
    times.push_back(run.step_times[i].ns);
  }
  nlohmann::json comms = nlohmann::json::array();
  for (const auto& c : run.comms) comms.push_back({{"name", c.name}, {"program_ranks", c.program_ranks}, {"live_ranks", c.ranks}});
  nlohmann::json j = result_to_json(e, r, "live");
  j["live"] = {
      {"steps", run.steps.size()},
      {"warmup", run.warmup},
      {"median_step", st.median_index},
      {"step_time_ns",
       {{"median", st.median.ns}, {"min", st.min.ns}, {"max", st.max.ns}, {"mean", st.mean.ns}, {"stddev", st.stddev.ns},
        {"p10", st.p10.ns}, {"p90", st.p90.ns}, {"spread_pct", st.spread_pct}}},
      {"step_times_ns", times},
      {"memory",
       {{"pool_used_high_bytes", r.metrics.peak_memory.count},
        {"pool_reserved_high_bytes", reserved_high.count},
        {"accounted_peak_bytes", accounted.count},
        {"pool_used_high_per_step", used},
        {"pool_reserved_high_per_step", reserved}}},
      {"mpi_world_size", run.mpi_world},
      {"experiment_world_size", run.experiment_world},
      {"communicators", comms},
      {"gemm_plans", run.gemm_plans},
      {"versions", run.versions},
      {"note", run.mpi_world == 1
                   ? "one MPI process: every collective ran on a 1-rank NCCL communicator (a local copy, no network)"
                   : fmt::format("{} MPI processes; communicator sizes as listed", run.mpi_world)}};
  return j;
}

}  // namespace stepsim::live
