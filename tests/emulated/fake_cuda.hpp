#pragma once
// A CPU emulation of the part of the CUDA runtime, cuBLASLt and NCCL APIs that kernels/gpu
// calls, so that the live executor and the microbenchmarks run end to end without a GPU.
//
// It is the API contract, checked, with a deterministic clock; not a GPU:
//  - every stream has its own clock; an operation starts when its stream is free and takes a
//    fixed modelled time (GEMM 2mnk / 400 TFLOP/s, copies 1 TB/s, collectives S / 100 GB/s (but
//    see the one-rank rule below),
//    spin kernels exactly their duration); events record their stream's clock, waits take the
//    maximum, elapsed time is the difference (so measured op times are exact and checkable);
//  - memory is address space only (nothing is dereferenced); every pointer an operation reads
//    or writes must lie inside a live allocation of sufficient size, and every cuBLASLt GEMM
//    must use layouts consistent with its operation (TN, m/n/k agreeing), else the call fails
//    with the library's error code and a violation is recorded;
//  - the stream-ordered pool counts used bytes at the host call, with a resettable high-water
//    mark, as cudaMemPoolAttrUsedMem{Current,High} do;
//  - NCCL communicators have one rank (the single-process world), with NCCL's one-rank rule
//    (ncclLaunchOneRank): in place is a no-op, out of place a device memcpy at the copy rate.
// Host synchronisation returns at once: all enqueued work counts as complete.

#include <cstdint>
#include <string>
#include <vector>

namespace stepsim::fake_cuda {

struct Counters {
  std::int64_t gemms = 0, copies = 0, spins = 0, collectives = 0, event_records = 0, stream_waits = 0;
  std::int64_t pool_allocs = 0, pool_frees = 0, fills = 0, membw_kernels = 0;
  std::int64_t in_place_one_rank = 0;  // one-rank collectives NCCL turns into no-ops
};

// Contract violations recorded since the last reset (each also made its call fail).
const std::vector<std::string>& violations();
const Counters& counters();
// Bytes currently allocated from stream-ordered pools.
std::uint64_t pool_used();
// Clears violations and counters (allocations and handles are left as they are) and restores
// NCCL's one-rank rule.
void reset_log();
// Prices every collective at S / 100 GB/s even on one rank, as if the single-process
// communicator were a real group: lets a test see the executor's cross-stream dependencies
// (a no-op collective hides a missing wait).
void price_one_rank_collectives(bool on);

// Modelled rates (the tests derive expected times from them).
constexpr double kGemmFlopsPerS = 400e12;
constexpr double kCopyBytesPerS = 1e12;
constexpr double kCollectiveBytesPerS = 100e9;

}  // namespace stepsim::fake_cuda
