// stepsim validate: the suite format, the error arithmetic, summaries, pairs, and the gates.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/error.hpp"
#include "test_support.hpp"
#include "tools/commands.hpp"
#include "sim/hardware/profile.hpp"
#include "validate/validate.hpp"

using namespace stepsim;
using stepsim::test::run_capture;

namespace {
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kBin = STEPSIM_BINARY;

// Seed case C1 (DDP buckets on the ideal profile): its step is exactly 56 ms.
nlohmann::json c1_experiment() {
  return nlohmann::json::parse(R"({"include": ")" + kSrc + R"(/configs/examples/seed/c1-ddp-buckets.json"})");
}

nlohmann::json published_case(const std::string& name, nlohmann::json published) {
  return {{"name", name},
          {"experiment", c1_experiment()},
          {"measured", {{"published", std::move(published)}}},
          {"provenance", {{"repository", "example/repo"}, {"commit", "abc123"}, {"path", "README.md"}, {"row", "1"}}}};
}

// A suite directory with suite.json holding `cases` (and `pairs`); returns the suite path.
std::string write_suite(const std::string& dir_name, const std::vector<nlohmann::json>& cases, const nlohmann::json& pairs = nlohmann::json::array(),
                        const nlohmann::json& tolerance = {{"step_time", 10}}) {
  static const stepsim::test::TempDir root("validate");  // this process's; removed at exit
  auto dir = root / dir_name;
  std::filesystem::create_directories(dir);
  nlohmann::json suite{{"schema", "stepsim.validation/1"}, {"tolerance_pct", tolerance}, {"cases", nlohmann::json(cases)},
                       {"pairs", pairs}};
  std::ofstream(dir / "suite.json") << suite.dump(1);
  return (dir / "suite.json").string();
}

int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// The gate's findings on report `r` against `base` with the value at `at` replaced by `value`.
std::vector<validate::BaselineFinding> findings_against(const validate::Report& r, nlohmann::json base,
                                                        const nlohmann::json::json_pointer& at, const nlohmann::json& value) {
  base[at] = value;
  validate::Report again = r;
  again.baseline.clear();
  validate::check_baseline(again, base, "base.json", 1.0);
  return again.baseline;
}

// The baseline's value at `at` replaced by `worse` is one regression; by `better`, one stale
// baseline (a finding, not a regression).
void check_gated_both_ways(const validate::Report& r, const nlohmann::json& base, const nlohmann::json::json_pointer& at,
                           const nlohmann::json& worse, const nlohmann::json& better) {
  INFO(at.to_string());
  const auto regression = findings_against(r, base, at, worse);
  REQUIRE(regression.size() == 1);
  CHECK(regression[0].regression);
  const auto stale = findings_against(r, base, at, better);
  REQUIRE(stale.size() == 1);
  CHECK_FALSE(stale[0].regression);
}
}  // namespace

TEST_CASE("validate: a published step time is compared with the prediction as 100 * (predicted - measured) / measured",
          "[validate]") {
  // C1 predicts 56 ms; measured 50 ms -> +12 %, 70 ms -> -20 %.
  auto suite_file = write_suite("error", {published_case("fast", {{"step_time_s", 0.050}}),
                                          published_case("slow", {{"step_time_s", 0.070}})},
                                nlohmann::json::array({{{"name", "fast -> slow"}, {"first", "fast"}, {"second", "slow"}, {"knob", "none"}}}),
                                {{"step_time", 15}});
  validate::Report r = validate::run_suite(validate::load_suite(suite_file));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[0].predicted == Approx(56e6));
  CHECK(r.rows[0].error == Approx(12.0));
  CHECK(r.rows[0].pass);
  CHECK(r.rows[1].error == Approx(-20.0));
  CHECK_FALSE(r.rows[1].pass);  // |-20| > 15
  // Summary over {+12, -20}: median |error| 16, nearest-rank p90 = 20, bias -4.
  const validate::Summary& all = r.summaries.back();
  CHECK(all.source == "all");
  CHECK(all.median_abs == Approx(16.0));
  CHECK(all.p90_abs == Approx(20.0));
  CHECK(all.bias == Approx(-4.0));
  // Pair: predicted change 0 %, measured +40 %: the predicted direction is not the measured one.
  REQUIRE(r.pairs.size() == 1);
  CHECK(r.pairs[0].measured_change_pct == Approx(40.0));
  CHECK(r.pairs[0].predicted_change_pct == Approx(0.0));
  REQUIRE(r.pairs[0].sign_right.has_value());
  CHECK_FALSE(*r.pairs[0].sign_right);
  CHECK_FALSE(r.pass());
  // The HTML report draws one scatter per compared metric with a point per comparison.
  std::string html = validate::report_to_html(r);
  CHECK_THAT(html, Catch::Contains("<svg class=\"scatter\" data-metric=\"step_time\""));
  std::size_t points = 0;
  for (auto at = html.find("class=\"point\""); at != std::string::npos; at = html.find("class=\"point\"", at + 1)) ++points;
  CHECK(points == 2);
  CHECK_THAT(html, !Catch::Contains("data-metric=\"forward\""));
}

TEST_CASE("validate: tokens/s become a step time through the experiment's tokens per step, which must match the "
          "published batch", "[validate]") {
  // C1 is a toy workload: micro_batch 1, seq_len 1 -> 1 token per GPU per step, 8 GPUs.
  auto ok = write_suite("tokens", {published_case("tps", {{"tokens_per_s", 100.0}, {"global_batch_tokens", 8}})});
  validate::Report r = validate::run_suite(validate::load_suite(ok));
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].measured == Approx(8.0 / 100.0 * 1e9));  // 80 ms
  auto per_gpu = write_suite("wps", {published_case("wps", {{"tokens_per_s_per_gpu", {10.0, 30.0}}})});
  r = validate::run_suite(validate::load_suite(per_gpu));
  CHECK(r.rows[0].measured == Approx(1.0 / 20.0 * 1e9));  // midpoint of the published range
  auto bad = write_suite("tokens-bad", {published_case("tps", {{"tokens_per_s", 100.0}, {"global_batch_tokens", 16}})});
  CHECK_THROWS_WITH(validate::run_suite(validate::load_suite(bad)),
                    Catch::Contains("/cases/0/measured/published/global_batch_tokens") &&
                        Catch::Contains("does not describe the published run"));
}

TEST_CASE("validate reports each case's predicted and measured tokens/s, outside the gated metrics", "[validate][objective]") {
  // C1: 8 tokens per step (toy: 1 token per GPU, 8 GPUs), predicted 56 ms -> 8 / 0.056 =
  // 142.857 tokens/s; published 100 tokens/s (an 80 ms step). A toy workload has no MFU.
  auto file = write_suite("throughput", {published_case("tps", {{"tokens_per_s", 100.0}, {"global_batch_tokens", 8}})});
  validate::Report r = validate::run_suite(validate::load_suite(file));
  REQUIRE(r.cases.size() == 1);
  const validate::CaseThroughput& t = r.cases[0].throughput;
  CHECK(t.tokens_per_step == 8);
  CHECK(t.predicted_tokens_per_s == Approx(8 / 0.056));
  REQUIRE(t.measured_tokens_per_s);
  CHECK(*t.measured_tokens_per_s == Approx(100.0));
  CHECK(t.predicted_mfu_pct == 0);
  CHECK_FALSE(t.measured_mfu_pct);
  REQUIRE(r.rows.size() == 1);  // still only step_time is compared and gated
  nlohmann::json j = validate::report_to_json(r);
  CHECK(j["cases"][0]["throughput"]["predicted_tokens_per_s"].get<double>() == Approx(8 / 0.056));
  CHECK(j["cases"][0]["throughput"]["measured_tokens_per_s"].get<double>() == Approx(100.0));
  CHECK_FALSE(j["cases"][0]["throughput"].contains("predicted_mfu_pct"));
  CHECK(j["summaries"] == validate::baseline_json(r)["summaries"]);
  CHECK_THAT(validate::report_to_html(r), Catch::Contains("<h2>Throughput</h2>") && Catch::Contains("<td>tps</td><td>8</td><td>143</td><td>100</td>"));
}

TEST_CASE("validate CLI: a case off by 50 % exits 3; a better baseline exits 3; the current baseline passes", "[validate]") {
  std::string out;
  auto good = write_suite("cli-good", {published_case("c1", {{"step_time_s", 0.056}})});
  REQUIRE(run_capture(kBin + " validate " + good, out) == 0);
  CHECK_THAT(out, Catch::Contains("c1") && Catch::Contains("+0.0 %"));
  // Measured 50 % off: 84 ms -> -33 %, outside the 10 % tolerance.
  auto off = write_suite("cli-off", {published_case("c1", {{"step_time_s", 0.084}})});
  CHECK(run_capture(kBin + " validate " + off, out) == 3);
  CHECK_THAT(out, Catch::Contains("FAIL"));
  // A baseline written from this run passes; a baseline claiming 0.5 % median error where the
  // suite has 33 % fails as a regression.
  auto dir = std::filesystem::path(off).parent_path();
  auto tolerant = write_suite("cli-tolerant", {published_case("c1", {{"step_time_s", 0.084}})}, nlohmann::json::array(),
                              {{"step_time", 50}});
  REQUIRE(run_capture(kBin + " validate " + tolerant + " --write-baseline " + (dir / "base.json").string(), out) == 0);
  CHECK(run_capture(kBin + " validate " + tolerant + " --baseline " + (dir / "base.json").string(), out) == 0);
  CHECK_THAT(out, Catch::Contains("within 1 point of the baseline"));
  nlohmann::json base = nlohmann::json::parse(std::ifstream(dir / "base.json"));
  for (auto& s : base["summaries"]) s["median_abs"] = 0.5;
  std::ofstream(dir / "better.json") << base.dump();
  CHECK(run_capture(kBin + " validate " + tolerant + " --baseline " + (dir / "better.json").string(), out) == 3);
  CHECK_THAT(out, Catch::Contains("REGRESSION"));
  // And a baseline worse than today is stale: the improvement must be committed with it.
  for (auto& s : base["summaries"]) s["median_abs"] = 60.0;
  std::ofstream(dir / "worse.json") << base.dump();
  CHECK(run_capture(kBin + " validate " + tolerant + " --baseline " + (dir / "worse.json").string(), out) == 3);
  CHECK_THAT(out, Catch::Contains("STALE"));
  // --json gives the same numbers.
  REQUIRE(run_capture(kBin + " validate " + tolerant + " --json 2>/dev/null", out) == 0);
  nlohmann::json j = nlohmann::json::parse(out);
  CHECK(j["rows"][0]["error"].get<double>() == Approx(100.0 * (56.0 - 84.0) / 84.0));
  CHECK(j["summaries"].back()["source"] == "all");
}

// Catches: a prediction over its GPUs' memory passing unnoticed (every case ran, so it fit),
// the allocator's cache flushes counted as a contradiction, or the baseline not holding the counts.
TEST_CASE("validate counts the cases predicted over their GPUs' memory, and the baseline holds the counts", "[validate]") {
  // C1 peaks at 85.8 MiB allocated and 110 MiB reserved: within 80 GiB; at 0.1 GiB (102.4 MiB)
  // the allocated bytes fit but a cudaMalloc fails even after a flush (every segment holds a
  // live block); over 0.05 GiB (51.2 MiB) on allocated bytes too.
  auto with_capacity = [](const std::string& name, double gib) {
    nlohmann::json c = published_case(name, {{"step_time_s", 0.056}});
    c["experiment"] = nlohmann::json::parse(std::ifstream(kSrc + "/configs/examples/seed/c1-ddp-buckets.json"));
    c["experiment"]["cluster"]["profile"]["include"] = kSrc + "/configs/hardware/toy-ideal.json";
    c["experiment"]["cluster"]["profile"]["memory_capacity_GiB"] = gib;
    return c;
  };
  // MPT-30B at sequence 2048 on 8 A100 80GB (llm-foundry's table, a suite case): the steady step
  // reserves up to the capacity by flushing the cache once.
  nlohmann::json flushes = published_case("flushes", {{"step_time_s", 163.7}});
  const auto a100 = nlohmann::json::parse(std::ifstream(kSrc + "/validation/cases/llm-foundry-a100.json"));
  for (const auto& c : a100["cases"])
    if (c["name"] == "llmf-a100-80gb-r008-mpt-30b-s2048-g8-mb3-ga21-ac") flushes["experiment"] = c["experiment"];
  REQUIRE(flushes["experiment"]["workload"]["preset"] == "mpt-30b");
  flushes["experiment"]["cluster"]["profile"] = kSrc + "/configs/hardware/a100-sxm-8x.json";
  auto suite = write_suite("capacity", {with_capacity("fits", 80), with_capacity("at risk", 0.1),
                                        with_capacity("over", 0.05), flushes});
  validate::Report r = validate::run_suite(validate::load_suite(suite));
  REQUIRE_FALSE(r.capacity.empty());
  const validate::CapacityCheck& all = r.capacity.back();
  CHECK(all.source == "all");
  CHECK(all.cases == 4);
  CHECK(all.allocated_over == 1);
  CHECK(all.at_risk == 1);
  CHECK(all.flushes == 1);
  CHECK(r.cases[1].memory.alloc_ooms > 0);
  CHECK(r.cases[3].memory.alloc_retries > 0);
  CHECK(r.cases[3].memory.alloc_ooms == 0);
  CHECK(r.cases[3].memory.reserved_of_capacity <= 1.0);
  CHECK(r.cases[2].memory.allocated_of_capacity == Approx(85.8 / 51.2).epsilon(0.01));
  CHECK_THAT(validate::report_to_text(r), Catch::Contains("allocated over") && Catch::Contains("cache flushes") &&
                                              Catch::Contains("at risk"));
  // The baseline holds both counts exactly: one fewer case over is stale, one more a regression.
  nlohmann::json base = validate::baseline_json(r);
  validate::check_baseline(r, base, "base.json", 1.0);
  CHECK(r.baseline.empty());
  const auto over = nlohmann::json::json_pointer("/capacity/" + std::to_string(base["capacity"].size() - 1) + "/allocated_over");
  check_gated_both_ways(r, base, over, 0, 2);
  base["capacity"].back()["flushes"] = "one";
  CHECK_THROWS_AS(validate::check_baseline(r, base, "base.json", 1.0), InputError);
}

TEST_CASE("validate CLI: malformed suites exit 2 with one line naming the file and JSON path", "[validate]") {
  std::string out;
  auto c = published_case("c1", {{"step_time_s", -1.0}});
  auto negative = write_suite("bad-negative", {c});
  CHECK(run_capture(kBin + " validate " + negative, out) == 2);
  CHECK(line_count(out) == 1);
  CHECK_THAT(out, Catch::Contains("suite.json") && Catch::Contains("/cases/0/measured/published/step_time_s"));

  auto unknown = published_case("c1", {{"step_time_s", 0.05}});
  unknown["tolerance"] = 5;  // the key is tolerance_pct
  CHECK(run_capture(kBin + " validate " + write_suite("bad-key", {unknown}), out) == 2);
  CHECK(line_count(out) == 1);
  CHECK_THAT(out, Catch::Contains("/cases/0/tolerance"));

  auto no_file = published_case("c1", {{"step_time_s", 0.05}});
  no_file["measured"] = {{"trace", {{"file", "no/such/trace.json.gz"}, {"steps", "1-2"}}}};
  CHECK(run_capture(kBin + " validate " + write_suite("bad-trace", {no_file}), out) == 2);
  CHECK_THAT(out, Catch::Contains("/cases/0/measured/trace/file") && Catch::Contains("not found"));

  auto bad_experiment = published_case("c1", {{"step_time_s", 0.05}});
  bad_experiment["experiment"] = {{"include", kSrc + "/configs/examples/seed/c1-ddp-buckets.json"},
                                  {"training", {{"grad_accum", 0}}}};
  CHECK(run_capture(kBin + " validate " + write_suite("bad-experiment", {bad_experiment}), out) == 2);
  CHECK(line_count(out) == 1);
  CHECK_THAT(out, Catch::Contains("/cases/0/experiment/training/grad_accum"));

  auto dup = published_case("c1", {{"step_time_s", 0.05}});
  CHECK(run_capture(kBin + " validate " + write_suite("bad-dup", {dup, dup}), out) == 2);
  CHECK_THAT(out, Catch::Contains("/cases/1/name"));

  nlohmann::json bad_pair = nlohmann::json::array({{{"first", "c1"}, {"second", "nope"}, {"name", "p"}, {"knob", "k"}}});
  CHECK(run_capture(kBin + " validate " + write_suite("bad-pair", {dup}, bad_pair), out) == 2);
  CHECK_THAT(out, Catch::Contains("/pairs/0/second") && Catch::Contains("nope"));
}

// The li-plus ZeRO-1 trace (ProfilerSteps 11-12) against the shipped example, one metric compared.
static validate::Report li_plus_zero1_on(const std::string& metric, double tolerance) {
  const std::string trace = std::string(STEPSIM_TEST_DATA) +
                            "/traces/li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz";
  nlohmann::json c = {{"name", "li-plus-zero1"},
                      {"experiment", {{"include", kSrc + "/configs/examples/opt-1.3b-zero1-8xa800.json"}}},
                      {"measured", {{"trace", {{"file", trace}, {"steps", "11-12"}}}}},
                      {"metrics", {metric}},
                      {"provenance", {{"repository", "li-plus/playground"}, {"commit", "3c40949f"}, {"path", "zero1"}, {"row", ""}}}};
  return validate::run_suite(validate::load_suite(write_suite(metric, {c}, nlohmann::json::array(), {{metric, tolerance}})));
}

TEST_CASE("validate says how much of a trace's reserved peak its own steps reserve", "[validate][memory]") {
  // The li-plus ZeRO-1 trace's reserved counter reads 20.44 GiB from the window's first event.
  // Its own 4,838 allocations, replayed through the allocator model with each block freed at its
  // free event, reserve 17.76 GiB (the all-reduce buckets' recordStream holds are not in the
  // events); the case says so next to its rows.
  validate::Report r = li_plus_zero1_on("peak_reserved", 30);
  REQUIRE(r.cases.size() == 1);
  REQUIRE(r.cases[0].conversions.size() == 1);
  const std::string& note = r.cases[0].conversions[0];
  CHECK_THAT(note, Catch::Contains("the trace reports 20.44 GiB (20.44 GiB at the window's first event)"));
  CHECK_THAT(note, Catch::Contains("its own 4838 allocations"));
  CHECK_THAT(note, Catch::Contains("reserve 17.76 GiB"));
}

TEST_CASE("validate compares the kernels per step of a trace with the prediction's", "[validate]") {
  // Issue 13's "kernels per step within 10 % of the trace": the trace side is analyze's class
  // breakdown (compute kernels, mean over the steps), the predicted side simulate's.
  validate::Report r = li_plus_zero1_on("kernels", 10);
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].metric == validate::Metric::Kernels);
  CHECK(r.rows[0].measured == Approx(1824));  // steps 11 and 12: 1,824 compute kernels each
  CHECK(std::fabs(r.rows[0].error) < 10);
  CHECK(r.rows[0].pass);
}

// Catches: --by putting a case in another value's group, ordering numbers as text ("10" before
// "2"), dropping the "all" line, or an unknown facet running the whole suite before it fails.
TEST_CASE("validate --by summarises the errors per value of a facet of the cases' experiments", "[validate]") {
  auto accumulating = [](const std::string& name, int grad_accum, double step_s) {
    nlohmann::json c = published_case(name, {{"step_time_s", step_s}});
    c["experiment"] = {{"include", kSrc + "/configs/examples/seed/c1-ddp-buckets.json"}, {"training", {{"grad_accum", grad_accum}}}};
    return c;
  };
  // C1 predicts 56 ms with one micro-batch: measured 50 and 70 ms give +12 and -20 %.
  auto suite_file = write_suite("by", {accumulating("ga10", 10, 0.5), published_case("fast", {{"step_time_s", 0.050}}),
                                       accumulating("ga2", 2, 0.1), published_case("slow", {{"step_time_s", 0.070}})},
                                nlohmann::json::array(), {{"step_time", 100}});
  validate::Report r = validate::run_suite(validate::load_suite(suite_file));
  REQUIRE(r.cases.size() == 4);
  CHECK(r.cases[1].facets.at("grad_accum") == "1");
  CHECK(r.cases[0].facets.at("grad_accum") == "10");
  CHECK(r.cases[0].facets.at("gpus") == "8");
  CHECK(r.cases[0].facets.at("framework") == "ddp");
  CHECK(r.cases[0].facets.at("model") == "toy");
  CHECK(r.cases[0].facets.at("attention") == "toy");
  CHECK(r.cases[0].facets.at("compile") == "off");
  auto error_of = [&](const std::string& name) {
    for (const auto& row : r.rows)
      if (row.case_name == name) return row.error;
    FAIL("no row for " << name);
    return 0.0;
  };
  const auto groups = validate::group_summaries(r, {"grad_accum"}, validate::Metric::StepTime);
  // One source (the suite's) and "all" per value, the values 1, 2, 10 in numeric order.
  REQUIRE(groups.size() == 6);
  CHECK(groups[0].value == "1");
  CHECK(groups[2].value == "2");
  CHECK(groups[4].value == "10");
  CHECK(groups[1].summary.source == "all");
  CHECK(groups[1].summary.cases == 2);
  CHECK(groups[1].summary.median_abs == Approx(16.0));  // {+12, -20}
  CHECK(groups[1].summary.p90_abs == Approx(20.0));
  CHECK(groups[1].summary.bias == Approx(-4.0));
  CHECK(groups[3].summary.cases == 1);
  CHECK(groups[3].summary.bias == Approx(error_of("ga2")));
  CHECK(groups[5].summary.bias == Approx(error_of("ga10")));
  CHECK(error_of("ga2") != Approx(error_of("ga10")));
  r.groups = groups;
  CHECK_THAT(validate::report_to_html(r), Catch::Contains("<h2>step_time by grad_accum</h2>"));
  CHECK_THAT(validate::report_to_text(r), Catch::Contains("step_time by grad_accum"));

  std::string out;
  REQUIRE(run_capture(kBin + " validate " + suite_file + " --by grad_accum,framework", out) == 0);
  CHECK_THAT(out, Catch::Contains("step_time by grad_accum") && Catch::Contains("step_time by framework"));
  REQUIRE(run_capture(kBin + " validate " + suite_file + " --by gpus --json 2>/dev/null", out) == 0);
  nlohmann::json j = nlohmann::json::parse(out);
  REQUIRE(j["groups"].size() == 2);  // one value (8), the source and "all"
  CHECK(j["groups"][1]["cases"] == 4);
  CHECK(j["cases"][0]["facets"]["grad_accum"] == "10");
  CHECK(run_capture(kBin + " validate " + suite_file + " --by gpu", out) == 2);
  CHECK(line_count(out) == 1);
  CHECK_THAT(out, Catch::Contains("--by: \"gpu\"") && Catch::Contains("gpus"));
  CHECK(run_capture(kBin + " validate " + suite_file + " --by gpus --by-metric steps", out) == 2);
  CHECK_THAT(out, Catch::Contains("--by-metric: \"steps\""));
  CHECK(run_capture(kBin + " validate " + suite_file + " --by-metric forward", out) == 2);  // not ignored
  CHECK_THAT(out, Catch::Contains("--by-metric") && Catch::Contains("--by FACET"));
}

// Catches: a split chosen by hand (or moved after seeing errors), a source declaring the split on
// only some cases, and fit rows mixed into the test summaries the accuracy claims are made on.
TEST_CASE("validate: the calibration split is the rule's (a third of each source by name hash), and fit and test rows "
          "are summarised apart", "[validate][split]") {
  // The rule: rank by FNV-1a 64 of the name, rank % 3 == 2 is fit: 2 fit of 6, 0 of 2.
  std::vector<std::string> names{"a", "b", "c", "d", "e", "f"};
  auto rule = validate::split_by_rule(names);
  CHECK(std::count(rule.begin(), rule.end(), validate::Split::Fit) == 2);
  CHECK(std::count(rule.begin(), rule.end(), validate::Split::Fit) ==
        static_cast<long>(names.size() / 3));
  auto two = validate::split_by_rule({"a", "b"});
  CHECK(std::count(two.begin(), two.end(), validate::Split::Fit) == 0);
  // The same names in another order get the same splits (a stable hash, not a position).
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  auto rule_rev = validate::split_by_rule(reversed);
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(rule_rev[names.size() - 1 - i] == rule[i]);

  // A suite declaring the rule's splits: fit and test summaries apart, test first.
  std::vector<nlohmann::json> cases;
  for (std::size_t i = 0; i < names.size(); ++i) {
    // C1 predicts 56 ms: the fit cases measured 40 ms (+40 %), the test ones 56 ms (0 %).
    auto c = published_case(names[i], {{"step_time_s", rule[i] == validate::Split::Fit ? 0.040 : 0.056}});
    c["split"] = rule[i] == validate::Split::Fit ? "fit" : "test";
    cases.push_back(c);
  }
  auto file = write_suite("split", cases, nlohmann::json::array(), {{"step_time", 50}});
  validate::Report r = validate::run_suite(validate::load_suite(file));
  const validate::Summary* test_all = nullptr;
  const validate::Summary* fit_all = nullptr;
  for (const auto& s : r.summaries)
    if (s.source == "all") (s.split == validate::Split::Test ? test_all : fit_all) = &s;
  REQUIRE(test_all);
  REQUIRE(fit_all);
  CHECK(test_all->cases == 4);
  CHECK(test_all->median_abs == Approx(0.0));
  CHECK(fit_all->cases == 2);
  CHECK(fit_all->median_abs == Approx(40.0));
  CHECK(r.summaries.front().split == validate::Split::Test);
  nlohmann::json base = validate::baseline_json(r);
  CHECK(base["summaries"][0]["split"] == "test");

  // A moved split is refused, naming the case's path and the rule's answer.
  auto moved = cases;
  std::size_t first_fit = static_cast<std::size_t>(std::find(rule.begin(), rule.end(), validate::Split::Fit) - rule.begin());
  moved[first_fit]["split"] = "test";
  CHECK_THROWS_WITH(validate::load_suite(write_suite("split-moved", moved)),
                    Catch::Contains("/cases/" + std::to_string(first_fit) + "/split") && Catch::Contains("expected \"fit\""));
  // So is a source that declares the split on some cases only.
  auto partial = cases;
  partial[0].erase("split");
  CHECK_THROWS_WITH(validate::load_suite(write_suite("split-partial", partial)),
                    Catch::Contains("/cases/0/split: missing"));
  auto bad = cases;
  bad[0]["split"] = "train";
  CHECK_THROWS_WITH(validate::load_suite(write_suite("split-bad", bad)), Catch::Contains("\"fit\" or \"test\""));
}

// Catches: fit --suite reading test rows, or a bisection that does not land where the fit rows'
// median error is zero.
TEST_CASE("fit --suite fits a profile's power-limited clock on the fit split's step times alone", "[validate][split][clock]") {
  const std::string profile = kSrc + "/configs/hardware/h100-sxm-8x.json";
  auto mpt_case = [&](const std::string& name, double step_s) {
    nlohmann::json c{{"name", name},
                     {"experiment",
                      {{"workload", {{"preset", "mpt-125m"}, {"seq_len", 2048}, {"micro_batch", 8}, {"dtype", "bf16"}}},
                       {"cluster", {{"profile", profile}, {"nodes", 1}, {"gpus_per_node", 8}}},
                       {"strategy", {{"framework", "fsdp1"}}},
                       {"training", {{"optimizer", "adamw"}}}}},
                     {"measured", {{"published", {{"step_time_s", step_s}}}}},
                     {"provenance", {{"repository", "example/repo"}, {"commit", "abc123"}, {"path", "README.md"}}}};
    return c;
  };
  // The prediction with the shipped clock (1,510 MHz at full load, 700 W).
  validate::Report once = validate::run_suite(validate::load_suite(write_suite("clock-once", {mpt_case("a", 1.0)})));
  const double predicted_s = once.rows.at(0).predicted / 1e9;
  // Three cases "a", "b", "c": the rule makes one of them fit. It measures 5 % slower than the
  // prediction; the test cases measure half the prediction, which must not move the fit.
  std::vector<std::string> names{"a", "b", "c"};
  auto rule = validate::split_by_rule(names);
  std::vector<nlohmann::json> cases;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool fit = rule[i] == validate::Split::Fit;
    auto c = mpt_case(names[i], fit ? predicted_s * 1.05 : predicted_s * 0.5);
    c["split"] = fit ? "fit" : "test";
    cases.push_back(c);
  }
  const validate::Suite suite = validate::load_suite(write_suite("clock-fit", cases, nlohmann::json::array(), {{"step_time", 100}}));
  const HardwareProfile h100 = load_profile(profile);
  const validate::ClockFit f = validate::fit_clock(suite, h100.name, h100.compute.clock);
  CHECK(f.rows == 1);
  CHECK(f.median_error_before == Approx(100.0 * (1 / 1.05 - 1)).margin(0.05));
  CHECK(f.full_load_mhz < h100.compute.clock.full_load_mhz);  // a slower step: a lower clock
  CHECK(std::fabs(f.median_error_after) < 0.3);
  CHECK(f.note.empty());
  // No fit row on a profile: an error, not a silent boost clock.
  CHECK_THROWS_WITH(validate::fit_clock(suite, "a100-sxm-8x", h100.compute.clock), Catch::Contains("no fit-split case"));
  // The CLI: a base without compute.clock, or --suite with other measurements, exits 2.
  std::string out;
  const std::string suite_file = std::filesystem::path(suite.file).string();
  CHECK(run_capture(kBin + " fit --suite " + suite_file + " --base " + kSrc + "/configs/hardware/a100-sxm-8x.json 2>&1", out) == 2);
  CHECK_THAT(out, Catch::Contains("/compute/clock: missing"));
  CHECK(run_capture(kBin + " fit --suite " + suite_file + " --trace x.json --base " + profile + " 2>&1", out) == 2);
  CHECK_THAT(out, Catch::Contains("--suite fits the power-limited clock alone"));
}

namespace {

// The band polygons of a validate page's scatter plots, as (x, y) pixel pairs in the plot's frame.
std::vector<std::vector<std::pair<double, double>>> band_polygons(const std::string& html) {
  std::vector<std::vector<std::pair<double, double>>> out;
  const std::regex poly("<polygon class=\"band\"[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), poly); it != std::sregex_iterator(); ++it) {
    std::vector<std::pair<double, double>> pts;
    std::stringstream ss((*it)[1].str());
    for (std::string xy; ss >> xy;) {
      const auto comma = xy.find(',');
      pts.push_back({std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1))});
    }
    out.push_back(std::move(pts));
  }
  return out;
}

// Whether (x, y) is inside the convex polygon (either orientation), on its edge included.
bool inside_convex(const std::vector<std::pair<double, double>>& p, double x, double y) {
  int sign = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto& [ax, ay] = p[i];
    const auto& [bx, by] = p[(i + 1) % p.size()];
    const double cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax);
    if (std::abs(cross) < 1e-6) continue;
    const int s = cross > 0 ? 1 : -1;
    if (sign != 0 && s != sign) return false;
    sign = s;
  }
  return true;
}

}  // namespace

TEST_CASE("The validate page's +-10 % band is the frame clipped to 0.9 x <= y <= 1.1 x, on narrow, wide, linear and log axes (issue 48 item 9)",
          "[validate][html]") {
  // The newcomer's plots: a narrow range (forward 92.5 vs 95.1 ms, where the old band ran
  // anti-diagonal), a range over 10 s (axis in s: scale 1e-3), and a log axis (hi / lo > 20).
  struct Plot {
    validate::Metric metric;
    std::vector<std::pair<double, double>> points;  // (predicted, measured), ns
    bool corners_outside;  // the range spans more than 10 %: the frame's off-diagonal corners are out
  };
  const std::vector<Plot> plots = {
      {validate::Metric::Forward, {{92.5e6, 95.1e6}, {93.0e6, 93.5e6}, {96.0e6, 94.0e6}}, false},
      {validate::Metric::StepTime, {{12.0e9, 13.0e9}, {15.0e9, 14.0e9}, {11.0e9, 11.5e9}}, true},
      {validate::Metric::Compute, {{1.0e6, 1.05e6}, {95.0e6, 90.0e6}, {40.0e6, 41.0e6}}, true},
  };
  for (const auto& plot : plots) {
    validate::Report r;
    for (const auto& [pred, meas] : plot.points) {
      validate::Row row;
      row.case_name = "c";
      row.source = "s";
      row.metric = plot.metric;
      row.predicted = pred;
      row.measured = meas;
      r.rows.push_back(row);
    }
    const std::string html = validate::report_to_html(r);
    const auto bands = band_polygons(html);
    REQUIRE(bands.size() == 1);
    const auto& band = bands[0];
    INFO(validate::to_string(plot.metric) << ": " << html.substr(html.find("<polygon"), 300));
    REQUIRE(band.size() >= 3);
    // Inside the frame: the plot's group is translated to the frame's corner, side 294 px.
    for (const auto& [x, y] : band) {
      CHECK(x >= -1e-6);
      CHECK(x <= 294 + 1e-6);
      CHECK(y >= -1e-6);
      CHECK(y <= 294 + 1e-6);
    }
    // Along the diagonal (where y = x is drawn, from bottom-left to top-right) and across it.
    CHECK(inside_convex(band, 147, 147));
    CHECK(inside_convex(band, 10, 284));
    CHECK(inside_convex(band, 284, 10));
    CHECK(inside_convex(band, 284, 284) == !plot.corners_outside);  // bottom-right: predicted far below measured
    CHECK(inside_convex(band, 10, 10) == !plot.corners_outside);    // top-left: predicted far above measured
    // Every point within 10 % is drawn inside the band: the circles' centres.
    const std::regex circle("<circle class=\"point\" cx=\"([0-9.-]+)\" cy=\"([0-9.-]+)\"");
    int points = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), circle); it != std::sregex_iterator(); ++it, ++points)
      CHECK(inside_convex(band, std::stod((*it)[1]), std::stod((*it)[2])));
    CHECK(points == 3);
  }
  // The band in axis units: a square entirely within 10 % is the whole square.
  CHECK(validate::band_polygon(100, 105).size() == 4);
}

TEST_CASE("validate: GPU-count pairs give the per-doubling growth of real and predicted steps, and the baseline gates it",
          "[validate][scale]") {
  // Cases a (8 GPUs), b (32 GPUs, the same run otherwise), c (8 GPUs, another model).
  validate::Report r;
  auto info = [](const std::string& name, const std::string& gpus, const std::string& model) {
    validate::CaseInfo c;
    c.name = name;
    for (const auto& f : validate::facet_names()) c.facets[f] = "x";
    c.facets["gpus"] = gpus;
    c.facets["nodes"] = std::to_string(std::stoi(gpus) / 8);
    c.facets["model"] = model;
    return c;
  };
  r.cases = {info("a", "8", "m"), info("b", "32", "m"), info("c", "8", "n"), info("d", "64", "m")};
  auto pair = [](const std::string& first, const std::string& second, double predicted, double measured) {
    validate::PairRow p;
    p.name = first + " -> " + second;
    p.first = first;
    p.second = second;
    p.predicted_change_pct = predicted;
    p.measured_change_pct = measured;
    return p;
  };
  // a -> b: two doublings, +4.04 % measured = +2 % per doubling; +0 % predicted. a -> c changes
  // the model, not the GPU count: left out. b -> d: one doubling, +3 % measured, +1 % predicted.
  r.pairs = {pair("a", "b", 0.0, 4.04), pair("a", "c", 5.0, 50.0), pair("b", "d", 1.0, 3.0)};
  const auto f = validate::gpu_pair_fidelity(r);
  REQUIRE(f);
  CHECK(f->pairs == 2);
  CHECK(f->min_gpus == 8);
  CHECK(f->max_gpus == 64);
  CHECK(f->measured_pct == Approx(2.5));   // median of 2 and 3
  CHECK(f->predicted_pct == Approx(0.5));  // of 0 and 1
  CHECK(f->gap_points == Approx(2.0));     // of 2 and 2
  CHECK_THAT(validate::report_to_text(r), Catch::Contains("the 2 GPU-count pairs (8-64 GPUs), per doubling of the GPUs: "
                                                          "measured median +2.50 %, predicted +0.50 %"));
  // The baseline holds them; a move past kScaleSlackPoints is a finding (the gap grown: a regression).
  nlohmann::json base = validate::baseline_json(r);
  CHECK(base["scale"]["gpu_pairs"] == 2);
  CHECK(base["scale"]["gap_points_per_doubling"] == 2.0);
  validate::check_baseline(r, base, "base.json", 1.0);
  CHECK(r.baseline.empty());
  const auto gap = nlohmann::json::json_pointer("/scale/gap_points_per_doubling");
  CHECK(findings_against(r, base, gap, 2.0 + validate::kScaleSlackPoints).empty());
  check_gated_both_ways(r, base, gap, 1.5, 2.5);  // the gap has grown since 1.5; it was 2.5
  base["scale"]["gpu_pairs"] = "two";
  CHECK_THROWS_WITH(validate::check_baseline(r, base, "base.json", 1.0), Catch::Contains("base.json") && Catch::Contains("/scale"));
  // No GPU-count pair: no "scale" in the baseline.
  r.pairs = {pair("a", "c", 5.0, 50.0)};
  CHECK_FALSE(validate::gpu_pair_fidelity(r));
  CHECK_FALSE(validate::baseline_json(r).contains("scale"));
}
