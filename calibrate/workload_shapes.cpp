#include "calibrate/workload_shapes.hpp"

#include <set>

namespace stepsim::calib {

const std::vector<TransformerDims>& known_transformers() {
  // meta-llama/Meta-Llama-3-8B config.json: hidden 4096, intermediate 14336, 32 heads, 8 KV heads.
  // meta-llama/Llama-2-7b-hf: hidden 4096, intermediate 11008, 32 heads (MHA).
  // facebook/opt-1.3b: hidden 2048, ffn_dim 8192, 32 heads.
  static const std::vector<TransformerDims> dims = {
      {"llama3-8b", 4096, 14336, 32, 8, true},
      {"llama2-7b", 4096, 11008, 32, 32, true},
      {"opt-1.3b", 2048, 8192, 32, 32, false},
  };
  return dims;
}

std::vector<GemmShape> block_gemms(const TransformerDims& d, std::int64_t tokens, Dtype dtype) {
  const std::int64_t head_dim = d.hidden / d.heads;
  struct Linear { std::int64_t in, out; };
  std::vector<Linear> linears = {
      {d.hidden, d.hidden + 2 * d.kv_heads * head_dim},  // fused q, k, v projection
      {d.hidden, d.hidden},                              // attention output projection
  };
  if (d.gated_mlp) {
    linears.push_back({d.hidden, d.ffn});  // gate
    linears.push_back({d.hidden, d.ffn});  // up
  } else {
    linears.push_back({d.hidden, d.ffn});  // fc1
  }
  linears.push_back({d.ffn, d.hidden});  // down / fc2
  std::vector<GemmShape> out;
  for (const auto& l : linears) {
    out.push_back({tokens, l.out, l.in, 1, dtype});  // forward
    out.push_back({tokens, l.in, l.out, 1, dtype});  // dgrad
    out.push_back({l.out, l.in, tokens, 1, dtype});  // wgrad
  }
  return out;
}

std::vector<GemmShape> calibration_gemm_shapes(const std::vector<std::int64_t>& token_counts, Dtype dtype,
                                               bool include_grid) {
  std::vector<GemmShape> out;
  std::set<GemmShape> seen;
  auto add = [&](const GemmShape& g) {
    if (seen.insert(g).second) out.push_back(g);
  };
  for (const auto& d : known_transformers())
    for (auto t : token_counts)
      for (const auto& g : block_gemms(d, t, dtype)) add(g);
  if (include_grid)
    for (std::int64_t m : {1024, 2048, 4096, 8192})
      for (std::int64_t n : {1024, 2048, 4096, 8192})
        for (std::int64_t k : {1024, 2048, 4096, 8192}) add({m, n, k, 1, dtype});
  return out;
}

}  // namespace stepsim::calib
