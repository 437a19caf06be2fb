#include "sim/report/result_json.hpp"

#include "sim/analysis/throughput.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

nlohmann::json ops_to_json(const Timeline& t) {
  auto exposed = exposed_per_op(t);
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    nlohmann::json o{{"name", op.name},
                     {"kind", op.kind == TimelineOp::Kind::Collective ? "collective" : "kernel"},
                     {"stream", t.streams.at(op.stream.index()).name},
                     {"phase", to_string(op.phase)},
                     {"unit", op.unit},
                     {"issue_ns", op.issue.ns},
                     {"start_ns", op.start.ns},
                     {"end_ns", op.end.ns}};
    if (op.kind == TimelineOp::Kind::Collective) {
      o["collective"] = to_string(op.collective);
      o["bytes"] = op.bytes.count;
      o["dtype"] = to_string(op.dtype);
      o["comm"] = t.comms.at(op.comm.value().index()).name;
      o["exposed_ns"] = exposed[i].ns;
    } else {
      o["class"] = to_string(op.cls);
      if (op.kernels != 1) o["kernels"] = op.kernels;
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

nlohmann::json result_to_json(const Experiment& e, const SimulationResult& r, const std::string& mode) {
  const Workload& w = e.workload;
  nlohmann::json summary{{"framework", e.strategy->framework()},
                         {"model", w.name},
                         {"parameters", w.numel()},
                         {"world_size", e.cluster.world_size()},
                         {"nodes", e.cluster.nodes},
                         {"gpus_per_node", e.cluster.gpus_per_node},
                         {"micro_batch", w.micro_batch},
                         {"seq_len", w.seq_len},
                         {"grad_accum", e.training.grad_accum},
                         {"hardware_profile", e.cluster.profile.name},
                         {"instructions", r.program.instructions.size()}};
  if (r.metrics.overlap.step_time.ns > 0) {
    // sim/analysis/throughput.hpp defines these (llm-foundry's MFU convention).
    Throughput t = throughput(e, r.metrics.overlap.step_time);
    summary["tokens_per_s"] = t.tokens_per_s;
    summary["tokens_per_s_per_gpu"] = t.tokens_per_s_per_gpu;
    summary["samples_per_s"] = t.samples_per_s;
    if (t.mfu_pct > 0) {
      summary["mfu_pct"] = t.mfu_pct;
      summary["hfu_pct"] = t.hfu_pct;
    }
  }
  nlohmann::json out = {{"schema", kResultSchema},
          {"tool", "stepsim 0.1.0"},
          {"mode", mode},
          {"device", r.timeline.device},
          {"experiment", e.resolved},
          {"strategy", e.strategy->effective_config()},
          {"summary", summary},
          {"metrics", metrics_to_json(r.metrics)},
          {"classes", breakdown_to_json(class_breakdown(r.timeline, r.metrics.overlap.comm_time, r.metrics.overlap.idle))},
          {"ops", ops_to_json(r.timeline)}};
  if (e.workload.options) out["workload"] = effective_workload(e.workload);  // toy workloads have none
  const GemmRateSource g = gemm_rate_source(e.cluster.profile.compute);
  out["gemm_rates"] = {{"table", g.table}, {"in_training_factor", g.in_training_factor}, {"peak_scale", g.peak_scale},
                       {"corrected_to_training", g.corrected}, {"source", g.text}};
  // Communicators priced outside the group sizes the profile's collective model was fitted on
  // (issue 15): present only when there are some.
  auto outside = collective_extrapolations(e.cluster.profile, r.program.comms);
  if (!outside.empty()) out["collective_extrapolations"] = outside;
  return out;
}

}  // namespace stepsim
