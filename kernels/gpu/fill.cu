// Random, finite, non-zero device data for benchmarks (nccl-tests and GEMM timings must not run
// on zeros: zero operands can take faster paths in the hardware and in reductions).
#include <cstdint>

#include "kernels/gpu/raii.hpp"

namespace stepsim::gpu {
namespace {

__device__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element bit patterns chosen so that every dtype reads a value of magnitude in [0.5, 1):
//  4 bytes (fp32): sign random, exponent 126, random mantissa.
//  2 bytes (bf16 and fp16 alike): bf16 exponent 126 -> 0x3F00 | 7 mantissa bits; for fp16 the
//    same pattern reads 0x3Fxx -> about 1.9..2.0, still finite and non-zero.
//  1 byte (fp8 e4m3): exponent 6 (value 0.5..0.94): 0x30 | 3 mantissa bits.
__global__ void fill_kernel(unsigned char* p, std::size_t n_elems, std::size_t elem_bytes, std::uint64_t seed) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (; i < n_elems; i += stride) {
    std::uint64_t r = splitmix64(seed ^ (i * 0x2545F4914F6CDD1Dull));
    std::uint32_t sign = static_cast<std::uint32_t>(r >> 63);
    if (elem_bytes == 4) {
      std::uint32_t bits = (sign << 31) | (126u << 23) | static_cast<std::uint32_t>(r & 0x7FFFFFu);
      reinterpret_cast<std::uint32_t*>(p)[i] = bits;
    } else if (elem_bytes == 2) {
      std::uint16_t bits = static_cast<std::uint16_t>((sign << 15) | 0x3F00u | (r & 0x7Fu));
      reinterpret_cast<std::uint16_t*>(p)[i] = bits;
    } else {
      p[i] = static_cast<unsigned char>((sign << 7) | 0x30u | (r & 0x7u));
    }
  }
}

}  // namespace

void DeviceBuffer::fill_random(std::size_t elem_bytes, std::uint64_t seed, cudaStream_t stream) const {
  if (!ptr_ || bytes_ == 0) return;
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4) elem_bytes = 1;
  std::size_t n = bytes_ / elem_bytes;
  int threads = 256;
  int blocks = static_cast<int>(std::min<std::size_t>((n + threads - 1) / threads, 65535));
  if (blocks < 1) blocks = 1;
  fill_kernel<<<blocks, threads, 0, stream>>>(static_cast<unsigned char*>(ptr_), n, elem_bytes, seed);
  STEPSIM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace stepsim::gpu
