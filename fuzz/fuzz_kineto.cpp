// Fuzzes the streaming Kineto/Chrome trace reader (JSON, or gzip: a trace file's bytes) and the
// overlap analysis behind `analyze`.
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"
#include "fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepsim;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_input_error([&] {
    std::vector<trace::KinetoTrace> traces{trace::read_kineto_trace_text(text, "fuzz.json")};
    trace::AnalyzeOptions o;
    (void)trace::analyze_job(traces, o);
  });
  return 0;
}
