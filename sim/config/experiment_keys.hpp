#pragma once
// The key tables (config_keys.hpp) of the experiment file's own objects: the root, workload,
// cluster and training, and the keys every strategy object shares (framework, world_size).
// Each framework's options are declared with the framework (sim/strategies/strategy_keys.hpp).

#include <cstdint>
#include <vector>

#include "sim/core/config_keys.hpp"

namespace stepsim {

// Per-key maxima (docs/limits.md). Each is far above any real training step and low enough
// that the products the workload builder forms stay inside int64 (experiment.cpp checks them).
namespace limits {
inline constexpr std::int64_t kMaxLayers = 100'000;
inline constexpr std::int64_t kMaxMicroBatch = 1 << 20;
inline constexpr std::int64_t kMaxSeqLen = 1 << 24;
inline constexpr std::int64_t kMaxHidden = 1 << 20;
inline constexpr std::int64_t kMaxFfn = 1 << 22;
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 32;
inline constexpr int kMaxNodes = 65'536;
inline constexpr int kMaxGpusPerNode = 1'024;
inline constexpr std::int64_t kMaxWorldSize = 1 << 20;
inline constexpr int kMaxGradAccum = 65'536;
inline constexpr double kMaxToyLayerMs = 1e7;  // 2.8 hours for one layer's forward or backward
// Bytes a workload may describe before sharding: 2^56 (64 PiB) leaves 2^7 of headroom for
// the sums the simulation forms (peak = states + activations + buffers ...).
inline constexpr std::int64_t kMaxWorkloadBytes = std::int64_t{1} << 56;
}  // namespace limits

// The dtype names parse_dtype accepts (sim/core/units.hpp).
const std::vector<std::string>& dtype_choices();

namespace experiment_keys {
const ConfigObject& root();
const ConfigObject& workload();
const ConfigObject& model();       // "model": dimensions
const ConfigObject& hf_model();    // "model": {"hf_config": ...}
const ConfigObject& toy();
const ConfigObject& toy_layer();   // one entry of toy.layer_list
const ConfigObject& cluster();
const ConfigObject& training();
const ConfigObject& allocator();
// The keys every strategy object holds; each framework's table starts with them.
const ConfigObject& strategy_common();
// The objects above in document order (the root first), strategies excluded.
std::vector<const ConfigObject*> objects();
}  // namespace experiment_keys

}  // namespace stepsim
