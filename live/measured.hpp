#pragma once
// The host-only half of what `live` reports: raw measurements of one executed step (CUDA event
// times of every timed op, steady-clock host intervals, allocator traffic) turned into the same
// Timeline the simulator produces, step-time statistics over repeated steps, and the
// stepsim.result/1 document with mode "live". The GPU executor only collects the raw numbers.
//
// Time base: 0 is the step's start event on the default stream, recorded right after the host
// took its own t0 with an idle device, so host (steady_clock - t0) and GPU (event elapsed time
// from the start event) share an origin to within the launch latency (a few microseconds).

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "live/lowering.hpp"
#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/exec/timeline.hpp"

namespace stepsim::live {

struct MeasuredOp {
  std::size_t instruction = 0;  // a Launch or Collective
  Time issue, start, end;
};

// A change of live bytes: an allocation (at its host call) or a free (plain: at its host call;
// record_stream: when the host saw the recorded work complete).
struct MemoryChange {
  Time time;
  BufferId buffer{0};
  bool alloc = true;
};

struct MeasuredStep {
  std::vector<MeasuredOp> ops;         // in issue order
  std::vector<HostInterval> host;      // Issue / Work / Blocked, in host order
  std::shared_ptr<TextPool> text;      // holds the host intervals' names (null: none named)
  std::vector<MemoryChange> memory;    // in host order
  std::vector<PhaseMark> marks;
  Time end;                            // last op end on any stream or host end
  Bytes pool_used_high;                // cudaMemPoolAttrUsedMemHigh over the step
  Bytes pool_reserved_high;            // cudaMemPoolAttrReservedMemHigh over the step
};

// Phase of every instruction: the phase of the last Mark with a phase before it (Setup first),
// as the simulator assigns it.
std::vector<Phase> instruction_phases(const Program& p);

// The Timeline of one measured step, in the simulator's layout (ops in issue order, memory
// samples in time order starting with an empty sample at 0).
Timeline build_measured_timeline(const Program& p, const MeasuredStep& m, const std::string& device, Bytes capacity);

struct StepStats {
  Time median, min, max, mean, stddev, p10, p90;
  double spread_pct = 0;         // (max - min) / median, percent
  std::size_t median_index = 0;  // which step is the median (lower median for an even count)
};
// Throws std::invalid_argument for an empty list.
StepStats step_stats(const std::vector<Time>& step_times);

// Everything one `live` run reports.
struct LiveRun {
  std::vector<MeasuredStep> steps;  // measured steps (after warm-up), rank 0's view
  std::vector<Time> step_times;     // per measured step: the slowest rank's step time
  int warmup = 0;
  int mpi_world = 1;
  int experiment_world = 1;
  std::string device;
  Bytes capacity;
  std::vector<LiveComm> comms;
  nlohmann::json versions = nlohmann::json::object();  // cuda runtime/driver, nccl, mpi
  std::size_t gemm_plans = 0;
};

// The stepsim.result/1 document (result_to_json with mode "live") for the median step, whose
// ops carry measured start/end, plus a "live" object: step-time statistics, every step time,
// the allocator's high-water marks, world sizes and communicator sizes, versions. The
// metrics' peak_memory_bytes is the pool's measured used-memory high-water mark (max over the
// measured steps); the breakdown is the Program's accounting at its own peak.
nlohmann::json live_result_json(const Experiment& e, const Program& p, const LiveRun& run);

// The median step as a SimulationResult: its Timeline (for the Chrome trace) and its metrics
// with the measured peak, exactly what live_result_json reports.
SimulationResult live_simulation_result(const Program& p, const LiveRun& run);

}  // namespace stepsim::live
