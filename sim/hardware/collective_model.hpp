#pragma once
// Collective cost: the time of one collective on a communicator of a given shape, from the
// model of its scope (intra-node when all ranks share a node, inter-node otherwise).

#include <string>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// nccl-tests bus-bandwidth factor (C6.1): AR 2(n-1)/n, AG/RS/A2A (n-1)/n, BC/Reduce 1.
double busbw_factor(CollectiveKind kind, int ranks);

// Per-rank NCCL arguments of a collective of S bytes on `nranks` ranks (the nccl-tests
// convention: S is the all-reduce buffer, the all-gather output, the reduce-scatter input).
struct NcclTestsSizes {
  std::int64_t count = 0;        // NCCL's count argument (elements)
  std::int64_t send_bytes = 0;   // this rank's send buffer
  std::int64_t recv_bytes = 0;   // this rank's receive buffer
  std::int64_t total_bytes = 0;  // S actually moved after rounding to whole elements per rank
};
NcclTestsSizes nccl_tests_sizes(CollectiveKind kind, std::int64_t bytes, int nranks, Dtype dtype);
// Ring steps of one collective (C6.4 nsteps): AR 2(n-1), AG/RS/A2A n-1, others n.
int ring_steps(CollectiveKind kind, int ranks);

// Time of one collective of S bytes (nccl-tests convention) on `comm`. A group of one rank
// costs nothing (NCCL copies locally; treated as free).
Time collective_time(const HardwareProfile& hw, CollectiveKind kind, Bytes bytes, const CommDecl& comm);

// --- The topology-aware NCCL model (profile "collectives.topology"; docs/collectives.md) ---

enum class NcclAlgo { Ring, Tree, Nvls, NvlsTree, Pat, P2p };
enum class NcclProto { LL, LL128, Simple };
std::string to_string(NcclAlgo a);
std::string to_string(NcclProto p);

// The bandwidth level that bounds one algorithm's time (the slowest level of its path).
enum class TopoLevel { None, Nvlink, Nvls, Net, NvlinkAllToAll, NetAllToAll };

// One (algorithm, protocol) NCCL's tuner would consider for a call, as the linear pieces of
// its time: time_us = fixed_us + nvlink_latency_scale * nvlink_us + net_latency_scale * net_us
// + wire_bytes / bandwidth(level). wire_bytes already carries the algorithm's traffic per GPU
// and the protocol's efficiency; bandwidth(level) is the profile's number for that level.
struct NcclCandidate {
  NcclAlgo algo = NcclAlgo::Ring;
  NcclProto proto = NcclProto::Simple;
  double fixed_us = 0;
  double nvlink_us = 0;  // NVLink hop latencies at scale 1
  double net_us = 0;     // network hop latencies at scale 1
  TopoLevel level = TopoLevel::None;
  double wire_bytes = 0;
  double local_bytes = 0;  // the ring's local pass (S/n), at NcclTopology::nvlink_local_bw
};

// Every candidate NCCL's tuner considers for `kind` on a group of `ranks` over `nodes` nodes
// (ranks spread evenly), at most kMaxCandidates; returns how many were written.
constexpr int kMaxNcclCandidates = 12;
int nccl_candidates(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes,
                    NcclCandidate* out);
double level_bandwidth(const NcclTopology& t, TopoLevel level);  // B/s; 0 when not declared
double candidate_time_us(const NcclTopology& t, const NcclCandidate& c);
double local_pass_us(const NcclTopology& t, const NcclCandidate& c);  // the ring's local pass part of it

// The candidate NCCL would pick (the fastest, as ncclTopoGetAlgoTime ranks them) and its time.
struct NcclChoice {
  NcclCandidate candidate;
  Time time;
};
NcclChoice nccl_choice(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes);
// The fabric a communicator over `nodes` nodes sees: `t` itself, or (across the spine of an
// oversubscribed fabric: nodes > leaf_nodes, oversubscription > 1) a copy in `scratch` with each
// NIC's bandwidth divided by the oversubscription. nccl_choice and topology_collective_time
// price through it. NCCL's tuner does not know the taper and picks as on a non-blocking fabric;
// here the pick sees the tapered bandwidth (a simplification: it matters only where a ring and
// a tree are close).
const NcclTopology& across_spine(const NcclTopology& t, int nodes, NcclTopology& scratch);
Time topology_collective_time(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes);

// Communicators of `program` whose shape lies outside the profile's fitted group sizes (empty
// when the profile has no topology model or no fitted range). One line per communicator.
std::vector<std::string> collective_extrapolations(const HardwareProfile& hw, const std::vector<CommDecl>& comms);

// Same, against one scope model directly (used by fitting and tests).
Time scope_collective_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int ranks, int nodes);

}  // namespace stepsim
