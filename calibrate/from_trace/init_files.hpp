#pragma once
// `stepsim init --from-trace` whole, for the CLI (tools/cmd_init.cpp) and the Python API: the
// starting experiment (trace_init.hpp) and the profile fitted from the same traces over the
// shipped profile of their GPU type (trace_fit.hpp). Writes nothing.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim::trace {

struct InitOutputs {
  nlohmann::json experiment;              // cluster.profile says `profile_ref`; "notes" lists every guess
  nlohmann::json profile;                 // the fitted profile, as `fit` writes one
  std::vector<std::string> notes;         // the guesses
  std::vector<std::string> against_base;  // the trace's GEMM rates against the base profile's (may be empty)
};

// `steps` as --steps ("" for all); `profile_ref` is what the experiment's cluster.profile says.
InitOutputs init_from_trace_files(const std::vector<std::string>& traces, const std::string& steps, const std::string& profile_ref);

}  // namespace stepsim::trace
