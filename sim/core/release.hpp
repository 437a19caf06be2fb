#pragma once
// A software release, "major.minor[.patch]": the DeepSpeed (deepspeed_version) or PyTorch
// (torch_version) of a run, for the rules that changed between releases. Ordered.

#include <compare>
#include <string>

namespace stepsim {

struct Release {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Release&) const = default;
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch); }
};

// The PyTorch release of a run that states none (torch_version unset).
inline constexpr Release kDefaultTorchRelease{2, 9};

// The flash_attn release `flash` (the package's FlashAttention-2 CUDA kernels) is priced by when a
// workload states no flash_attn_version: the current one (Dao-AILab/flash-attention tag v2.8.3,
// 060c9188beec3a8b62b33a3bfa6d5d2d44975fab; v2.8.3.post1 changed no kernel width).
inline constexpr Release kDefaultFlashAttnRelease{2, 8, 3};

}  // namespace stepsim
