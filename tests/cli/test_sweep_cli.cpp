// sweep and tune on the command line: --objective and --constraint (issue 17).
#include <catch2/catch.hpp>

#include <fstream>

#include "test_support.hpp"

using stepsim::test::run_capture;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("a bad --objective is exit 2 with one line naming the option, the value and the allowed values", "[cli][sweep]") {
  const std::string expected = "--objective fastest: expected one of step_time, tokens_per_s, mfu";
  for (const std::string cmd : {" sweep " + kSrc + "/configs/sweeps/llama8b-ddp-buckets.json --no-progress --objective fastest",
                                " tune " + kSrc + "/configs/examples/seed/c1-ddp-buckets.json --objective fastest"}) {
    INFO(cmd);
    std::string out;
    CHECK(run_capture(kBin + cmd, out) == 2);
    CHECK_THAT(out, Catch::Contains(expected));
    CHECK(count_lines(out) == 1);
  }
}

TEST_CASE("a sweep file's objective must be one of the three", "[cli][sweep]") {
  const stepsim::test::TempDir dir("sweep-cli");
  const auto f = dir / "bad-objective.json";
  std::ofstream(f) << R"({"base": {"include": ")" << kSrc << R"(/configs/examples/seed/c1-ddp-buckets.json"},
                          "axes": {"strategy.bucket_cap_bytes": [3000000]}, "objective": "speed"})";
  std::string out;
  CHECK(run_capture(kBin + " sweep " + f.string() + " --no-progress", out) == 2);
  CHECK_THAT(out, Catch::Contains("/objective") && Catch::Contains("speed") && Catch::Contains("tokens_per_s"));
  CHECK(count_lines(out) == 1);
}

TEST_CASE("sweep says which objective it used and --constraint adds a constraint", "[cli][sweep]") {
  // C1 (toy, 8 ranks): two bucket caps do the same work per step, so step time is the default.
  const stepsim::test::TempDir dir("sweep-cli");
  const auto f = dir / "c1.json";
  std::ofstream(f) << R"({"base": {"include": ")" << kSrc << R"(/configs/examples/seed/c1-ddp-buckets.json"},
                          "axes": {"strategy.bucket_cap_bytes": [3000000, 30000000]}})";
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress", out) == 0);
  CHECK_THAT(out, Catch::Contains("objective: step_time (the default when every point does the same work"));
  CHECK_THAT(out, Catch::Contains("2 satisfy the constraints"));
  // 3 MB buckets: 53 ms; 30 MB: 74 ms (seed case C1); the constraint keeps the first only.
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress --constraint 'step_time_ms <= 60'", out) == 0);
  CHECK_THAT(out, Catch::Contains("1 satisfy the constraints"));
  CHECK(run_capture(kBin + " sweep " + f.string() + " --no-progress --constraint 'speed <= 60'", out) == 2);
  CHECK_THAT(out, Catch::Contains("--constraint"));
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress --objective tokens_per_s", out) == 0);
  CHECK_THAT(out, Catch::Contains("objective: tokens_per_s (as requested)"));
}
