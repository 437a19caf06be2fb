#pragma once
// MPI launch: `mpirun -np N stepsim ...` (or srun). MPI only bootstraps: rank 0 creates the NCCL
// unique id and MPI_Bcast's it; all data moves through NCCL. Without mpirun, MPI_Init still
// works as a singleton (world size 1), which is how single-GPU runs and tests use it.

#include <string>

#include "kernels/gpu/raii.hpp"

namespace stepsim::gpu {

// Owns MPI initialisation (MPI_Init_thread ... MPI_Finalize). One per process; it does not
// finalise an MPI that was initialised by someone else.
class MpiSession {
 public:
  MpiSession(int* argc = nullptr, char*** argv = nullptr);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Rank among the processes on this host and their count (MPI_COMM_TYPE_SHARED split).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Index of this process's host and the number of hosts (ranks grouped by local split).
  int node() const { return node_; }
  int nodes() const { return nodes_; }
  std::string hostname() const;

  void barrier() const;
  // Every rank gets rank 0's value / the maximum over ranks (for timings: the slowest rank).
  double max_over_ranks(double value) const;
  // Broadcasts `bytes` bytes at `data` from rank 0.
  void broadcast_bytes(void* data, int bytes) const;

 private:
  bool owns_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_ = 0, nodes_ = 1;
};

// Selects device local_rank % device_count, then builds the world communicator from rank 0's
// unique id broadcast over MPI.
NcclComm make_world_comm(const MpiSession& mpi);

// ncclCommSplit: ranks with the same `color` form one communicator ordered by `key`; a rank
// passing NCCL_SPLIT_NOCOLOR (-1) gets an empty NcclComm. Collective over `parent`.
NcclComm split_comm(const NcclComm& parent, int color, int key);

// The communicator shapes calibrate measures: the ranks on this node, and one rank per node
// (ranks with the same local rank across nodes). Either is empty when it would hold one rank.
NcclComm make_intra_node_comm(const MpiSession& mpi, const NcclComm& world);
NcclComm make_inter_node_comm(const MpiSession& mpi, const NcclComm& world);

}  // namespace stepsim::gpu
