#include "calibrate/from_trace/init_files.hpp"

#include <filesystem>

#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/from_trace/trace_fit.hpp"
#include "calibrate/from_trace/trace_init.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/hardware/profile.hpp"

namespace stepsim::trace {

namespace fs = std::filesystem;

InitOutputs init_from_trace_files(const std::vector<std::string>& traces, const std::string& steps, const std::string& profile_ref) {
  AnalyzeOptions o;
  if (!steps.empty()) parse_step_range(steps, o);
  std::vector<KinetoTrace> read;
  for (const auto& f : traces) read.push_back(read_kineto_trace(f));
  InitResult r = init_from_traces(read, o, profile_ref);

  // The profile: the shipped one of this GPU type, refitted from the trace's collectives and
  // GEMMs (the world's collectives: a trace without group sizes is taken as data parallel over
  // the whole world, as the framework guess assumes).
  std::string base = r.base_profile.empty() ? "configs/hardware/h100-sxm-8x.json" : r.base_profile;
  HardwareProfile base_profile = load_profile(resolve_config_path(base, ""));
  const int gpn = r.experiment["cluster"]["gpus_per_node"].get<int>();
  TraceCalibration c = trace_calibration(read, traces, o, TraceFitOptions{true, 0, false, gpn});
  calib::FitOptions fo;
  fo.command = "stepsim init --from-trace";
  calib::FitReport report;
  HardwareProfile fitted = refit_from_traces(base_profile, c, fo, report);
  fitted.name = base_profile.name + "-fitted";
  fitted.description = "fitted by stepsim init --from-trace from " + fs::path(traces.front()).filename().string() + " over " + base;
  fitted.provenance = report.provenance;

  InitOutputs out;
  out.experiment = std::move(r.experiment);
  out.profile = calib::fitted_profile_to_json(fitted, report);
  out.notes = std::move(r.notes);
  if (const auto tc = report.provenance.find("trace_compute"); tc != report.provenance.end()) out.against_base = against_base_summary(*tc);
  return out;
}

}  // namespace stepsim::trace
