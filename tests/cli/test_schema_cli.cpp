// `stepsim schema`, and CLI errors that name the user's arguments, never the internal option
// a positional argument is stored under (issue 18 item 2).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;
}  // namespace

TEST_CASE("stepsim schema prints a draft 2020-12 JSON Schema whose strategy lists every framework's keys", "[cli][config]") {
  std::string out;
  REQUIRE(run_capture(kBin + " schema", out) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["$schema"] == "https://json-schema.org/draft/2020-12/schema");
  CHECK(j["$defs"]["experiment"]["additionalProperties"] == false);
  CHECK(j["$defs"]["strategy.ddp"]["properties"].contains("bucket_cap_mb"));
  CHECK(j["$defs"]["strategy.zero"]["properties"]["stage"]["maximum"] == 3);
  CHECK(j["$defs"]["strategy.fsdp1"]["properties"]["framework"]["const"] == "fsdp1");
}

TEST_CASE("stepsim schema --markdown prints the committed configuration reference", "[cli][config]") {
  std::string out;
  REQUIRE(run_capture(kBin + " schema --markdown", out) == 0);
  CHECK_THAT(out, Catch::StartsWith("# Configuration reference"));
  CHECK_THAT(out, Catch::Contains("| `bucket_cap_mb` |"));
}

TEST_CASE("A missing positional argument is named by what it is, never by an internal --option", "[cli]") {
  // Before: "the option '--experiment' is required but missing", naming an option the user
  // never wrote (the positional EXP.json is stored under it).
  for (const char* cmd : {"simulate", "explain", "tune"}) {
    std::string out;
    INFO(cmd);
    CHECK(run_capture(kBin + " " + cmd, out) == 2);
    CHECK_THAT(out, Catch::Contains("missing argument: expected the experiment JSON"));
    CHECK_THAT(out, Catch::Contains(std::string("usage: stepsim ") + cmd + " EXP.json"));
    CHECK(out.find("--experiment") == std::string::npos);
  }
  std::string out;
  CHECK(run_capture(kBin + " compare " + kSrc + "/README.md", out) == 2);
  CHECK_THAT(out, Catch::Contains("missing argument: expected the second result"));
  CHECK(out.find("--second") == std::string::npos);
}

TEST_CASE("Too many positional arguments is one line naming the usage, exit 2", "[cli]") {
  std::string out;
  CHECK(run_capture(kBin + " simulate a.json b.json", out) == 2);
  CHECK_THAT(out, Catch::Contains("too many arguments (usage: stepsim simulate EXP.json"));
}

TEST_CASE("--help lists options, not the internal names of positional arguments", "[cli]") {
  std::string out;
  REQUIRE(run_capture(kBin + " simulate --help", out) == 0);
  CHECK_THAT(out, Catch::Contains("--set"));
  CHECK(out.find("--experiment") == std::string::npos);
}

TEST_CASE("A missing required option names the option the user must add", "[cli]") {
  std::string out;
  CHECK(run_capture(kBin + " collective --kind all_reduce --ranks 8", out) == 2);
  CHECK_THAT(out, Catch::Contains("missing option --profile: expected hardware profile JSON"));
}
