#pragma once
// Checked CUDA / cuBLASLt / NCCL calls. Every failure throws std::runtime_error whose message
// names the call text, the library's error string and file:line, e.g.
//   cudaMalloc(&ptr, bytes): out of memory (cudaErrorMemoryAllocation) at kernels/gpu/raii.cpp:41
// Library code never exits; main() maps the exception to exit code 1.
//
// This header (and everything under kernels/gpu) may include CUDA headers; nothing in sim/ or
// calibrate/ may include it.

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace stepsim::gpu {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line);

// Number of CUDA devices, 0 when there is no driver, no device, or the runtime fails to
// initialise (never throws: this is how the CLI decides to say "no CUDA device present").
int cuda_device_count_or_zero();

}  // namespace stepsim::gpu

#define STEPSIM_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    cudaError_t stepsim_err_ = (call);                                               \
    if (stepsim_err_ != cudaSuccess)                                                 \
      ::stepsim::gpu::throw_cuda_error(stepsim_err_, #call, __FILE__, __LINE__);     \
  } while (0)

#define STEPSIM_CUBLAS_CHECK(call)                                                   \
  do {                                                                               \
    cublasStatus_t stepsim_st_ = (call);                                             \
    if (stepsim_st_ != CUBLAS_STATUS_SUCCESS)                                        \
      ::stepsim::gpu::throw_cublas_error(stepsim_st_, #call, __FILE__, __LINE__);    \
  } while (0)

#define STEPSIM_NCCL_CHECK(call)                                                     \
  do {                                                                               \
    ncclResult_t stepsim_nr_ = (call);                                               \
    if (stepsim_nr_ != ncclSuccess)                                                  \
      ::stepsim::gpu::throw_nccl_error(stepsim_nr_, #call, __FILE__, __LINE__);      \
  } while (0)
