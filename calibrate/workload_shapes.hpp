#pragma once
// The GEMM shapes `stepsim calibrate gemm` sweeps: every GEMM of a transformer block (forward
// and both backward GEMMs) for a few real model configurations over token counts, plus a
// regular grid. Derived here from the published dimensions so calibration does not depend on
// the simulator's workload presets.
//
// A linear layer y = x W^T with x: T x in, W: out x in is
//   forward  {m = T,   n = out, k = in}
//   dgrad    {m = T,   n = in,  k = out}   (dx = dy W)
//   wgrad    {m = out, n = in,  k = T}     (dW = dy^T x)
// Attention score/value batched GEMMs are not here: flash attention fuses them (the profile's
// attention_efficiency covers them).

#include <string>
#include <vector>

#include "sim/program/program.hpp"

namespace stepsim::calib {

struct TransformerDims {
  std::string name;
  std::int64_t hidden = 0, ffn = 0, heads = 0, kv_heads = 0;
  bool gated_mlp = false;  // SwiGLU: gate and up projections (Llama), else fc1/fc2 (GPT/OPT)
};

// llama3-8b, llama2-7b, opt-1.3b (from their published configs).
const std::vector<TransformerDims>& known_transformers();

// Forward, dgrad and wgrad GEMMs of one block of `d` for `tokens` tokens (micro-batch x seq).
std::vector<GemmShape> block_gemms(const TransformerDims& d, std::int64_t tokens, Dtype dtype);

// Distinct shapes: every known transformer over `token_counts`, plus the grid
// {1024, 2048, 4096, 8192}^3, in a deterministic order.
std::vector<GemmShape> calibration_gemm_shapes(const std::vector<std::int64_t>& token_counts, Dtype dtype,
                                               bool include_grid = true);

}  // namespace stepsim::calib
