// Sweeps: grid order, per-row invalid points, determinism under threads, shard merge, summary.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "sim/explore/sweep.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

// C1 (10 layers x 5 ms backward, 3 ms all-reduce per layer) as the base of a sweep file.
SweepSpec c1_sweep(const std::string& axes_json, const std::string& extra = "") {
  std::string text = R"({"name": "test", "base": {"include": ")" + kRoot + R"(/configs/examples/seed/c1-ddp-buckets.json"}, "axes": )" +
                     axes_json + extra + "}";
  static const test::TempDir dir("sweeps");  // this process's; removed at exit
  fs::path f = dir / ("sweep_" + std::to_string(std::hash<std::string>{}(text)) + ".json");
  std::ofstream(f) << text;
  return load_sweep(f);
}

// A sweep file of `text` in a directory of this process's named `name` (removed at exit).
fs::path sweep_file(const std::string& name, const std::string& text) {
  static std::map<std::string, test::TempDir> dirs;
  const fs::path f = dirs.try_emplace(name, name).first->second / "sweep.json";
  std::ofstream(f) << text;
  return f;
}

SweepOptions with_jobs(int jobs) {
  SweepOptions o;
  o.jobs = jobs;
  return o;
}

std::string run_csv(const SweepSpec& spec, SweepOptions o, SweepSummary* summary = nullptr) {
  std::ostringstream out;
  out << sweep_csv_header(spec) << "\n";
  SweepSummary s = run_sweep(spec, o, [&](const SweepRow& r) { out << sweep_csv_row(r) << "\n"; });
  if (summary) *summary = s;
  return out.str();
}

std::vector<std::map<std::string, std::string>> parse_csv(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  auto head = split_csv_line(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    auto f = split_csv_line(line);
    REQUIRE(f.size() == head.size());
    std::map<std::string, std::string> m;
    for (std::size_t i = 0; i < f.size(); ++i) m[head[i]] = f[i];
    rows.push_back(m);
  }
  return rows;
}

}  // namespace

TEST_CASE("a grid enumerates points with the last axis varying fastest", "[sweep]") {
  SweepSpec s = c1_sweep(R"({"cluster.nodes": [1, 2], "strategy.bucket_cap_bytes": [3000000, 6000000, 30000000]})");
  REQUIRE(s.size() == 6);
  auto p4 = s.point(4);  // 4 = 1 * 3 + 1 -> nodes[1] = 2, bucket[1] = 6e6
  CHECK(p4[0].second == 2);
  CHECK(p4[1].second == 6000000);
  CHECK(s.columns == std::vector<std::string>{"cluster.nodes", "strategy.bucket_cap_bytes"});
}

TEST_CASE("sweep rows carry every metric and reproduce seed case C1 at its bucket size", "[sweep]") {
  SweepSpec s = c1_sweep(R"({"strategy.bucket_cap_bytes": [6000000, 30000000]})");
  SweepOptions o;
  o.jobs = 1;
  auto rows = parse_csv(run_csv(s, o));
  REQUIRE(rows.size() == 2);
  // C1: two-layer buckets -> 50 + 6 = 56 ms. One 30 MB bucket holds all ten layers (first
  // bucket 6 MB = layers 9, 8; the rest in one bucket of 24 MB = 24 ms after backward ends at
  // 50 ms; bucket 0 (10 ms..16 ms) is hidden): 50 + 24 = 74 ms.
  CHECK(rows[0]["status"] == "ok");
  CHECK(rows[0]["step_time_ns"] == "56000000");
  CHECK(rows[0]["exposed_comm_ns"] == "6000000");
  CHECK(rows[1]["step_time_ns"] == "74000000");
  for (const char* col : {"compute_time_ns", "comm_time_ns", "overlap_pct", "idle_ns", "forward_ns", "backward_ns", "optimizer_ns",
                          "peak_memory_bytes", "mem_parameters_bytes", "fits", "constraints_ok"})
    CHECK(rows[0].count(col) == 1);
}

TEST_CASE("invalid points are reported in their row and do not stop the sweep", "[sweep]") {
  SweepSpec s = c1_sweep(R"({"strategy.bucket_cap_bytes": [6000000, -1, "lots"], "cluster.gpus_per_node": [8, 0]})");
  SweepOptions o;
  o.jobs = 2;
  SweepSummary sum(std::vector<std::string>{});
  auto rows = parse_csv(run_csv(s, o, &sum));
  REQUIRE(rows.size() == 6);
  // Axes run in path order (JSON objects are sorted): gpus_per_node outer, bucket inner.
  CHECK(rows[0]["status"] == "ok");
  CHECK(rows[1]["status"] == "invalid");  // bucket -1
  CHECK(rows[1]["error"].find("/strategy/bucket_cap_bytes") != std::string::npos);
  CHECK(rows[2]["status"] == "invalid");  // bucket "lots"
  CHECK(rows[3]["status"] == "invalid");  // gpus_per_node 0
  CHECK(rows[3]["error"].find("/cluster/gpus_per_node") != std::string::npos);
  CHECK(rows[4]["step_time_ns"].empty());
  CHECK(sum.ok() == 1);
  CHECK(sum.invalid() == 5);
}

TEST_CASE("a sweep's CSV is identical whatever the number of worker threads", "[sweep]") {
  SweepSpec s = c1_sweep(R"({"strategy.bucket_cap_bytes": [1000000, 3000000, 6000000, 9000000, 12000000, 30000000], "cluster.nodes": [1, 2, 3]})");
  SweepOptions one, four;
  one.jobs = 1;
  four.jobs = 4;
  CHECK(run_csv(s, one) == run_csv(s, four));
}

TEST_CASE("workers held back by a slow writer are woken when they may run again", "[sweep]") {
  // 2 workers may run 32 points ahead of the row being written; a writer that takes a
  // millisecond a row keeps them waiting for room all along (the runner wakes a waiting worker
  // only when its point may run). Every row comes, in point order, as with one worker.
  std::string buckets;
  for (int i = 1; i <= 48; ++i) buckets += (i > 1 ? ", " : "") + std::to_string(1000000 * i);
  const SweepSpec s = c1_sweep(R"({"strategy.bucket_cap_bytes": [)" + buckets + R"(], "cluster.nodes": [1, 2]})");
  std::ostringstream slow;
  slow << sweep_csv_header(s) << "\n";
  const SweepSummary sum = run_sweep(s, with_jobs(2), [&](const SweepRow& r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    slow << sweep_csv_row(r) << "\n";
  });
  CHECK(sum.total() == 96);
  CHECK(slow.str() == run_csv(s, with_jobs(1)));
}

TEST_CASE("shards merged equal the unsharded sweep byte for byte", "[sweep]") {
  SweepSpec s = c1_sweep(R"({"strategy.bucket_cap_bytes": [1000000, 3000000, 6000000, 9000000, 30000000], "cluster.nodes": [1, 2], "strategy.first_bucket_bytes": [1000000, 6000000, -3]})");
  SweepOptions o;
  o.jobs = 2;
  const std::string whole = run_csv(s, o);
  std::vector<fs::path> parts;
  const test::TempDir dir;
  for (int i = 0; i < 3; ++i) {
    SweepOptions so = o;
    so.shard = i;
    so.shards = 3;
    fs::path f = dir / ("shard_" + std::to_string(i) + ".csv");
    std::ofstream(f, std::ios::binary) << run_csv(s, so);
    parts.push_back(f);
  }
  std::reverse(parts.begin(), parts.end());  // order of the inputs does not matter
  std::ostringstream merged;
  SweepSummary sum = merge_sweep_csv(parts, merged);
  CHECK(merged.str() == whole);
  CHECK(sum.total() == 30);
  CHECK(sum.invalid() == 10);  // first_bucket_bytes -3 in a third of the points
}

TEST_CASE("the summary keeps the best configurations, the Pareto front and the knob that moved step time most", "[sweep]") {
  // Buckets of 1 layer (3 MB cap): the last bucket holds layer 0 alone -> 50 + 3 = 53 ms, the
  // fastest; no_sync has no effect with grad_accum 1, so bucket size moves step time most.
  SweepSpec s = c1_sweep(R"({"training.no_sync": [true, false], "strategy.bucket_cap_bytes": [3000000, 6000000, 30000000]})",
                         R"(, "constraints": ["step_time_ms <= 60"], "top": 2)");
  SweepOptions o;
  o.jobs = 2;
  SweepSummary sum(std::vector<std::string>{});
  run_csv(s, o, &sum);
  CHECK(sum.feasible() == 4);  // the 74 ms points violate the constraint
  auto best = sum.best();
  REQUIRE(best.size() == 2);
  CHECK(best[0].step_time.ns == 53'000'000);
  CHECK(best[0].index == 0);
  auto fx = sum.effects();
  REQUIRE(fx.size() == 2);
  CHECK(fx[0].path == "strategy.bucket_cap_bytes");
  CHECK(fx[0].range_ns() == Approx(21e6));  // 74 - 53 ms
  CHECK(fx[1].range_ns() == Approx(0));
  // Every point does the same work (C1's tokens per step), so step time is the default objective.
  CHECK(sum.objective().objective == Objective::StepTime);
  for (const auto& p : sum.pareto())  // no front point is beaten in both coordinates
    for (const auto& q : sum.scatter()) CHECK_FALSE((q.step_time < p.step_time && q.memory() <= p.memory()));
}

TEST_CASE("constraints must name a numeric metric and a comparison", "[sweep]") {
  CHECK_THROWS_AS(parse_constraint("peak_memory_gib <= eighty", "f"), InputError);
  CHECK_THROWS_AS(parse_constraint("happiness >= 3", "f"), InputError);
  CHECK_THROWS_AS(parse_constraint("peak_memory_gib => 3", "f"), InputError);
  auto c = parse_constraint("peak_memory_gib <= 80", "f");
  CHECK(c.metric == "peak_memory_gib");
  CHECK(c.value == 80);
}

TEST_CASE("merging refuses shards of different sweeps", "[sweep]") {
  const test::TempDir dir;
  fs::path a = dir / "merge_a.csv", b = dir / "merge_b.csv";
  std::ofstream(a) << "index,status,x\n0,ok,1\n";
  std::ofstream(b) << "index,status,y\n1,ok,1\n";
  std::ostringstream out;
  CHECK_THROWS_AS(merge_sweep_csv({a, b}, out), InputError);
  // The last column is the sweep's point count (4 here), on every row.
  const std::string head = "index,status,x,framework,step_time_ns,peak_memory_bytes,constraints_ok,points\n";
  std::ofstream(a) << head << "0,ok,1,ddp,5,7,true,4\n2,ok,3,ddp,5,7,true,4\n";
  std::ofstream(b) << head << "1,ok,2,ddp,4,7,true,4\n2,ok,3,ddp,5,7,true,4\n";
  CHECK_THROWS_WITH(merge_sweep_csv({a, b}, out), Catch::Contains("point 2 appears twice") && Catch::Contains("line 3"));
  // Rows out of point order are not a stepsim shard (the merge streams, one row per file).
  std::ofstream(b) << head << "3,ok,2,ddp,4,7,true,4\n1,ok,3,ddp,5,7,true,4\n";
  CHECK_THROWS_WITH(merge_sweep_csv({a, b}, out), Catch::Contains("point 1 after point 3"));
  // Interleaved shards merge in point order.
  std::ofstream(b) << head << "1,ok,2,ddp,4,7,true,4\n3,ok,4,ddp,6,7,true,4\n";
  std::ostringstream merged;
  SweepSummary sum = merge_sweep_csv({a, b}, merged);
  CHECK(merged.str() == head + "0,ok,1,ddp,5,7,true,4\n1,ok,2,ddp,4,7,true,4\n2,ok,3,ddp,5,7,true,4\n3,ok,4,ddp,6,7,true,4\n");
  CHECK(sum.total() == 4);
  REQUIRE(!sum.best().empty());
  CHECK(sum.best().front().index == 1);  // the fastest point (4 ns)
}

TEST_CASE("The sweep table marks a best point within the noise of the first as a tie", "[sweep]") {
  // Three points of 100, 102 and 110 ms under a 3.4 % noise: 102 ms is within 3.4 ms of the
  // first, a tie; 110 ms is not.
  SweepSummary sum(std::vector<std::string>{});
  sum.set_noise_pct(3.4);
  for (int k = 0; k < 3; ++k) {
    SweepPointBrief p;
    p.index = static_cast<std::uint64_t>(k);
    p.step_time = Time::from_ms(k == 0 ? 100 : k == 1 ? 102 : 110);
    p.peak_memory = Bytes{1000};
    p.tokens_per_step = 1000;
    p.constraints_ok = true;
    sum.add(p, "ok");
  }
  std::ostringstream out;
  sum.write_text(out);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("(tie with #0 within 3.4 %)"));
  const auto line_of = [&](const std::string& head) { return text.substr(text.find(head), text.find('\n', text.find(head)) - text.find(head)); };
  CHECK_THAT(line_of("#1 "), Catch::Contains("tie"));
  CHECK_THAT(line_of("#2 "), !Catch::Contains("tie"));
}

TEST_CASE("a sweep whose points share workloads gives the rows it gives when every workload is built anew", "[sweep]") {
  // Llama-3-8B points that repeat each workload (seq_len x torch_version: the key) across
  // nodes and reshard_after_forward; without a cache every point builds its own op list.
  const std::string text = R"({"name": "workloads", "base": {"include": ")" + kRoot +
                           R"(/configs/examples/llama3-8b-fsdp2-8xh100.json"}, "axes": {"workload.seq_len": [512, 1024],
      "cluster.nodes": [1, 2], "strategy.reshard_after_forward": [true, false], "training.torch_version": ["2.4", "2.9"]}})";
  const fs::path f = sweep_file("sweeps-workloads", text);
  SweepSpec cached = load_sweep(f);
  SweepSpec fresh = load_sweep(f);
  fresh.workloads = nullptr;
  const SweepOptions one = with_jobs(1), two = with_jobs(2);
  const std::string expected = run_csv(fresh, one);
  CHECK(parse_csv(expected).size() == 16);
  CHECK(expected.find(",ok,") != std::string::npos);
  CHECK(run_csv(cached, one) == expected);
  // No column is the profile, so no two points can share a program: none is kept.
  CHECK(cached.programs->held_instructions() == 0);
  cached.workloads = std::make_shared<WorkloadCache>(SweepSpec::kSweepWorkloads);
  CHECK(run_csv(cached, two) == expected);
  // A cache smaller than the distinct workloads (4) shares the first one, builds the others, and agrees.
  cached.workloads = std::make_shared<WorkloadCache>(1);
  CHECK(run_csv(cached, two) == expected);
}

TEST_CASE("a cache that drops a workload no one holds any more hands it to the next build, which takes its names", "[sweep]") {
  // A sweep worker's own cache (one workload, the least recent dropped) in front of the sweep's.
  WorkloadCache sweep_cache(0);
  WorkloadCache worker(1, WorkloadCache::WhenFull::DropLeastRecent, &sweep_cache);
  SourceMap src;
  src.root_file = "(test)";
  auto doc = [&](int seq) {
    nlohmann::json d = nlohmann::json::parse(std::ifstream(kRoot + "/configs/examples/llama3-8b-fsdp2-8xh100.json"));
    d["workload"]["seq_len"] = seq;
    return d;
  };
  auto pool_of = [](const Experiment& e) { return e.workload->layers.front().text.get(); };
  const TextPool* first_pool = nullptr;
  {
    const Experiment e = experiment_from_json(doc(1024), src, nullptr, "", &worker);
    first_pool = pool_of(e);
  }
  // The first workload is dropped at the next miss and, held by no one, taken by that build.
  const Experiment second = experiment_from_json(doc(2048), src, nullptr, "", &worker);
  CHECK(pool_of(second) == first_pool);
  CHECK(worker.take_recyclable() == nullptr);  // taken
  // A workload still held (by `second`) is dropped from the cache but not handed on.
  const Experiment third = experiment_from_json(doc(512), src, nullptr, "", &worker);
  CHECK(pool_of(third) != pool_of(second));
  CHECK(third.workload->seq_len == 512);
  // A cache that keeps what it holds never drops one.
  WorkloadCache keeps(1);
  { const Experiment e = experiment_from_json(doc(1024), src, nullptr, "", &keeps); }
  const Experiment again = experiment_from_json(doc(2048), src, nullptr, "", &keeps);
  CHECK(keeps.take_recyclable() == nullptr);
}

TEST_CASE("a sweep evaluates the points that build one workload together and writes its rows in point order", "[sweep]") {
  // The workload's columns innermost: 2 node counts x 2 reshard settings outside 3 sequence
  // lengths x 2 PyTorch releases, 6 workloads each met at 4 points spread over the sweep. A
  // sweep cache that keeps none builds each once all the same: the runner evaluates a
  // workload's points one after another, and the worker keeps the one it built last. Rows come
  // in point order, the same as every point building its own workload, with any number of
  // workers.
  const std::string text = R"({"name": "grouped", "base": {"include": ")" + kRoot +
                           R"(/configs/examples/llama3-8b-fsdp2-8xh100.json"}, "axes": {"workload.seq_len": [512, 768, 1024],
      "cluster.nodes": [1, 2], "strategy.reshard_after_forward": [true, false], "training.torch_version": ["2.4", "2.9"]}})";
  const fs::path f = sweep_file("sweeps-grouped", text);
  SweepSpec spec = load_sweep(f);
  REQUIRE(spec.columns.back() == "workload.seq_len");
  CHECK_FALSE(SweepSpec::may_change_workload("cluster.nodes"));
  CHECK_FALSE(SweepSpec::may_change_workload("workloads"));
  CHECK(SweepSpec::may_change_workload("workload.model.layers"));
  CHECK(SweepSpec::may_change_workload("training"));
  CHECK(SweepSpec::may_change_workload("strategy"));
  CHECK(spec.workload_group(0) == spec.workload_group(6));  // nodes 1 and 2, the same workload
  CHECK(spec.workload_group(0) != spec.workload_group(1));
  SweepSpec fresh = load_sweep(f);
  fresh.workloads = nullptr;
  const SweepOptions one = with_jobs(1), two = with_jobs(2);
  const std::string expected = run_csv(fresh, one);
  const auto rows = parse_csv(expected);
  REQUIRE(rows.size() == 24);
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(rows[i].at("index") == std::to_string(i));
  // The sweep's cache counts a miss for each workload built (its workers' own found the rest).
  spec.workloads = std::make_shared<WorkloadCache>(0);
  CHECK(run_csv(spec, one) == expected);
  CHECK(spec.workloads->misses() == 6);
  // Two workers: a worker claims a workload's run of points whole, so each workload is built
  // once, where two workers taking turns within each run built each one twice.
  spec.workloads = std::make_shared<WorkloadCache>(0);
  CHECK(run_csv(spec, two) == expected);
  CHECK(spec.workloads->misses() == 6);
}

TEST_CASE("a sweep over profiles shares each program among the points whose build read the same inputs", "[sweep]") {
  // Four profiles on two nodes: the H100's, the H200's (the same host section), the H100's with a
  // slower NIC (the same program, priced differently) and with a training loop that takes 500 us
  // after the step (host.step_end: build_step_program reads it, so its own program); times
  // reshard_after_forward, which changes the program. The programs built: 2 x 2; the rest found.
  const std::string h100 = kRoot + "/configs/hardware/h100-sxm-8x.json";
  const std::string text = R"({"name": "profiles", "base": {"include": ")" + kRoot +
                           R"(/configs/examples/llama3-8b-fsdp2-8xh100.json"}, "axes": {"cluster.nodes": [2],
      "cluster.profile": [")" + h100 + R"(", ")" + kRoot + R"(/configs/hardware/h200-sxm-8x.json",
        {"include": ")" + h100 + R"(", "name": "slow-nic", "collectives": {"topology": {"network": {"nic_GBps": 12.5}}}},
        {"include": ")" + h100 + R"(", "name": "slow-loop", "host": {"step_end_us": 500}}],
      "strategy.reshard_after_forward": [true, false]}})";
  const fs::path f = sweep_file("sweeps-programs", text);
  SweepSpec cached = load_sweep(f);
  SweepSpec fresh = load_sweep(f);
  fresh.programs = nullptr;
  const SweepOptions one = with_jobs(1), two = with_jobs(2);
  const std::string expected = run_csv(fresh, one);
  const auto rows = parse_csv(expected);
  REQUIRE(rows.size() == 8);
  for (const auto& r : rows) REQUIRE(r.at("status") == "ok");
  // Each profile prices the program its own way (the slower NIC's step is longer).
  CHECK(rows[0].at("step_time_ms") != rows[4].at("step_time_ms"));
  CHECK(rows[0].at("step_time_ms") != rows[2].at("step_time_ms"));
  SweepSummary summary = empty_sweep_summary(cached);
  CHECK(run_csv(cached, one, &summary) == expected);
  CHECK(cached.programs->hits() == 4);
  CHECK(cached.programs->held_instructions() > 0);
  // The text summary names an inline profile by its "name", where the CSV holds the whole
  // object (its includes resolved: ~130 KB a row).
  std::ostringstream shown;
  summary.write_text(shown);
  CHECK_THAT(shown.str(), Catch::Contains(R"({"name":"slow-nic",...})"));
  std::istringstream lines(shown.str());
  for (std::string line; std::getline(lines, line);) CHECK(line.size() < 400);
  cached.programs = std::make_shared<ProgramCache>();
  CHECK(run_csv(cached, two) == expected);
  // A cache too small for one program keeps none, and agrees.
  cached.programs = std::make_shared<ProgramCache>(10);
  CHECK(run_csv(cached, one) == expected);
  CHECK(cached.programs->hits() == 0);
}
