#pragma once
// PyTorch FSDP2 (`fully_shard`), internal to sim/strategies/fsdp2*.cpp: the validated config
// and the parameter groups (framework-semantics.md section 2, F2.x). Targets PyTorch 2.9; the
// version-dependent behaviours of section 10 that move step time are named knobs.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/experiment.hpp"
#include "sim/core/units.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

class Strategy;

namespace fsdp2 {

struct Fsdp2Config {
  // "block": fully_shard on every Block layer + the root (embedding, final norm, head);
  // "none": only the root group (one AG / RS for the whole model).
  std::string wrap = "block";
  // 2-D device mesh (F2.3): dim 0 replicate, dim 1 shard; replicate * shard = world size.
  int replicate = 1;
  int shard = 1;
  // reshard_after_forward for non-root groups (F2.4). The root is never resharded after
  // forward. 0 = False (keep), `shard` = True, 1 < k < shard = keep a 1/k slice and
  // all-gather over a group of k ranks in backward.
  int reshard_size = 1;
  // The root's own post-forward reshard (F2.4): fully_shard(reshard_after_forward=None), the
  // default, sets _auto_reshard_after_forward and FSDPState._lazy_init then clears the root's
  // post_forward_mesh_info; an explicit value (True or an int, as torchtitan passes) leaves
  // it, so the root is resharded like every group and all-gathered again at backward start.
  bool root_reshard = false;
  // reshard_after_forward of the last block group (torchtitan passes False for it): false keeps
  // it unsharded from its forward to its backward, which comes first.
  bool last_block_reshard = true;
  // Explicit forward prefetch: each group unshards the next `forward_prefetch` groups in
  // forward order after its own unshard (set_modules_to_forward_prefetch); 0 = implicit.
  int forward_prefetch = 0;
  // Backward prefetch: groups unsharded ahead in reverse post-forward order; 1 = the default
  // one-ahead implicit prefetch (set_modules_to_backward_prefetch for > 1).
  int backward_prefetch = 1;
  // MixedPrecisionPolicy (F2.5). param_dtype defaults to the original (master) dtype.
  Dtype orig_dtype = Dtype::FP32;
  Dtype param_dtype = Dtype::FP32;
  std::optional<Dtype> reduce_dtype;
  // Version knob (section 10): an unset reduce_dtype reduces in the gradient dtype, i.e. the
  // param dtype ("param_dtype", PyTorch <= 2.9), or in the original dtype ("orig_dtype", the
  // newest main docstring: follows the parameter's grad_dtype, default orig dtype).
  std::string unset_reduce_dtype = "param_dtype";
  // Version knob (section 10, PR #186000): RS inputs in flight before the compute stream
  // waits on the oldest RS (F2.14-4). 1 in every release up to 2.9.
  int rs_max_input_buffers = 1;

  Dtype effective_reduce_dtype() const {
    if (reduce_dtype) return *reduce_dtype;
    return unset_reduce_dtype == "param_dtype" ? param_dtype : orig_dtype;
  }
  bool resharded_after_forward() const { return reshard_size > 0; }
  bool partial_reshard() const { return reshard_size > 0 && reshard_size < shard; }
};

// One fully_shard call = one FSDPParamGroup (F2.1).
struct Group {
  std::string name;                  // "root", "block.3"
  bool root = false;
  std::vector<const Layer*> layers;  // layers whose parameters it owns
  std::int64_t numel = 0;            // unpadded parameters
  std::int64_t padded = 0;           // sum over params of W * ceil(dim0 / W) * (numel / dim0)
  std::int64_t shard_numel() const;  // padded / W (this rank's shard)
  int shard_ranks = 1;               // W
  bool empty() const { return numel == 0; }
};

// Unsharded padded numel of one parameter over a shard group of `ranks` (F2.2).
std::int64_t padded_numel(const Param& p, int ranks);

// Groups in forward (pre-forward) order: the root first, then one per Block (wrap "block").
std::vector<Group> build_groups(const Workload& w, const Fsdp2Config& c);

// Number of nodes spanned by the ranks {start + i * stride, i < count} when ranks are laid
// out node-major with `gpus_per_node` per node.
int nodes_spanned(int start, int stride, int count, int gpus_per_node);

std::unique_ptr<Strategy> make_fsdp2(Fsdp2Config c);

}  // namespace fsdp2
}  // namespace stepsim
