// FSDP2 config parsing and parameter groups (framework-semantics.md F2.1-F2.5, section 7).
#include <set>

#include <fmt/format.h>

#include "sim/strategies/common.hpp"
#include "sim/strategies/fsdp2.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

namespace stepsim {
namespace fsdp2 {

std::int64_t Group::shard_numel() const { return padded / shard_ranks; }

std::int64_t padded_numel(const Param& p, int ranks) {
  // torch.chunk on dim 0, every chunk padded to ceil(dim0 / W) rows (_get_dim0_padded_size).
  const std::int64_t dim0 = p.dim0 > 0 ? p.dim0 : p.numel;
  if (dim0 == 0) return 0;
  const std::int64_t row = p.numel / dim0;
  return ranks * ceil_div(dim0, ranks) * row;
}

std::vector<Group> build_groups(const Workload& w, const Fsdp2Config& c) {
  std::vector<Group> groups;
  Group root;
  root.name = "root";
  root.root = true;
  root.shard_ranks = c.shard;
  groups.push_back(root);
  for (const Layer& l : w.layers) {
    // wrap "block": fully_shard(block) for every Block; everything else is left to the root
    // (fully_shard(model) takes the parameters no inner call owns, F2.1).
    Group* g = &groups.front();
    if (c.wrap == "block" && l.kind == LayerKind::Block) {
      Group b;
      b.name = l.name;
      b.shard_ranks = c.shard;
      groups.push_back(b);
      g = &groups.back();
    }
    g->layers.push_back(&l);
    for (const Param* p : l.params()) {
      g->numel += p->numel;
      g->padded += padded_numel(*p, c.shard);
    }
  }
  return groups;
}

int nodes_spanned(int start, int stride, int count, int gpus_per_node) {
  std::set<int> nodes;
  for (int i = 0; i < count; ++i) nodes.insert((start + i * stride) / gpus_per_node);
  return static_cast<int>(nodes.size());
}

}  // namespace fsdp2

namespace {

// Mesh (F2.3): default 1-D over the world; {"replicate": R, "shard": S} is HSDP.
void parse_mesh(ObjectReader& r, const Experiment& e, fsdp2::Fsdp2Config& c) {
  const int W = e.cluster.world_size();
  c.shard = W;
  if (!r.has("mesh")) return;
  ObjectReader m = r.object("mesh", strategy_keys::fsdp2_mesh());
  std::int64_t rep = m.integer_in("replicate", 1, W, 1);
  std::int64_t sh = m.integer_in("shard", 1, W, W / rep > 0 ? W / rep : 1);
  m.finish();
  if (rep * sh != W)
    r.fail("mesh", fmt::format("replicate x shard equal to the world size {} ({} nodes x {} GPUs)", W,
                               e.cluster.nodes, e.cluster.gpus_per_node));
  c.replicate = static_cast<int>(rep);
  c.shard = static_cast<int>(sh);
}

// The first PyTorch whose FSDP2 root honours an explicit reshard_after_forward: before it,
// FSDPState._lazy_init set the root group's post_forward_mesh_info = None unconditionally ("For
// the root, do not reshard after forward"); pytorch/pytorch#154704 and #155319 (2025-06, 2.8) made
// it conditional on `self._auto_reshard_after_forward` (torch 2.9
// torch/distributed/fsdp/_fully_shard/_fsdp_state.py l.183-186), which is true only for the None
// default (_fully_shard.py l.205-210 `auto_reshard_after_forward = reshard_after_forward is None`).
constexpr Release kFsdp2RootReshardsSince{2, 8};

// reshard_after_forward (F2.4): None/true -> reshard non-root groups; false -> keep; int k
// -> a non-trivial divisor of the shard size. Then the root's and the last block's overrides.
// `torch`: the run's PyTorch; an explicit value reshards the root too only from 2.8.
void parse_reshard(ObjectReader& r, fsdp2::Fsdp2Config& c, Release torch) {
  const bool root_honours = torch >= kFsdp2RootReshardsSince;
  c.reshard_size = c.shard;
  if (r.has("reshard_after_forward")) {
    const Json& v = r.raw("reshard_after_forward");
    const std::string expected =
        fmt::format("true, false, null, or an integer k with 1 < k < {} dividing the shard size {}", c.shard, c.shard);
    if (v.is_null()) {
      c.reshard_size = c.shard;
    } else if (v.is_boolean()) {
      c.reshard_size = v.get<bool>() ? c.shard : 0;
      c.root_reshard = v.get<bool>() && root_honours;
    } else if (v.is_number_integer()) {
      std::int64_t k = v.get<std::int64_t>();
      if (k <= 1 || k >= c.shard || c.shard % k != 0) r.fail("reshard_after_forward", expected);
      c.reshard_size = static_cast<int>(k);
      c.root_reshard = root_honours;
    } else {
      r.fail("reshard_after_forward", expected);
    }
  }

  c.root_reshard = r.boolean("root_reshard_after_forward", c.root_reshard);
  if (c.root_reshard && !root_honours)
    r.fail("root_reshard_after_forward", fmt::format("false with training.torch_version {} (FSDP2's root reshards after forward "
                                                     "from PyTorch {}: pytorch#154704, #155319)",
                                                     torch.text(), kFsdp2RootReshardsSince.text()));
  c.last_block_reshard = c.reshard_size > 0;
  if (r.has("reshard_last_block_after_forward")) {
    c.last_block_reshard = r.boolean("reshard_last_block_after_forward", c.last_block_reshard);
    if (c.last_block_reshard && c.reshard_size == 0)
      r.fail("reshard_last_block_after_forward", "false when reshard_after_forward is false (no block reshards)");
  }
}

// MixedPrecisionPolicy: param_dtype (None: the parameters' own dtype) and reduce_dtype (left
// unset unless given; unset_reduce_dtype says what that means).
void parse_mixed_precision(ObjectReader& r, const Experiment& e, fsdp2::Fsdp2Config& c) {
  c.orig_dtype = e.training.master_dtype;
  c.param_dtype = c.orig_dtype;  // MixedPrecisionPolicy(param_dtype=None)
  if (!r.has("mixed_precision")) return;
  ObjectReader mp = r.object("mixed_precision", strategy_keys::fsdp2_mixed_precision());
  c.param_dtype = mp.dtype("param_dtype", c.orig_dtype);
  if (mp.has("reduce_dtype")) c.reduce_dtype = mp.dtype("reduce_dtype", c.param_dtype);
  mp.finish();
}

}  // namespace

std::unique_ptr<Strategy> parse_fsdp2(ObjectReader& r, const Experiment& e) {
  fsdp2::Fsdp2Config c;
  c.wrap = r.declared_choice("wrap");
  parse_mesh(r, e, c);
  parse_reshard(r, c, e.training.torch());
  // Prefetch depths and buffer counts beyond the layer count change nothing; 1024 bounds them.
  c.forward_prefetch = r.declared_int("forward_prefetch");
  c.backward_prefetch = r.declared_int("backward_prefetch");
  parse_mixed_precision(r, e, c);
  c.unset_reduce_dtype = r.declared_choice("unset_reduce_dtype");
  c.rs_max_input_buffers = r.declared_int("reduce_scatter_max_input_buffers");
  return fsdp2::make_fsdp2(c);
}

}  // namespace stepsim
