// The sweep objective (issue 17): what the best rows, the Pareto front and the knob effects
// rank by, how the default is chosen, and the bounded knob-effect line.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "sim/core/error.hpp"
#include "sim/explore/sweep.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {

SweepPointBrief point(std::uint64_t index, std::vector<std::string> values, double step_ms, double tokens_per_step, double mfu_pct,
                      double reserved_gib, bool ok = true) {
  SweepPointBrief p;
  p.index = index;
  p.values = std::move(values);
  p.step_time = Time{static_cast<std::int64_t>(step_ms * 1e6)};
  p.tokens_per_step = tokens_per_step;
  p.mfu_pct = mfu_pct;
  p.peak_reserved = Bytes{static_cast<std::int64_t>(reserved_gib * 1024 * 1024 * 1024)};
  p.peak_memory = p.peak_reserved;
  p.capacity = Bytes{80LL * 1024 * 1024 * 1024};
  p.constraints_ok = ok;
  return p;
}

// micro_batch 1 does 8192 tokens in 100 ms (81,920 tokens/s); micro_batch 4 does 32768 tokens
// in 300 ms (109,227 tokens/s): slower per step, faster per token. The bucket axis changes no
// work; bucket 25 is 2 ms faster at either micro-batch.
SweepSummary ddp_like(std::optional<Objective> requested) {
  SweepSummary s({"strategy.bucket_cap_mb", "workload.micro_batch"}, 5, requested);
  s.add(point(0, {"5", "1"}, 102, 8192, 30.0, 40), "ok");
  s.add(point(1, {"5", "4"}, 302, 32768, 40.1, 60), "ok");
  s.add(point(2, {"25", "1"}, 100, 8192, 30.6, 41), "ok");
  s.add(point(3, {"25", "4"}, 300, 32768, 40.4, 61), "ok");
  return s;
}

}  // namespace

TEST_CASE("--objective accepts step_time, tokens_per_s and mfu and names the allowed values otherwise", "[sweep][objective]") {
  CHECK(parse_objective("step_time") == Objective::StepTime);
  CHECK(parse_objective("tokens_per_s") == Objective::TokensPerS);
  CHECK(parse_objective("mfu") == Objective::Mfu);
  CHECK_THROWS_AS(parse_objective("fastest"), InputError);
  CHECK_THROWS_WITH(parse_objective("fastest"), "--objective fastest: expected one of step_time, tokens_per_s, mfu");
  CHECK_THROWS_WITH(parse_objective("MFU", "objective"), Catch::Contains("objective MFU: expected one of"));
}

TEST_CASE("tokens/s ranks a point that does more work per step above a faster step that does less", "[sweep][objective]") {
  ObjectiveInputs small{Time{100'000'000}, 8192, 30};   // 81,920 tokens/s
  ObjectiveInputs large{Time{300'000'000}, 32768, 40};  // 109,226.7 tokens/s
  CHECK(small.tokens_per_s() == Approx(81920));
  CHECK(large.tokens_per_s() == Approx(109226.67).epsilon(1e-6));
  CHECK(objective_better(Objective::StepTime, small, large));
  CHECK_FALSE(objective_better(Objective::StepTime, large, small));
  CHECK(objective_better(Objective::TokensPerS, large, small));
  CHECK(objective_better(Objective::Mfu, large, small));
  CHECK_FALSE(objective_better(Objective::TokensPerS, large, large));  // equal is not better
  CHECK(objective_value(Objective::StepTime, small) == Approx(100));
}

TEST_CASE("the default objective is tokens/s when the tokens per step differ, naming the axes that change them", "[sweep][objective]") {
  SweepSummary s = ddp_like(std::nullopt);
  ObjectiveChoice c = s.objective();
  CHECK(c.objective == Objective::TokensPerS);
  CHECK_FALSE(c.requested);
  CHECK_THAT(c.reason, Catch::Contains("8192 to 32768 tokens per step, through workload.micro_batch"));
  CHECK_THAT(c.reason, !Catch::Contains("bucket_cap_mb"));
  // Best: micro_batch 4 with bucket 25 (32768 / 0.300 s = 109,227 tokens/s), then bucket 5
  // (32768 / 0.302 = 108,503); the step-time ranking would put micro_batch 1 first.
  auto best = s.best();
  REQUIRE(best.size() == 4);
  CHECK(best[0].index == 3);
  CHECK(best[1].index == 1);
  CHECK(s.best(Objective::StepTime)[0].index == 2);
  // Knob effects under tokens/s: micro_batch moves the mean by ~27,300 tokens/s (109,227 +
  // 108,503)/2 - (81,920 + 80,314)/2; the bucket by ~760.
  auto fx = s.effects();
  REQUIRE(fx.size() == 2);
  CHECK(fx[0].path == "workload.micro_batch");
  CHECK(fx[0].changes_work());
  CHECK_FALSE(fx[1].changes_work());
  CHECK(fx[0].range(Objective::TokensPerS) == Approx((32768 / 0.300 + 32768 / 0.302) / 2 - (8192 / 0.100 + 8192 / 0.102) / 2));
}

TEST_CASE("a requested objective is used as given, with a note when step time compares unequal work", "[sweep][objective]") {
  SweepSummary s = ddp_like(Objective::StepTime);
  CHECK(s.objective().objective == Objective::StepTime);
  CHECK(s.objective().requested);
  CHECK_THAT(s.objective().reason, Catch::Contains("less work"));
  CHECK(s.best()[0].index == 2);  // 100 ms
  SweepSummary m = ddp_like(Objective::Mfu);
  CHECK(m.best()[0].index == 3);  // 40.4 %
  CHECK_THAT(m.objective().reason, !Catch::Contains("MFU is 0"));
  // A toy workload has no MFU: asked for, the ranking says it is only the point order.
  SweepSummary toy({"strategy.bucket_cap_mb"}, 5, Objective::Mfu);
  toy.add(point(0, {"5"}, 102, 8, 0, 1), "ok");
  toy.add(point(1, {"25"}, 100, 8, 0, 1), "ok");
  CHECK_THAT(toy.objective().reason, Catch::Contains("MFU is 0 at every point"));
  CHECK(toy.best()[0].index == 0);
}

TEST_CASE("the default objective is step time when every point does the same work", "[sweep][objective]") {
  SweepSummary s({"strategy.bucket_cap_mb"}, 5);
  s.add(point(0, {"5"}, 102, 8192, 30.0, 40), "ok");
  s.add(point(1, {"25"}, 100, 8192, 30.6, 41), "ok");
  CHECK(s.objective().objective == Objective::StepTime);
  CHECK_THAT(s.objective().reason, Catch::Contains("same work (8192 tokens per step)"));
  CHECK(s.best()[0].index == 1);
}

TEST_CASE("the Pareto front under tokens/s keeps the points no other beats in both tokens/s and reserved memory", "[sweep][objective]") {
  SweepSummary s = ddp_like(Objective::TokensPerS);
  // Index 2 (81,920 tokens/s, 41 GiB) beats 0 (80,314, 40 GiB)? No: 0 uses less memory, both
  // stay. Index 3 (109,227, 61 GiB) beats 1 (108,503, 60 GiB)? 1 uses less memory: both stay.
  // Nothing dominates anything here, so all four are on the front, best tokens/s first.
  auto front = s.pareto();
  REQUIRE(front.size() == 4);
  CHECK(front[0].index == 3);
  s.add(point(4, {"100", "4"}, 300, 32768, 40.4, 70), "ok");  // same rate as 3, more memory: dominated
  CHECK(s.pareto().size() == 4);
  s.add(point(5, {"1", "4"}, 290, 32768, 41.0, 30), "ok");  // faster and smaller than 1, 3, 0 and 2
  front = s.pareto();
  REQUIRE(front.size() == 1);
  CHECK(front[0].index == 5);
}

TEST_CASE("the knob-effect line of an axis with many values shows the best three and the worst", "[sweep][objective]") {
  SweepSummary s({"strategy.bucket_cap_mb"}, 5);
  for (int i = 0; i < 6250; ++i) s.add(point(static_cast<std::uint64_t>(i), {std::to_string(i + 1)}, 100.0 + i * 0.001, 8192, 30, 40), "ok");
  std::ostringstream out;
  s.write_text(out);
  const std::string text = out.str();
  const auto at = text.find("knobs by effect");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(text.find('\n', at) + 1);
  CHECK(line.size() < 200);  // was 6,250 values, ~100 KB
  CHECK_THAT(line, Catch::Contains("(1: 100.000 ms, 2: 100.001 ms, 3: 100.002 ms, ... 6246 more, worst 6250: 106.249 ms)"));
}

TEST_CASE("constraints take the reserved memory, the global batch and the tokens per step", "[sweep][objective]") {
  for (const char* c : {"peak_reserved_gib <= 70", "global_batch == 512", "tokens_per_step >= 65536", "device_memory_gib < 79",
                        "samples_per_s > 10", "peak_reserved_bytes <= 1e10", "alloc_retries_per_step == 0",
                        "alloc_ooms_per_step == 0"})
    CHECK_NOTHROW(parse_constraint(c, "f"));
  // The cap drawn on the charts is the tightest memory bound: 70 GiB below 75 GiB; a lower
  // bound (>=) is no cap.
  auto cap = constraint_memory_cap({parse_constraint("peak_memory_gib <= 75", "f"), parse_constraint("peak_reserved_gib <= 70", "f"),
                                    parse_constraint("peak_reserved_gib >= 1", "f"), parse_constraint("global_batch == 512", "f")});
  REQUIRE(cap);
  CHECK(cap->first.count == 70LL * 1024 * 1024 * 1024);
  CHECK(cap->second == "peak_reserved_gib <= 70");
  CHECK_FALSE(constraint_memory_cap({parse_constraint("global_batch == 512", "f")}));
}

TEST_CASE("the shipped DDP sweep ranks by tokens/s and its best row is not the micro-batch that does the least work", "[sweep][objective]") {
  // Nodes and micro_batch change the tokens per step (1 x 8 GPUs x 1 x 8192 = 65,536 ... 16 x 8
  // x 4 x 8192), so tokens/s is the default. By step time, micro_batch 1 on one node was best.
  SweepSpec spec = load_sweep(std::string(STEPSIM_SOURCE_DIR) + "/configs/sweeps/llama8b-ddp-buckets.json");
  SweepOptions o;
  o.jobs = 2;
  SweepSummary s = run_sweep(spec, o, [](const SweepRow&) {});
  REQUIRE(s.objective().objective == Objective::TokensPerS);
  CHECK_THAT(s.objective().reason, Catch::Contains("cluster.nodes, workload.micro_batch"));
  const auto best = s.best();
  REQUIRE(!best.empty());
  const auto& cols = s.columns();
  const auto mb = static_cast<std::size_t>(std::find(cols.begin(), cols.end(), "workload.micro_batch") - cols.begin());
  CHECK(best[0].values.at(mb) != "1");
  CHECK(s.best(Objective::StepTime)[0].values.at(mb) == "1");
}

TEST_CASE("a merged sweep's summary ranks like the unsharded run's, objective included", "[sweep][objective]") {
  // C1 over 1-3 nodes: the tokens per step differ (8, 16, 24), so tokens/s is the default; the
  // merge reads tokens_per_step, mfu_pct and peak_reserved_bytes back from the CSV.
  const test::TempDir dir;
  const auto f = dir / "sweep.json";
  std::ofstream(f) << R"({"base": {"include": ")" << STEPSIM_SOURCE_DIR
                   << R"(/configs/examples/seed/c1-ddp-buckets.json"}, "axes": {"cluster.nodes": [1, 2, 3], "strategy.bucket_cap_bytes": [3000000, 30000000]}})";
  SweepSpec spec = load_sweep(f);
  std::ostringstream whole_text, merged_text;
  std::vector<std::filesystem::path> parts;
  SweepSummary whole = run_sweep(spec, SweepOptions{}, [](const SweepRow&) {});
  for (int i = 0; i < 2; ++i) {
    SweepOptions so;
    so.shard = i;
    so.shards = 2;
    parts.push_back(dir / ("part" + std::to_string(i) + ".csv"));
    std::ofstream out(parts.back(), std::ios::binary);
    out << sweep_csv_header(spec) << "\n";
    run_sweep(spec, so, [&](const SweepRow& r) { out << sweep_csv_row(r) << "\n"; });
  }
  std::ostringstream csv;
  SweepSummary merged = merge_sweep_csv(parts, csv);
  CHECK(whole.objective().objective == Objective::TokensPerS);
  whole.write_text(whole_text);
  merged.write_text(merged_text);
  CHECK(merged_text.str() == whole_text.str());
}

TEST_CASE("a value met again, after others, adds to its own slot, and values keep their first-seen order", "[sweep][objective]") {
  // The summary finds a value's slot by a hash of the value (a scan of every value per point was
  // quadratic in an axis's values); this holds what the scan gave.
  SweepSummary s({"workload.seq_len", "cluster.nodes"}, 5);
  const std::vector<std::pair<std::string, std::string>> order = {{"2048", "1"}, {"1024", "1"}, {"4096", "1"},
                                                                  {"1024", "2"}, {"2048", "2"}, {"1024", "1"}};
  for (std::size_t i = 0; i < order.size(); ++i)
    s.add(point(i, {order[i].first, order[i].second}, 100.0 + static_cast<double>(i), 8192, 30, 40), "ok");
  s.add(point(6, {"8192", "3"}, 1.0, 8192, 30, 40), "error");  // not ok: not counted, and no slot
  const auto fx = s.effects(Objective::StepTime);
  const auto seq = std::find_if(fx.begin(), fx.end(), [](const AxisEffect& e) { return e.path == "workload.seq_len"; });
  REQUIRE(seq != fx.end());
  REQUIRE(seq->by_value.size() == 3);
  CHECK(seq->by_value[0].first == "2048");
  CHECK(seq->by_value[1].first == "1024");
  CHECK(seq->by_value[2].first == "4096");
  CHECK(seq->by_value[0].second.count == 2);
  CHECK(seq->by_value[1].second.count == 3);
  CHECK(seq->by_value[2].second.count == 1);
  CHECK(seq->by_value[1].second.sum_step_ns == Approx((101.0 + 103.0 + 105.0) * 1e6));
  const auto nodes = std::find_if(fx.begin(), fx.end(), [](const AxisEffect& e) { return e.path == "cluster.nodes"; });
  REQUIRE(nodes != fx.end());
  REQUIRE(nodes->by_value.size() == 2);
  CHECK(nodes->by_value[0].second.count == 4);
  CHECK(nodes->by_value[1].second.count == 2);
}
