// The memory-bound class kernels of `calibrate membw` (membw_kernels.hpp has the table).
#include "kernels/gpu/membw_kernels.hpp"

#include <cstdint>

#include <cuda_bf16.h>

namespace stepsim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kHeads = 32, kHeadDim = 64;  // the strided permute's [B, S, H, D]

unsigned grid_for(std::size_t work, std::size_t per_block) {
  std::size_t g = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 2147483647u ? 2147483647u : g));
}

// out = a + b, eight bf16 per thread through 16-byte loads and stores.
__global__ void add_vec8(const uint4* a, const uint4* b, uint4* out, std::size_t n8) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 x = a[i], y = b[i], r;
    const __nv_bfloat162* xs = reinterpret_cast<const __nv_bfloat162*>(&x);
    const __nv_bfloat162* ys = reinterpret_cast<const __nv_bfloat162*>(&y);
    __nv_bfloat162* rs = reinterpret_cast<__nv_bfloat162*>(&r);
    for (int k = 0; k < 4; ++k) rs[k] = __hadd2(xs[k], ys[k]);
    out[i] = r;
  }
}

// [B, S, H, D] -> [B, H, S, D], one element per thread: the index arithmetic of a strided copy.
__global__ void permute_0213(const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t n, std::size_t seq) {
  for (std::size_t o = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t d = o % kHeadDim, s = (o / kHeadDim) % seq, h = (o / (kHeadDim * seq)) % kHeads,
                      b = o / (kHeadDim * seq * kHeads);
    out[o] = in[((b * seq + s) * kHeads + h) * kHeadDim + d];
  }
}

// The dtypes the casting loads switch on (c10::ScalarType's values for Float and BFloat16).
enum Dtype : int { kFloat = 6, kBFloat16 = 15 };

__device__ float load_as_float(const char* p, int dtype) {
  switch (dtype) {
    case kFloat: return *reinterpret_cast<const float*>(p);
    case kBFloat16: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
    default: return 0.f;
  }
}

__device__ void store_from_float(char* p, int dtype, float v) {
  switch (dtype) {
    case kFloat: *reinterpret_cast<float*>(p) = v; break;
    case kBFloat16: *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16(v); break;
    default: break;
  }
}

// out = max(x, scalar) as PyTorch's elementwise_kernel<128, 4> computes a bf16 tensor against a
// float32 0-dim tensor (CUDALoops.cuh, needs_dynamic_casting): each of 128 threads handles 4
// elements spaced by 128; each operand's byte offset comes from its stride (the scalar's is 0)
// and its dtype from a kernel argument, read through a switch; the max is taken in bf16, the
// common dtype, and stored through a switch on the output's dtype.
struct CastOperands {
  const char* x;
  const char* scalar;
  char* out;
  long long stride[3];  // bytes: out, x, scalar
  int dtype[3];
};

__global__ void max_with_cast(CastOperands op, std::size_t n) {
  constexpr int kPerThread = 4, kBlock = 128;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kBlock * kPerThread + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const std::size_t i = base + static_cast<std::size_t>(k) * kBlock;
    if (i >= n) return;
    const auto idx = static_cast<long long>(i);
    const float x = __bfloat162float(__float2bfloat16(load_as_float(op.x + idx * op.stride[1], op.dtype[1])));
    const float s = __bfloat162float(__float2bfloat16(load_as_float(op.scalar + idx * op.stride[2], op.dtype[2])));
    store_from_float(op.out + idx * op.stride[0], op.dtype[0], fmaxf(x, s));
  }
}

// Softmax over rows of 512 bf16, one warp per row, 16 elements per lane, fp32 arithmetic.
__global__ void softmax_rows_512(const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t rows) {
  const std::size_t row = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __nv_bfloat16* x = in + row * kMembwSoftmaxRow;
  float v[16], m = -3.0e38f, sum = 0.f;
  for (int k = 0; k < 16; ++k) m = fmaxf(m, v[k] = __bfloat162float(x[k * 32 + lane]));
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  for (int k = 0; k < 16; ++k) sum += (v[k] = __expf(v[k] - m));
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __nv_bfloat16* y = out + row * kMembwSoftmaxRow;
  for (int k = 0; k < 16; ++k) y[k * 32 + lane] = __float2bfloat16(v[k] / sum);
}

// LayerNorm over rows of 2048 bf16 (one block of 256 threads per row, 8 elements each), fp32
// mean and variance, bf16 gamma and beta.
__global__ void layer_norm_2048(const __nv_bfloat16* in, const __nv_bfloat16* gamma_beta, __nv_bfloat16* out,
                                std::size_t rows) {
  __shared__ float partial[2][kThreads / 32];
  const std::size_t row = blockIdx.x;
  if (row >= rows) return;
  const __nv_bfloat16* x = in + row * kMembwRow;
  float v[8], s = 0.f, sq = 0.f;
  for (int k = 0; k < 8; ++k) {
    v[k] = __bfloat162float(x[k * kThreads + threadIdx.x]);
    s += v[k];
    sq += v[k] * v[k];
  }
  for (int off = 16; off > 0; off /= 2) {
    s += __shfl_xor_sync(0xffffffffu, s, off);
    sq += __shfl_xor_sync(0xffffffffu, sq, off);
  }
  if (threadIdx.x % 32 == 0) partial[0][threadIdx.x / 32] = s, partial[1][threadIdx.x / 32] = sq;
  __syncthreads();
  s = sq = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) s += partial[0][w], sq += partial[1][w];
  const float mean = s / kMembwRow, rstd = rsqrtf(fmaxf(sq / kMembwRow - mean * mean, 0.f) + 1e-5f);
  __nv_bfloat16* y = out + row * kMembwRow;
  for (int k = 0; k < 8; ++k) {
    const std::size_t c = k * kThreads + threadIdx.x;
    y[c] = __float2bfloat16((v[k] - mean) * rstd * __bfloat162float(gamma_beta[c]) + __bfloat162float(gamma_beta[kMembwRow + c]));
  }
}

// out[t, :] = table[ids[t], :] for rows of 2048 bf16 through 16-byte loads.
__global__ void gather_rows_2048(const uint4* table, const long long* ids, uint4* out, std::size_t rows) {
  constexpr std::size_t kVec = kMembwRow / 8;  // uint4 per row
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < rows * kVec;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t t = i / kVec, c = i % kVec;
    out[i] = table[static_cast<std::size_t>(ids[t]) * kVec + c];
  }
}

__global__ void random_ids(long long* ids, std::size_t rows, unsigned long long seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < rows;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned long long x = seed ^ (i * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    ids[i] = static_cast<long long>((x ^ (x >> 31)) % rows);
  }
}

}  // namespace

cudaError_t launch_membw(MembwClass c, const MembwArgs& a, cudaStream_t stream) {
  const auto* in = static_cast<const __nv_bfloat16*>(a.a);
  auto* out = static_cast<__nv_bfloat16*>(a.out);
  switch (c) {
    case MembwClass::Elementwise:
      add_vec8<<<grid_for(a.n / 8, kThreads * 4), kThreads, 0, stream>>>(static_cast<const uint4*>(a.a),
                                                                         static_cast<const uint4*>(a.b),
                                                                         static_cast<uint4*>(a.out), a.n / 8);
      break;
    case MembwClass::Strided: {
      const std::size_t batch = a.n >= (std::size_t{1} << 20) ? a.n >> 20 : 1;
      permute_0213<<<grid_for(a.n, kThreads * 4), kThreads, 0, stream>>>(in, out, a.n, a.n / (batch * kHeads * kHeadDim));
      break;
    }
    case MembwClass::StridedCast: {
      CastOperands op{static_cast<const char*>(a.a), static_cast<const char*>(a.b), static_cast<char*>(a.out),
                      {2, 2, 0}, {kBFloat16, kBFloat16, kFloat}};
      max_with_cast<<<grid_for(a.n, 128 * 4), 128, 0, stream>>>(op, a.n);
      break;
    }
    case MembwClass::Reduction: {
      const std::size_t rows = a.n / kMembwSoftmaxRow;
      softmax_rows_512<<<grid_for(rows * 32, kThreads), kThreads, 0, stream>>>(in, out, rows);
      break;
    }
    case MembwClass::Norm:
      layer_norm_2048<<<grid_for(a.n / kMembwRow, 1), kThreads, 0, stream>>>(in, static_cast<const __nv_bfloat16*>(a.b), out,
                                                                            a.n / kMembwRow);
      break;
    case MembwClass::Embedding: {
      const std::size_t rows = a.n / kMembwRow;
      gather_rows_2048<<<grid_for(rows * (kMembwRow / 8), kThreads * 4), kThreads, 0, stream>>>(
          static_cast<const uint4*>(a.a), static_cast<const long long*>(a.b), static_cast<uint4*>(a.out), rows);
      break;
    }
  }
  return cudaGetLastError();
}

cudaError_t launch_membw_ids(void* ids, std::size_t n, unsigned long long seed, cudaStream_t stream) {
  const std::size_t rows = n / kMembwRow;
  random_ids<<<grid_for(rows, kThreads), kThreads, 0, stream>>>(static_cast<long long*>(ids), rows, seed);
  return cudaGetLastError();
}

}  // namespace stepsim::gpu
