#pragma once
// Each framework's strategy options, declared once (sim/core/config_keys.hpp): name, JSON
// type, static range, default, doc line and the release that introduced the option. The
// parsers (ddp.cpp, fsdp1.cpp, fsdp2_config.cpp, zero.cpp) read through these tables; tune
// searches the keys that carry `tune` settings; `stepsim schema` and docs/configuration-keys.md
// are generated from them.

#include <string>

#include "sim/core/config_keys.hpp"

namespace stepsim {

namespace strategy_keys {
const ConfigObject& ddp();
const ConfigObject& fsdp1();
const ConfigObject& fsdp1_mixed_precision();
const ConfigObject& fsdp2();
const ConfigObject& fsdp2_mesh();
const ConfigObject& fsdp2_mixed_precision();
const ConfigObject& zero();
// The table of `framework` ("ddp", "fsdp1", "fsdp2", "zero"); nullptr for another name.
const ConfigObject* for_framework(const std::string& framework);
}  // namespace strategy_keys

// Every object of an experiment file: experiment_keys::objects() then the strategies'.
const ConfigCatalog& experiment_catalog();

}  // namespace stepsim
