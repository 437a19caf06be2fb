#pragma once
// NCCL collectives sized by the nccl-tests convention (framework-semantics C6.1), so the same
// S means the same thing in a Program, a profile, an nccl-tests log and a calibration run:
//   all_reduce, broadcast, reduce: S = count * typesize          (the buffer)
//   all_gather:     S = count * typesize * nranks  (the whole gathered output; each rank sends S/n)
//   reduce_scatter: S = count * typesize * nranks  (the whole unreduced input; each rank gets S/n)
//   all_to_all:     S = count * typesize * nranks  (each rank's whole send buffer)

#include <cstddef>

#include "kernels/gpu/raii.hpp"
#include "sim/program/program.hpp"

namespace stepsim::gpu {

ncclDataType_t nccl_dtype(Dtype dtype);  // FP8 -> ncclFloat8e4m3 where NCCL has it, else uint8
std::size_t nccl_elem_bytes(Dtype dtype);

// Per-rank element count and buffer sizes of one collective of S bytes on `nranks` ranks.
// S is rounded down to a whole number of elements per rank (at least one element).
struct CollectiveSizes {
  std::size_t count = 0;       // the `count` argument NCCL gets
  std::size_t send_bytes = 0;  // this rank's send buffer
  std::size_t recv_bytes = 0;  // this rank's receive buffer
  std::size_t total_bytes = 0; // S actually moved, nccl-tests convention (after rounding)
};
CollectiveSizes collective_sizes(CollectiveKind kind, std::size_t bytes, int nranks, Dtype dtype);

// Enqueues one collective on `comm` and `stream`. `send`/`recv` must hold the sizes above
// (in-place is allowed where NCCL allows it: pass the same pointer, offset by rank for AG/RS as
// nccl-tests does). Reductions are sums; broadcast/reduce use `root`.
void run_collective(const NcclComm& comm, cudaStream_t stream, CollectiveKind kind, const CollectiveSizes& sizes,
                    Dtype dtype, const void* send, void* recv, int root = 0);

// The send and receive pointers of the in-place form of a collective on `buffer` (nccl-tests,
// and how the frameworks call them): all-reduce, broadcast, reduce: both `buffer`;
// all-gather: receive into `buffer` (S bytes), send from this rank's slot of it; reduce-scatter:
// send from `buffer` (S bytes), receive into this rank's slot. All-to-all has no in-place form
// (throws std::logic_error).
struct CollectivePointers {
  const void* send = nullptr;
  void* recv = nullptr;
};
CollectivePointers in_place_pointers(CollectiveKind kind, const CollectiveSizes& sizes, Dtype dtype, int rank, void* buffer);

// Convenience owner of send/receive buffers for one collective size (filled with random data).
struct CollectiveBuffers {
  DeviceBuffer send;
  DeviceBuffer recv;
  CollectiveBuffers(const CollectiveSizes& sizes, Dtype dtype, cudaStream_t stream, unsigned long long seed);
};

}  // namespace stepsim::gpu
