#pragma once
// Throughput of a predicted (or measured) step, defined once for every report:
//   tokens_per_step       micro_batch x seq_len x grad_accum x world size (the global batch)
//   samples_per_step      micro_batch x grad_accum x world size (the global batch in sequences)
//   tokens_per_s          tokens_per_step / step time; per GPU: / world size
//   samples_per_s         sequences per second over the job
//   mfu_pct               model FLOPs per second per GPU / the profile's dense peak of the
//                         compute dtype, with llm-foundry's convention (scripts/train/benchmarking,
//                         the same as Korthikanti et al. 2022 up to embeddings): per token,
//                         6 x parameters + 12 x layers x hidden x seq (attention over the full
//                         s x s, not halved by the causal mask)
//   hfu_pct               the same with the FLOPs the GPU really runs for recomputation:
//                         full checkpointing re-runs the forward (+1/3: 8 N + 16 l h s per
//                         token), selective re-runs attention's s x s products (+4 l h s);
//                         op_sac and every_k add the FLOPs of the ops the workload re-runs
// Toy workloads have no FLOPs: tokens only.

#include "sim/analysis/metrics.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

struct Throughput {
  double tokens_per_step = 0;
  double samples_per_step = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double samples_per_s = 0;
  double mfu_pct = 0;  // 0 for toy workloads or a dtype without a peak in the profile
  double hfu_pct = 0;
};

Throughput throughput(const Experiment& e, Time step_time);

// Model FLOPs per token in the convention above (0 for toy workloads).
double model_flops_per_token(const Workload& w);

}  // namespace stepsim
