#pragma once
// What the importers produce and the fitter consumes: measured collective times (nccl-tests
// convention for S, C6.1) grouped by communicator shape, and measured GEMM throughput.

#include <string>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim::calib {

struct CollectiveSample {
  Bytes bytes;          // S, nccl-tests convention
  Time time;            // one call, as the source reports it (nccl-tests: mean over iters)
  bool in_place = false;
  int line = 0;         // 1-based line in the source file, 0 if not from a text file
};

// One run of one collective on one communicator shape (an nccl-tests table, an XLA group).
struct CollectiveSeries {
  std::string source;   // file path
  std::string label;    // "run 2 of 4", "sm_90 1x8", ...
  CollectiveKind kind = CollectiveKind::AllReduce;
  int ranks = 0;
  int nodes = 1;
  std::vector<CollectiveSample> samples;
};

struct GemmSample {
  GemmShape shape;
  FlopRate rate;
  double spread_pct = -1;  // (p90 - p10) / median in percent when measured by calibrate; -1 unknown
  std::string source;
};

// `stepsim calibrate contention`: solo and concurrent times of one GEMM and one collective.
struct ContentionSample {
  Time gemm_alone, gemm_concurrent;
  Time comm_alone, comm_concurrent;
  std::string source;
};

// busbw = S * factor / t (GB/s = 1e9 B/s), factor from sim/hardware/collective_model.
double busbw_gbps(CollectiveKind kind, int ranks, Bytes bytes, Time time);
double algbw_gbps(Bytes bytes, Time time);

}  // namespace stepsim::calib
