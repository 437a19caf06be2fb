#pragma once
// One simulation from an experiment: build the Program, run it, compute the metrics.

#include "sim/analysis/metrics.hpp"
#include "sim/config/experiment.hpp"
#include "sim/exec/engine.hpp"
#include "sim/exec/timeline.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

struct SimulationResult {
  Program program;
  Timeline timeline;
  Metrics metrics;
};

// The strategy's program for one step, inside the training loop's own host time when the
// profile measured it (host.step_start / step_end): a HostWork after the forward mark, and at the
// end a synchronize of every stream followed by a HostWork.
Program build_step_program(const Experiment& e);

// Builds and simulates e's step. `detail`: Metrics where only the metrics and the ops are read
// (scale's points), Full for every report.
SimulationResult run_experiment(const Experiment& e, TimelineDetail detail = TimelineDetail::Full);

// Per-op exposed time: the part of each collective's interval that no compute kernel covers
// (indexed like timeline.ops; 0 for kernels).
std::vector<Time> exposed_per_op(const Timeline& t);

}  // namespace stepsim
