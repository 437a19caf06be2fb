#pragma once
// The spin kernel of live mode: holds a stream for a fixed time (the `fixed` part of a
// KernelWork, i.e. the toy workloads' layer times). Kept free of sim/ headers because .cu
// files build as C++17 (kernels/CMakeLists.txt).

#include <cuda_runtime.h>

namespace stepsim::gpu {

// Enqueues one single-thread kernel that returns once the GPU's global timer has advanced by
// `duration_ns` nanoseconds since the kernel started. Returns the launch error, if any.
cudaError_t launch_live_spin(cudaStream_t stream, unsigned long long duration_ns);

}  // namespace stepsim::gpu
