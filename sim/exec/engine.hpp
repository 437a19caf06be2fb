#pragma once
// The simulator: runs a Program on simulated streams (DESIGN.md section 1, rules 1-7).
//
//  1. Two clocks: the host thread advances by each instruction's CPU cost (from the
//     profile's host section); a GPU op starts at max(issue, previous op on its stream done,
//     the event it waits on).
//  2. Communicator FIFO: collectives of one communicator run one at a time in issue order,
//     whatever stream issued them; different communicators run concurrently.
//  3. Costs come from the hardware models (kernel_time, collective_time), never the strategy.
//  4. Contention is fluid: rates change only when the set of running ops changes. Concurrent
//     kernels share the GPU equally; collectives on the same link class (intra- or inter-node)
//     share it equally; a kernel overlapping a collective runs at 1/(1+compute_slowdown) and
//     the collective at 1/(1+comm_slowdown) (both 0 by default); when the profile declares the
//     SMs (contention.gpu_sms, collective_sms), a compute-bound kernel (GEMM, attention) runs on
//     the SMs the collectives' NCCL kernels leave, and a memory-bound kernel and the collectives
//     share HBM in proportion to demand.
//  5. Memory: Alloc/Free move live bytes per category; a Free with record_streams takes effect
//     when the GPU finishes the work queued on those streams before the free. The same
//     traffic runs through a model of PyTorch's caching allocator (caching_allocator.hpp),
//     which gives the reserved bytes of every sample.
//  6. Determinism: integer ns; same-time events run in insertion order.
//  7. A program that cannot finish throws DeadlockError naming the stuck instructions.

#include "sim/exec/allocator_config.hpp"
#include "sim/exec/timeline.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// How the simulated rank meets the others at each collective when the profile's rank_variation
// is set (docs/scale.md): by default the expected wait for the slowest of the communicator's N
// ranks (the expected maximum of N normal draws times the spread accumulated since the ranks last
// met); with `sample`, one draw of that maximum per collective from `seed` (stepsim simulate
// --samples K --seed S runs K of these).
struct RankOptions {
  bool sample = false;
  std::uint64_t seed = 0;
};

// What the timeline holds. `Full`: everything the reports read. `Metrics`: what compute_metrics
// reads (the ops, the memory samples, the slowest-rank waits), without the host's intervals and
// without why each op and host interval started when it did (Timeline::host, host_why, op_why:
// explain's critical path, the trace, the HTML report). The simulation is the same, so are the
// metrics; a sweep point, a --samples draw or a sensitivity run skips a tenth of the engine's work.
enum class TimelineDetail { Full, Metrics };

// E[max of n independent standard normal draws] (0 for n <= 1): 1.42 for 8, 2.47 for 128.
double expected_max_of_normals(int n);

// Throws std::logic_error on a malformed Program (validate()'s checks, sim/program/validate.hpp,
// run on each instruction as the host reaches it) and DeadlockError (rule 7).
Timeline simulate_program(const Program& program, const HardwareProfile& hw, const AllocatorConfig& allocator = {},
                          const RankOptions& ranks = {}, TimelineDetail detail = TimelineDetail::Full);
// The same with an experiment's profile, whose GEMM times are kept across simulations when it
// has a memo (SharedProfile::gemm_time_memo): the same timeline.
Timeline simulate_program(const Program& program, const SharedProfile& hw, const AllocatorConfig& allocator = {},
                          const RankOptions& ranks = {}, TimelineDetail detail = TimelineDetail::Full);

// One-line description of an instruction, for errors and reports ("Wait stream 2 on event 7").
std::string describe(const Program& program, std::size_t instruction);

}  // namespace stepsim
