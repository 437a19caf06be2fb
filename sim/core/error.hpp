#pragma once
// Errors. Library code throws; only main() turns them into exit codes:
// InputError -> 2 (bad file, bad JSON path/value, bad flag), anything else -> 1.

#include <stdexcept>
#include <string>

namespace stepsim {

// A problem with what the user gave us. The message is one line that names the file, the
// JSON path, the value and what was expected, e.g.
//   exp.json: /strategy/bucket_cap_mb: -5: expected a positive number
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The README's table of what stepsim does not model; every error that refuses such an input
// ends with not_modelled(), so the user finds the whole list before trying the next feature.
inline constexpr const char* kNotModelledTable = "README.md#what-is-not-modelled";
// "<what> is not modelled (see README.md#what-is-not-modelled)"
inline std::string not_modelled(const std::string& what) {
  return what + " is not modelled (see " + kNotModelledTable + ")";
}

// A schedule that can never finish (a wait on an event never recorded, a host sync that can
// never be satisfied). The message names the instructions involved.
class DeadlockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace stepsim
