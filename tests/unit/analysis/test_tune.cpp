// tune: knob discovery from the strategy, the search under a memory cap, the config diff.
#include <catch2/catch.hpp>

#include "sim/explore/tune.hpp"
#include "sim/core/error.hpp"

#include <fstream>
#include <map>
#include <sstream>

using namespace stepsim;

namespace {
const std::string kRoot = STEPSIM_SOURCE_DIR;
}

TEST_CASE("memory sizes parse with binary and decimal units", "[tune]") {
  CHECK(parse_memory_size("80GiB").count == 80LL << 30);
  CHECK(parse_memory_size("80 GB").count == 80'000'000'000LL);
  CHECK(parse_memory_size("512MiB").count == 512LL << 20);
  CHECK(parse_memory_size("1000").count == 1000);
  CHECK_THROWS_AS(parse_memory_size("lots"), InputError);
  CHECK_THROWS_AS(parse_memory_size("80 parsecs"), InputError);
}

TEST_CASE("tune finds one-layer buckets for C1 and prints them as a config diff", "[tune]") {
  // DDP's knobs (bucket_cap_bytes, first_bucket_bytes, gradient_as_bucket_view) come from its
  // effective_config. The fastest: 1 MiB caps put each 3 MB layer in its own bucket, so only
  // layer 0's 3 ms all-reduce is exposed: 50 + 3 = 53 ms (baseline 56 ms). 6 x 6 x 2 = 72 points.
  TuneOptions o;
  o.memory_cap = parse_memory_size("80GiB");
  o.jobs = 2;
  TuneResult r = tune_file(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", {}, o);
  CHECK(r.framework == "ddp");
  CHECK(r.method == "grid");
  std::vector<std::string> names;
  for (const auto& k : r.knobs) names.push_back(k.name);
  CHECK(std::find(names.begin(), names.end(), "strategy.bucket_cap_bytes") != names.end());
  CHECK(std::find(names.begin(), names.end(), "strategy.gradient_as_bucket_view") != names.end());
  REQUIRE(r.found);
  CHECK(r.baseline.overlap.step_time.ns == 56'000'000);
  CHECK(r.best.overlap.step_time.ns == 53'000'000);
  // Ties keep the first grid point found, which changes only the cap (the 6 MB first bucket
  // of layers 9 and 8 is hidden anyway).
  REQUIRE(r.diff.size() == 1);
  CHECK(r.diff[0].path == "strategy.bucket_cap_bytes");
  CHECK(r.diff[0].old_value == 6000000);
  CHECK(r.diff[0].new_value == 1024 * 1024);
}

TEST_CASE("tune searches the bucket cap in MiB when the file writes bucket_cap_mb", "[tune]") {
  // Setting both bucket_cap_mb and bucket_cap_bytes is an input error, so a knob on
  // bucket_cap_bytes would make every point of a file that writes bucket_cap_mb invalid. The
  // knob is searched under the key the file writes, the candidates converted to MiB, and C1
  // finds the same 53 ms optimum (1 MiB caps) with no invalid point.
  SourceMap src;
  nlohmann::json doc = load_with_includes(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", src);
  doc["strategy"].erase("bucket_cap_bytes");
  doc["strategy"]["bucket_cap_mb"] = 6000000.0 / (1024 * 1024);
  auto knobs = tune_knobs(doc, src);
  const TuneKnob* cap = nullptr;
  for (const auto& k : knobs)
    if (k.name == "strategy.bucket_cap_mb") cap = &k;
  REQUIRE(cap != nullptr);
  CHECK(std::none_of(knobs.begin(), knobs.end(), [](const TuneKnob& k) { return k.name == "strategy.bucket_cap_bytes"; }));
  REQUIRE(cap->settings.size() == 6);  // the file's 5.72 MiB, then 1, 5, 25, 100, 250
  CHECK(cap->settings[1][0].second.get<double>() == 1.0);
  TuneOptions o;
  o.memory_cap = parse_memory_size("80GiB");
  o.jobs = 2;
  TuneResult r = tune(doc, src, o);
  CHECK(r.invalid == 0);
  REQUIRE(r.found);
  CHECK(r.best.overlap.step_time.ns == 53'000'000);
}

TEST_CASE("tune reports that nothing fits when the memory cap is below every configuration", "[tune]") {
  TuneOptions o;
  o.memory_cap = Bytes{1000};
  o.jobs = 2;
  TuneResult r = tune_file(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", {}, o);
  CHECK_FALSE(r.found);
  CHECK_FALSE(r.baseline_fits);
  CHECK(r.over_cap == r.evaluated - r.invalid);
}

TEST_CASE("tune searches micro-batch against grad accumulation at a fixed global batch, and checkpointing", "[tune]") {
  SourceMap src;
  nlohmann::json doc = load_with_includes(kRoot + "/configs/examples/llama3-8b-ddp-8xh100.json", src);
  apply_override(doc, "workload.micro_batch=2");
  apply_override(doc, "training.grad_accum=2");
  auto knobs = tune_knobs(doc, src);
  const TuneKnob* mb = nullptr;
  for (const auto& k : knobs)
    if (k.name.rfind("micro_batch", 0) == 0) mb = &k;
  REQUIRE(mb != nullptr);
  // Global batch 4 per rank: (2, 2) baseline, then (1, 4) and (4, 1).
  REQUIRE(mb->settings.size() == 3);
  for (const auto& s : mb->settings) CHECK(s[0].second.get<int>() * s[1].second.get<int>() == 4);
  CHECK(std::any_of(knobs.begin(), knobs.end(), [](const TuneKnob& k) { return k.name == "workload.activation_checkpointing"; }));
  // tune tries torchtitan's selective op checkpointing (op_sac) beside Megatron's selective.
  for (const auto& k : knobs)
    if (k.name == "workload.activation_checkpointing")
      CHECK(std::any_of(k.settings.begin(), k.settings.end(), [](const KnobSetting& s) { return s[0].second == "op_sac"; }));
}

TEST_CASE("The noise tune ranks against is the step-time error of the validated sources closest to the run", "[tune]") {
  // H100 + FSDP2: torchtitan's two sources run FSDP2 on H100 profiles (score 3); the noise is
  // the larger of their step-time median |error| in validation/baseline.json.
  std::ifstream in(kRoot + "/validation/baseline.json");
  const nlohmann::json baseline = nlohmann::json::parse(in);
  std::map<std::string, double> err, fit;  // test rows; the calibration split's, which must not count
  for (const auto& s : baseline["summaries"])
    if (s["metric"] == "step_time") (s["split"] == "test" ? err : fit)[s["source"]] = s["median_abs"].get<double>();
  REQUIRE(fit.count("torchtitan-h100-202412"));
  REQUIRE(fit["torchtitan-h100-202412"] > err["torchtitan-h100-202412"]);  // so a fit-split reading would show
  NoiseFloor h = noise_floor("configs/hardware/h100-sxm-8x.json", "fsdp2");
  CHECK(h.closeness == "same GPU class and framework");
  CHECK(h.sources == std::vector<std::string>{"torchtitan-h100-202412", "torchtitan-pr165"});
  CHECK(h.pct == std::max(err["torchtitan-h100-202412"], err["torchtitan-pr165"]));
  // A100 + FSDP1: llm-foundry's A100 tables only (li-plus is Ampere too, but ZeRO).
  NoiseFloor a = noise_floor("configs/hardware/a100-sxm-8x.json", "fsdp1");
  CHECK(a.sources == std::vector<std::string>{"llm-foundry-a100"});
  CHECK(a.pct == err["llm-foundry-a100"]);
  // The toy profile is no GPU: nothing is said.
  CHECK(noise_floor("configs/hardware/toy-ideal.json", "ddp").pct == 0);
}

TEST_CASE("tune says nothing beats the baseline when its best gain is below the noise", "[tune]") {
  TuneResult r;
  r.found = true;
  r.baseline.overlap.step_time = Time::from_ms(1000);
  r.best.overlap.step_time = Time::from_ms(999);  // 0.1 % faster
  r.diff.push_back(TuneDiff{"/strategy/x", 1, 2});
  r.noise = NoiseFloor{3.4, {"llm-foundry-a100"}, "same GPU class and framework"};
  std::ostringstream out;
  write_tune_text(out, r);
  CHECK_THAT(out.str(), Catch::Contains("nothing beats the baseline by more than 3.4 %"));
  CHECK_FALSE(r.beats_noise());
  r.best.overlap.step_time = Time::from_ms(900);  // 10 % faster: a finding
  std::ostringstream found;
  write_tune_text(found, r);
  CHECK_THAT(found.str(), !Catch::Contains("nothing beats"));
  CHECK(r.beats_noise());
}
