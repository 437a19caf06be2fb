#pragma once
// The live executor: runs a lowered Program (live/lowering.hpp) on this process's GPU,
// one MPI rank per GPU, and collects raw measurements per step (live/measured.hpp
// turns them into a Timeline and the stepsim.result/1 document).
//
// It interprets the lowering literally and decides nothing: one CUDA stream per Program
// stream (non-blocking, with the declared priority), one CUDA event per Program event, one
// NCCL communicator per Program communicator (ncclCommSplit of the world), one GemmRunner per
// distinct GEMM shape, and a stream-ordered memory pool (cudaMemPoolCreate) for the Program's
// allocations, kept reserved between steps; its used-memory high-water mark is the peak.
// Scratch operands (GEMM A/B/C, copy and collective buffers) live outside the pool so the
// peak counts only what the Program allocates.
//
// Per step: device idle and ranks at a barrier; t0 on the host, a start event on the default
// stream that every stream waits on; every Launch/Collective between a pair of timing events
// on its stream; host intervals with steady_clock; end events on every stream; synchronize.

#include <memory>

#include "kernels/gpu/mpi_bootstrap.hpp"
#include "live/lowering.hpp"
#include "live/measured.hpp"

namespace stepsim::gpu {

struct LiveOptions {
  int steps = 10;   // measured steps
  int warmup = 3;   // steps run first and discarded (plans, NCCL setup, pool growth)
};

class LiveExecutor {
 public:
  // Creates streams, events, communicators (collective over all MPI ranks), GEMM plans and
  // scratch buffers. `world` is the MPI world's NCCL communicator (make_world_comm), whose
  // device is current. Throws std::runtime_error on a CUDA/NCCL failure.
  LiveExecutor(const Program& program, const live::LoweredProgram& lowered, const MpiSession& mpi, const NcclComm& world);
  ~LiveExecutor();
  LiveExecutor(const LiveExecutor&) = delete;
  LiveExecutor& operator=(const LiveExecutor&) = delete;

  // Runs warm-up and measured steps; every rank must call it. Step times are the slowest
  // rank's; the step records are this rank's.
  live::LiveRun run(const LiveOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "CUDA runtime 13.0, driver 13.0, NCCL 2.28.3, MPI 3.1" as JSON fields.
nlohmann::json live_versions();

}  // namespace stepsim::gpu
