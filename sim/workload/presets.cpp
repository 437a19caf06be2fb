// Model presets from published dimensions. Sources: Llama 2 paper (Touvron et al. 2023, Table
// 1 + HF configs), Llama 3 model card / HF config.json (meta-llama/Meta-Llama-3-8B, -70B,
// Llama-3.1-405B), GPT-2 (Radford et al. 2019; HF gpt2*), GPT-3 (Brown et al. 2020, Table 2.1),
// OPT (Zhang et al. 2022, Table 1; HF facebook/opt-*), MPT (llm-foundry yamls, below).
#include <map>
#include <stdexcept>

#include "sim/workload/workload.hpp"

namespace stepsim {

static const std::map<std::string, ModelDims>& presets() {
  static const std::map<std::string, ModelDims> table = {
      //               family  hidden layers heads kv  ffn    vocab   pos   tied
      {"llama2-7b", {"llama", 4096, 32, 32, 32, 11008, 32000, 0, false}},
      {"llama2-13b", {"llama", 5120, 40, 40, 40, 13824, 32000, 0, false}},
      {"llama2-70b", {"llama", 8192, 80, 64, 8, 28672, 32000, 0, false}},
      {"llama3-8b", {"llama", 4096, 32, 32, 8, 14336, 128256, 0, false}},
      {"llama3-70b", {"llama", 8192, 80, 64, 8, 28672, 128256, 0, false}},
      {"llama3-405b", {"llama", 16384, 126, 128, 8, 53248, 128256, 0, false}},
      {"gpt2", {"gpt", 768, 12, 12, 12, 3072, 50257, 1024, true}},
      {"gpt2-medium", {"gpt", 1024, 24, 16, 16, 4096, 50257, 1024, true}},
      {"gpt2-large", {"gpt", 1280, 36, 20, 20, 5120, 50257, 1024, true}},
      {"gpt2-xl", {"gpt", 1600, 48, 25, 25, 6400, 50257, 1024, true}},
      {"gpt3-6.7b", {"gpt", 4096, 32, 32, 32, 16384, 50257, 2048, true}},
      {"gpt3-175b", {"gpt", 12288, 96, 96, 96, 49152, 50257, 2048, true}},
      {"opt-125m", {"opt", 768, 12, 12, 12, 3072, 50272, 2050, true}},
      {"opt-350m", {"opt", 1024, 24, 16, 16, 4096, 50272, 2050, true}},
      {"opt-1.3b", {"opt", 2048, 24, 32, 32, 8192, 50272, 2050, true}},
      {"opt-2.7b", {"opt", 2560, 32, 32, 32, 10240, 50272, 2050, true}},
      {"opt-6.7b", {"opt", 4096, 32, 32, 32, 16384, 50272, 2050, true}},
      {"opt-13b", {"opt", 5120, 40, 40, 40, 20480, 50272, 2050, true}},
      {"opt-30b", {"opt", 7168, 48, 56, 56, 28672, 50272, 2050, true}},
      {"opt-66b", {"opt", 9216, 64, 72, 72, 36864, 50272, 2050, true}},
      // MPT as llm-foundry's benchmark runs built it (scripts/train/yamls/pretrain/mpt-*.yaml @
      // 8c8dd48f, copied to data/published/llm-foundry-a100/yamls): the yamls set
      // d_model, n_heads, n_layers, expansion_ratio 4, vocab 50368 and nothing else, so MPTConfig's
      // defaults of 2023 hold: learned position embeddings of max_seq_len rows (not ALiBi),
      // biases (no_bias false), LayerNorm, GELU, tied embeddings. The published NumParams
      // column confirms it exactly (mpt-7b at seq 2048: 6,658,859,008; it grows with SeqLen by
      // seq x d_model). mpt-760m/1b/3b use the yamls' head counts modified for d_head 128.
      {"mpt-125m", {"mpt", 768, 12, 12, 12, 3072, 50368, 0, true}},
      {"mpt-350m", {"mpt", 1024, 24, 16, 16, 4096, 50368, 0, true}},
      {"mpt-760m", {"mpt", 1536, 24, 12, 12, 6144, 50368, 0, true}},
      {"mpt-1b", {"mpt", 2048, 24, 16, 16, 8192, 50368, 0, true}},
      {"mpt-3b", {"mpt", 2560, 32, 20, 20, 10240, 50368, 0, true}},
      {"mpt-7b", {"mpt", 4096, 32, 32, 32, 16384, 50368, 0, true}},
      {"mpt-13b", {"mpt", 5120, 40, 40, 40, 20480, 50368, 0, true}},
      {"mpt-30b", {"mpt", 7168, 48, 56, 56, 28672, 50368, 0, true}},
      {"mpt-70b", {"mpt", 8192, 80, 64, 64, 32768, 50368, 0, true}},
      // modded-nanogpt's GPT-2 small of October 2024 (records/track_1_short/2024-10-14_ModernArch
      // train_gpt2.py: GPTConfig(vocab_size=50304, n_layer=12, n_head=6, n_embd=768), MLP 4 x
      // n_embd, lm_head tied to wte): 123,568,128 parameters.
      {"nanogpt-124m", {"nanogpt", 768, 12, 6, 6, 3072, 50304, 0, true}},
      // modded-nanogpt's GPT of late 2025 (records/track_1_short/2025-10-31_AdamSyncGradientHook:
      // GPT(vocab_size=50257 -> 50304, num_layers=12, num_heads=6, head_dim=128, model_dim=768),
      // MLP 4 x 768, an untied FP8 lm_head, three value embeddings; transformer.cpp, namespace
      // nanogpt2025): 268,665,628 parameters.
      {"nanogpt-2025-10", {"nanogpt-2025", 768, 12, 6, 6, 3072, 50304, 0, false}},
  };
  return table;
}

const ModelDims& preset_dims(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) throw std::out_of_range(name);
  return it->second;
}

WorkloadOptions preset_options(const std::string& name) {
  const ModelDims& d = preset_dims(name);
  WorkloadOptions o = default_options(d.family);
  if (name.starts_with("gpt3-")) {
    // GPT-3 sizes are trained Megatron-style (Megatron-LM pretrain_gpt: hidden_dropout =
    // attention_dropout = 0.1 by default, fused kernels, flash attention).
    o.impl = Implementation::Megatron;
    o.attention = Attention::Flash;
    o.dropout = 0.1;
    o.attention_dropout = 0.1;
  }
  return o;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : presets()) out.push_back(k);
  return out;
}

}  // namespace stepsim
