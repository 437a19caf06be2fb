// Seed case C6 (orderings, not exact numbers): FSDP1 FULL_SHARD on Llama-3-8B over 2 x 8 H100
// with a slow inter-node network (25 GB/s bus bandwidth) and a fast host, from the shipped
// example configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

using namespace stepsim;

namespace {

const std::string kExample = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json";

SimulationResult run_variant(const std::string& prefetch, bool limit) {
  return run_experiment(load_experiment(kExample, {"strategy.backward_prefetch=" + prefetch,
                                                   std::string("strategy.limit_all_gathers=") + (limit ? "true" : "false")}));
}

// The most forward all-gathers ever issued ahead of compute: at each forward AG's issue, the
// number of forward AGs issued so far whose unit's forward compute has not finished yet.
int max_allgathers_ahead(const Timeline& t) {
  std::map<std::string, Time> compute_end;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Kernel && op.phase == Phase::Forward && op.name == "fwd " + op.unit)
      compute_end[op.unit] = op.end;
  std::vector<const TimelineOp*> ags;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Collective && op.phase == Phase::Forward && compute_end.count(op.unit))
      ags.push_back(&op);
  int most = 0;
  for (const auto* ag : ags) {
    int ahead = 0;
    for (const auto* other : ags)
      if (other->issue <= ag->issue && compute_end[other->unit] > ag->issue) ++ahead;
    most = std::max(most, ahead);
  }
  return most;
}

}  // namespace

TEST_CASE("C6: on a slow network with a fast host, throughput is none < BACKWARD_POST <= BACKWARD_PRE and peak "
          "memory none <= POST <= PRE with the limit < PRE without it",
          "[fsdp1][c6]") {
  SimulationResult none = run_variant("none", true);
  SimulationResult post = run_variant("backward_post", true);
  SimulationResult pre = run_variant("backward_pre", true);
  SimulationResult pre_unlimited = run_variant("backward_pre", false);
  auto step = [](const SimulationResult& r) { return r.metrics.overlap.step_time; };
  auto peak = [](const SimulationResult& r) { return r.metrics.peak_memory; };
  INFO("step ns none " << step(none).ns << " post " << step(post).ns << " pre " << step(pre).ns << " pre-nolimit "
                       << step(pre_unlimited).ns);
  INFO("peak B none " << peak(none).count << " post " << peak(post).count << " pre " << peak(pre).count
                      << " pre-nolimit " << peak(pre_unlimited).count);
  CHECK(step(none) > step(post));
  CHECK(step(post) >= step(pre));
  CHECK(peak(none) <= peak(post));
  CHECK(peak(post) <= peak(pre));
  CHECK(peak(pre) < peak(pre_unlimited));
}

TEST_CASE("C6: with limit_all_gathers at most two all-gathers are ever issued ahead of compute; without it the host "
          "issues far ahead",
          "[fsdp1][c6]") {
  CHECK(max_allgathers_ahead(run_variant("backward_pre", true).timeline) <= 2);
  CHECK(max_allgathers_ahead(run_variant("backward_pre", false).timeline) > 2);
}

TEST_CASE("C6: the rate limiter blocks the host, and only when it is on", "[fsdp1][c6]") {
  auto blocked = [](const SimulationResult& r) {
    int n = 0;
    for (const auto& h : r.timeline.host) n += h.kind == HostInterval::Kind::Blocked && h.end > h.start;
    return n;
  };
  CHECK(blocked(run_variant("backward_pre", true)) > 0);
  CHECK(blocked(run_variant("backward_pre", false)) == 0);
}
