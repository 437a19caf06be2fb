#pragma once
// The strict JSON reader moved to sim/core/json_reader.hpp (issue 18: hardware reads its
// profiles with it, so it cannot live in config without a config <-> hardware folder cycle).
// This forwarder keeps the existing includes valid; new code includes the core header.
#include "sim/core/json_reader.hpp"
