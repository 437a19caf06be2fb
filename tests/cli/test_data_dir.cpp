// The data directory (sim/core/data_dir.hpp): a relative name not found from the working
// directory is looked up there; --data-dir, then $STEPSIM_DATA_DIR, then the installed default
// name it; the binary never falls back to the tree it was built from.
#include <cstdlib>
#include <fstream>

#include <catch2/catch.hpp>

#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

// Runs `cmd` from `dir` (a subshell cd) and returns its exit status, output in `out`.
int run_in(const fs::path& dir, const std::string& cmd, std::string& out) {
  return test::run_capture("cd '" + dir.string() + "' && " + cmd, out);
}

const std::string kBin = STEPSIM_BINARY;
const std::string kRoot = STEPSIM_SOURCE_DIR;
const std::string kExample = "configs/examples/seed/c1-ddp-buckets.json";

}  // namespace

TEST_CASE("a name missing from the working directory resolves in the data directory, an existing one stays", "[cli]") {
  test::TempDir dir("data-dir");
  fs::create_directories(dir / "configs");
  std::ofstream(dir / "configs/x.json") << "{}";
  set_data_dir(dir.path());
  CHECK(resolve_input_path("configs/x.json") == (dir.path() / "configs/x.json").lexically_normal());
  // Not in the data directory either: the name as given, so the error names what the user wrote.
  CHECK(resolve_input_path("configs/absent.json") == fs::path("configs/absent.json"));
  // Absolute names are never redirected.
  CHECK(resolve_input_path("/nonexistent/x.json") == fs::path("/nonexistent/x.json"));
  // A name that exists from the working directory (the tests run from the repository root) wins.
  CHECK(resolve_input_path("CMakeLists.txt") == fs::path("CMakeLists.txt"));
  set_data_dir("");
}

TEST_CASE("--data-dir naming no directory is bad input naming the value", "[cli]") {
  CHECK_THROWS_WITH(set_data_dir("/nonexistent/stepsim-data"), Catch::Contains("--data-dir: \"/nonexistent/stepsim-data\": expected a directory"));
  std::string out;
  CHECK(test::run_capture(kBin + " --data-dir /nonexistent/stepsim-data simulate " + kExample, out) == 2);
  CHECK_THAT(out, Catch::Contains("--data-dir: \"/nonexistent/stepsim-data\": expected a directory"));
}

// The report after its first line, which names the file as it was read.
std::string body(const std::string& report) { return report.substr(report.find('\n') + 1); }

TEST_CASE("from another directory the build's binary finds the shipped files only through --data-dir or STEPSIM_DATA_DIR",
          "[cli]") {
  test::TempDir elsewhere("elsewhere");
  std::string here, out;
  REQUIRE(test::run_capture("cd '" + kRoot + "' && " + kBin + " simulate " + kExample, here) == 0);
  // No data directory (the build tree has no share/stepsim beside its binary): the example is not found.
  CHECK(run_in(elsewhere.path(), "env -u STEPSIM_DATA_DIR " + kBin + " simulate " + kExample, out) == 2);
  CHECK_THAT(out, Catch::Contains(kExample));
  // The option, anywhere on the line, and the variable: the same report as from the repository
  // root, whose first line names the file it read in the data directory.
  const std::string read = "stepsim simulate: " + kRoot + "/" + kExample + "\n";
  CHECK(run_in(elsewhere.path(), kBin + " --data-dir " + kRoot + " simulate " + kExample, out) == 0);
  CHECK(out.rfind(read, 0) == 0);
  CHECK(body(out) == body(here));
  CHECK(run_in(elsewhere.path(), kBin + " simulate " + kExample + " --data-dir=" + kRoot, out) == 0);
  CHECK(body(out) == body(here));
  CHECK(run_in(elsewhere.path(), "STEPSIM_DATA_DIR=" + kRoot + " " + kBin + " simulate " + kExample, out) == 0);
  CHECK(out.rfind(read, 0) == 0);
  CHECK(body(out) == body(here));
}

TEST_CASE("stepsim --help names the data directory in force", "[cli]") {
  std::string out;
  REQUIRE(test::run_capture("STEPSIM_DATA_DIR=" + kRoot + " " + kBin + " --help", out) == 0);
  CHECK_THAT(out, Catch::Contains("now: " + kRoot + " (STEPSIM_DATA_DIR)"));
}

TEST_CASE("a profile name found nowhere: the error says where it looked and how to name a data directory", "[cli]") {
  test::TempDir elsewhere("elsewhere");
  const fs::path copy = elsewhere / "exp.json";
  fs::copy_file(kRoot + "/configs/examples/llama3-8b-fsdp2-8xh100.json", copy);  // names "configs/hardware/h100-sxm-8x.json"
  std::string out;
  CHECK(run_in(elsewhere.path(), "env -u STEPSIM_DATA_DIR " + kBin + " simulate exp.json", out) == 2);
  const std::string dir = fs::canonical(elsewhere.path()).string();
  CHECK_THAT(out, Catch::Contains("/cluster/profile: \"configs/hardware/h100-sxm-8x.json\": expected an existing hardware profile file "
                                  "(not found in ") &&
                      Catch::Contains("the working directory " + dir + "; no data directory is set: --data-dir or STEPSIM_DATA_DIR names one)"));
  // With one, the message names it too; with the repository as the data directory the name resolves.
  CHECK(run_in(elsewhere.path(), kBin + " --data-dir " + kRoot + " simulate exp.json --set cluster.profile=configs/hardware/none.json", out) == 2);
  CHECK_THAT(out, Catch::Contains("(not found in the working directory " + dir + " or the data directory " + kRoot + ")"));
  CHECK(run_in(elsewhere.path(), kBin + " --data-dir " + kRoot + " simulate exp.json", out) == 0);
}
