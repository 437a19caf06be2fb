#pragma once
// Human formatting of times and sizes, shared by the reports, `explain` and the sweep and tune
// drivers (one spelling of "56.000 ms" everywhere).

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/units.hpp"

namespace stepsim {

std::string format_time(Time t);    // "56.000 ms", "180.0 us"
std::string format_bytes(Bytes b);  // "12.50 GiB"

// The parts joined, in one allocation (kernel names: 10^4 per sweep point).
std::string concat(std::span<const std::string_view> parts);
inline std::string concat(std::initializer_list<std::string_view> parts) { return concat(std::span<const std::string_view>(parts.begin(), parts.size())); }

// The first number after a '.' or ' ' in a program name is its unit index ("block.3", "bucket
// 4"): the [begin, end) of each run of it in `name`.
std::vector<std::pair<std::size_t, std::size_t>> unit_number_runs(std::string_view name);
// `name` with every run of its unit index replaced by '#' ("fwd block.3.mlp" -> "fwd block.#.mlp"):
// the one template for all units' copies of an op (explain's segments, the idle causes).
std::string fold_unit_number(std::string_view name);

}  // namespace stepsim
