#pragma once
// `stepsim explain`: why is the step as long as it is (issue 5, DESIGN.md section 3).
//
// The critical path walks back from the op that ends last, each step to what it waited for
// as the simulator recorded it (Timeline::op_why, Timeline::host_why: host order, host issue,
// stream order, event wait, communicator FIFO, host sync; sim/exec/timeline.hpp). The
// dependency rules live only in the engine; nothing here re-derives them.

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

using DepKind = StartCause;
std::string to_string(DepKind k);

struct CriticalStep {
  enum class Kind { Kernel, Collective, Host, Blocked };
  Kind kind = Kind::Kernel;
  std::size_t index = 0;  // into timeline.ops (Kernel/Collective) or timeline.host
  std::string name, unit, where;  // where: stream name, "host"
  Time start, end;
  DepKind via = DepKind::Stream;  // how this step waited for the previous one on the path
  bool first = false;             // no binding predecessor (the chain starts here)
};

struct CollectiveExposure {
  std::size_t op = 0;
  std::string name, unit, comm;
  CollectiveKind kind = CollectiveKind::AllReduce;
  Phase phase = Phase::Setup;
  Time duration, exposed;
  bool on_critical_path = false;
};

struct Sensitivity {
  std::string what;  // "2x link bandwidth", "2x compute", "zero host overhead"
  Time step_time;
  double speedup = 1;  // baseline / this
};

struct Explanation {
  Time step_time;
  // vertices: ops and host intervals; edges: the constraints the simulator checked
  // (Timeline::dependencies).
  std::size_t vertices = 0, edges = 0;
  // The durations along the critical path (blocked host time aside): the step time when the
  // record explains every start back to time zero, less when a start has no recorded cause.
  Time longest_chain;
  std::vector<CriticalStep> path;     // from the step's start to its end
  // Critical-path time per category: "compute", "collective <comm>", "host".
  std::vector<std::pair<std::string, Time>> path_time;
  std::vector<std::string> host_syncs_on_path;  // reasons of HostSyncs the path went through
  std::string bound;                  // one line: what bounds the step
  std::vector<CollectiveExposure> collectives;  // issue order
  std::map<std::string, Time> exposed_by_phase; // forward, backward, optimizer, setup
  std::vector<Sensitivity> sensitivities;
  // What would move the step: one framework knob changed at a time (tune's knobs,
  // sim/explore/tune.hpp single_knob_moves), re-simulated, only settings that fit the device,
  // fastest first; shown before the hardware sensitivities. Empty without sensitivities.
  std::vector<Sensitivity> knob_moves;
};

// Repeated reasons once each, in first-seen order, a repeat count after those seen more than
// once: {"a", "b", "a"} -> "a (x2); b".
std::string group_reasons(const std::vector<std::string>& reasons);

// The part read from a simulated timeline's start records (no re-simulation).
Explanation explain_timeline(const Program& program, const Timeline& timeline);

// The profile the "2x link bandwidth" sensitivity runs on: every bandwidth term a collective
// can be priced with doubles, every latency stays (critical_path.cpp says how per model).
HardwareProfile with_double_link_bandwidth(const HardwareProfile& hw);

// Re-simulates with a modified profile (and, for the compute variant, the workload's fixed
// kernel times halved, since toy workloads carry times rather than FLOPs).
std::vector<Sensitivity> sensitivities(const Experiment& e, Time baseline);

// Both, for an experiment.
Explanation explain_experiment(const Experiment& e, const SimulationResult& r, bool with_sensitivities = true);

nlohmann::json explanation_to_json(const Explanation& x);
// verbose: also every step of the path, one line each (the grouped lines always).
void write_explanation_text(std::ostream& out, const Explanation& x, bool verbose = false);

// The path in groups, in time order. First, consecutive non-collective steps in one place
// collapse into one segment ("fwd+bwd x56 on default"); each collective is a segment of its
// own. Then a pattern of 1 to 4 segments repeated at least 3 times in a row over numbered
// units (collective names "AG block.3 fwd": the same text around a number that moves by +1 or
// -1 per repetition; non-collective segments: the same passes on the same stream) becomes one
// group: "AG block.0-31 fwd on unshard: 32 x 16.378 ms".
struct PathGroup {
  std::string label;           // what repeats, with unit ranges ("AG block.0-31 fwd on unshard")
  std::size_t first = 0, last = 0;  // indices into Explanation::path, inclusive
  int repeats = 1;             // 1: a single segment
  int period = 1;              // segments per repetition
  Time start, end;             // of the first and last step
  Time time;                   // the steps' durations summed (blocked host time aside)
  Time each_min, each_max;     // per repetition
};
std::vector<PathGroup> group_path(const Explanation& x);
// "label: N x T (total)": T per repetition ("T1 to T2" when they differ), as one line;
// "label (total)" for a single segment.
std::string describe_group(const PathGroup& g);

// The groups on one line, " -> " between them.
std::string summarize_path(const Explanation& x);

}  // namespace stepsim
