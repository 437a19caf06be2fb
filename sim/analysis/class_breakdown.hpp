#pragma once
// Where the GPU time of a step goes, by kernel class: time (sum of kernel durations) and CUDA
// kernel count per class, plus communication (union of collective intervals) and idle. The
// same rows come out of `simulate` (from the timeline) and `analyze` (from a trace's kernel
// names, calibrate/trace), so a prediction and a trace compare class by class.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "sim/exec/timeline.hpp"

namespace stepsim {

struct ClassRow {
  std::string cls;        // to_string(KernelClass), "communication" or "idle"
  std::int64_t kernels = 0;
  Time time;
};

struct ClassBreakdown {
  std::vector<ClassRow> rows;  // every kernel class in enum order, then communication, idle
  std::int64_t kernels() const;  // compute kernels (communication and idle excluded)
  ClassRow& communication() { return rows[kKernelClassCount]; }
  ClassRow& idle() { return rows[kKernelClassCount + 1]; }
};

// An empty breakdown with every row present (zero).
ClassBreakdown empty_breakdown();
// From a simulated timeline: kernels by their class (Kernel::kernels each), collectives
// counted as one kernel each, `idle` as the metrics computed it.
ClassBreakdown class_breakdown(const Timeline& t, Time comm_time, Time idle);

// {"gemm": {"kernels": N, "time_ns": T}, ...}
nlohmann::json breakdown_to_json(const ClassBreakdown& b);
// A readable table: class, time, % of `step`, kernels.
std::string breakdown_to_text(const ClassBreakdown& b, Time step);

}  // namespace stepsim
