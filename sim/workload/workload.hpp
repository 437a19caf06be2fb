#pragma once
// A model as the frameworks see it: an ordered list of layers (embedding, blocks, final norm,
// head), each a list of modules owning parameters, with the kernels of its forward and
// backward pass and the activation bytes it saves for backward.
//
// The strategies wrap these: FSDP's `block` policy makes each Block a unit and leaves the
// rest to the root; DDP buckets the parameters in gradient-ready order; ZeRO-3 fetches each
// module's direct parameters.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

struct Param {
  std::string name;
  std::int64_t numel = 0;
  std::int64_t dim0 = 0;  // rows (FSDP2 shards dim 0 and pads it to a multiple of the group)
};

struct Module {
  std::string name;             // "block.3.attn.q_proj"
  std::vector<Param> params;    // direct parameters
  KernelWork forward;
  KernelWork backward;          // input grad + weight grad
  std::int64_t numel() const;
};

enum class LayerKind { Embedding, Block, Norm, Head };
std::string to_string(LayerKind k);

struct Layer {
  std::string name;             // "embed", "block.3", "norm", "head"
  LayerKind kind = LayerKind::Block;
  std::vector<Module> modules;
  Bytes saved_activations;      // held from this layer's forward to its backward
  KernelWork recompute;         // re-run forward work in backward (activation checkpointing)
  Bytes recompute_activations;  // transient during backward when recomputing

  std::int64_t numel() const;
  KernelWork forward() const;
  KernelWork backward() const;  // recompute + backward of every module
  std::vector<const Param*> params() const;
};

enum class Checkpointing { None, Selective, Full };
std::string to_string(Checkpointing c);

struct Workload {
  std::string name;
  Dtype dtype = Dtype::BF16;    // compute dtype
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 1;
  Checkpointing checkpointing = Checkpointing::None;
  std::int64_t hidden = 0;      // model width (0 for toy workloads), for throughput conventions
  bool toy = false;             // fixed-time layers (textbook cases)
  std::vector<Layer> layers;

  std::int64_t numel() const;
  std::int64_t tokens() const { return micro_batch * seq_len; }
  // Model FLOPs of one micro-batch (forward + backward, no recompute): for MFU.
  Flops model_flops() const;
};

// Transformer dimensions, enough to build a preset.
struct ModelDims {
  std::string family;           // "llama", "gpt", "opt", "mpt"
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  std::int64_t max_positions = 0;  // learned positional embeddings (gpt, opt); 0 for rotary
  bool tied_embeddings = false;
};

// The named presets ("llama3-8b", "opt-1.3b", ...). Throws std::out_of_range for an unknown name.
const ModelDims& preset_dims(const std::string& name);
std::vector<std::string> preset_names();

Workload build_transformer(const std::string& name, const ModelDims& dims, std::int64_t micro_batch,
                           std::int64_t seq_len, Dtype dtype, Checkpointing ckpt);

// Textbook form: `layers` identical layers of fixed forward/backward time, `params` elements
// each, `activation_bytes` saved each; no embedding, head or norm (the FSDP root holds no
// parameters).
struct ToyLayerSpec {
  Time forward, backward;
  std::int64_t params = 0;
  Bytes activations;
};
Workload build_toy(const std::vector<ToyLayerSpec>& layers, Dtype dtype);

}  // namespace stepsim
