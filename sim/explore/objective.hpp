#pragma once
// What `sweep` and `tune` rank configurations by (issue 17 item 3):
//   step_time      lower is better; meaningful only when every point does the same work
//   tokens_per_s   higher is better; the job's tokens per step / step time
//                  (sim/analysis/throughput.hpp)
//   mfu            higher is better; model FLOPs utilisation in percent (llm-foundry's
//                  convention, sim/analysis/throughput.hpp); 0 for toy workloads
// Default: tokens_per_s when the tokens per step differ between the points that ran (an axis
// changed micro_batch, grad_accum, seq_len or the world size), else step_time. A point with
// less work per step is faster without being better, so step time alone would rank it first.
// Ties go to the smaller point index, so rankings are deterministic.

#include <optional>
#include <string>

#include "sim/core/units.hpp"

namespace stepsim {

enum class Objective { StepTime, TokensPerS, Mfu };
inline constexpr Objective kObjectives[] = {Objective::StepTime, Objective::TokensPerS, Objective::Mfu};
inline constexpr std::size_t kObjectiveCount = 3;

std::string to_string(Objective o);           // "step_time", "tokens_per_s", "mfu"
std::string objective_label(Objective o);     // "step time", "tokens/s", "MFU"
// Throws InputError "FLAG TEXT: expected one of step_time, tokens_per_s, mfu".
Objective parse_objective(const std::string& text, const std::string& flag = "--objective");

// The numbers an objective is computed from, for one configuration.
struct ObjectiveInputs {
  Time step_time;
  double tokens_per_step = 0;  // the whole job's, per optimizer step
  double mfu_pct = 0;
  double tokens_per_s() const;  // tokens_per_step / step time (0 when the step time is 0)
};

// The objective's value in its display unit: ms, tokens/s, percent.
double objective_value(Objective o, const ObjectiveInputs& v);
bool higher_is_better(Objective o);
// Strictly better under the objective (equal values are not better).
bool objective_better(Objective o, const ObjectiveInputs& a, const ObjectiveInputs& b);
// "542.103 ms", "120,345 tokens/s", "41.2% MFU".
std::string format_objective(Objective o, double value);

// The objective used and why, as printed.
struct ObjectiveChoice {
  Objective objective = Objective::StepTime;
  bool requested = false;  // given with --objective
  std::string reason;      // one sentence
};

}  // namespace stepsim
