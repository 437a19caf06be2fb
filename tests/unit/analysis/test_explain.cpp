// explain: the dependency graph, the critical path, exposure and sensitivities on seed cases.
#include <algorithm>

#include <catch2/catch.hpp>

#include "sim/analysis/critical_path.hpp"
#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"

using namespace stepsim;

namespace {

const std::string kSeed = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/";

Explanation explain_file(const std::string& file, bool sens = true) {
  Experiment e = load_experiment(kSeed + file);
  SimulationResult r = run_experiment(e);
  return explain_experiment(e, r, sens);
}

int count_path(const Explanation& x, CriticalStep::Kind kind, const std::string& prefix) {
  return static_cast<int>(std::count_if(x.path.begin(), x.path.end(), [&](const CriticalStep& s) {
    return s.kind == kind && s.name.rfind(prefix, 0) == 0;
  }));
}

}  // namespace

TEST_CASE("explain on C1 names the last bucket's all-reduce as the only exposed comm and the backward chain as the critical path",
          "[explain]") {
  Explanation x = explain_file("c1-ddp-buckets.json");
  CHECK(x.step_time.ns == 56'000'000);
  // Exposed: only the last bucket (layers 1 and 0), its whole 6 ms, in the backward phase.
  std::vector<CollectiveExposure> exposed;
  for (const auto& c : x.collectives)
    if (c.exposed.ns > 0) exposed.push_back(c);
  REQUIRE(exposed.size() == 1);
  CHECK(exposed[0].exposed.ns == 6'000'000);
  CHECK(exposed[0].on_critical_path);
  CHECK(x.collectives.back().name == exposed[0].name);  // the last all-reduce issued
  CHECK(x.exposed_by_phase["backward"].ns == 6'000'000);
  // The path: the ten backward kernels back to back on the default stream, then (event wait)
  // that all-reduce; it ends at the step's end.
  REQUIRE_FALSE(x.path.empty());
  CHECK(x.path.back().kind == CriticalStep::Kind::Collective);
  CHECK(x.path.back().name == exposed[0].name);
  CHECK(x.path.back().via == DepKind::Event);
  CHECK(x.path.back().end.ns == 56'000'000);
  int bwd = 0;
  Time bwd_time{};
  for (const auto& s : x.path)
    if (s.kind == CriticalStep::Kind::Kernel && s.end > s.start) {
      ++bwd;
      bwd_time += s.end - s.start;
    }
  CHECK(bwd == 10);
  CHECK(bwd_time.ns == 50'000'000);
  CHECK(x.path_time[0].first == "compute");
  CHECK(x.bound.rfind("compute", 0) == 0);
  CHECK(x.longest_chain.ns == 56'000'000);
}

TEST_CASE("explain's sensitivities re-simulate C1 with doubled bandwidth, doubled compute and no host cost", "[explain]") {
  Explanation x = explain_file("c1-ddp-buckets.json");
  REQUIRE(x.sensitivities.size() == 3);
  // 2x bandwidth: the last bucket's all-reduce takes 3 ms -> 53 ms.
  CHECK(x.sensitivities[0].step_time.ns == 53'000'000);
  // 2x compute: buckets ready every 5 ms but each all-reduce takes 6 ms, so they queue in the
  // communicator FIFO: bucket 0 ready at 5 ms, the five run back to back 5..35 ms -> 35 ms.
  CHECK(x.sensitivities[1].step_time.ns == 35'000'000);
  // The toy profile has no host cost: unchanged.
  CHECK(x.sensitivities[2].step_time.ns == 56'000'000);
  CHECK(x.sensitivities[1].speedup == Approx(56.0 / 35.0));
}

TEST_CASE("explain follows a host sync: the blocked host interval is released by the op it waited for", "[explain]") {
  // Host: launch A (10 us issue) on the default stream; host_sync on its event; launch B.
  // B can only be issued after A ends, so the path is A -> (sync) -> host issue of B -> B.
  ProgramBuilder b;
  b.mark("fwd", Phase::Forward);
  KernelWork w;
  w.fixed = Time::from_ms(2);
  b.launch(b.default_stream(), Kernel{"fwd A", KernelClass::Compute, w, ""});
  EventId ev = b.record(b.default_stream());
  b.host_sync(ev, "item() in the loss");
  b.launch(b.default_stream(), Kernel{"fwd B", KernelClass::Compute, w, ""});
  Program p = b.take();
  HardwareProfile hw;
  hw.host.launch_overhead = Time::from_us(10);
  Timeline t = simulate_program(p, hw);
  Explanation x = explain_timeline(p, t);
  REQUIRE(x.path.size() >= 3);
  CHECK(x.path.back().name == "fwd B");
  bool through_sync = std::any_of(x.path.begin(), x.path.end(), [](const CriticalStep& s) { return s.kind == CriticalStep::Kind::Blocked; });
  CHECK(through_sync);
  CHECK(x.host_syncs_on_path.size() == 1);
  CHECK(x.bound.find("host sync") != std::string::npos);
  // The chain starts with the host issuing A (10 us), then A itself.
  CHECK(x.path.front().kind == CriticalStep::Kind::Host);
  CHECK(x.path[1].name == "fwd A");
  // 10 us issue + 2 ms A + 10 us issue + 2 ms B.
  CHECK(x.step_time.ns == 4'020'000);
}

TEST_CASE("explain on C4 with backward_prefetch none names the all-gather/reduce-scatter chain", "[explain][needs-fsdp1]") {
  Explanation x = explain_file("c4-bwd-none.json");
  // C4: forward 4 x 3 ms all-gathers, backward 4 x (3 + 10 + 3) ms, step 76 ms; nothing
  // overlaps so every collective is exposed and on the path.
  CHECK(x.step_time.ns == 76'000'000);
  CHECK(count_path(x, CriticalStep::Kind::Collective, "AG") == 8);
  CHECK(count_path(x, CriticalStep::Kind::Collective, "RS") == 4);
  Time chain{};
  for (const auto& [k, v] : x.path_time)
    if (k.rfind("collective chain", 0) == 0) chain += v;
  CHECK(chain.ns == 36'000'000);  // 8 AG + 4 RS x 3 ms
  CHECK(x.bound.find("collective chain") != std::string::npos);
  for (const auto& c : x.collectives) CHECK(c.exposed == c.duration);
}
