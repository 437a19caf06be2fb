#pragma once
// The memory-bound kernel classes of stepsim's compute model as real kernels over bf16 tensors
// (membw_kernels.cu), for `stepsim calibrate membw`: each class is timed over a size sweep and
// its bandwidth is the bytes the kernel reads plus writes over its time, the convention the
// workload's ops (sim/workload) and `fit --trace` price the class by. Kept free of sim/ headers:
// .cu files build as C++17 (kernels/CMakeLists.txt).
//
//  class                what it runs (the PyTorch kernel it stands for)                  bytes for n elements
//  elementwise          out = a + b, 16-byte vector loads (vectorized_elementwise_kernel)   3 x 2n
//  elementwise_strided  [B, S, 32, 64] -> [B, 32, S, 64] permute copy, one element per      2 x 2n
//                       thread with index arithmetic (elementwise_kernel on a transpose:
//                       attention's q/k/v .transpose(1, 2).contiguous())
//  elementwise_strided  torch.max(bf16 x, float32 0-dim tensor) as elementwise_kernel<128, 4>   2 x 2n + 4
//    _cast              runs it with dynamic casting: 4 elements per thread, each operand's
//                       offset from its stride (0 for the scalar) and loaded through a switch
//                       on its runtime dtype, the result stored through one (OPT's clamp)
//  reduction            softmax over rows of 512, one warp per row (softmax_warp_forward)   2 x 2n
//  norm                 LayerNorm over rows of 2048 with fp32 statistics and affine         2 x 2n + 2 x 2 x 2048
//                       (vectorized_layer_norm_kernel)
//  embedding            gather of n / 2048 rows of 2048 from a table of as many rows by     2 x 2n + 8 n / 2048
//                       random int64 ids (index_select / embedding forward)

#include <cstddef>

#include <cuda_runtime.h>

namespace stepsim::gpu {

enum class MembwClass { Elementwise, Strided, StridedCast, Reduction, Norm, Embedding };
inline constexpr MembwClass kMembwClasses[] = {MembwClass::Elementwise, MembwClass::Strided, MembwClass::StridedCast,
                                               MembwClass::Reduction, MembwClass::Norm, MembwClass::Embedding};
inline constexpr std::size_t kMembwRow = 2048;        // norm and embedding rows (elements)
inline constexpr std::size_t kMembwSoftmaxRow = 512;  // softmax rows (elements)

// The profile's class name ("elementwise", "elementwise_strided", ...; the casting kernel's
// "elementwise_strided_cast" is no class: it times the strided path's casting elements).
const char* membw_class_name(MembwClass c);

// Buffers of one launch over n bf16 elements: `a` and `out` hold n elements; `b` holds n
// elements (elementwise), 2 x 2048 (norm: gamma, beta), n / 2048 int64 ids in [0, n / 2048)
// (embedding) or one float (elementwise_strided_cast); unused otherwise.
struct MembwArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  std::size_t n = 0;  // a multiple of 2^19 (so of every row and the strided block)
};

// Bytes one launch reads plus writes (the table above).
std::size_t membw_bytes(MembwClass c, std::size_t n);
// Bytes `b` must hold.
std::size_t membw_b_bytes(MembwClass c, std::size_t n);
// Enqueues one kernel of class `c`; returns the launch error, if any.
cudaError_t launch_membw(MembwClass c, const MembwArgs& args, cudaStream_t stream);
// Writes n / 2048 random row ids in [0, n / 2048) into `ids` (the embedding's `b`).
cudaError_t launch_membw_ids(void* ids, std::size_t n, unsigned long long seed, cudaStream_t stream);

}  // namespace stepsim::gpu
