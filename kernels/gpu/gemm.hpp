#pragma once
// One GEMM through cuBLASLt, planned once and run many times (the live executor runs the same
// plan for every Launch of that shape; the calibration benchmark times it).
//
// Layout ("TN", the one layout cuBLASLt supports for every dtype including fp8): for a
// GemmShape {m, n, k, batch} the operands are, per batch entry,
//   A: m x k row-major  (k contiguous)       m*k elements
//   B: n x k row-major  (k contiguous)       n*k elements
//   C: m x n column-major (m contiguous)     m*n elements (D = C, written in place)
// i.e. C = A * B^T, which is exactly nn.Linear's y = x W^T. Batch entries are densely strided.
// Element types: bf16/fp16 in and out with fp32 accumulation; FP32 with exact fp32 compute;
// TF32: fp32 storage with CUBLAS_COMPUTE_32F_FAST_TF32; FP8: e4m3 inputs, bf16 output, fp32
// accumulation (needs compute capability >= 8.9, else the constructor throws).

#include <cstddef>
#include <string>

#include "kernels/gpu/raii.hpp"
#include "sim/program/program.hpp"

namespace stepsim::gpu {

// Bytes of one element of A/B and of C for `dtype` under the layout above.
std::size_t gemm_input_elem_bytes(Dtype dtype);
std::size_t gemm_output_elem_bytes(Dtype dtype);

// Whether the current device can run this dtype (fp8 needs sm_89+).
bool gemm_dtype_supported(Dtype dtype);

class GemmRunner {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = 32u << 20;  // what PyTorch gives cuBLASLt on Hopper

  // Creates the descriptors and asks the heuristic for its best algorithm within
  // `workspace_bytes`. Throws std::runtime_error when the dtype is unsupported on this device or
  // cuBLASLt returns no algorithm. `handle` must outlive the runner.
  GemmRunner(const CublasLtHandle& handle, const GemmShape& shape,
             std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmRunner();
  GemmRunner(GemmRunner&& o) noexcept;
  GemmRunner& operator=(GemmRunner&&) = delete;
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Enqueues C = A * B^T on `stream`. `workspace` must hold at least workspace_bytes() bytes
  // (it may be shared by runners used on one stream; not by runners on concurrent streams).
  void run(cudaStream_t stream, const void* a, const void* b, void* c, const DeviceBuffer& workspace) const;

  const GemmShape& shape() const { return shape_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  std::size_t a_bytes() const;
  std::size_t b_bytes() const;
  std::size_t c_bytes() const;
  // The chosen algorithm's id and the heuristic's workspace need, for logs.
  std::string algo_description() const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;  // owned; raw to keep cuBLASLt descriptor types out of users' way
  GemmShape shape_;
  std::size_t workspace_bytes_ = 0;
};

}  // namespace stepsim::gpu
