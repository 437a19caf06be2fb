// The topology-aware NCCL model (issue 15): NCCL's tuner structure (src/graph/tuning.cc), per-hop
// latency growing with ring length and tree depth, bandwidth per level with the slowest bounding.
#include <catch2/catch.hpp>

#include "sim/config/json_reader.hpp"
#include "sim/hardware/collective_model.hpp"

using namespace stepsim;

namespace {

NcclTopology h100_like() {
  NcclTopology t;
  t.arch = NcclArch::Hopper;
  t.gpus_per_node = 8;
  t.nvlink_busbw = Bandwidth::from_gbps(360);
  t.nics_per_node = 8;
  t.nic_bw = Bandwidth::from_gbps(49);
  return t;
}

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

}  // namespace

TEST_CASE("a one-node all-gather of 1 GiB is a Simple ring: base + 7 NVLink hops + 7/8 S over the NVLink busbw",
          "[hardware][topology]") {
  NcclTopology t = h100_like();
  NcclChoice c = nccl_choice(t, CollectiveKind::AllGather, Bytes{kGiB}, 8, 1);
  CHECK(c.candidate.algo == NcclAlgo::Ring);
  CHECK(c.candidate.proto == NcclProto::Simple);
  // 8.4 us base (tuning.cc:151) + 7 x 3.4 us NVLink Simple ring hop (:159) + 1 GiB x 7/8 / 360 GB/s
  // = 8.4 + 23.8 + 2609.85 us = 2642.05 us.
  CHECK(c.time.us() == Approx(8.4 + 23.8 + kGiB * 0.875 / 360e9 * 1e6).epsilon(1e-6));
}

TEST_CASE("with NVLS declared, a one-node all-reduce moves S(1 + 1/n) per GPU and wins over the ring",
          "[hardware][topology]") {
  NcclTopology t = h100_like();
  t.nvls_bw = Bandwidth::from_gbps(310);
  NcclChoice c = nccl_choice(t, CollectiveKind::AllReduce, Bytes{kGiB}, 8, 1);
  CHECK(c.candidate.algo == NcclAlgo::Nvls);
  // NVLS latency is its NVLink hop, 25 us (tuning.cc:161, :424-425); 1 GiB x 9/8 / 310 GB/s.
  CHECK(c.time.us() == Approx(25 + kGiB * 1.125 / 310e9 * 1e6).epsilon(1e-6));
  // Its nccl-tests busbw is 2(n-1)/(n+1) x 310: 482 GB/s on 8 GPUs, 372 on 4 (the ratio 1.30 is
  // that of the h100-cluster01 logs: 482 / 367).
  double t8 = c.time.seconds();
  double t4 = nccl_choice(t, CollectiveKind::AllReduce, Bytes{kGiB}, 4, 1).time.seconds();
  CHECK(kGiB * 1.75 / t8 / 1e9 == Approx(482.2).epsilon(0.01));
  CHECK(kGiB * 1.5 / t4 / 1e9 == Approx(372.0).epsilon(0.01));
}

TEST_CASE("across nodes the NICs bound the ring: one GPU per node gets one NIC, two GPUs per node two",
          "[hardware][topology]") {
  NcclTopology t = h100_like();
  const Bytes S{64 * kGiB};  // large enough that the latency (< 1 ms) is < 0.3 % of the time
  // 10 nodes x 1 GPU: busbw = 1 x 49 GB/s; 10 x 2: 2 x 49; 10 x 8: min(NVLink 360, 8 x 49 = 392).
  auto busbw = [&](int ranks, int nodes) {
    return S.count * busbw_factor(CollectiveKind::AllReduce, ranks) /
           topology_collective_time(t, CollectiveKind::AllReduce, S, ranks, nodes).seconds() / 1e9;
  };
  CHECK(busbw(10, 10) == Approx(49).epsilon(0.01));
  CHECK(busbw(20, 10) == Approx(98).epsilon(0.01));
  CHECK(busbw(80, 10) == Approx(360).epsilon(0.01));
}

TEST_CASE("the latency grows with the ring length and the tree depth", "[hardware][topology]") {
  NcclTopology t = h100_like();
  t.tree = false;
  const Bytes S{64 * 1024};
  // A small all-reduce is latency-bound: 4 nodes, then 16 nodes, one GPU each (ring: 2(n-1)
  // network hops), is strictly slower, by more than the bandwidth term changes.
  Time r4 = topology_collective_time(t, CollectiveKind::AllReduce, S, 4, 4);
  Time r16 = topology_collective_time(t, CollectiveKind::AllReduce, S, 16, 16);
  CHECK(r16.us() > r4.us() + 10 * 2.7);  // 24 more LL network hops of >= 2.7 us (tuning.cc:171)
  // With the tree allowed, 16 nodes costs 2 log2(16) = 8 network hops, not 30: faster.
  NcclTopology tt = h100_like();
  NcclChoice c = nccl_choice(tt, CollectiveKind::AllReduce, S, 16, 16);
  CHECK(c.candidate.algo == NcclAlgo::Tree);
  CHECK(c.time < r16);
}

TEST_CASE("small messages pick LL, large ones Simple, as NCCL's tuner ranks lat + bytes / bw", "[hardware][topology]") {
  NcclTopology t = h100_like();
  CHECK(nccl_choice(t, CollectiveKind::AllGather, Bytes{4096}, 8, 1).candidate.proto == NcclProto::LL);
  CHECK(nccl_choice(t, CollectiveKind::AllGather, Bytes{4 * kGiB}, 8, 1).candidate.proto == NcclProto::Simple);
  // One rank costs nothing.
  CHECK(topology_collective_time(t, CollectiveKind::AllReduce, Bytes{kGiB}, 1, 1) == Time::zero());
}

TEST_CASE("a communicator outside the fitted group sizes is flagged, one inside is not", "[hardware][topology]") {
  HardwareProfile hw;
  hw.topology = h100_like();
  hw.topology->fitted = FittedRange{2, 20, 1, 10, 1, 8};
  auto flags = collective_extrapolations(hw, {CommDecl{"dp", 16, 2}, CommDecl{"world", 80, 10}, CommDecl{"solo", 1, 1}});
  REQUIRE(flags.size() == 1);  // 80 ranks > 20; one rank is never priced
  CHECK(flags[0].find("world") == 0);
  CHECK(flags[0].find("80 ranks") != std::string::npos);
}

TEST_CASE("a profile's collectives.topology round-trips through JSON and replaces the scope models",
          "[hardware][topology]") {
  nlohmann::json doc = {
      {"name", "t"},
      {"memory_capacity_GiB", 80},
      {"compute", {{"peak_tflops", {{"bf16", 989}}}, {"hbm_bandwidth_GBps", 3350}}},
      {"collectives",
       {{"topology",
         {{"arch", "hopper"},
          {"gpus_per_node", 8},
          {"nvlink", {{"busbw_GBps", 360}, {"nvls_GBps", 310}, {"latency_scale", 1.5}}},
          {"network", {{"nics_per_node", 8}, {"nic_GBps", 49}}},
          {"fitted", {{"ranks", {2, 20}}, {"nodes", {1, 10}}, {"gpus_per_node", {1, 8}}}}}}}}};
  SourceMap sm;
  sm.root_file = "t.json";
  ObjectReader r(doc, sm, "");
  HardwareProfile p = parse_profile(r);
  REQUIRE(p.topology);
  CHECK(p.topology->nvlink_latency_scale == 1.5);
  CHECK(p.topology->fitted.max_ranks == 20);
  nlohmann::json again = profile_to_json(p);
  ObjectReader r2(again, sm, "");
  HardwareProfile q = parse_profile(r2);
  REQUIRE(q.topology);
  CHECK(q.topology->nvls_bw.gbps() == Approx(310));
  CHECK(q.topology->fitted.min_gpus_per_node == 1);
  // The engine's entry point uses the topology: 8 ranks on one node, NVLS all-reduce.
  CHECK(collective_time(q, CollectiveKind::AllReduce, Bytes{kGiB}, CommDecl{"w", 8, 1}) ==
        nccl_choice(*q.topology, CollectiveKind::AllReduce, Bytes{kGiB}, 8, 1).time);
}

TEST_CASE("a bad fitted range is a one-line error naming the JSON path", "[hardware][topology]") {
  nlohmann::json doc = {
      {"name", "t"},
      {"memory_capacity_GiB", 80},
      {"compute", {{"peak_tflops", {{"bf16", 989}}}, {"hbm_bandwidth_GBps", 3350}}},
      {"collectives",
       {{"topology",
         {{"gpus_per_node", 8},
          {"nvlink", {{"busbw_GBps", 360}}},
          {"network", {{"nics_per_node", 8}, {"nic_GBps", 49}}},
          {"fitted", {{"ranks", {20, 2}}, {"nodes", {1, 10}}, {"gpus_per_node", {1, 8}}}}}}}}};
  SourceMap sm;
  sm.root_file = "t.json";
  ObjectReader r(doc, sm, "");
  std::string err;
  try {
    parse_profile(r);
  } catch (const std::exception& e) {
    err = e.what();
  }
  CHECK(err.find("t.json") != std::string::npos);
  CHECK(err.find("fitted") != std::string::npos);
  CHECK(err.find("min <= max") != std::string::npos);
}

TEST_CASE("the engine's fast path prices every call exactly as the candidate list NCCL's tuner ranks",
          "[hardware][topology]") {
  // topology_collective_time computes the minimum without building candidates; it must agree
  // with nccl_choice (to the nanosecond of rounding) on every kind, size and shape.
  NcclTopology a = h100_like();
  NcclTopology b = h100_like();
  b.nvls_bw = Bandwidth::from_gbps(300);
  b.nvlink_latency_scale = 1.7;
  b.net_latency_scale = 0.4;
  NcclTopology c = b;
  c.arch = NcclArch::Ampere;
  c.tree = false;
  c.ll128 = false;
  c.nics_per_node = 2;
  NcclTopology d = b;  // with a local pass
  d.arch = NcclArch::Ampere;
  d.nvls_bw = Bandwidth{0};
  d.nvlink_local_bw = Bandwidth::from_gbps(600);
  const std::pair<int, int> shapes[] = {{2, 1}, {4, 1}, {8, 1}, {16, 2}, {10, 10}, {20, 10}, {40, 10}, {80, 10}, {3, 3}};
  int compared = 0;
  for (const NcclTopology* t : {&a, &b, &c, &d})
    for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                             CollectiveKind::Broadcast, CollectiveKind::Reduce})
      for (std::int64_t bytes = 8; bytes <= 64 * kGiB; bytes *= 4)
        for (auto [n, nodes] : shapes) {
          Time fast = topology_collective_time(*t, k, Bytes{bytes}, n, nodes);
          Time ref = nccl_choice(*t, k, Bytes{bytes}, n, nodes).time;
          INFO(to_string(k) << " " << bytes << " B on " << n << "/" << nodes);
          CHECK(std::abs(fast.ns - ref.ns) <= 1);
          ++compared;
        }
  CHECK(compared == 4 * 5 * 17 * 9);  // 17 sizes: 8 B x 4^0..16
}

TEST_CASE("the local pass adds each rank's own S/n at its rate to a ring, not to a rooted ring or a tree",
          "[hardware][topology]") {
  NcclTopology t = h100_like();
  t.arch = NcclArch::Ampere;
  t.nvls_bw = Bandwidth{0};
  t.tree = false;
  NcclTopology local = t;
  local.nvlink_local_bw = Bandwidth::from_gbps(500);
  const Bytes s{1LL << 30};
  for (int n : {2, 4, 8}) {
    // 2^30 / n bytes at 500 GB/s, in ns.
    const double extra_ns = static_cast<double>(s.count) / n / 500e9 * 1e9;
    for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
      INFO(to_string(k) << " on " << n);
      CHECK(static_cast<double>(topology_collective_time(local, k, s, n, 1).ns - topology_collective_time(t, k, s, n, 1).ns) ==
            Approx(extra_ns).margin(1));
    }
    CHECK(topology_collective_time(local, CollectiveKind::Broadcast, s, n, 1) ==
          topology_collective_time(t, CollectiveKind::Broadcast, s, n, 1));
  }
  // Its share shrinks as 1/n while the wire's (n-1)/n grows: the busbw of a large all-reduce rises
  // with the group, as A100 nccl-tests show (2, 4, 8 GPUs: 208, 224, 231 GB/s at 1 GiB).
  auto busbw = [&](int n) {
    return static_cast<double>(s.count) * 2 * (n - 1) / n / topology_collective_time(local, CollectiveKind::AllReduce, s, n, 1).ns;
  };
  CHECK(busbw(2) < busbw(4));
  CHECK(busbw(4) < busbw(8));
}
