// `stepsim compare` with a PyTorch profiler trace as one side: the trace is analysed as
// `analyze --json` would (the mean of its steps, or of --steps), so the comparison is the one of
// the two-command path, row for row.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "test_support.hpp"

using stepsim::test::run_capture;
using stepsim::test::TempDir;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kZero1 = kSrc + "/configs/examples/opt-1.3b-zero1-8xa800.json";

// The output without its first line (which names the measured file).
std::string after_first_line(const std::string& s) { return s.substr(s.find('\n') + 1); }
}  // namespace

TEST_CASE("compare takes a trace as the measured side: the analysis of analyze --json, row for row", "[cli][trace][data]") {
  TempDir dir("compare-trace");
  const std::string pred = dir.file("pred.json"), meas = dir.file("meas.json");
  std::string out;
  REQUIRE(run_capture(kBin + " simulate " + kZero1 + " --json > " + pred, out) == 0);
  REQUIRE(run_capture(kBin + " analyze " + stepsim::test::kLiPlusZero1Trace + " --steps 11-12 --json > " + meas, out) == 0);
  std::string two_step, direct;
  REQUIRE(run_capture(kBin + " compare " + pred + " " + meas, two_step) == 0);
  REQUIRE(run_capture(kBin + " compare " + pred + " " + stepsim::test::kLiPlusZero1Trace + " --steps 11-12", direct) == 0);
  CHECK(direct.find("reference: " + stepsim::test::kLiPlusZero1Trace + " (analyze, NVIDIA A800-SXM4-80GB)") == 0);
  CHECK(after_first_line(direct) == after_first_line(two_step));
  CHECK(direct.find("phase            optimizer") != std::string::npos);

  // The trace holds steps 11 and 12: without --steps their mean too (analyze's default); step
  // 11 alone is another measurement.
  std::string all_steps, step11;
  REQUIRE(run_capture(kBin + " compare " + pred + " " + stepsim::test::kLiPlusZero1Trace, all_steps) == 0);
  CHECK(after_first_line(all_steps) == after_first_line(direct));
  REQUIRE(run_capture(kBin + " compare " + pred + " " + stepsim::test::kLiPlusZero1Trace + " --steps 11", step11) == 0);
  CHECK(step11.find("346.639 ms") != std::string::npos);  // analyze's step #11
  CHECK(after_first_line(step11) != after_first_line(direct));
}

TEST_CASE("compare --steps without a trace, and a gzip file that is no trace, are exit 2 naming them", "[cli][hardening]") {
  TempDir dir("compare-bad");
  const std::string pred = dir.file("pred.json");
  std::string out;
  REQUIRE(run_capture(kBin + " simulate " + kZero1 + " --json > " + pred, out) == 0);
  CHECK(run_capture(kBin + " compare " + pred + " " + pred + " --steps 3", out) == 2);
  CHECK(out.find("--steps 3: expected a trace among the files") != std::string::npos);

  const std::string gz = dir.file("not-a-trace.json.gz");
  REQUIRE(run_capture("printf 'hello' | gzip > " + gz, out) == 0);
  CHECK(run_capture(kBin + " compare " + pred + " " + gz, out) == 2);
  CHECK(out.find(gz) != std::string::npos);
}
