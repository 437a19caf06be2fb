// DeepSpeed ZeRO: configuration (DeepSpeed's own key names and 0.19 defaults, Z4.1) and the
// dispatch to the stage 1/2 (zero12.cpp) and stage 3 (zero3.cpp) schedules.
#include <cmath>

#include <fmt/format.h>

#include "sim/strategies/strategy.hpp"
#include "sim/strategies/zero_common.hpp"
#include "sim/strategies/common.hpp"

namespace stepsim {

namespace {

class Zero final : public Strategy {
 public:
  explicit Zero(ZeroConfig c) : c_(c) {}
  std::string framework() const override { return "zero"; }

  nlohmann::json effective_config() const override {
    nlohmann::json j = {{"framework", "zero"},
                        {"stage", c_.stage},
                        {"deepspeed_version", c_.version.text()},
                        {"monitor", c_.monitor},
                        {"reduce_bucket_size", c_.reduce_bucket_size},
                        {"allgather_bucket_size", c_.allgather_bucket_size},
                        {"overlap_comm", c_.overlap_comm},
                        {"contiguous_gradients", c_.contiguous_gradients},
                        {"reduce_scatter", c_.reduce_scatter},
                        {"use_multi_rank_bucket_allreduce", c_.use_multi_rank_bucket_allreduce},
                        {"all_gather_into_tensor", c_.all_gather_into_tensor},
                        {"communication_data_type", to_string(c_.communication_data_type)},
                        {"grad_accum_dtype", to_string(c_.grad_accum_dtype)},
                        {"model_dtype", to_string(c_.model_dtype)}};
    if (c_.stage != 3) j["param_groups"] = c_.two_param_groups ? "decay_no_decay" : "one";
    if (c_.stage == 3) {
      j["stage3_prefetch_bucket_size"] = c_.prefetch_bucket_size;
      j["stage3_max_live_parameters"] = c_.max_live_parameters;
      j["stage3_max_reuse_distance"] = c_.max_reuse_distance;
      j["stage3_param_persistence_threshold"] = c_.param_persistence_threshold;
      j["stage3_model_persistence_threshold"] = c_.model_persistence_threshold;
      j["sub_group_size"] = c_.sub_group_size;
    }
    return j;
  }

  Program build(const Experiment& e) const override {
    return c_.stage == 3 ? build_zero3(c_, e) : build_zero12(c_, e);
  }
  std::size_t instruction_estimate(const Experiment& e) const override {
    return stepsim::instruction_estimate(e, c_.stage == 3 ? kZero3OwnPerLayer : kZero12OwnPerLayer);
  }

 private:
  ZeroConfig c_;
};

// An element count: DeepSpeed configs write these as 5e8 or 500000000; both are accepted, and
// 0 (config.py declares every one `ge=0`: "stage3_param_persistence_threshold": 0 keeps no
// parameter persistent), a fractional or negative value is not.
std::int64_t elements(ObjectReader& r, const std::string& key) {
  const Json& v = r.raw(key);
  if (!v.is_number()) r.fail_value(key, v, "an element count >= 0 (e.g. 5e8)");
  double d = v.get<double>();
  if (!(d >= 0) || d != std::floor(d) || d > 9.2e18) r.fail_value(key, v, "a whole element count >= 0 (e.g. 5e8)");
  return static_cast<std::int64_t>(d);
}

// DeepSpeed accepts both the stage-3 prefixed name and the short alias (config.py pydantic
// aliases); so do we, but not both at once.
std::int64_t aliased_elements(ObjectReader& r, const std::string& name, const std::string& alias, std::int64_t fallback) {
  if (r.has(name) && r.has(alias)) r.fail(alias, fmt::format("either {} or {}, not both", name, alias));
  if (r.has(name)) return elements(r, name);
  if (r.has(alias)) return elements(r, alias);
  return fallback;
}

}  // namespace

std::unique_ptr<Strategy> parse_zero(ObjectReader& r, const Experiment& e) {
  ZeroConfig c;
  if (!r.has("stage")) r.fail("stage", "a ZeRO stage: 1, 2 or 3");
  const Json& st = r.raw("stage");
  if (!st.is_number_integer() || st.get<std::int64_t>() < 1 || st.get<std::int64_t>() > 3)
    r.fail_value("stage", st, "1, 2 or 3 (stage 0 is plain data parallel: use \"ddp\")");
  c.stage = static_cast<int>(st.get<std::int64_t>());
  if (r.has("deepspeed_version")) c.version = r.release("deepspeed_version", "a DeepSpeed release such as \"0.12.6\" or \"0.19\"");
  c.monitor = r.boolean("monitor", false);

  if (r.has("reduce_bucket_size")) c.reduce_bucket_size = elements(r, "reduce_bucket_size");
  if (r.has("allgather_bucket_size")) c.allgather_bucket_size = elements(r, "allgather_bucket_size");
  // overlap_comm=None -> the validator picks True for stage 3 and False otherwise (Z4.1).
  c.overlap_comm = r.boolean("overlap_comm", c.stage == 3);
  c.contiguous_gradients = r.declared_boolean("contiguous_gradients");
  if (c.stage == 1 && c.version < DeepSpeedVersion{0, 13, 0}) {
    // engine.py _configure_zero_optimizer from #2703 (0.8.0) until #4887 (af033831, 0.13.0):
    // "Overlap and contiguous grads are meaningless in stage 1 and are ignored", and non-MoE
    // stage 1 sets contiguous_gradients = False. The effective config reports both as false.
    c.overlap_comm = false;
    c.contiguous_gradients = false;
  }
  c.reduce_scatter = r.declared_boolean("reduce_scatter");
  c.use_multi_rank_bucket_allreduce = r.declared_boolean("use_multi_rank_bucket_allreduce");
  c.all_gather_into_tensor = r.declared_boolean("all_gather_into_tensor");
  if (!c.all_gather_into_tensor && c.stage != 3 && c.allgather_bucket_size == 0)
    // all_gather_dp_groups: num_shards = max(1, partition_size * dp_world_size // allgather_bucket_size).
    r.fail("allgather_bucket_size", "a positive element count with all_gather_into_tensor false (DeepSpeed's "
                                    "all_gather_dp_groups divides by it)");
  c.prefetch_bucket_size = aliased_elements(r, "stage3_prefetch_bucket_size", "prefetch_bucket_size", c.prefetch_bucket_size);
  c.max_live_parameters = aliased_elements(r, "stage3_max_live_parameters", "max_live_parameters", c.max_live_parameters);
  c.max_reuse_distance = aliased_elements(r, "stage3_max_reuse_distance", "max_reuse_distance", c.max_reuse_distance);
  c.param_persistence_threshold =
      aliased_elements(r, "stage3_param_persistence_threshold", "param_persistence_threshold", c.param_persistence_threshold);
  c.model_persistence_threshold =
      aliased_elements(r, "stage3_model_persistence_threshold", "model_persistence_threshold", c.model_persistence_threshold);
  if (r.has("sub_group_size")) c.sub_group_size = elements(r, "sub_group_size");
  if (r.has("param_groups")) {
    if (c.stage == 3) r.fail("param_groups", "no param_groups at stage 3 (only stages 1 and 2 model them)");
    c.two_param_groups = r.declared_choice("param_groups") == "decay_no_decay";
  }

  c.model_dtype = e.workload->dtype;
  c.communication_data_type = r.dtype("communication_data_type", c.model_dtype);
  c.grad_accum_dtype = r.dtype("grad_accum_dtype", c.model_dtype);
  if (c.stage != 3 && c.grad_accum_dtype != c.model_dtype)
    // engine.py routes bf16 + fp32 grad accumulation at stage 1 to BF16_Optimizer, and
    // stage 2 rejects it; neither is the ZeRO optimizer modelled here.
    r.fail("grad_accum_dtype", fmt::format("the model dtype {} at stage {} (another dtype selects DeepSpeed's BF16_Optimizer)",
                                           to_string(c.model_dtype), c.stage));
  return std::make_unique<Zero>(c);
}

void engine_backward_prologue(ProgramBuilder& b, const ZeroConfig& c, const Workload& w, StreamId s, int micro, int grad_accum,
                              Time monitor_write) {
  const bool boundary = micro == grad_accum - 1;
  // With accumulation, `loss = self._scale_loss_by_gas(loss.float())` (every release from 0.6 to
  // 0.16.5): the cast where the model's loss is not fp32, then `prescaled_loss / scaling_factor`.
  // The loss is cast once, by whichever `loss.float()` meets it first.
  bool fp32_loss = w.loss_dtype == Dtype::FP32;
  const auto to_fp32 = [&](const char* name) {
    if (fp32_loss) return;
    b.launch(s, scalar_kernel(name, dtype_bytes(w.loss_dtype) + 4, KernelClass::ElementwiseStrided, HostDispatch::Eager));
    fp32_loss = true;
  };
  if (grad_accum > 1) {
    to_fp32("engine.backward: loss.float()");
    b.launch(s, scalar_kernel("_scale_loss_by_gas: loss / gradient_accumulation_steps", 8, KernelClass::Elementwise, HostDispatch::Eager));
  }
  // The loss log: a 0-d mean (one reduction kernel), read back where the release reads it. A
  // read-back waits for the stream, i.e. for the whole forward.
  const auto mean = [&] { b.launch(s, scalar_kernel("engine.backward: loss.mean()", 8, KernelClass::Reduction, HostDispatch::Eager)); };
  bool monitor_read = false;  // the monitor's value is on the host already
  switch (c.loss_log()) {
    case ZeroConfig::LossLog::MonitorOnly:
      if (c.monitor && boundary) {
        mean();
        b.host_sync_stream(s, "engine.backward: monitor reads the loss back, loss.mean().item() (rank 0)");
        monitor_read = true;
      }
      break;
    case ZeroConfig::LossLog::OffBoundary:
      if (!boundary) {
        mean();
        b.host_sync_stream(s, "engine.backward: self.losses.append(loss.mean().item())");
      }
      monitor_read = true;  // the mean of the appended floats
      break;
    case ZeroConfig::LossLog::EveryMicroBatch:
      mean();
      b.host_sync_stream(s, "engine.backward: self.losses += loss.mean().item()");
      monitor_read = true;
      break;
    case ZeroConfig::LossLog::OnDevice:
      mean();
      if (micro > 0) b.launch(s, scalar_kernel("engine.backward: self.losses + mean_loss", 12, KernelClass::Elementwise, HostDispatch::Eager));
      break;
  }
  if (c.monitor && boundary) {
    if (!monitor_read) b.host_sync_stream(s, "engine.backward: monitor reads the loss back (rank 0)");
    if (monitor_write.ns > 0) b.host_work(monitor_write, "engine.backward: monitor.write_events (rank 0)");
  }
  // The ZeRO optimizer's backward (stage_1_and_2.py and stage3.py, v0.12.6 to v0.16.5):
  // `self.loss_scaler.backward(loss.float())`, i.e. `(loss.float() * loss_scale).backward()`
  // (fp16/loss_scaler.py), whose torch.autograd.backward makes the seed gradient with
  // `torch.ones_like` (_make_grads) before the engine starts: three 0-d kernels (two when the
  // loss is fp32 already), launched from Python.
  to_fp32("optimizer.backward: loss.float()");
  b.launch(s, scalar_kernel("loss_scaler.backward: loss * loss_scale", 8, KernelClass::Elementwise, HostDispatch::Eager));
  seed_loss_gradient(b, s, Dtype::FP32);
}

void loss_scale_backward(ProgramBuilder& b, const Workload& w, StreamId s, int grad_accum) {
  // MulBackward0 (the seed times loss_scale), DivBackward0 (by the accumulation steps), then
  // ToCopyBackward0 back to the loss's dtype.
  b.launch(s, scalar_kernel("bwd loss_scale: MulBackward0", 8, KernelClass::Elementwise, HostDispatch::Autograd));
  if (grad_accum > 1)
    b.launch(s, scalar_kernel("bwd _scale_loss_by_gas: DivBackward0", 8, KernelClass::Elementwise, HostDispatch::Autograd));
  if (w.loss_dtype != Dtype::FP32)
    b.launch(s, scalar_kernel("bwd loss.float: ToCopyBackward0", 4 + dtype_bytes(w.loss_dtype), KernelClass::ElementwiseStrided,
                              HostDispatch::Autograd));
}

}  // namespace stepsim
