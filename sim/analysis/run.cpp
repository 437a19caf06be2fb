#include "sim/analysis/run.hpp"

#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

SimulationResult run_experiment(const Experiment& e) {
  SimulationResult r;
  try {
    r.program = e.strategy->build(e);
  } catch (const ProgramTooLarge& ex) {
    throw InputError(e.file + ": " + ex.what());
  }
  r.timeline = simulate_program(r.program, e.cluster.profile, e.training.allocator);
  r.metrics = compute_metrics(r.timeline);
  return r;
}

std::vector<Time> exposed_per_op(const Timeline& t) {
  std::vector<Interval> compute;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Kernel) compute.push_back({op.start, op.end});
  auto merged = merge_intervals(std::move(compute));
  std::vector<Time> out(t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.kind != TimelineOp::Kind::Collective || op.end <= op.start) continue;
    std::vector<Interval> one{{op.start, op.end}};
    out[i] = (op.end - op.start) - intersection_length(one, merged);
  }
  return out;
}

}  // namespace stepsim
