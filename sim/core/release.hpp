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

}  // namespace stepsim
