#include "sim/explore/objective.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/format.hpp"

namespace stepsim {

std::string to_string(Objective o) {
  switch (o) {
    case Objective::StepTime: return "step_time";
    case Objective::TokensPerS: return "tokens_per_s";
    case Objective::Mfu: return "mfu";
  }
  return "?";
}

std::string objective_label(Objective o) {
  switch (o) {
    case Objective::StepTime: return "step time";
    case Objective::TokensPerS: return "tokens/s";
    case Objective::Mfu: return "MFU";
  }
  return "?";
}

Objective parse_objective(const std::string& text, const std::string& flag) {
  for (Objective o : kObjectives)
    if (text == to_string(o)) return o;
  throw InputError(fmt::format("{} {}: expected one of step_time, tokens_per_s, mfu", flag, text.empty() ? "\"\"" : text));
}

double ObjectiveInputs::tokens_per_s() const {
  return step_time.ns > 0 ? tokens_per_step * 1e9 / static_cast<double>(step_time.ns) : 0.0;
}

double objective_value(Objective o, const ObjectiveInputs& v) {
  switch (o) {
    case Objective::StepTime: return v.step_time.ms();
    case Objective::TokensPerS: return v.tokens_per_s();
    case Objective::Mfu: return v.mfu_pct;
  }
  return 0;
}

bool higher_is_better(Objective o) { return o != Objective::StepTime; }

bool objective_better(Objective o, const ObjectiveInputs& a, const ObjectiveInputs& b) {
  switch (o) {
    case Objective::StepTime: return a.step_time < b.step_time;
    // tokens/s compared without dividing: a.tokens / a.step > b.tokens / b.step.
    case Objective::TokensPerS:
      return a.tokens_per_step * static_cast<double>(b.step_time.ns) > b.tokens_per_step * static_cast<double>(a.step_time.ns);
    case Objective::Mfu: return a.mfu_pct > b.mfu_pct;
  }
  return false;
}

std::string format_objective(Objective o, double value) {
  switch (o) {
    case Objective::StepTime: return format_time(Time{static_cast<std::int64_t>(value * 1e6 + 0.5)});
    case Objective::TokensPerS: return fmt::format("{:.0f} tokens/s", value);
    case Objective::Mfu: return fmt::format("{:.1f}% MFU", value);
  }
  return "?";
}

}  // namespace stepsim
