// explain: the dependency graph, the critical path, exposure and sensitivities on seed cases.
#include <algorithm>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/analysis/critical_path.hpp"
#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/load_experiment.hpp"

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

namespace {

// A critical path written by hand: steps back to back from t = 0, durations in ms.
struct PathWriter {
  Explanation x;
  std::int64_t t = 0;
  void add(CriticalStep::Kind kind, const std::string& name, const std::string& where, std::int64_t ms) {
    CriticalStep s;
    s.kind = kind;
    s.name = name;
    s.where = where;
    s.start = Time{t};
    t += ms * 1'000'000;
    s.end = Time{t};
    x.path.push_back(s);
  }
};

}  // namespace

TEST_CASE("explain groups repeated steps over numbered units: one line per run of all-gathers, one per alternating RS/AG pattern",
          "[explain]") {
  using K = CriticalStep::Kind;
  PathWriter w;
  w.add(K::Host, "launch cast", "host", 1);                                    // [0] alone
  for (int b = 0; b < 4; ++b) w.add(K::Collective, fmt::format("AG block.{} fwd", b), "unshard", b == 2 ? 12 : 10);  // [1..4]
  w.add(K::Kernel, "fwd block.3", "default", 2);                               // [5] and [6]: one segment
  w.add(K::Kernel, "bwd block.3", "default", 3);
  for (int b = 3; b >= 1; --b) {                                               // [7..12]
    w.add(K::Collective, fmt::format("RS block.{}", b), "post_backward", 5);
    w.add(K::Collective, fmt::format("AG block.{} bwd", b - 1), "unshard", 10);
  }
  w.add(K::Collective, "AR bucket 1", "nccl", 4);                              // [13], [14]: only 2 in a row
  w.add(K::Collective, "AR bucket 0", "nccl", 4);
  auto groups = group_path(w.x);
  REQUIRE(groups.size() == 6);
  CHECK(groups[0].label == "launch x1 on host");  // non-collective runs are named by their first word
  CHECK(groups[0].repeats == 1);
  // Four all-gathers of blocks 0..3 in a row: one group, 10..12 ms each, 42 ms in all.
  CHECK(groups[1].label == "AG block.0-3 fwd on unshard");
  CHECK(groups[1].repeats == 4);
  CHECK(groups[1].first == 1);
  CHECK(groups[1].last == 4);
  CHECK(groups[1].each_min.ns == 10'000'000);
  CHECK(groups[1].each_max.ns == 12'000'000);
  CHECK(groups[1].time.ns == 42'000'000);
  CHECK(describe_group(groups[1]) == "AG block.0-3 fwd on unshard: 4 x 10.000 ms to 12.000 ms (42.000 ms)");
  CHECK(groups[2].label == "fwd+bwd x2 on default");
  CHECK(groups[2].time.ns == 5'000'000);
  // RS block.k then AG block.k-1 three times (k = 3, 2, 1): one group of period 2, 15 ms per repetition.
  CHECK(groups[3].label == "(RS block.3-1 on post_backward, AG block.2-0 bwd on unshard)");
  CHECK(groups[3].period == 2);
  CHECK(groups[3].repeats == 3);
  CHECK(groups[3].first == 7);
  CHECK(groups[3].last == 12);
  CHECK(describe_group(groups[3]) == "(RS block.3-1 on post_backward, AG block.2-0 bwd on unshard): 3 x 15.000 ms per repetition (45.000 ms)");
  // Two in a row are not a pattern: listed as they are.
  CHECK(groups[4].label == "AR bucket 1 on nccl");
  CHECK(groups[5].label == "AR bucket 0 on nccl");
  // The groups cover the path exactly, in order.
  for (std::size_t g = 1; g < groups.size(); ++g) CHECK(groups[g].first == groups[g - 1].last + 1);
  CHECK(groups.back().last == w.x.path.size() - 1);
}

TEST_CASE("explain's text lists the grouped critical path and only with --verbose every step; --json keeps every step and adds the groups",
          "[explain]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json");
  SimulationResult r = run_experiment(e);
  Explanation x = explain_experiment(e, r, false);
  std::ostringstream brief, verbose;
  write_explanation_text(brief, x);
  write_explanation_text(verbose, x, true);
  // The 32 forward all-gathers of C6 (2 x 8 H100, 25 GB/s inter-node ring) run back to back on
  // the critical path, each 16.378 ms (416 MiB per block): one line.
  CHECK(brief.str().find("AG block.0-31 fwd on unshard: 32 x 16.378 ms") != std::string::npos);
  CHECK(brief.str().find("step-by-step") == std::string::npos);
  CHECK(verbose.str().find("step-by-step") != std::string::npos);
  CHECK(verbose.str().find("AG block.17 fwd") != std::string::npos);
  // The grouped listing is short: 15 lines for the 173 steps (host set-up, cast, AG root, the
  // 32 forward AGs, the forward and backward kernels, 30 x (RS, AG) in backward, the tail).
  const std::string text = brief.str();
  auto from = text.find("critical path, ");
  auto to = text.find("time on the path by category");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  auto lines = std::count(text.begin() + static_cast<long>(from), text.begin() + static_cast<long>(to), '\n');
  CHECK(x.path.size() == 173);
  CHECK(lines == 2 + 14);  // the title, the column header, 14 groups
  auto j = explanation_to_json(x);
  CHECK(j["critical_path"].size() == x.path.size());
  REQUIRE(j["critical_path_groups"].size() == group_path(x).size());
  std::size_t covered = 0;
  for (const auto& g : j["critical_path_groups"]) covered += g["last_step"].get<std::size_t>() - g["first_step"].get<std::size_t>() + 1;
  CHECK(covered == x.path.size());
}
