#pragma once
// DeepSpeed ZeRO (stages 1, 2, 3): the configuration shared by zero.cpp (parsing), zero12.cpp
// (stage_1_and_2.py) and zero3.cpp (stage3.py + partitioned_param_coordinator.py), following
// framework-semantics.md section 4 (Z4.x), S8.4, S8.5 and M5.1/M5.5.
//
// Every size knob is an ELEMENT count, as DeepSpeed counts them (Z4.1): reduce_bucket_size =
// 5e8 elements is a 1 GB bf16 IPG buffer, not 500 MB.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "sim/config/experiment.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// A DeepSpeed release, for the rules that changed between releases (deepspeed_version).
using DeepSpeedVersion = Release;

struct ZeroConfig {
  int stage = 1;
  DeepSpeedVersion version{0, 19, 6};
  // Where stages 1/2 allocate the IPG buffers (contiguous_gradients): before 0.18.3
  // DeepSpeedZeroOptimizer.backward() allocated them ahead of loss.backward(); since #7665
  // (53e91a09, 0.18.3) setup_buckets() allocates them at the first gradient hook.
  bool ipg_buffers_at_backward_start() const { return version < DeepSpeedVersion{0, 18, 3}; }
  // How DeepSpeedEngine.backward() logs the loss, release by release (engine.py backward()):
  //   <= 0.9.2  MonitorOnly: only the monitor, on rank 0 at the boundary,
  //             `loss.mean().item() * gradient_accumulation_steps()` (v0.9.2 l.1831);
  //   0.9.3 (#3428, 4d269c6e) to 0.10.0  OffBoundary: `self.losses.append(loss.mean().item())`
  //             on every rank off the boundary; at the boundary the list of floats is reset, and
  //             the monitor writes their mean without a read-back (v0.10.0 l.1876-1884);
  //   0.10.1 (#4030, eeab613a) to 0.13.2  EveryMicroBatch: `self.losses += loss.mean().item()`
  //             on every rank and micro-batch (v0.12.6 l.1935);
  //   >= 0.13.3 (#5135, fac1df99)  OnDevice: `mean_loss = loss.mean().detach()`, summed on the
  //             device (`self.losses + mean_loss` after a window's first micro-batch; `step()`
  //             resets it to None) and read back only by the monitor (v0.16.5 l.2105-2112).
  enum class LossLog { MonitorOnly, OffBoundary, EveryMicroBatch, OnDevice };
  LossLog loss_log() const {
    if (version < DeepSpeedVersion{0, 9, 3}) return LossLog::MonitorOnly;
    if (version < DeepSpeedVersion{0, 10, 1}) return LossLog::OffBoundary;
    if (version < DeepSpeedVersion{0, 13, 3}) return LossLog::EveryMicroBatch;
    return LossLog::OnDevice;
  }
  // DeepSpeed's monitor (a tensorboard, wandb, csv_monitor or comet block enabled in the ds
  // config; MonitorMaster since 0.6.6, #2013): at each accumulation boundary rank 0 reads the
  // loss back and writes it (engine.py v0.12.6 l.1936-1944, v0.16.5 l.2107-2115: `self.losses
  // .item()`, then monitor.write_events, which flushes). The other ranks wait for rank 0 at the
  // next collective. Its write at engine.step's end is part of the loop's tail (host.step_end).
  bool monitor = false;
  // Whether c10d holds a collective's tensors until it has run (TrainingConfig::
  // c10d_records_streams): the run's torch_version when the experiment gives one; else the
  // PyTorch of the DeepSpeed release's time: releases up to 0.16.4 (February 2025; the
  // repository's version.txt read 0.16.5 on 2025-02-21) predate pytorch#148590 (2.8), later
  // ones are taken with the default 2.9.
  bool c10d_records_streams(const TrainingConfig& t) const {
    return t.torch_version ? t.c10d_records_streams() : version < DeepSpeedVersion{0, 16, 5};
  }
  // The same for a synchronous reduce-scatter or all-gather (ZeRO-3's, TrainingConfig::
  // c10d_records_sync_gather_scatter_streams): recorded before PyTorch 2.2 (pytorch#111431);
  // without torch_version, DeepSpeed releases up to 0.13.1 (tagged 2024-01-23, before PyTorch
  // 2.2.0 of 2024-01-30; v0.13.2 is of 2024-02-10) are taken with a PyTorch of their time.
  bool c10d_records_sync_gather_scatter_streams(const TrainingConfig& t) const {
    return t.torch_version ? t.c10d_records_sync_gather_scatter_streams() : version < DeepSpeedVersion{0, 13, 2};
  }
  // Z4.1 defaults of deepspeed/runtime/zero/config.py (DeepSpeed 0.19).
  std::int64_t reduce_bucket_size = 500'000'000;
  std::int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;                 // None -> True for stage 3, False for 1/2
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  // DeepSpeed >= 0.12.4 (PR #4695): one all-reduce per IPG bucket. false = the older
  // per-owner-rank dist.reduce per bucket (section 10).
  bool use_multi_rank_bucket_allreduce = true;
  // torch >= 1.13 has all_gather_into_tensor: the post-step gather of stages 1/2 is one AG of
  // the whole flat buffer. false = the legacy bucketed dist.all_gather (allgather_bucket_size).
  bool all_gather_into_tensor = true;
  std::int64_t prefetch_bucket_size = 50'000'000;
  std::int64_t max_live_parameters = 1'000'000'000;
  std::int64_t max_reuse_distance = 1'000'000'000;
  std::int64_t param_persistence_threshold = 100'000;
  std::int64_t model_persistence_threshold = std::numeric_limits<std::int64_t>::max();  // sys.maxsize
  std::int64_t sub_group_size = 1'000'000'000;
  // The optimizer's parameter groups (stages 1/2 flatten, partition and all-gather each group
  // on its own: bit16_groups in stage_1_and_2.py). "decay_no_decay": the two groups every
  // common training script builds (HF Trainer get_decay_parameter_names, DeepSpeed-Chat
  // get_optimizer_grouped_parameters): weights in group 0, the 1-D params (biases, norm
  // weights) in group 1. "one": a single group (model.parameters()).
  bool two_param_groups = true;
  Dtype model_dtype = Dtype::BF16;           // the bit16 params (= the workload dtype)
  Dtype communication_data_type = Dtype::BF16;  // engine: config value, else the model dtype
  Dtype grad_accum_dtype = Dtype::BF16;         // engine: config value, else the model dtype
};

class ProgramBuilder;

// What DeepSpeedEngine.backward() does before autograd starts, on stream `s` (every stage), for
// micro-batch `micro` of `grad_accum`: with accumulation, `_scale_loss_by_gas(loss.float())`
// (the cast where the loss is not fp32, then the division); the loss log as the release has it
// (ZeroConfig::loss_log); at the accumulation boundary the monitor's read-back and write
// (ZeroConfig::monitor; `monitor_write` is the profile's host.monitor_write_us); then the
// optimizer's loss scaling up to the seed gradient. Called before the backward phase mark: the
// host has not entered autograd, which is where a trace's phase rule (trace/trace_index.cpp) ends
// the forward too.
void engine_backward_prologue(ProgramBuilder& b, const ZeroConfig& c, const Workload& w, StreamId s, int micro, int grad_accum,
                              Time monitor_write);
// The autograd nodes of the prologue's loss arithmetic, the first of the backward (after the
// backward mark): the loss scale's multiply, the accumulation's division, the fp32 cast's copy.
void loss_scale_backward(ProgramBuilder& b, const Workload& w, StreamId s, int grad_accum);

// The instructions each stage writes of its own per layer and micro-batch, beside its ops'
// (instruction_estimate, common.hpp): collectives, events, allocations and host syncs.
inline constexpr std::size_t kZero12OwnPerLayer = 50;
inline constexpr std::size_t kZero3OwnPerLayer = 150;

// Stage 1/2 (DeepSpeedZeroOptimizer) and stage 3 (DeepSpeedZeroOptimizer_Stage3) schedules.
Program build_zero12(const ZeroConfig& c, const Experiment& e);
Program build_zero3(const ZeroConfig& c, const Experiment& e);

// The rank whose program is built. Partition-dependent sizes (ZeRO-1/2 grads_in_partition)
// are rank 0's: the first 1/W of the flat buffer (embedding first).
inline constexpr int kZeroSimulatedRank = 0;

}  // namespace stepsim
