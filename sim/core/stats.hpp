#pragma once
// Order statistics over samples, shared by the fits, validate and the trace comparisons.

#include <algorithm>
#include <vector>

namespace stepsim {

// The median of `v`: its middle value, or the mean of the two middle ones; 0 for no sample.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace stepsim
