// `analyze --idle` (trace/idle_attribution.hpp): every gap between a step's GPU ops charged to what
// the host did before the next one, on a hand-written trace whose answer follows from the rules,
// and on the li-plus ZeRO-1 trace against an independent scan.

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "test_support.hpp"
#include "trace/idle_attribution.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

std::string cpu_op(const char* name, int ts, int dur) {
  return fmt::format(R"J(,
  {{"ph": "X", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": {}, "dur": {}}})J", name, ts, dur);
}
std::string runtime(const char* name, int ts, int dur, int corr) {
  return fmt::format(R"J(,
  {{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": 1, "tid": 1, "ts": {}, "dur": {}, "args": {{"correlation": {}}}}})J", name, ts,
                     dur, corr);
}
std::string python(const char* name, int ts, int dur) {
  return fmt::format(R"J(,
  {{"ph": "X", "cat": "python_function", "name": "{}", "pid": 1, "tid": 1, "ts": {}, "dur": {}, "args": {{"Python id": 1}}}})J", name, ts,
                     dur);
}
std::string kernel(int ts, int dur, int corr) {
  return fmt::format(R"J(,
  {{"ph": "X", "cat": "kernel", "name": "k{}", "pid": 0, "tid": 7, "ts": {}, "dur": {}, "args": {{"device": 0, "stream": 7{}}}}})J", ts, ts,
                     dur, corr > 0 ? fmt::format(", \"correlation\": {}", corr) : "");
}

// One step, ProfilerStep#1 = [1000, 2000] us, on one host thread:
//   aten::linear > aten::addmm launches k1 [1120, 1200]          head 120 us
//   aten::add launches k2 [1202, 1210]                            a 2 us launch gap
//   aten::item waits in cudaStreamSynchronize [1190, 1215] while the GPU runs dry at 1210,
//   then aten::mul launches k3 [1280, 1300]                       70 us, sync, forward
//   aten::linear > aten::addmm busy until it launches k4 [1400, 1500]   100 us, host, forward
//   autograd MulBackward0 > aten::mul launches k5 [1600, 1700]    100 us, host, backward
//   k6 [1750, 1760] has no launch record                          50 us, backward; tail 240 us
KinetoTrace hand_written(const std::string& more_events = "") {
  std::string text = R"J({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000})J";
  text += cpu_op("aten::linear", 1050, 70) + cpu_op("aten::addmm", 1060, 58) + runtime("cudaLaunchKernel", 1110, 5, 1) + kernel(1120, 80, 1);
  text += cpu_op("aten::add", 1150, 20) + runtime("cudaLaunchKernel", 1160, 5, 2) + kernel(1202, 8, 2);
  text += cpu_op("aten::item", 1180, 60) + cpu_op("aten::_local_scalar_dense", 1185, 54) + runtime("cudaStreamSynchronize", 1190, 25, 3);
  text += cpu_op("aten::mul", 1250, 30) + runtime("cudaLaunchKernel", 1270, 5, 4) + kernel(1280, 20, 4);
  text += cpu_op("aten::linear", 1300, 100) + cpu_op("aten::addmm", 1310, 88) + runtime("cudaLaunchKernel", 1390, 5, 5) + kernel(1400, 100, 5);
  text += cpu_op("autograd::engine::evaluate_function: MulBackward0", 1500, 100) + cpu_op("aten::mul", 1550, 40) +
          runtime("cudaLaunchKernel", 1580, 5, 6) + kernel(1600, 100, 6);
  text += kernel(1750, 10, 0);
  text += more_events;
  text += "]}";
  std::istringstream in(text);
  return read_kineto_trace_stream(in, "t.json");
}

// hand_written() with the Python frames a with_stack=True trace records around the step's head
// [1000, 1120] and tail [1760, 2000]:
//   train.py(10): <module> spans the whole step (contains both windows: no frame of theirs);
//   head: engine.py(5): forward [990, 1100] began before the step (its 100 us inside count),
//         its child module.py(1): _call_impl [1000, 1090] is inside it; a Tensor.to [1100, 1110]
//         (named without its object's address); 10 us with no frame;
//   tail: engine.py(9): step [1700, 1800] (40 us inside; found through its child
//         optimizer.py(1): step [1710, 1750], the last frame to start before the tail, which
//         ended before it), perf.py(10): print_throughput
//         [1810, 1950] and its child perf.py(24): <listcomp>, profiler.py(625): step [1960, 2010]
//         (clipped to 40 us); 10 + 10 us with no frame.
KinetoTrace with_python_frames() {
  return hand_written(python("train.py(10): <module>", 900, 1200) + python("engine.py(5): forward", 990, 110) +
                      python("module.py(1): _call_impl", 1000, 90) +
                      python("<built-in method to of Tensor object at 0x7f392ca6f770>", 1100, 10) + python("engine.py(9): step", 1700, 100) +
                      python("optimizer.py(1): step", 1710, 40) +
                      python("perf.py(10): print_throughput", 1810, 140) + python("perf.py(24): <listcomp>", 1820, 120) +
                      python("profiler.py(625): step", 1960, 50));
}

}  // namespace

TEST_CASE("The reader keeps every CPU operator's span and the runtime calls' names", "[trace]") {
  KinetoTrace t = hand_written();
  CHECK(t.host_ops.size() == 10);
  REQUIRE(t.runtime.size() == 6);
  CHECK(t.names[static_cast<std::size_t>(t.runtime[2].name)] == "cudaStreamSynchronize");
}

TEST_CASE("Idle gaps are charged to the host op before the next GPU op, waits in a sync apart", "[trace]") {
  KinetoTrace t = hand_written();
  TraceAnalysis a = analyze_trace(t, AnalyzeOptions{});
  auto r = attribute_idle(t, a);
  REQUIRE(r);
  INFO(idle_to_text(*r, 10));
  CHECK(r->steps == 1);
  CHECK(r->head == Time::from_us(120));
  CHECK(r->tail == Time::from_us(240));
  CHECK(r->gaps == Time::from_us(2 + 70 + 100 + 100 + 50));
  CHECK(r->short_total == Time::from_us(2));
  CHECK(r->short_count == 1);
  CHECK(r->sync_total == Time::from_us(70));
  CHECK(r->phase_total[static_cast<int>(Phase::Forward)] == Time::from_us(170));
  CHECK(r->phase_total[static_cast<int>(Phase::Backward)] == Time::from_us(150));
  // The gaps add up to the step's GPU idle; here (kernels only) exactly analyze's idle.
  CHECK(r->idle() == a.mean.overlap.idle);

  REQUIRE(r->causes.size() == 4);
  const IdleCause* sync = r->find("aten::item > aten::_local_scalar_dense");
  REQUIRE(sync);
  CHECK(sync->sync);
  CHECK(sync->phase == Phase::Forward);
  CHECK(sync->total == Time::from_us(70));
  const IdleCause* gemm = r->find("aten::linear > aten::addmm");
  REQUIRE(gemm);
  CHECK_FALSE(gemm->sync);
  CHECK(gemm->total == Time::from_us(100));
  const IdleCause* bwd = r->find("autograd::engine::evaluate_function: MulBackward0 > aten::mul");
  REQUIRE(bwd);
  CHECK(bwd->phase == Phase::Backward);
  const IdleCause* none = r->find("(no launch record)");
  REQUIRE(none);
  CHECK(none->total == Time::from_us(50));
  CHECK(r->causes.back().total == Time::from_us(50));  // largest first

  const nlohmann::json j = idle_to_json(*r);
  CHECK(j["idle_us"].get<double>() == Approx(682));
  CHECK(j["causes"].size() == 4);
  CHECK(j["by_phase_us"]["forward"].get<double>() == Approx(170));
  // --top 2: two rows and one line for the rest.
  CHECK(idle_to_text(*r, 2).find("(2 more causes)") != std::string::npos);
}

TEST_CASE("The step's head and tail are charged to the outermost Python frames inside them", "[trace]") {
  KinetoTrace t = with_python_frames();
  CHECK(t.python_ops.size() == 9);
  auto r = attribute_idle(t, analyze_trace(t, AnalyzeOptions{}));
  REQUIRE(r);
  INFO(idle_to_text(*r, 10));
  // The gaps are charged as before: Python frames change only the head and the tail.
  CHECK(r->head == Time::from_us(120));
  CHECK(r->tail == Time::from_us(240));
  CHECK(r->causes.size() == 4);

  auto frames = [](const std::vector<HostFrame>& v) {
    std::vector<std::pair<std::string, double>> out;
    for (const HostFrame& f : v) out.emplace_back(f.name, f.total.us());
    return out;
  };
  using Row = std::pair<std::string, double>;
  const std::string none(kNoHostFrame);
  CHECK(frames(r->head_frames) ==
        std::vector<Row>{{"engine.py(5): forward", 100.0}, {none, 10.0}, {"<built-in method to of Tensor object>", 10.0}});
  CHECK(frames(r->tail_frames) == std::vector<Row>{{"perf.py(10): print_throughput", 140.0},
                                                   {"engine.py(9): step", 40.0},
                                                   {"profiler.py(625): step", 40.0},
                                                   {none, 20.0}});
  const std::string text = idle_to_text(*r, 10);
  CHECK(text.find("perf.py(10): print_throughput") != std::string::npos);
  const nlohmann::json j = idle_to_json(*r);
  CHECK(j["tail_host"][0]["name"] == "perf.py(10): print_throughput");
  CHECK(j["tail_host"][0]["per_step_us"].get<double>() == Approx(140));
  CHECK(j["head_host"].size() == 3);
}

TEST_CASE("Without Python frames the head and tail are charged to the CPU operators inside them", "[trace]") {
  // hand_written(): the head [1000, 1120] holds aten::linear [1050, 1120] (70 us, its child
  // aten::addmm inside it) and 50 us with no operator; no operator runs in the tail.
  KinetoTrace t = hand_written();
  CHECK(t.python_ops.empty());
  auto r = attribute_idle(t, analyze_trace(t, AnalyzeOptions{}));
  REQUIRE(r);
  REQUIRE(r->head_frames.size() == 2);
  CHECK(r->head_frames[0].name == "aten::linear");
  CHECK(r->head_frames[0].total == Time::from_us(70));
  CHECK(r->head_frames[1].name == kNoHostFrame);
  CHECK(r->head_frames[1].total == Time::from_us(50));
  REQUIRE(r->tail_frames.size() == 1);
  CHECK(r->tail_frames[0].name == kNoHostFrame);
  CHECK(r->tail_frames[0].total == Time::from_us(240));
}

TEST_CASE("A gap no synchronising call spans is host time even after an earlier sync", "[trace]") {
  // The 100 us gap before k4 follows k3, long after cudaStreamSynchronize returned (1215 us).
  KinetoTrace t = hand_written();
  auto r = attribute_idle(t, analyze_trace(t, AnalyzeOptions{}));
  REQUIRE(r);
  CHECK_FALSE(r->find("aten::linear > aten::addmm")->sync);
}

TEST_CASE("analyze --idle on li-plus ZeRO-1 steps 11-12 matches an independent scan", "[trace][data]") {
  // Independent Python scan (json + gzip): the device-0 kernels, memcpys and memsets whose
  // launching runtime call starts inside ProfilerStep#11 / #12, in start order; head 534 / 375 us,
  // tail 3263 / 3243 us, gaps 16342 / 14835 us, of which 5357 / 5353 us in 2246 / 2248 gaps under
  // 5 us.
  KinetoTrace t = read_kineto_trace(test::kLiPlusZero1Trace);
  AnalyzeOptions o;
  parse_step_range("11-12", o);
  TraceAnalysis a = analyze_trace(t, o);
  auto r = attribute_idle(t, a);
  REQUIRE(r);
  INFO(idle_to_text(*r, 10));
  CHECK(r->head == Time::from_us(454.5));
  CHECK(r->tail == Time::from_us(3253));
  CHECK(r->gaps == Time::from_us(15588.5));
  CHECK(r->short_total == Time::from_us(5355));
  CHECK(r->short_count == 4494);
  CHECK(r->idle() <= a.mean.overlap.idle);
  // The largest cause: DeepSpeed 0.12.6's get_grad_norm_direct reads each slice's norm back
  // (`param_norm.item()`), a host sync per parameter slice (stage_1_and_2.py; the simulator's
  // ZeRO program has the same sync, sim/strategies/zero12.cpp grad_norm()).
  REQUIRE_FALSE(r->causes.empty());
  const IdleCause& top = r->causes.front();
  CHECK(top.sync);
  CHECK(top.ops == "aten::item > aten::_local_scalar_dense");
  CHECK(top.phase == Phase::Backward);
  CHECK(top.total > Time::from_ms(2));

  // The head and tail are DeepSpeed-Chat's own (main.py around model.step(), Python stacks in
  // the trace; independent scan of ProfilerStep#11 / #12, the outermost frames of the main thread
  // inside each stretch): the tail's print_throughput 2252 / 2098 us ((2252 + 2098) / 2 = 2175
  // us), its `model.model` through DeepSpeedEngine.__getattr__ (dir() of the module) 542 / 521
  // us; the head's DataLoader __next__ 385 / 269 us.
  REQUIRE_FALSE(r->head_frames.empty());
  CHECK(r->head_frames[0].name == "torch/utils/data/dataloader.py(625): __next__");
  CHECK(r->head_frames[0].total == Time::from_us(327));
  REQUIRE(r->tail_frames.size() >= 2);
  CHECK(r->tail_frames[0].name == "dschat/utils/perf.py(10): print_throughput");
  CHECK(r->tail_frames[0].total == Time::from_us(2175));
  CHECK(r->tail_frames[1].name == "deepspeed/runtime/engine.py(453): __getattr__");
  CHECK(r->tail_frames[1].total == Time::from_us(531.5));
  Time sum;
  for (const HostFrame& f : r->tail_frames) sum += f.total;
  CHECK(sum == r->tail);
}
