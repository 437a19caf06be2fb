// `stepsim live` without a GPU: the dry run prints the lowering; a real run says plainly that
// it needs a GPU and exits 2 (CUDA_VISIBLE_DEVICES="" hides any device, so this holds on GPU
// machines too); bad flags are input errors.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <sys/wait.h>

namespace {

struct Run {
  int rc = -1;
  std::string out;
};

Run run(const std::string& args, const std::string& env = "") {
  Run r;
  std::string cmd = env + std::string(STEPSIM_BINARY) + " live " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string kC1 = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json";

}  // namespace

TEST_CASE("live --dry-run prints which CUDA/NCCL call each instruction becomes", "[live]") {
  Run r = run(kC1 + " --dry-run");
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("MPI world size 1 (program built for world size 8)"));
  CHECK_THAT(r.out, Catch::Contains("communicator 'ddp': 8 program ranks -> 1 live ranks"));
  CHECK_THAT(r.out, Catch::Contains("ncclAllReduce count=1500000 fp32 send=6000000 B recv=6000000 B in place on comm 'ddp'"));
  CHECK_THAT(r.out, Catch::Contains("spin_kernel 5000000 ns on 'default'"));
  Run w8 = run(kC1 + " --dry-run --world 8");
  CHECK_THAT(w8.out, Catch::Contains("8 program ranks -> 8 live ranks"));
}

TEST_CASE("live without a visible GPU says so in one line and exits 2", "[live]") {
  Run r = run(kC1 + " --out /dev/null", "CUDA_VISIBLE_DEVICES= ");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("no CUDA device present: live needs a GPU"));
}

TEST_CASE("live refuses bad flags as input errors", "[live]") {
  CHECK(run(kC1 + " --dry-run --steps 0").rc == 2);
  CHECK(run(kC1).rc == 2);  // no --out
  CHECK(run(kC1 + " --dry-run --set strategy.bucket_cap_bytes=-1").rc == 2);
}
