// Seed case C6 (orderings, not exact numbers): FSDP1 FULL_SHARD on Llama-3-8B over 2 x 8 H100
// with a slow inter-node network (25 GB/s bus bandwidth) and a fast host, from the shipped
// example configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "sim/analysis/run.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

const std::string kExample = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json";

SimulationResult run_variant(const std::string& prefetch, bool limit) {
  return run_experiment(load_experiment(kExample, {"strategy.backward_prefetch=" + prefetch,
                                                   std::string("strategy.limit_all_gathers=") + (limit ? "true" : "false")}));
}

// All-gathers issued ahead of compute: at the start of the forward compute kernel `at`, the
// number of forward AGs of blocks already issued whose block's compute has not started yet.
int allgathers_ahead(const Timeline& t, const std::string& at) {
  std::map<std::string, Time> compute_start;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Kernel && op.phase == Phase::Forward && op.name == "fwd " + op.unit)
      compute_start[op.unit.str()] = op.start;
  const Time start = compute_start.at(at);
  int ahead = 0;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Collective && op.phase == Phase::Forward && op.unit.rfind("block.", 0) == 0 &&
        op.issue <= start && compute_start.at(op.unit.str()) > start)
      ++ahead;
  return ahead;
}

int max_ahead_of_blocks(const Timeline& t) {
  int most = 0;
  for (int k = 0; k < 32; ++k) most = std::max(most, allgathers_ahead(t, "block." + std::to_string(k)));
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

TEST_CASE("C6: with limit_all_gathers at most two all-gathers are issued ahead of any block's compute; without it "
          "the host issues far ahead",
          "[fsdp1][c6]") {
  SimulationResult limited = run_variant("backward_pre", true);
  CHECK(max_ahead_of_blocks(limited.timeline) <= 2);
  CHECK(max_ahead_of_blocks(run_variant("backward_pre", false).timeline) > 2);
  // Steady state: the previous backward leaves four complete free events in the limiter's
  // queue (the frees of block.0 and the root come after the last prefetch), so AG(k) waits for
  // compute(k-3), not compute(k-2) as in the first iteration (F1.9), and before the root's
  // embedding runs three block all-gathers are already issued.
  CHECK(allgathers_ahead(limited.timeline, "embed") == 3);
}

TEST_CASE("C6: the rate limiter blocks the host, and only when it is on", "[fsdp1][c6]") {
  // Blocks in a host sync (the rate limiter's event.synchronize()); a full launch queue
  // (kLaunchQueueDepth, sim/exec/engine.cpp) blocks the host too, in either variant.
  auto blocked = [](const SimulationResult& r) {
    int n = 0;
    for (const auto& h : r.timeline.host)
      n += h.kind == HostInterval::Kind::Blocked && h.end > h.start && host_label(r.timeline, h).find("launch queue full") == std::string::npos;
    return n;
  };
  CHECK(blocked(run_variant("backward_pre", true)) > 0);
  CHECK(blocked(run_variant("backward_pre", false)) == 0);
}
