#include "sim/strategies/fsdp1_units.hpp"

#include "sim/strategies/common.hpp"

namespace stepsim {

std::string to_string(Fsdp1Sharding s) {
  switch (s) {
    case Fsdp1Sharding::FullShard: return "full_shard";
    case Fsdp1Sharding::ShardGradOp: return "shard_grad_op";
    case Fsdp1Sharding::NoShard: return "no_shard";
    case Fsdp1Sharding::HybridShard: return "hybrid_shard";
    case Fsdp1Sharding::HybridShardZero2: return "hybrid_shard_zero2";
  }
  return "full_shard";
}

std::string to_string(Fsdp1BackwardPrefetch p) {
  switch (p) {
    case Fsdp1BackwardPrefetch::BackwardPre: return "backward_pre";
    case Fsdp1BackwardPrefetch::BackwardPost: return "backward_post";
    case Fsdp1BackwardPrefetch::None: return "none";
  }
  return "backward_pre";
}

std::string to_string(Fsdp1Wrap w) {
  switch (w) {
    case Fsdp1Wrap::Block: return "block";
    case Fsdp1Wrap::Size: return "size";
    case Fsdp1Wrap::None: return "none";
  }
  return "none";
}

nlohmann::json Fsdp1Config::to_json(Dtype master) const {
  nlohmann::json j = {{"framework", "fsdp1"},
                      {"sharding", to_string(sharding)},
                      {"requested_sharding", to_string(requested)},
                      {"backward_prefetch", to_string(backward_prefetch)},
                      {"forward_prefetch", forward_prefetch},
                      {"limit_all_gathers", limit_all_gathers},
                      {"wrap", to_string(wrap)},
                      {"use_orig_params", use_orig_params},
                      {"param_dtype", to_string(param_dtype(master))},
                      {"reduce_dtype", to_string(reduce_dtype(master))}};
  if (wrap == Fsdp1Wrap::Size) j["min_num_params"] = min_num_params;
  if (mp_param || mp_reduce) {
    j["mixed_precision"] = nlohmann::json::object();
    if (mp_param) j["mixed_precision"]["param_dtype"] = to_string(*mp_param);
    j["mixed_precision"]["reduce_dtype"] = to_string(reduce_dtype(master));
  } else {
    j["mixed_precision"] = nullptr;
  }
  return j;
}

namespace {

// F1.2, a parameter at a time: _get_aligned_numel's ALIGNMENT (16 bytes) // itemsize of the flat
// parameter's dtype; 0 (no alignment) without use_orig_params.
std::int64_t alignment(bool use_orig_params, Dtype master) { return use_orig_params ? 16 / dtype_bytes(master) : 0; }

// The flat parameter's numel after a parameter of n elements joins `total`.
std::int64_t add_param(std::int64_t total, std::int64_t n, std::int64_t aligned) {
  if (aligned > 0 && total % aligned != 0) total += aligned - total % aligned;
  return total + n;
}

// "Pad to be divisible by world size to avoid a copy for the post-backward reduce-scatter."
std::int64_t pad_for_shards(std::int64_t total, std::int64_t aligned, int shard_size) {
  if (aligned > 0 && total % shard_size != 0) total += shard_size - total % shard_size;
  return total;
}

}  // namespace

std::int64_t fsdp1_flat_numel(const std::vector<std::int64_t>& param_numels, bool use_orig_params, int shard_size,
                              Dtype master) {
  const std::int64_t aligned = alignment(use_orig_params, master);
  std::int64_t total = 0;
  for (std::int64_t n : param_numels) total = add_param(total, n, aligned);
  return pad_for_shards(total, aligned, shard_size);
}

std::vector<Fsdp1Unit> make_fsdp1_units(const Workload& w, const Fsdp1Config& c, int shard_size, Dtype master) {
  // Sized up front, the flat numels summed as the parameters come: a sweep builds these at every
  // point.
  const std::int64_t aligned = alignment(c.use_orig_params, master);
  std::vector<Fsdp1Unit> units(1);
  units.reserve(w.layers.size() + 1);
  units[0].name = "root";
  units[0].root = true;
  for (std::size_t li = 0; li < w.layers.size(); ++li) {
    const Layer& l = w.layers[li];
    bool wrapped = false;
    switch (c.wrap) {
      case Fsdp1Wrap::Block: wrapped = l.kind == LayerKind::Block; break;
      case Fsdp1Wrap::Size: wrapped = l.numel() > 0 && l.numel() >= c.min_num_params; break;
      case Fsdp1Wrap::None: wrapped = false; break;
    }
    std::size_t u = 0;
    if (wrapped) {
      units.push_back(Fsdp1Unit{});
      units.back().name = l.name;
      u = units.size() - 1;
    }
    units[u].layers.push_back(li);
    for (const Module& m : l.modules)
      for (const Param& p : m.params) {
        units[u].numel += p.numel;
        units[u].flat_numel = add_param(units[u].flat_numel, p.numel, aligned);
      }
  }
  for (Fsdp1Unit& unit : units) {
    unit.flat_numel = pad_for_shards(unit.flat_numel, aligned, shard_size);
    // torch.chunk + _get_shard: every shard padded to ceil(N/W) elements.
    unit.shard_numel = ceil_div(unit.flat_numel, shard_size);
    unit.padded_numel = unit.shard_numel * shard_size;
  }
  return units;
}

std::int64_t fsdp1_predivide_factor(std::int64_t world) {
  std::int64_t f = 1;
  while (world % f == 0 && world / f > f) f *= 2;
  return f;
}

}  // namespace stepsim
