#pragma once
// E[max of n independent standard normal draws], the integral behind expected_max_of_normals
// (engine.hpp): E[max] = int_0^inf (1 - Phi(x)^n) dx - int_-inf^0 Phi(x)^n dx, by the midpoint
// rule on [-9, 9] with step 1e-3 (exact to ~1e-7 against the tabulated 1.4236 for n = 8).
//
// The build computes it for every n up to kExpectedMaxTableSize with this same code
// (expected_max_table_gen.cpp writes the generated expected_max_table.cpp), so a process looks
// the value up instead of spending 18,000 erfc and pow calls, a fifth of a `stepsim simulate`
// process's instructions, on it; larger n are computed here at run time, bit for bit as the table
// would hold them (a unit test compares the two).

#include <cmath>
#include <cstddef>
#include <vector>

namespace stepsim::expected_max {

// Phi(x) at the rule's midpoints, with whether x >= 0 (x stepped by repeated addition, as the
// sum below visits them).
struct CdfGrid {
  std::vector<double> phi;
  std::size_t first_nonnegative = 0;  // index of the first x >= 0
};

inline CdfGrid normal_cdf_grid() {
  constexpr double h = 1e-3;
  CdfGrid g;
  g.phi.reserve(18000);
  bool seen_nonnegative = false;
  for (double x = -9 + h / 2; x < 9; x += h) {
    if (x >= 0 && !seen_nonnegative) {
      g.first_nonnegative = g.phi.size();
      seen_nonnegative = true;
    }
    g.phi.push_back(0.5 * std::erfc(-x / std::sqrt(2.0)));
  }
  return g;
}

inline double integral(const CdfGrid& g, int n) {
  if (n <= 1) return 0;
  constexpr double h = 1e-3;
  double e = 0;
  for (std::size_t i = 0; i < g.phi.size(); ++i) {
    const double cdf_n = std::pow(g.phi[i], n);
    e += (i >= g.first_nonnegative ? 1.0 - cdf_n : -cdf_n) * h;
  }
  return e;
}

}  // namespace stepsim::expected_max

namespace stepsim {

// The table the build generated: entry n for 0 <= n < kExpectedMaxTableSize.
inline constexpr int kExpectedMaxTableSize = 4097;
extern const double kExpectedMaxTable[kExpectedMaxTableSize];

}  // namespace stepsim
