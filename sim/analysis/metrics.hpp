#pragma once
// The metrics every report carries, defined once (DESIGN.md section 5):
//   step_time        first host instruction to the end of the last op on every stream
//   compute_time     length of the union of compute-kernel intervals
//   comm_time        length of the union of collective intervals
//   overlapped_comm  length of (collective union) intersected with (compute union)
//   exposed_comm     comm_time - overlapped_comm
//   overlap_pct      overlapped_comm / comm_time (HTA's comp_comm_overlap_pctg), in percent
//   idle             step_time minus the union of compute and collective intervals
//   phases           runs of one phase's ops (issue order) each own the step up to their last op's end;
//                    a phase is the sum of its runs over the micro-batches (as a profiler shows
//                    it); with one micro-batch forward ends at the last forward op, backward at the
//                    last backward kernel's or gradient collective's end; optimizer at the end
//   peak_memory      the highest live-bytes sample, its breakdown, instant and phase; the
//                    phase is the host program's at that instant (allocations are host events):
//                    the phase of the last op the host issued at or before it ("forward" when
//                    none was), not the GPU's, which may still be in an earlier phase
//   peak_reserved    the highest bytes the caching allocator holds from the device
//                    (torch.cuda.max_memory_reserved(); sim/exec/caching_allocator.hpp)
//   non_pytorch      device memory outside the allocator (CUDA context, NCCL buffers)
//   alloc_retries    cudaMalloc calls a steady step retries after flushing the allocator's cache
//                    (release_cached_blocks; num_alloc_retries), with the device limited to the
//                    capacity minus non_pytorch; alloc_ooms: those that fail even then (num_ooms),
//                    in the first step or the steady one, whichever has more
//   fits             peak_reserved + non_pytorch <= capacity and no retry: no cudaMalloc fails
//   fits_allocated   peak_memory + non_pytorch <= capacity: without it the step cannot run; with
//                    it but not `fits`, PyTorch's allocator frees its cache and retries cudaMalloc
//                    where it runs out (a device synchronization each time), and where its free
//                    blocks are too fragmented for that, alloc_ooms says so

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "sim/exec/timeline.hpp"

namespace stepsim {

struct Interval {
  Time start, end;
};

// Sorts and merges; returns disjoint intervals in increasing order (empty ones dropped).
std::vector<Interval> merge_intervals(std::vector<Interval> v);
Time total_length(const std::vector<Interval>& merged);
// Length of the intersection of two merged interval lists.
Time intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b);

struct OverlapMetrics {
  Time step_time, compute_time, comm_time, overlapped_comm, exposed_comm, idle;
  double overlap_pct = 0;  // percent, 0..100
};

// The overlap part of the metrics from raw intervals in a window [start, end) (intervals are
// clipped to it). `analyze` uses this on measured kernels; the simulator through Timeline.
OverlapMetrics overlap_metrics(const std::vector<Interval>& compute, const std::vector<Interval>& comm, Time start,
                               Time end);

struct Metrics {
  OverlapMetrics overlap;
  Time forward, backward, optimizer;  // phase durations; they sum to step_time
  Bytes peak_memory;
  std::map<std::string, Bytes> peak_breakdown;  // category -> bytes at the peak
  Time peak_time;                               // relative to the step start
  std::string peak_phase;
  Bytes persistent_memory;                      // live bytes at the end of the step
  Bytes peak_reserved;                          // caching allocator's high-water mark
  Bytes non_pytorch;                            // outside the allocator
  std::vector<NonPytorchPart> non_pytorch_parts;  // what non_pytorch is made of
  Bytes capacity;
  // capacity - (max(peak_reserved, peak_memory) + non_pytorch): what is left at the peak;
  // negative when it does not fit; 0 without a capacity.
  Bytes headroom() const {
    return capacity.count ? capacity - (std::max(peak_reserved, peak_memory) + non_pytorch) : Bytes{};
  }
  std::int64_t alloc_retries = 0, alloc_ooms = 0;  // per step (see above)
  // Of comm_time: the collectives' waits for the slowest rank (profile rank_variation; 0 without).
  Time rank_wait;
  bool fits = true;
  bool fits_allocated = true;
};

// The text reports' verdict: "fits"; "fits with N allocator cache flushes per step" (the
// allocator model frees its cache and retries); "AT RISK: ..." (allocated bytes fit, but some
// cudaMalloc fails even after a flush: the cache is too fragmented, or a new segment is larger
// than the request); "DOES NOT FIT" (the allocated bytes alone exceed the GPU).
std::string memory_verdict(const Metrics& m);

Metrics compute_metrics(const Timeline& t);

// explain --json's "memory": the peaks, the memory outside PyTorch by component, the capacity,
// the headroom and the verdict (the CLI and the Python API print the same object).
nlohmann::json memory_summary_json(const Metrics& m);

// {"step_time_ns": ..., "phases": {...}, "peak_memory_bytes": ..., ...} as in DESIGN.md 5.
nlohmann::json metrics_to_json(const Metrics& m);
// Inverse, for compare/analyze round trips. Throws std::runtime_error on a missing field.
Metrics metrics_from_json(const nlohmann::json& j);

}  // namespace stepsim
