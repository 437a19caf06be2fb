// Fuzzes `init --from-trace`: the trace reader, the guesses of trace_init (world, GPU, dtype,
// framework, model dimensions) and the profile fitted from the trace's collectives and GEMMs
// (zero-time kernels, missing sizes, one-rank groups). Input: one Kineto trace (JSON text).
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/from_trace/trace_fit.hpp"
#include "calibrate/from_trace/trace_init.hpp"
#include "fuzz/fuzz_common.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/hardware/profile.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_input_error([&] {
    std::vector<trace::KinetoTrace> traces{trace::read_kineto_trace_text(text, "fuzz.json")};
    trace::AnalyzeOptions o;
    trace::InitResult r = trace::init_from_traces(traces, o, "fuzz.profile.json");
    const std::string base = r.base_profile.empty() ? "configs/hardware/h100-sxm-8x.json" : r.base_profile;
    static const HardwareProfile h100 = load_profile(resolve_config_path("configs/hardware/h100-sxm-8x.json", ""));
    const HardwareProfile base_profile = r.base_profile.empty() ? h100 : load_profile(resolve_config_path(base, ""));
    const int gpn = r.experiment["cluster"]["gpus_per_node"].get<int>();
    trace::TraceCalibration c = trace::trace_calibration(traces, {"fuzz.json"}, o, trace::TraceFitOptions{true, 0, false, gpn});
    calib::FitOptions fo;
    calib::FitReport report;
    (void)trace::refit_from_traces(base_profile, c, fo, report);
  });
  return 0;
}
