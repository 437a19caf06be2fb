// Cost of one collective prediction (issue 15: the topology-aware NCCL model runs in the
// engine's inner loop and must cost no more than 2x the alpha-beta lookup it replaces).
//   build/bench/collective_bench [ALPHA_BETA_PROFILE.json] [TOPOLOGY_PROFILE.json] [calls]
// Prices the same mix of calls (3 kinds x 13 sizes x 6 group shapes) through collective_time()
// on each profile, repeats 9 times, and prints the median ns per call and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/profile.hpp"

namespace {

struct Call {
  stepsim::CollectiveKind kind;
  stepsim::Bytes bytes;
  stepsim::CommDecl comm;
};

double ns_per_call(const stepsim::HardwareProfile& hw, const std::vector<Call>& calls, int rounds, std::int64_t& sink) {
  std::vector<double> per;
  for (int r = 0; r < 9; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < rounds; ++i)
      for (const auto& c : calls) sink += stepsim::collective_time(hw, c.kind, c.bytes, c.comm).ns;
    auto t1 = std::chrono::steady_clock::now();
    per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / (static_cast<double>(rounds) * calls.size()));
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stepsim;
  const bench::Args args{"collective_bench", "collective_bench [ALPHA_BETA_PROFILE.json] [TOPOLOGY_PROFILE.json] [calls]"};
  if (argc > 4) args.fail("too many arguments");
  std::string ab = argc > 1 ? argv[1] : std::string(STEPSIM_SOURCE_DIR) + "/tests/data/profiles/a100-sxm-8x-alpha-beta.json";
  std::string topo = argc > 2 ? argv[2] : std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json";
  const int calls_total = argc > 3 ? args.count("calls", argv[3], 1'000'000'000) : 2'000'000;
  return args.run([&] {
  HardwareProfile a = load_profile(ab), t = load_profile(topo);
  std::vector<Call> calls;
  const CommDecl shapes[] = {{"tp2", 2, 1}, {"node", 8, 1}, {"half", 4, 1}, {"2n", 16, 2}, {"10n", 80, 10}, {"hsdp", 10, 10}};
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter})
    for (std::int64_t b = 4096; b <= (1LL << 34); b *= 4)
      for (const auto& s : shapes) calls.push_back({k, Bytes{b}, s});
  int rounds = std::max(1, calls_total / static_cast<int>(calls.size()));
  std::int64_t sink = 0;
  double ns_ab = ns_per_call(a, calls, rounds, sink);
  double ns_topo = ns_per_call(t, calls, rounds, sink);
  std::printf("alpha-beta (%s, %s): %.1f ns per call\n", a.name.c_str(), a.topology ? "topology!" : "alpha_beta", ns_ab);
  std::printf("topology   (%s, %s): %.1f ns per call\n", t.name.c_str(), t.topology ? "topology" : "no topology!", ns_topo);
  std::printf("ratio topology / alpha-beta: %.2f (target <= 2)   [checksum %lld]\n", ns_topo / ns_ab,
              static_cast<long long>(sink % 1000));
  return 0;
  });
}
