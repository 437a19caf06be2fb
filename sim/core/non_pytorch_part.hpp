#pragma once
// One component of the device memory a training process holds outside PyTorch's caching
// allocator (HardwareProfile::non_pytorch_parts), for the reports: one line each.

#include <string>

#include "sim/core/units.hpp"

namespace stepsim {

struct NonPytorchPart {
  std::string name;    // "CUDA context", "NCCL buffers"
  std::string detail;  // "2 communicators x 24 channels x 9.2 MiB (LL + LL128 + Simple)"
  Bytes bytes;
};

}  // namespace stepsim
