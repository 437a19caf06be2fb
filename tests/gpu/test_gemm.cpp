// [gpu] cuBLASLt GEMM runner: correct results for the documented layout, and throughput that
// agrees with an independent cuBLASLt call on large shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "kernels/gpu/bench.hpp"
#include "kernels/gpu/gemm.hpp"
#include "kernels/gpu/raii.hpp"

using namespace stepsim;
using namespace stepsim::gpu;

namespace {

// An independent timing: cublasLtMatmul with its own descriptors and no algorithm given (cuBLASLt
// picks one itself), same TN layout, operands rotated the same way, median of 5 loops of 20.
double reference_tflops(const CublasLtHandle& h, const GemmShape& s, const Stream& stream) {
  cudaDataType_t t = s.dtype == Dtype::BF16 ? CUDA_R_16BF : s.dtype == Dtype::FP16 ? CUDA_R_16F : CUDA_R_32F;
  cublasComputeType_t ct = s.dtype == Dtype::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t op;
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
  cublasOperation_t tr = CUBLAS_OP_T;
  STEPSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof(tr)));
  cublasLtMatrixLayout_t a, b, c;
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, t, s.k, s.m, s.k));
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, t, s.k, s.n, s.k));
  STEPSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, t, s.m, s.n, s.m));
  std::size_t eb = static_cast<std::size_t>(dtype_bytes(s.dtype));
  const int sets = 4;
  std::vector<DeviceBuffer> as, bs;
  for (int i = 0; i < sets; ++i) {
    as.emplace_back(static_cast<std::size_t>(s.m * s.k) * eb).fill_random(eb, 11 + i, stream.get());
    bs.emplace_back(static_cast<std::size_t>(s.n * s.k) * eb).fill_random(eb, 21 + i, stream.get());
  }
  DeviceBuffer cbuf(static_cast<std::size_t>(s.m * s.n) * eb);
  DeviceBuffer ws(GemmRunner::kDefaultWorkspaceBytes);
  float alpha = 1, beta = 0;
  auto call = [&](int i) {
    STEPSIM_CUBLAS_CHECK(cublasLtMatmul(h.get(), op, &alpha, as[i % sets].data(), a, bs[i % sets].data(), b, &beta, cbuf.data(), c,
                                        cbuf.data(), c, nullptr, ws.data(), ws.bytes(), stream.get()));
  };
  for (int i = 0; i < 5; ++i) call(i);
  stream.synchronize();
  Event e0, e1;
  std::vector<double> loops;
  for (int r = 0; r < 5; ++r) {
    e0.record(stream.get());
    for (int i = 0; i < 20; ++i) call(i);
    e1.record(stream.get());
    e1.synchronize();
    loops.push_back(1e3 * Event::elapsed_ms(e0, e1) / 20);
  }
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(op);
  double median = summarize(loops).median_us;
  return s.flops().count / (median * 1e-6) / 1e12;
}

}  // namespace

TEST_CASE("GemmRunner computes C = A * B^T in the documented layout (fp32)", "[gpu][gemm]") {
  GemmShape s{64, 32, 48, 1, Dtype::FP32};
  std::vector<float> a(64 * 48), b(32 * 48), c(64 * 32);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 11) - 5.0f;
  CublasLtHandle h;
  Stream stream;
  GemmRunner g(h, s);
  DeviceBuffer da(a.size() * 4), db(b.size() * 4), dc(c.size() * 4), ws(g.workspace_bytes());
  STEPSIM_CUDA_CHECK(cudaMemcpy(da.data(), a.data(), da.bytes(), cudaMemcpyHostToDevice));
  STEPSIM_CUDA_CHECK(cudaMemcpy(db.data(), b.data(), db.bytes(), cudaMemcpyHostToDevice));
  g.run(stream.get(), da.data(), db.data(), dc.data(), ws);
  stream.synchronize();
  STEPSIM_CUDA_CHECK(cudaMemcpy(c.data(), dc.data(), dc.bytes(), cudaMemcpyDeviceToHost));
  // A: m x k row-major, B: n x k row-major, C: m x n column-major; small integers are exact.
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 32; ++j) {
      float ref = 0;
      for (int k = 0; k < 48; ++k) ref += a[i * 48 + k] * b[j * 48 + k];
      REQUIRE(c[i + j * 64] == ref);
    }
}

TEST_CASE("GemmRunner throughput is within 5% of an independent cuBLASLt call on large shapes", "[gpu][gemm]") {
  CublasLtHandle h;
  Stream stream;
  GemmBenchOptions o;
  std::ofstream record;
  if (const char* path = std::getenv("STEPSIM_VALIDATION_OUT")) record.open(path, std::ios::app);
  DeviceInfo dev = current_device_info();
  for (GemmShape s : {GemmShape{8192, 8192, 8192, 1, Dtype::BF16}, GemmShape{16384, 14336, 4096, 1, Dtype::BF16},
                      GemmShape{16384, 4096, 14336, 1, Dtype::BF16}, GemmShape{8192, 8192, 8192, 1, Dtype::FP16}}) {
    GemmBenchResult ours = bench_gemm(h, s, o, stream);
    double ref = reference_tflops(h, s, stream);
    std::string line = fmt::format("{} cc{}.{} {} m={} n={} k={}: runner {:.1f} TFLOP/s (spread {:.2f}%), cuBLASLt {:.1f} TFLOP/s, "
                                   "ratio {:.4f}, {}",
                                   dev.name, dev.cc_major, dev.cc_minor, to_string(s.dtype), s.m, s.n, s.k, ours.tflops,
                                   ours.timing.spread_pct(), ref, ours.tflops / ref, ours.algo);
    WARN(line);
    if (record) record << line << "\n";
    CHECK(std::abs(ours.tflops / ref - 1.0) <= 0.05);
  }
}

TEST_CASE("fp8 GEMMs run where the device supports them and are refused clearly elsewhere", "[gpu][gemm]") {
  CublasLtHandle h;
  GemmShape s{4096, 4096, 4096, 1, Dtype::FP8};
  if (gemm_dtype_supported(Dtype::FP8)) {
    Stream stream;
    GemmBenchOptions o;
    o.timing = {2, 5, 3};
    CHECK(bench_gemm(h, s, o, stream).tflops > 0);
  } else {
    CHECK_THROWS_WITH(GemmRunner(h, s), Catch::Contains("compute capability >= 8.9"));
  }
}
