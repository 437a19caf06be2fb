#pragma once
// Human formatting of times and sizes, shared by the reports, `explain` and the sweep and tune
// drivers (one spelling of "56.000 ms" everywhere).

#include <string>

#include "sim/core/units.hpp"

namespace stepsim {

std::string format_time(Time t);    // "56.000 ms", "180.0 us"
std::string format_bytes(Bytes b);  // "12.50 GiB"

}  // namespace stepsim
