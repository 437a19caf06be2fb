#include "sim/analysis/run.hpp"

#include <algorithm>

#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

Program build_step_program(const Experiment& e) {
  Program p;
  try {
    p = e.strategy->build(e);
  } catch (const ProgramTooLarge& ex) {
    throw InputError(e.file + ": " + ex.what());
  }
  const HostProfile& h = e.cluster.profile->host;
  if (h.step_start.ns > 0) {
    auto forward = std::find_if(p.instructions.begin(), p.instructions.end(), [](const Instruction& ins) {
      const auto* m = std::get_if<Mark>(&ins);
      return m && m->phase == Phase::Forward;
    });
    if (forward != p.instructions.end()) ++forward;
    p.instructions.insert(forward, HostWork{h.step_start, "training loop before the step (data loading, inputs)"});
  }
  if (h.step_end.ns > 0) {
    for (std::size_t s = 0; s < p.streams.size(); ++s)
      p.instructions.push_back(HostSync{StreamId{static_cast<std::uint32_t>(s)}, "training loop: synchronize at the step's end"});
    p.instructions.push_back(HostWork{h.step_end, "training loop after the step (logging, metrics)"});
  }
  return p;
}

SimulationResult run_experiment(const Experiment& e, TimelineDetail detail) {
  SimulationResult r;
  r.program = build_step_program(e);
  r.timeline = simulate_program(r.program, e.cluster.profile, e.training.allocator, {}, detail);
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
