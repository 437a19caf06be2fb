// The wait for the slowest rank measured across several ranks' traces (analyze_job's rank_waits,
// docs/analyze.md): on two hand-written ranks whose host clocks differ by 1 ms, the answer follows
// from the rule.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <fmt/format.h>

#include "trace/trace_analysis.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

// ProfilerStep#1 over [clock, clock + 1000] us; each collective an all-reduce kernel {start, dur}
// launched at the step's start, times on this rank's clock.
KinetoTrace rank_with(int rank, int clock, std::initializer_list<std::pair<int, int>> collectives,
                      const char* kernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") {
  std::string ev = fmt::format(R"J({{"distributedInfo": {{"rank": {}, "world_size": 2}}, "traceEvents": [
  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": {}, "dur": 1000}})J",
                               rank, clock);
  int corr = 1;
  for (const auto& [start, dur] : collectives) {
    ev += fmt::format(R"J(,
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 2, "args": {{"correlation": {}}}}},
  {{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {}, "dur": {}, "args": {{"device": 0, "stream": 7, "correlation": {}}}}})J",
                      clock + corr, corr, kernel, clock + start, dur, corr);
    ++corr;
  }
  ev += "]}";
  std::istringstream in(ev);
  return read_kineto_trace_stream(in, fmt::format("rank{}.json", rank));
}

}  // namespace

// Catches: arrivals compared on unaligned clocks (a 1 ms offset would be a 500 us wait), the
// wait measured from the first arrival instead of the mean, collectives matched across ranks that
// ran different ones.
TEST_CASE("the slowest-rank wait is measured on clocks aligned by the collectives' ends", "[trace]") {
  // Rank 1's clock reads 1,000 us more. Collective 1: arrivals 100 and 120 us, both end at 150;
  // collective 2: arrivals 300 and 290, both end at 320.
  const KinetoTrace r0 = rank_with(0, 0, {{100, 50}, {300, 20}});
  const KinetoTrace r1 = rank_with(1, 1000, {{120, 30}, {290, 30}});
  const JobAnalysis job = analyze_job({r1, r0}, AnalyzeOptions{});
  REQUIRE(job.rank_waits.size() == 1);
  const RankWaitRow& w = job.rank_waits[0];
  CHECK(w.step == 1);
  CHECK(w.collectives == 2);
  CHECK(w.wait.us() == Approx(10 + 5));  // 120 - 110, then 300 - 295
  CHECK(w.largest_wait.us() == Approx(10));
  CHECK(w.largest_index == 0);
  CHECK(w.largest_kind == TraceCollective::AllReduce);
  CHECK(w.end_spread.ns == 0);

  // One collective fewer on a rank, or another kind: nothing is matched, nothing measured.
  CHECK(analyze_job({r0, rank_with(1, 1000, {{120, 30}})}, AnalyzeOptions{}).rank_waits.empty());
  const KinetoTrace other = rank_with(1, 1000, {{120, 30}, {290, 30}}, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  CHECK(analyze_job({r0, other}, AnalyzeOptions{}).rank_waits.empty());
  // One trace: no job, no wait.
  CHECK(analyze_job({r0}, AnalyzeOptions{}).rank_waits.empty());
}
