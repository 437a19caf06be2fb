// Spin kernel for fixed-time work in live mode (see live_spin.hpp).
#include "live/live_spin.hpp"

namespace stepsim::gpu {

namespace {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread: the time is the contract, not the SM usage. __nanosleep keeps the thread from
// hammering the timer; its granularity (< 1 us) is far below the millisecond times of toy layers.
__global__ void live_spin_kernel(unsigned long long duration_ns) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < duration_ns) __nanosleep(256);
}

}  // namespace

cudaError_t launch_live_spin(cudaStream_t stream, unsigned long long duration_ns) {
  live_spin_kernel<<<1, 1, 0, stream>>>(duration_ns);
  return cudaGetLastError();
}

}  // namespace stepsim::gpu
