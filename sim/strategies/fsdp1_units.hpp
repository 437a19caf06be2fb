#pragma once
// FSDP1 configuration and units (framework-semantics.md section 1.1, F1.1-F1.4): which layers
// form each FlatParameter, and the flat-parameter padding and shard sizes of F1.2.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

enum class Fsdp1Sharding { FullShard, ShardGradOp, NoShard, HybridShard, HybridShardZero2 };
enum class Fsdp1BackwardPrefetch { BackwardPre, BackwardPost, None };
// block: one unit per Block layer (transformer_auto_wrap_policy); size: a layer is a unit when
// it holds >= min_num_params parameters (size_based_auto_wrap_policy, judged per layer);
// none: PyTorch's auto_wrap_policy=None, the root alone.
enum class Fsdp1Wrap { Block, Size, None };

std::string to_string(Fsdp1Sharding s);
std::string to_string(Fsdp1BackwardPrefetch p);
std::string to_string(Fsdp1Wrap w);

struct Fsdp1Config {
  Fsdp1Sharding requested = Fsdp1Sharding::FullShard;  // what the user asked for
  Fsdp1Sharding sharding = Fsdp1Sharding::FullShard;   // after "world size 1 -> NO_SHARD"
  Fsdp1BackwardPrefetch backward_prefetch = Fsdp1BackwardPrefetch::BackwardPre;
  bool forward_prefetch = false;
  bool limit_all_gathers = true;                        // True since PyTorch 2.1
  // stepsim default: one unit per block (transformer_auto_wrap_policy), what every FSDP1 recipe
  // passes; PyTorch's own default, auto_wrap_policy=None, is "none".
  Fsdp1Wrap wrap = Fsdp1Wrap::Block;
  std::int64_t min_num_params = 100'000'000;            // size_based_auto_wrap_policy default 1e8
  bool use_orig_params = false;
  // MixedPrecision(param_dtype, reduce_dtype); unset = full precision (the master dtype).
  std::optional<Dtype> mp_param, mp_reduce;

  bool sharded() const { return sharding != Fsdp1Sharding::NoShard; }
  bool hybrid() const { return sharding == Fsdp1Sharding::HybridShard || sharding == Fsdp1Sharding::HybridShardZero2; }
  // N, the ranks a flat parameter is sharded over: 1 unsharded, the node's GPUs hybrid, else all.
  int shard_size(int world, int gpus_per_node) const { return !sharded() ? 1 : hybrid() ? gpus_per_node : world; }
  // F1.3/F1.14: FULL_SHARD and HYBRID_SHARD free the unsharded parameters after forward.
  bool reshard_after_forward() const {
    return sharding == Fsdp1Sharding::FullShard || sharding == Fsdp1Sharding::HybridShard;
  }
  // F1.22: param dtype, reduce dtype (defaults to the param dtype when only it is given).
  Dtype param_dtype(Dtype master) const { return mp_param.value_or(master); }
  Dtype reduce_dtype(Dtype master) const { return mp_reduce ? *mp_reduce : param_dtype(master); }
  nlohmann::json to_json(Dtype master) const;
};

// One FullyShardedDataParallel instance = one FlatParameter (F1.1).
struct Fsdp1Unit {
  std::string name;                  // the layer name ("block.17"), or "root"
  bool root = false;
  boost::container::small_vector<std::size_t, 1> layers;  // indices into Workload::layers, ascending (a block: one)
  std::int64_t numel = 0;            // sum of the original parameters' numels
  std::int64_t flat_numel = 0;       // flat parameter numel (with use_orig_params alignment padding)
  std::int64_t shard_numel = 0;      // ceil(flat_numel / N): every rank's padded shard
  std::int64_t padded_numel = 0;     // N * shard_numel: the all-gather output / RS input
  bool has_handle() const { return numel > 0; }  // a root without parameters has no handle
};

// Units in pre-forward order: the root first (index 0, always present), then the wrapped
// layers in layer order. `shard_size` = N, the size of the group a flat parameter is sharded
// over (1 for NO_SHARD). `master` is the original parameter dtype (the alignment unit).
std::vector<Fsdp1Unit> make_fsdp1_units(const Workload& w, const Fsdp1Config& c, int shard_size, Dtype master);

// F1.2: flat numel of a unit's parameters: with use_orig_params every parameter start is
// aligned to 16 bytes of the flat parameter's dtype and the total padded to a multiple of N.
std::int64_t fsdp1_flat_numel(const std::vector<std::int64_t>& param_numels, bool use_orig_params, int shard_size,
                              Dtype master);

// F1.21: the gradient pre-divide factor for a data-parallel size W (post = W / pre).
std::int64_t fsdp1_predivide_factor(std::int64_t world);

}  // namespace stepsim
