#include "kernels/gpu/cuda_check.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace stepsim::gpu {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw std::runtime_error(
      fmt::format("{}: {} ({}) at {}:{}", call, cudaGetErrorString(code), cudaGetErrorName(code), file, line));
}

void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line) {
  // cublasLt has no string function of its own; the status values are cuBLAS's.
  throw std::runtime_error(fmt::format("{}: cuBLAS status {} at {}:{}", call, static_cast<int>(code), file, line));
}

void throw_nccl_error(ncclResult_t code, const char* call, const char* file, int line) {
  throw std::runtime_error(
      fmt::format("{}: {} (ncclResult {}) at {}:{}", call, ncclGetErrorString(code), static_cast<int>(code), file, line));
}

int cuda_device_count_or_zero() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

}  // namespace stepsim::gpu
