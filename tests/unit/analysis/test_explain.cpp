// explain: the dependency graph, the critical path, exposure and sensitivities on seed cases.
#include <algorithm>
#include <limits>
#include <sstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/analysis/critical_path.hpp"
#include "sim/exec/engine.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

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
  b.launch(b.default_stream(), KernelSpec{"fwd A", KernelClass::Compute, w, ""});
  EventId ev = b.record(b.default_stream());
  b.host_sync(ev, "item() in the loss");
  b.launch(b.default_stream(), KernelSpec{"fwd B", KernelClass::Compute, w, ""});
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
  // The grouped listing is short: 16 groups for the 185 steps (host set-up, cast, AG root, the
  // 32 forward AGs, the forward kernels, autograd's ones_like seed and the backward kernels, 30 x (RS, AG) in backward, the tail: the
  // last reduce-scatters, torchtitan's clip_grad_norm_ with its all-reduce, the foreach AdamW).
  const std::string text = brief.str();
  auto from = text.find("critical path, ");
  auto to = text.find("time on the path by category");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  auto lines = std::count(text.begin() + static_cast<long>(from), text.begin() + static_cast<long>(to), '\n');
  CHECK(x.path.size() == 185);
  CHECK(lines == 2 + 16);  // the title, the column header, 16 groups
  auto j = explanation_to_json(x);
  CHECK(j["critical_path"].size() == x.path.size());
  REQUIRE(j["critical_path_groups"].size() == group_path(x).size());
  std::size_t covered = 0;
  for (const auto& g : j["critical_path_groups"]) covered += g["last_step"].get<std::size_t>() - g["first_step"].get<std::size_t>() + 1;
  CHECK(covered == x.path.size());
}

TEST_CASE("2x link bandwidth doubles the bandwidth of the measured group size a communicator uses", "[explain]") {
  // DDP on one node of the alpha-beta A100 profile (tests/data/profiles) with 4 GPUs: the gradient all-reduces run on a 4-rank intra-node
  // communicator. The profile's intra_node alpha_beta ranges were measured on 8 ranks
  // ("ranks": {"all_reduce": 8}) and, for all-reduce, also on 4 ("groups": {"all_reduce": {"4":
  // [...]}}), so a 4-rank all-reduce is priced with the 4-rank range as measured (no busbw
  // rescaling, nearest_group): t = alpha + S / beta with alpha 0 and beta 149.524 GB/s.
  // Doubling the link bandwidth must give t = S / (2 x 149.524 GB/s): a 25 MiB bucket takes
  // 26,214,400 B / 299.048 GB/s = 87.66 us instead of 175.32 us. (Before the fix the "groups"
  // ranges kept their bandwidth and the 2x variant left these all-reduces unchanged.)
  const std::string root = std::string(STEPSIM_SOURCE_DIR) + "/";
  Experiment e = load_experiment(root + "configs/examples/llama3-8b-ddp-8xh100.json",
                                 {"cluster.profile=\"" + root + "tests/data/profiles/a100-sxm-8x-alpha-beta.json\"", "cluster.gpus_per_node=4",
                                  "workload.preset=\"opt-1.3b\"", "workload.seq_len=2048"});
  const HardwareProfile& hw = e.cluster.profile;
  const auto& measured = std::get<AlphaBetaModel>(hw.intra_node);
  REQUIRE(measured.ranks.at(CollectiveKind::AllReduce) == 8);
  const auto& group4 = measured.groups.at(CollectiveKind::AllReduce).at(4);
  REQUIRE(group4.size() == 1);
  REQUIRE(group4[0].alpha.ns == 0);
  REQUIRE(group4[0].beta.bytes_per_s == Approx(149.5238717794142e9));
  const Bandwidth doubled{2 * group4[0].beta.bytes_per_s};
  CHECK(transfer_time(Bytes{26'214'400}, doubled).ns == Approx(87'660).margin(1));

  const HardwareProfile fast = with_double_link_bandwidth(hw);
  const Program prog = e.strategy->build(e);
  REQUIRE(prog.comms.size() >= 1);
  Timeline base = simulate_program(prog, hw), t = simulate_program(prog, fast);
  int all_reduces = 0;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimelineOp& op = t.ops[i];
    if (op.kind != TimelineOp::Kind::Collective || op.collective != CollectiveKind::AllReduce) continue;
    REQUIRE(op.comm);
    const CommDecl& comm = prog.comms[op.comm->index()];
    REQUIRE(comm.ranks == 4);
    REQUIRE(comm.nodes == 1);
    ++all_reduces;
    CHECK(op.solo_duration == transfer_time(op.bytes, doubled));
    CHECK(base.ops[i].solo_duration == transfer_time(op.bytes, group4[0].beta));
  }
  CHECK(all_reduces > 10);
  // The sensitivity runs on that profile: faster than the baseline step.
  Time step = compute_metrics(base).overlap.step_time;
  auto s = sensitivities(e, step);
  CHECK(s[0].what == "2x link bandwidth");
  CHECK(s[0].step_time == compute_metrics(t).overlap.step_time);
}

TEST_CASE("2x link bandwidth doubles every alpha_beta range's beta and keeps alpha", "[explain]") {
  HardwareProfile hw;
  AlphaBetaModel ab;
  ab.default_ranges = {{Bytes{1024}, Time::from_us(5), Bandwidth::from_gbps(10)}, {Bytes{}, Time::from_us(20), Bandwidth::from_gbps(100)}};
  ab.default_ranges[1].max_bytes = Bytes{std::numeric_limits<std::int64_t>::max()};
  ab.ranges[CollectiveKind::AllGather] = {{Bytes{std::numeric_limits<std::int64_t>::max()}, Time::from_us(7), Bandwidth::from_gbps(50)}};
  ab.ranks[CollectiveKind::AllGather] = 8;
  ab.groups[CollectiveKind::AllGather][2] = {{Bytes{std::numeric_limits<std::int64_t>::max()}, Time::from_us(3), Bandwidth::from_gbps(30)}};
  hw.intra_node = ab;
  hw.inter_node = RingModel{Bandwidth::from_gbps(25), Time::from_us(2), Time::from_us(10)};
  HardwareProfile fast = with_double_link_bandwidth(hw);
  const auto& f = std::get<AlphaBetaModel>(fast.intra_node);
  CHECK(f.default_ranges[0].beta.bytes_per_s == 20e9);
  CHECK(f.default_ranges[1].beta.bytes_per_s == 200e9);
  CHECK(f.default_ranges[0].alpha == Time::from_us(5));
  CHECK(f.ranges.at(CollectiveKind::AllGather)[0].beta.bytes_per_s == 100e9);
  CHECK(f.groups.at(CollectiveKind::AllGather).at(2)[0].beta.bytes_per_s == 60e9);
  CHECK(f.groups.at(CollectiveKind::AllGather).at(2)[0].alpha == Time::from_us(3));
  const auto& ring = std::get<RingModel>(fast.inter_node);
  CHECK(ring.busbw.bytes_per_s == 50e9);
  CHECK(ring.step_latency == Time::from_us(2));
  CHECK(ring.base_latency == Time::from_us(10));
}

TEST_CASE("2x link bandwidth halves a table's time above its latency, the time of its smallest measured size", "[explain]") {
  // Points 1 KiB: 10 us (the latency: table_time holds it constant below), 1 MiB: 30 us,
  // 1 GiB: 4010 us. Bandwidth part 0, 20, 4000 us halves: 10, 10 + 10 = 20, 10 + 2000 = 2010 us.
  HardwareProfile hw;
  TableModel table;
  table.points[CollectiveKind::AllReduce][8] = {
      {Bytes{1024}, Time::from_us(10)}, {Bytes{1 << 20}, Time::from_us(30)}, {Bytes{1 << 30}, Time::from_us(4010)}};
  hw.intra_node = table;
  hw.inter_node = table;
  HardwareProfile fast = with_double_link_bandwidth(hw);
  for (const ScopeModel* m : {&fast.intra_node, &fast.inter_node}) {
    const auto& pts = std::get<TableModel>(*m).points.at(CollectiveKind::AllReduce).at(8);
    CHECK(pts[0].time == Time::from_us(10));
    CHECK(pts[1].time == Time::from_us(20));
    CHECK(pts[2].time == Time::from_us(2010));
  }
  // The latency-bound region (below 1 KiB) keeps its time, as every model keeps its latencies.
  CommDecl comm{"dp", 8, 1};
  CHECK(collective_time(fast, CollectiveKind::AllReduce, Bytes{512}, comm) == collective_time(hw, CollectiveKind::AllReduce, Bytes{512}, comm));
}

TEST_CASE("explain groups a blocking reason repeated on the path: once, with its count (issue 48 item 8)", "[explain]") {
  const std::string pageable = "scores.max_clamp: torch.tensor(..., device=cuda) from pageable memory";
  std::vector<std::string> reasons(24, pageable);
  reasons.insert(reasons.begin() + 3, "loss.item()");
  reasons.push_back("loss.item()");
  reasons.push_back("optimizer step sync");
  CHECK(group_reasons(reasons) == pageable + " (x24); loss.item() (x2); optimizer step sync");
  CHECK(group_reasons({"a"}) == "a");
  CHECK(group_reasons({}).empty());
}
