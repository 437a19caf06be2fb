#pragma once
// The caching allocator's knobs (PYTORCH_CUDA_ALLOC_CONF), apart from the model
// (caching_allocator.hpp) so the experiment config does not depend on it.

#include <optional>

#include "sim/core/units.hpp"

namespace stepsim {

struct AllocatorConfig {
  bool enabled = true;               // false: reserved == allocated (no caching allocator)
  bool expandable_segments = false;  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  std::optional<Bytes> max_split_size;  // max_split_size_mb; unset = unlimited (SIZE_MAX upstream)
};

}  // namespace stepsim
