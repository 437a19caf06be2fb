#include "kernels/gpu/mpi_bootstrap.hpp"

#include <mpi.h>

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace stepsim::gpu {

namespace {
void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(fmt::format("{}: {}", call, std::string(text, static_cast<std::size_t>(len))));
}
#define STEPSIM_MPI_CHECK(call) mpi_check((call), #call)
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  STEPSIM_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    STEPSIM_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    owns_ = true;
  }
  STEPSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  STEPSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm local = MPI_COMM_NULL;
  STEPSIM_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  STEPSIM_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
  STEPSIM_MPI_CHECK(MPI_Comm_size(local, &local_size_));
  // Node index: nodes are numbered by their lowest world rank (the local rank 0 of the split,
  // which is keyed by world rank), whatever the rank-to-host mapping (block or round-robin).
  int my_leader = rank_;
  STEPSIM_MPI_CHECK(MPI_Bcast(&my_leader, 1, MPI_INT, 0, local));
  MPI_Comm_free(&local);
  int is_leader = local_rank_ == 0 ? 1 : 0;
  std::vector<int> leaders(static_cast<std::size_t>(size_));
  STEPSIM_MPI_CHECK(MPI_Allgather(&is_leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD));
  nodes_ = 0;
  node_ = 0;
  for (int r = 0; r < size_; ++r) {
    nodes_ += leaders[static_cast<std::size_t>(r)];
    if (r < my_leader) node_ += leaders[static_cast<std::size_t>(r)];
  }
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiSession::hostname() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<std::size_t>(len));
}

void MpiSession::barrier() const { STEPSIM_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

double MpiSession::max_over_ranks(double value) const {
  double out = 0;
  STEPSIM_MPI_CHECK(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

void MpiSession::broadcast_bytes(void* data, int bytes) const {
  STEPSIM_MPI_CHECK(MPI_Bcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
}

NcclComm make_world_comm(const MpiSession& mpi) {
  int devices = 0;
  STEPSIM_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 1) throw std::runtime_error("make_world_comm: no CUDA device");
  STEPSIM_CUDA_CHECK(cudaSetDevice(mpi.local_rank() % devices));
  ncclUniqueId id{};
  if (mpi.rank() == 0) STEPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
  mpi.broadcast_bytes(&id, static_cast<int>(sizeof(id)));
  return NcclComm(id, mpi.size(), mpi.rank());
}

NcclComm split_comm(const NcclComm& parent, int color, int key) {
  ncclComm_t out = nullptr;
  STEPSIM_NCCL_CHECK(ncclCommSplit(parent.get(), color, key, &out, nullptr));
  return NcclComm::adopt(out);
}

NcclComm make_intra_node_comm(const MpiSession& mpi, const NcclComm& world) {
  // Every rank must take part in the split, even when the result is unused.
  int color = mpi.local_size() > 1 ? mpi.node() : NCCL_SPLIT_NOCOLOR;
  return split_comm(world, color, mpi.local_rank());
}

NcclComm make_inter_node_comm(const MpiSession& mpi, const NcclComm& world) {
  int color = mpi.nodes() > 1 ? mpi.local_rank() : NCCL_SPLIT_NOCOLOR;
  return split_comm(world, color, mpi.node());
}

}  // namespace stepsim::gpu
