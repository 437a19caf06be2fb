#pragma once
// An experiment: workload x cluster x strategy x training (DESIGN.md section 4), loaded from
// JSON with includes and --set overrides, validated once, then immutable.

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/json_reader.hpp"
#include "sim/core/release.hpp"
#include "sim/exec/allocator_config.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/workload/workload.hpp"

namespace stepsim {

struct ClusterConfig {
  std::string profile_path;
  SharedProfile profile;
  int nodes = 1;
  int gpus_per_node = 8;
  int world_size() const { return nodes * gpus_per_node; }
};

// Muon: torch.optim.Muon over each 2-D weight of the transformer blocks and torch.optim.AdamW
// over the other parameters, as Muon's documentation prescribes (sim/strategies/common.hpp
// launch_muon_step). Adafactor: torch.optim.Adafactor over every parameter (launch_adafactor_step).
// Lion: Composer's DecoupledLionW (for-loop) or DeepSpeed's FusedLion (fused), launch_optimizer_step.
// AdamW8bit: bitsandbytes' bnb.optim.AdamW8bit, blockwise 8-bit moments (launch_adamw8bit_step).
// NorMuon: modded-nanogpt's optimizers of late 2025, NorMuon and DistAdam, which synchronize the
// gradients themselves (launch_normuon_step; the family nanogpt-2025 under ddp only).
enum class Optimizer { AdamW, SGD, None, Muon, Adafactor, Lion, AdamW8bit, NorMuon };
// torch.optim.Muon first shipped in PyTorch 2.9 (pytorch/pytorch#160213, torch/optim/_muon.py),
// torch.optim.Adafactor in 2.5 (pytorch/pytorch#129905, torch/optim/_adafactor.py).
inline constexpr Release kTorchMuonSince{2, 9};
inline constexpr Release kTorchAdafactorSince{2, 5};
// The name the config and the reports use ("adamw", "muon", ...).
std::string to_string(Optimizer o);

// torch.optim's three code paths for one update over the parameter tensors (adamw.py):
//  fused     fused=True: one multi-tensor kernel series (_fused_adamw_), as DeepSpeed's and apex's
//            FusedAdam
//  foreach   foreach=True, torch's default for CUDA tensors: _multi_tensor_adamw, one
//            multi-tensor kernel series per arithmetic op over every tensor
//  for_loop  foreach=False: _single_tensor_adamw, each arithmetic op once per tensor from Python
//            (also Composer's DecoupledAdamW)
enum class OptimizerImpl { Fused, Foreach, ForLoop };
std::string to_string(OptimizerImpl i);

// Which Muon (training.muon_impl; sim/strategies/common.hpp launch_muon_step and
// launch_modded_muon_step):
//  torch                       torch.optim.Muon (PyTorch 2.9 and later)
//  modded_nanogpt              KellerJordan/modded-nanogpt's Muon of 2024-10-14: every rank
//                              orthogonalizes every matrix, Newton-Schulz under torch.compile
//  modded_nanogpt_distributed  its Muon from 2024-10-17: rank r orthogonalizes the matrices
//                              i % world == r, then one bf16 all_reduce of every update
enum class MuonImpl { Torch, ModdedNanogpt, ModdedNanogptDistributed };
// Every `muon_impl` value, in enum order (the key table's choices, the parser's and to_string's).
const std::vector<std::string>& muon_impl_names();
std::string to_string(MuonImpl i);

struct TrainingConfig {
  int grad_accum = 1;          // micro-batches per optimizer step
  bool no_sync = true;         // accumulate without gradient sync (DDP/FSDP no_sync context)
  Optimizer optimizer = Optimizer::AdamW;
  Dtype master_dtype = Dtype::FP32;  // parameters the optimizer updates (fp32 master weights)
  // Unset: the framework's or training loop's (sim/strategies/common.hpp step_optimizer_impl).
  std::optional<OptimizerImpl> optimizer_impl;
  MuonImpl muon_impl = MuonImpl::Torch;  // with optimizer muon
  // With optimizer normuon: the record's odd step (DistAdam and NorMuon) or its even one (NorMuon).
  bool normuon_odd_step = true;
  // clip_grad_norm_(max_norm) before the step: unset = the training loop's default (torchtitan
  // clips at 1.0, the others do not); declared null = no clipping; a number = its max norm.
  std::optional<std::optional<double>> clip_grad_norm;
  // PYTORCH_CUDA_ALLOC_CONF of the run: "allocator": {"expandable_segments": false,
  // "max_split_size_mb": null} (PyTorch's defaults; sim/exec/caching_allocator.hpp).
  AllocatorConfig allocator;
  // The PyTorch release of the run (torch_version), for the rules that changed between
  // releases; unset: 2.9, or what a strategy infers from its framework's release.
  std::optional<Release> torch_version;
  Release torch() const { return torch_version.value_or(kDefaultTorchRelease); }
  // Before 2.8, ProcessGroupNCCL runs each collective on its own NCCL stream and calls
  // recordStream(ncclStream) on the collective's input and output tensors (the [Sync Streams]
  // note of ProcessGroupNCCL.cpp; TORCH_NCCL_AVOID_RECORD_STREAMS=1 opted out): a tensor freed
  // while its collective is still queued returns to the caching allocator only once the
  // collective has run on the GPU. pytorch/pytorch#148590 (2.8) launches the kernel on the
  // current stream and stashes the tensors until wait(): the free is stream-ordered again.
  // This is the rule for all-reduce (and every asynchronous collective).
  bool c10d_records_streams() const { return torch() < kC10dStreamOrderedSince; }
  // A synchronous (async_op=False) all_gather_into_tensor or reduce_scatter_tensor lost its
  // recordStream earlier: pytorch/pytorch#111431 ("[ProcessGroupNCCL] Avoid recording stream for
  // synchronous ops", 2023-10-17) stashes their tensors until wait(), which also joins the
  // current stream to the NCCL stream, so the caller's free is stream-ordered. Shipped in 2.2:
  // 2.1.0's ProcessGroupNCCL.hpp collective(...) has no avoidRecordStreams parameter, 2.2.0's has
  // `bool avoidRecordStreams = false`. All-reduce kept recordStream until #148590.
  bool c10d_records_sync_gather_scatter_streams() const { return torch() < kC10dSyncGatherScatterStashedSince; }
  static constexpr Release kC10dStreamOrderedSince{2, 8};
  static constexpr Release kC10dSyncGatherScatterStashedSince{2, 2};
};

// The strategy is held as an opaque handle: sim/config reads workload, cluster and training and
// never names a framework; the strategy registry (sim/strategies) builds the Strategy.
class Strategy;
class ProfileCache;

struct Experiment {
  std::string file;
  nlohmann::json resolved;     // the config after includes and overrides (echoed in reports)
  // Read-only, and shared by the experiments a sweep builds from one workload object
  // (WorkloadCache); a test that edits one puts a changed copy here.
  std::shared_ptr<const Workload> workload = std::make_shared<const Workload>();
  ClusterConfig cluster;
  TrainingConfig training;
  std::shared_ptr<const Strategy> strategy;
};

// Workloads built once per distinct `workload` object (with the training's torch_version, which
// its defaults read) and shared by the experiments a sweep builds from one base: points that
// vary only cluster, strategy or training knobs have byte-identical op lists, and building a
// transformer's was ~11 % of a sweep point (issue 49). Thread-safe. At most `capacity`
// workloads are kept: full, it keeps the first ones and takes no more (experiment.cpp says
// why), so a sweep's memory stays bounded however many workloads it varies through. A hit is
// shared, not copied (a copy was ~1/3 of a build and 16 % of a sweep point's heap allocations).
class WorkloadCache {
 public:
  // What a full cache does with a new workload: keep what it holds (a sweep, above), or make
  // room by dropping the one used longest ago (the process's cache, below, whose calls come one
  // after another from a user's loop: the workload of the current loop is the one to keep; and
  // a sweep worker's own, below).
  enum class WhenFull { KeepFirst, DropLeastRecent };
  // With a `parent`, a cache of one thread's own in front of a shared one: what it does not hold
  // it looks for in the parent, and what is built it offers the parent and keeps itself. A sweep
  // worker keeps the workloads it built last so (sweep_run.cpp: the runner evaluates the points
  // that build one workload one after another), and frees them itself: freed by another thread,
  // a workload's heap blocks went back across threads to the arena that allocated them, a fifth
  // more CPU time in a sweep whose every point builds its own (sweep_bench sweep 100000 2).
  explicit WorkloadCache(std::size_t capacity = 1024, WhenFull when_full = WhenFull::KeepFirst, WorkloadCache* parent = nullptr)
      : capacity_(capacity), when_full_(when_full), parent_(parent) {}
  // Not const: a thread's own cache (with a parent) that misses makes room for what the caller
  // builds.
  std::shared_ptr<const Workload> find(const std::string& key);
  // `w` as read_experiment made it: a workload no one else holds any more may be handed to the
  // build of another (take_recyclable), so the cache holds it as an object that can change.
  void add(const std::string& key, std::shared_ptr<Workload> w);
  // A workload a find that missed dropped to make room, which nothing else held: the caller may
  // build the next one from it (build_transformer's `recycled`: its names are taken where they
  // are the new workload's: an eighth of a sweep point that builds its workload, issue 49), then
  // drops it. Null if none. Only a cache that drops what it holds when full has one.
  std::shared_ptr<Workload> take_recyclable();
  // Finds that found a workload here, and that did not (nor in the parent: the caller then
  // built one).
  std::uint64_t hits() const;
  std::uint64_t misses() const;
  // Whether a workload whose model is read from a file (hf_config) may be kept: its key is its
  // JSON object, which names the file but not its content. A sweep reads it once per run; the
  // process's cache does not keep it, so an edited config.json is read again at the next call.
  bool keeps_file_models() const { return parent_ ? parent_->keeps_file_models() : when_full_ == WhenFull::KeepFirst; }

 private:
  struct Entry {
    std::shared_ptr<Workload> workload;
    std::uint64_t last_use = 0;
  };
  std::size_t capacity_;
  WhenFull when_full_;
  WorkloadCache* parent_;
  mutable std::mutex mutex_;
  std::uint64_t uses_ = 0, hits_ = 0, misses_ = 0;
  std::unordered_map<std::string, Entry> by_key_;
  std::shared_ptr<Workload> recyclable_;
};

// The cache load_experiment and load_experiment_from_json share within a process (the Python
// API's simulate, explain and their loops; a C++ caller's): a user's loop over strategy, cluster
// or training knobs builds its model once, where each call built it again (2.1 M of a call's
// 13.9 M instructions for the Llama-3-8B DDP example). Eight workloads, the least recently used
// dropped; models read from files are not kept (keeps_file_models).
WorkloadCache& process_workload_cache();

// Reads the "strategy" object of an experiment whose workload, cluster and training are read:
// `strategy` is positioned at /strategy ("world_size" consumed and checked). The one such
// reader is the strategy registry's (sim/strategies/load_experiment.hpp), which owns each
// framework's keys.
using StrategyReader = std::function<std::shared_ptr<const Strategy>(ObjectReader& strategy, const Experiment& e)>;

// The experiment file with its includes merged and the --set overrides applied; `sources`
// names the file each JSON path came from.
nlohmann::json load_experiment_document(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                                        SourceMap& sources);
// The same for a document in memory (the Python API's dict), named `as_file` in messages.
nlohmann::json experiment_document_of(nlohmann::json doc, const std::string& as_file, const std::vector<std::string>& overrides,
                                      SourceMap& sources);

// Parses and validates an already-resolved experiment document, the strategy object through
// `read_strategy`. Throws InputError with file, JSON path, value and expectation. With
// `profiles`, profile files are parsed once and shared across experiments. `root_path` is the
// JSON path of `doc` inside the file `sources` describes ("" for a whole experiment file;
// validate reads an experiment embedded in a suite at "/cases/3/experiment"), so errors name
// the path the user wrote. Callers use load_experiment / experiment_from_json
// (sim/strategies/load_experiment.hpp), which pass the registry.
// With `workloads`, a workload object met before is not built again (WorkloadCache). `doc`
// becomes the experiment's `resolved` (a caller done with it moves it in: no copy).
Experiment read_experiment(nlohmann::json doc, const SourceMap& sources, const StrategyReader& read_strategy,
                           ProfileCache* profiles = nullptr, const std::string& root_path = "",
                           WorkloadCache* workloads = nullptr);

// The workload's implementation knobs as they applied, defaults resolved, under their config
// keys (the `workload` line of results, beside the strategy's effective_config): implementation,
// attention, dropout, attention_dropout, compile, training_loop, loop_keeps_output,
// activation_checkpointing (with flash_attn_version for `flash`, activation_checkpointing_every
// for every_k, checkpoint_early_stop when blocks are checkpointed). Null for a toy workload, which has none.
nlohmann::json effective_workload(const Workload& w);

}  // namespace stepsim
