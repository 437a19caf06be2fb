#pragma once
// Collective cost: the time of one collective on a communicator of a given shape, from the
// model of its scope (intra-node when all ranks share a node, inter-node otherwise).

#include "sim/core/units.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// nccl-tests bus-bandwidth factor (C6.1): AR 2(n-1)/n, AG/RS/A2A (n-1)/n, BC/Reduce 1.
double busbw_factor(CollectiveKind kind, int ranks);
// Ring steps of one collective (C6.4 nsteps): AR 2(n-1), AG/RS/A2A n-1, others n.
int ring_steps(CollectiveKind kind, int ranks);

// Time of one collective of S bytes (nccl-tests convention) on `comm`. A group of one rank
// costs nothing (NCCL copies locally; treated as free).
Time collective_time(const HardwareProfile& hw, CollectiveKind kind, Bytes bytes, const CommDecl& comm);

// Same, against one scope model directly (used by fitting and tests).
Time scope_collective_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int ranks, int nodes);

}  // namespace stepsim
