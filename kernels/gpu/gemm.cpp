#include "kernels/gpu/gemm.hpp"

#include <memory>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace stepsim::gpu {

namespace {

struct Types {
  cudaDataType_t in, out, scale;
  cublasComputeType_t compute;
};

Types types_for(Dtype d) {
  switch (d) {
    case Dtype::BF16: return {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::FP16: return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::FP32: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Dtype::TF32: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case Dtype::FP8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  }
  throw std::logic_error("types_for: unknown dtype");
}

void set_batch(cublasLtMatrixLayout_t layout, std::int64_t batch, std::int64_t stride_elems) {
  if (batch <= 1) return;
  int count = static_cast<int>(batch);
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                        &stride_elems, sizeof(stride_elems)));
}

}  // namespace

std::size_t gemm_input_elem_bytes(Dtype d) { return d == Dtype::FP8 ? 1 : static_cast<std::size_t>(dtype_bytes(d)); }
std::size_t gemm_output_elem_bytes(Dtype d) { return d == Dtype::FP8 ? 2 : static_cast<std::size_t>(dtype_bytes(d)); }

bool gemm_dtype_supported(Dtype d) {
  if (d != Dtype::FP8) return true;
  DeviceInfo info = current_device_info();
  return info.cc_major * 10 + info.cc_minor >= 89;
}

struct GemmRunner::Impl {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  ~Impl() {
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

GemmRunner::GemmRunner(const CublasLtHandle& handle, const GemmShape& shape, std::size_t workspace_bytes)
    : shape_(shape), workspace_bytes_(workspace_bytes) {
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0)
    throw std::invalid_argument(fmt::format("GemmRunner: non-positive shape m={} n={} k={} batch={}", shape.m, shape.n,
                                            shape.k, shape.batch));
  if (!gemm_dtype_supported(shape.dtype))
    throw std::runtime_error(fmt::format("GemmRunner: {} GEMMs need compute capability >= 8.9", to_string(shape.dtype)));
  Types t = types_for(shape.dtype);
  auto impl = std::make_unique<Impl>();
  impl->handle = handle.get();
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&impl->op, t.compute, t.scale));
  cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(impl->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(impl->op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  auto m = static_cast<std::uint64_t>(shape.m), n = static_cast<std::uint64_t>(shape.n),
       k = static_cast<std::uint64_t>(shape.k);
  // Column-major views: A^T is k x m (ld k), B is k x n (ld k), C is m x n (ld m).
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&impl->a, t.in, k, m, static_cast<std::int64_t>(k)));
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&impl->b, t.in, k, n, static_cast<std::int64_t>(k)));
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&impl->c, t.out, m, n, static_cast<std::int64_t>(m)));
  set_batch(impl->a, shape.batch, shape.m * shape.k);
  set_batch(impl->b, shape.batch, shape.n * shape.k);
  set_batch(impl->c, shape.batch, shape.m * shape.n);

  cublasLtMatmulPreference_t pref = nullptr;
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::uint64_t ws = workspace_bytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(impl->handle, impl->op, impl->a, impl->b, impl->c, impl->c, pref, 1,
                                        &impl->heuristic, &returned);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (returned == 0)
    throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for {} GEMM m={} n={} k={} batch={}",
                                         to_string(shape.dtype), shape.m, shape.n, shape.k, shape.batch));
  impl_ = impl.release();
}

GemmRunner::~GemmRunner() { delete impl_; }

GemmRunner::GemmRunner(GemmRunner&& o) noexcept
    : impl_(std::exchange(o.impl_, nullptr)), shape_(o.shape_), workspace_bytes_(o.workspace_bytes_) {}

void GemmRunner::run(cudaStream_t stream, const void* a, const void* b, void* c, const DeviceBuffer& workspace) const {
  if (!impl_) throw std::logic_error("GemmRunner::run on a moved-from runner");
  if (workspace.bytes() < workspace_bytes_)
    throw std::invalid_argument(fmt::format("GemmRunner::run: workspace of {} B, plan needs {} B", workspace.bytes(),
                                            workspace_bytes_));
  const float alpha = 1.0f, beta = 0.0f;
  STEPSIM_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, impl_->op, &alpha, a, impl_->a, b, impl_->b, &beta, c, impl_->c, c,
                                      impl_->c, &impl_->heuristic.algo, workspace.data(), workspace_bytes_, stream));
}

std::size_t GemmRunner::a_bytes() const {
  return static_cast<std::size_t>(shape_.m * shape_.k * shape_.batch) * gemm_input_elem_bytes(shape_.dtype);
}
std::size_t GemmRunner::b_bytes() const {
  return static_cast<std::size_t>(shape_.n * shape_.k * shape_.batch) * gemm_input_elem_bytes(shape_.dtype);
}
std::size_t GemmRunner::c_bytes() const {
  return static_cast<std::size_t>(shape_.m * shape_.n * shape_.batch) * gemm_output_elem_bytes(shape_.dtype);
}

std::string GemmRunner::algo_description() const {
  if (!impl_) return "(moved-from)";
  int algo_id = 0;
  std::size_t written = 0;
  (void)cublasLtMatmulAlgoConfigGetAttribute(&impl_->heuristic.algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof(algo_id),
                                             &written);
  return fmt::format("cuBLASLt algo {} (workspace {} B, waves {:.2f})", algo_id, impl_->heuristic.workspaceSize,
                     impl_->heuristic.wavesCount);
}

}  // namespace stepsim::gpu
