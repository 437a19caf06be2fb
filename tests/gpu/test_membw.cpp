// [gpu] calibrate membw's class kernels compute what the PyTorch kernels they stand for compute,
// so the times they measure are of real work.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/gpu/membw_kernels.hpp"
#include "kernels/gpu/raii.hpp"

using namespace stepsim::gpu;

namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // exact for the small integers and halves used here
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace

TEST_CASE("the casting strided kernel is torch.max of a bf16 tensor against a float 0-dim tensor", "[gpu][membw]") {
  const std::size_t n = std::size_t{1} << 19;
  std::vector<std::uint16_t> x(n), out(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = float_to_bf16(static_cast<float>(static_cast<int>(i % 17) - 8) * 0.5f);
  const float scalar = -1.5f;
  Stream stream;
  DeviceBuffer dx(2 * n), dout(2 * n), ds(membw_b_bytes(MembwClass::StridedCast, n));
  REQUIRE(ds.bytes() == 4);
  STEPSIM_CUDA_CHECK(cudaMemcpy(dx.data(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  STEPSIM_CUDA_CHECK(cudaMemcpy(ds.data(), &scalar, 4, cudaMemcpyHostToDevice));
  STEPSIM_CUDA_CHECK(launch_membw(MembwClass::StridedCast, MembwArgs{dx.data(), ds.data(), dout.data(), n}, stream.get()));
  stream.synchronize();
  STEPSIM_CUDA_CHECK(cudaMemcpy(out.data(), dout.data(), dout.bytes(), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) {
    const float v = bf16_to_float(x[i]);
    REQUIRE(bf16_to_float(out[i]) == (v > scalar ? v : scalar));
  }
  CHECK(membw_bytes(MembwClass::StridedCast, n) == 4 * n + 4);
}
