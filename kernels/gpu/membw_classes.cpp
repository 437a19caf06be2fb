// The byte conventions of the memory-bound class kernels (membw_kernels.hpp); the kernels
// themselves are in membw_kernels.cu (and emulated in tests/emulated/fake_cuda.cpp).
#include "kernels/gpu/membw_kernels.hpp"

namespace stepsim::gpu {

const char* membw_class_name(MembwClass c) {
  switch (c) {
    case MembwClass::Elementwise: return "elementwise";
    case MembwClass::Strided: return "elementwise_strided";
    case MembwClass::StridedCast: return "elementwise_strided_cast";
    case MembwClass::Reduction: return "reduction";
    case MembwClass::Norm: return "norm";
    case MembwClass::Embedding: return "embedding";
  }
  return "elementwise";
}

std::size_t membw_bytes(MembwClass c, std::size_t n) {
  const std::size_t e = 2;  // bf16
  switch (c) {
    case MembwClass::Elementwise: return 3 * n * e;
    case MembwClass::Strided:
    case MembwClass::Reduction: return 2 * n * e;
    case MembwClass::StridedCast: return 2 * n * e + 4;
    case MembwClass::Norm: return 2 * n * e + 2 * kMembwRow * e;
    case MembwClass::Embedding: return 2 * n * e + 8 * (n / kMembwRow);
  }
  return 0;
}

std::size_t membw_b_bytes(MembwClass c, std::size_t n) {
  switch (c) {
    case MembwClass::Elementwise: return 2 * n;
    case MembwClass::Norm: return 2 * 2 * kMembwRow;
    case MembwClass::Embedding: return 8 * (n / kMembwRow);
    case MembwClass::StridedCast: return 4;
    default: return 0;
  }
}

}  // namespace stepsim::gpu
