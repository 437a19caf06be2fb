#pragma once
// The key tables (sim/core/config_keys.hpp) of the hardware profile file (configs/hardware/*.json):
// every object of the document, each key once with its type, physical range and default.
// profile_io.cpp reads through them (unknown keys: "did you mean", every valid key listed);
// `stepsim schema --profile` prints them as a JSON Schema, `--markdown` as docs/profile-keys.md.

#include <cstdint>
#include <string>

#include "sim/core/config_keys.hpp"

namespace stepsim {

// Physical ranges of profile numbers (docs/limits.md): generous bounds around any GPU,
// interconnect or host that exists, so a typo (1e300, 2^63) is an input error, not a
// negative capacity or a cost that silently vanishes in an int64 overflow.
namespace limits {
inline constexpr double kMaxCapacityGiB = 65536;   // 64 TiB per device
inline constexpr double kMaxTflops = 1e6;          // 1 EFLOP/s per device
inline constexpr double kMaxGBps = 1e6;            // 1 PB/s (HBM, links, busbw)
inline constexpr double kMaxLatencyUs = 1e6;       // 1 s for one latency, overhead or minimum
inline constexpr double kMaxSlowdown = 100;        // contention: 1/(1+s) of the solo rate
inline constexpr double kMaxTableTimeUs = 1e9;     // 1000 s for one measured collective
inline constexpr double kMaxTableBytes = 281474976710656.0;  // 2^48 bytes for one measured collective
inline constexpr double kMaxOutsideAllocatorMiB = 1024.0 * 1024.0;  // 1 TiB outside the allocator
inline constexpr std::int64_t kMaxGemmDim = 1 << 24;
inline constexpr int kMaxGroup = 1 << 20;
}  // namespace limits

namespace profile_keys {
const ConfigObject& root();
const ConfigObject& compute();
const ConfigObject& peak_tflops();
const ConfigObject& memory_bandwidth();
const ConfigObject& attention();
const ConfigObject& attention_kernel(); // one entry of compute.attention
const ConfigObject& clock();            // compute.clock
const ConfigObject& gemm();             // one entry of compute.gemm_table
const ConfigObject& collectives();
// The scope model of "intra_node" / "inter_node", chosen by its "model"; nullptr if none.
const ConfigObject* scope_model(const std::string& model);
const ConfigObject& alpha_beta_range();
const ConfigObject& alpha_beta_ranks();
const ConfigObject& alpha_beta_groups();
const ConfigObject& topology();
const ConfigObject& nvlink();
const ConfigObject& network();
const ConfigObject& fitted();
const ConfigObject& contention();
const ConfigObject& rank_variation();
const ConfigObject& host();
const ConfigObject& outside_allocator();
}  // namespace profile_keys

// Every object of a profile, the root first.
const ConfigCatalog& profile_catalog();
// docs/profile-keys.md.
std::string profile_markdown_reference();

}  // namespace stepsim
