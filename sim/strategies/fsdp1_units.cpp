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

std::int64_t fsdp1_flat_numel(const std::vector<std::int64_t>& param_numels, bool use_orig_params, int shard_size,
                              Dtype master) {
  std::int64_t total = 0;
  // _get_aligned_numel: ALIGNMENT (16 bytes) // itemsize of the flat parameter's dtype; 0
  // (no alignment) without use_orig_params.
  const std::int64_t aligned = use_orig_params ? 16 / dtype_bytes(master) : 0;
  for (std::int64_t n : param_numels) {
    if (aligned > 0 && total % aligned != 0) total += aligned - total % aligned;
    total += n;
  }
  // "Pad to be divisible by world size to avoid a copy for the post-backward reduce-scatter."
  if (aligned > 0 && total % shard_size != 0) total += shard_size - total % shard_size;
  return total;
}

std::vector<Fsdp1Unit> make_fsdp1_units(const Workload& w, const Fsdp1Config& c, int shard_size, Dtype master) {
  // Sized up front: a sweep builds these at every point.
  std::vector<Fsdp1Unit> units(1);
  units.reserve(w.layers.size() + 1);
  units[0].name = "root";
  units[0].root = true;
  std::vector<std::vector<std::int64_t>> numels(1);
  numels.reserve(w.layers.size() + 1);
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
      numels.emplace_back().reserve(static_cast<std::size_t>(l.param_count()));
      u = units.size() - 1;
    }
    units[u].layers.push_back(li);
    for (const Module& m : l.modules)
      for (const Param& p : m.params) {
        units[u].numel += p.numel;
        numels[u].push_back(p.numel);
      }
  }
  for (std::size_t u = 0; u < units.size(); ++u) {
    Fsdp1Unit& unit = units[u];
    unit.flat_numel = fsdp1_flat_numel(numels[u], c.use_orig_params, shard_size, master);
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
