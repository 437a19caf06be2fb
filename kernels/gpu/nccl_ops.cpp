#include "kernels/gpu/nccl_ops.hpp"

#include "sim/hardware/collective_model.hpp"

#include <algorithm>
#include <stdexcept>

namespace stepsim::gpu {

ncclDataType_t nccl_dtype(Dtype d) {
  switch (d) {
    case Dtype::FP32: case Dtype::TF32: return ncclFloat32;
    case Dtype::BF16: return ncclBfloat16;
    case Dtype::FP16: return ncclFloat16;
    case Dtype::FP8:
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
      return ncclFloat8e4m3;
#else
      return ncclUint8;
#endif
  }
  throw std::logic_error("nccl_dtype: unknown dtype");
}

std::size_t nccl_elem_bytes(Dtype d) { return static_cast<std::size_t>(dtype_bytes(d)); }

// The nccl-tests size convention is defined once, in sim/hardware/collective_model (unit-tested
// without a GPU); this is its size_t view for the NCCL calls.
CollectiveSizes collective_sizes(CollectiveKind kind, std::size_t bytes, int nranks, Dtype dtype) {
  NcclTestsSizes h = nccl_tests_sizes(kind, static_cast<std::int64_t>(bytes), nranks, dtype);
  return CollectiveSizes{static_cast<std::size_t>(h.count), static_cast<std::size_t>(h.send_bytes),
                         static_cast<std::size_t>(h.recv_bytes), static_cast<std::size_t>(h.total_bytes)};
}

void run_collective(const NcclComm& comm, cudaStream_t stream, CollectiveKind kind, const CollectiveSizes& s,
                    Dtype dtype, const void* send, void* recv, int root) {
  if (!comm) throw std::logic_error("run_collective: empty communicator");
  ncclDataType_t t = nccl_dtype(dtype);
  ncclComm_t c = comm.get();
  switch (kind) {
    case CollectiveKind::AllReduce: STEPSIM_NCCL_CHECK(ncclAllReduce(send, recv, s.count, t, ncclSum, c, stream)); return;
    case CollectiveKind::AllGather: STEPSIM_NCCL_CHECK(ncclAllGather(send, recv, s.count, t, c, stream)); return;
    case CollectiveKind::ReduceScatter:
      STEPSIM_NCCL_CHECK(ncclReduceScatter(send, recv, s.count, t, ncclSum, c, stream));
      return;
    case CollectiveKind::Broadcast: STEPSIM_NCCL_CHECK(ncclBroadcast(send, recv, s.count, t, root, c, stream)); return;
    case CollectiveKind::Reduce: STEPSIM_NCCL_CHECK(ncclReduce(send, recv, s.count, t, ncclSum, root, c, stream)); return;
    case CollectiveKind::AllToAll: STEPSIM_NCCL_CHECK(ncclAlltoAll(send, recv, s.count, t, c, stream)); return;
  }
}

CollectivePointers in_place_pointers(CollectiveKind kind, const CollectiveSizes& sizes, Dtype dtype, int rank, void* buffer) {
  if (kind == CollectiveKind::AllToAll) throw std::logic_error("in_place_pointers: all-to-all has no in-place form");
  auto* base = static_cast<char*>(buffer);
  const std::size_t slot = static_cast<std::size_t>(rank) * sizes.count * nccl_elem_bytes(dtype);
  CollectivePointers p{base, base};
  if (kind == CollectiveKind::AllGather) p.send = base + slot;
  if (kind == CollectiveKind::ReduceScatter) p.recv = base + slot;
  return p;
}

CollectiveBuffers::CollectiveBuffers(const CollectiveSizes& sizes, Dtype dtype, cudaStream_t stream,
                                     unsigned long long seed)
    : send(sizes.send_bytes), recv(sizes.recv_bytes) {
  send.fill_random(nccl_elem_bytes(dtype), seed, stream);
  recv.fill_random(nccl_elem_bytes(dtype), seed + 1, stream);
}

}  // namespace stepsim::gpu
