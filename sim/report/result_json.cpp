#include "sim/report/result_json.hpp"

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
                     {"stream", t.streams.at(static_cast<std::size_t>(op.stream)).name},
                     {"phase", to_string(op.phase)},
                     {"unit", op.unit},
                     {"issue_ns", op.issue.ns},
                     {"start_ns", op.start.ns},
                     {"end_ns", op.end.ns}};
    if (op.kind == TimelineOp::Kind::Collective) {
      o["collective"] = to_string(op.collective);
      o["bytes"] = op.bytes.count;
      o["dtype"] = to_string(op.dtype);
      o["comm"] = t.comms.at(static_cast<std::size_t>(op.comm)).name;
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
  if (!w.toy && r.metrics.overlap.step_time.ns > 0) {
    // Model FLOPs utilisation against the profile's bf16 dense peak.
    double flops = w.model_flops().count * e.training.grad_accum;
    auto peak = e.cluster.profile.compute.peak.find(w.dtype);
    double tps = static_cast<double>(w.tokens()) * e.training.grad_accum / r.metrics.overlap.step_time.seconds();
    summary["tokens_per_s_per_gpu"] = tps;
    if (peak != e.cluster.profile.compute.peak.end())
      summary["mfu_pct"] = 100.0 * flops / r.metrics.overlap.step_time.seconds() / peak->second.flops_per_s;
  }
  return {{"schema", kResultSchema},
          {"tool", "stepsim 0.1.0"},
          {"mode", mode},
          {"device", r.timeline.device},
          {"experiment", e.resolved},
          {"strategy", e.strategy->effective_config()},
          {"summary", summary},
          {"metrics", metrics_to_json(r.metrics)},
          {"classes", breakdown_to_json(class_breakdown(r.timeline, r.metrics.overlap.comm_time, r.metrics.overlap.idle))},
          {"ops", ops_to_json(r.timeline)}};
}

}  // namespace stepsim
