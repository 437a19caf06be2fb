// The Kineto trace reader and the per-step analysis on small hand-written traces whose answers
// can be derived by hand.

#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trace/trace_analysis.hpp"
#include "sim/core/error.hpp"
#include "test_support.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

// One step, ProfilerStep#5 = [1000, 2000] us on thread 1 (pid 10, tid 1), world size 4.
//   kernel A  (compute)   GPU [1100, 1300]  launched at 1050 (corr 1)
//   NCCL AR   bf16        GPU [1250, 1400]  launched at 1200 (corr 2) inside nccl:all_reduce
//                                            whose Input Dims [[1024]] c10::BFloat16
//   kernel B  (compute)   GPU [1950, 2100]  launched at 1900 (corr 3): runs past the span
//   kernel C  (compute)   GPU [3000, 3100]  launched at 2500 (corr 4): outside every step
//   memcpy                GPU [1500, 1510]  launched at 1450 (corr 5)
// The ts use Kineto's fractional-microsecond text for one event to check exact ns.
const char* kTrace = R"J({
 "schemaVersion": 1,
 "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 4},
 "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1000000, "numSms": 10}],
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 10, "tid": 1, "ts": 1000, "dur": 1000},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 1, "ts": 1050, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 10, "tid": 1, "ts": 1190, "dur": 20,
   "args": {"Input Dims": [[1024]], "Input type": ["c10::BFloat16"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 10, "tid": 1, "ts": 1200, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 1, "ts": 1900, "dur": 5, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 1, "ts": 2500, "dur": 5, "args": {"correlation": 4}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, "tid": 1, "ts": 1450, "dur": 5, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "gemm_A", "pid": 0, "tid": 7, "ts": 1100.000, "dur": 200, "args": {"device": 0, "stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 20,
   "ts": 1250, "dur": 150, "args": {"device": 0, "stream": 20, "correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "elementwise_B", "pid": 0, "tid": 7, "ts": 1950, "dur": 150, "args": {"device": 0, "stream": 7, "correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "elementwise_C", "pid": 0, "tid": 7, "ts": 3000, "dur": 100, "args": {"device": 0, "stream": 7, "correlation": 4}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 7, "ts": 1500, "dur": 10, "args": {"device": 0, "stream": 7, "correlation": 5, "bytes": 4096}},
  {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 1, "ts": 1300, "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 5000, "Total Reserved": 8192}},
  {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 1, "ts": 1400, "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 3000, "Total Reserved": 6144}},
  {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 1, "ts": 1350, "args": {"Device Type": 0, "Device Id": -1, "Total Allocated": 99999}},
  {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}}
 ]
})J";

}  // namespace

TEST_CASE("Kineto microsecond text converts to exact nanoseconds", "[trace]") {
  // At 1.7e15 us a double holds 0.25 us steps; the decimal text keeps every ns.
  CHECK(parse_us_text("1703670651148150.123") == Time{1703670651148150123});
  CHECK(parse_us_text("4458676524648.797") == Time{4458676524648797});
  CHECK(parse_us_text("12") == Time{12000});
  CHECK(parse_us_text("0.0005") == Time{1});  // rounded half up on the 4th decimal
  CHECK(parse_us_text("1.5e3") == Time{1500000});
}

TEST_CASE("NCCL kernel names give the collective kind and dtype, old and new naming", "[trace]") {
  CHECK(is_nccl_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
  CHECK(is_nccl_kernel_name("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"));
  CHECK_FALSE(is_nccl_kernel_name("void at::native::vectorized_elementwise_kernel<4>"));
  CHECK(collective_from_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(x)") == TraceCollective::AllReduce);
  CHECK(collective_from_kernel_name("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(x)") == TraceCollective::ReduceScatter);
  CHECK(collective_from_kernel_name("ncclDevKernel_AllGather_RING_LL(x)") == TraceCollective::AllGather);
  CHECK(collective_from_kernel_name("ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)") == TraceCollective::Broadcast);
  CHECK(collective_from_kernel_name("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(x)") == TraceCollective::SendRecv);
  CHECK(dtype_from_kernel_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)") == "bf16");
  CHECK(dtype_from_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float(x)") == "float");
  CHECK(dtype_from_kernel_name("ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)") == "int8_t");
  CHECK(dtype_from_kernel_name("ncclDevKernel_AllGather_RING_LL(x)").empty());
  CHECK(collective_from_op_name("nccl:_all_gather_base") == TraceCollective::AllGather);
  CHECK(collective_from_op_name("_reduce_scatter_base") == TraceCollective::ReduceScatter);
  CHECK(collective_from_op_name("allreduce") == TraceCollective::AllReduce);
  CHECK(collective_from_op_name("all_to_all") == TraceCollective::AllToAll);
  CHECK(dtype_bytes_from_name("c10::BFloat16") == 2);
  CHECK(dtype_bytes_from_name("Float") == 4);
  CHECK(dtype_bytes_from_name("long int") == 8);
  CHECK(dtype_bytes_from_name("unsigned char") == 1);
}

TEST_CASE("The reader keeps kernels, launches, steps, memory and rank info of a Kineto trace", "[trace]") {
  KinetoTrace t = read_kineto_trace_text(kTrace, "mini");
  CHECK(t.rank == 2);
  CHECK(t.world_size == 4);
  REQUIRE(t.devices.size() == 1);
  CHECK(t.devices[0].name == "Test GPU");
  CHECK(t.devices[0].memory == Bytes{1000000});
  CHECK(t.gpu_ops.size() == 5);
  CHECK(t.runtime.size() == 5);
  CHECK(t.memory.size() == 2);  // the CPU (Device Type 0) sample is dropped
  CHECK(t.event_count == 16);
  std::size_t nccl = 0;
  for (const auto& op : t.gpu_ops) nccl += op.collective ? 1 : 0;
  CHECK(nccl == 1);
}

TEST_CASE("A step's metrics follow DESIGN.md 5 with kernels attributed by their launch", "[trace]") {
  KinetoTrace t = read_kineto_trace_text(kTrace, "mini");
  TraceAnalysis a = analyze_trace(t, AnalyzeOptions{});
  REQUIRE(a.steps.size() == 1);
  const auto& s = a.steps[0];
  CHECK(s.number == 5);
  const auto& m = s.metrics.overlap;
  // step = span = 1000 us; compute = A 200 + B 150 (B launched in the step, runs past it);
  // C was launched after the span: not in the step. comm = 150; overlap = [1250,1300] = 50.
  CHECK(m.step_time == Time::from_us(1000));
  CHECK(m.compute_time == Time::from_us(350));
  CHECK(m.comm_time == Time::from_us(150));
  CHECK(m.overlapped_comm == Time::from_us(50));
  CHECK(m.exposed_comm == Time::from_us(100));
  CHECK(m.overlap_pct == Approx(100.0 / 3.0));
  // idle = 1000 - |compute U comm| = 1000 - (350 + 150 - 50) = 550 us
  CHECK(m.idle == Time::from_us(550));
  CHECK(a.unattributed_gpu_ops == 1);
  CHECK(s.memory_ops == 1);
  // No backward/optimizer markers: everything is forward; its last kernel (B) ends at 2100,
  // clamped to the span end 2000.
  CHECK(s.metrics.forward == Time::from_us(1000));
  CHECK(s.metrics.peak_memory == Bytes{5000});
  CHECK(s.metrics.peak_time == Time::from_us(300));
  CHECK(s.metrics.persistent_memory == Bytes{3000});
  // Reserved: the highest "Total Reserved" of the rank's device in the step (8192 at 1300 us;
  // the CPU sample's is not the GPU's).
  CHECK(s.metrics.peak_reserved == Bytes{8192});
  CHECK(s.metrics.capacity == Bytes{1000000});

  // The all-reduce: 1024 bf16 elements from the enclosing nccl:all_reduce = 2048 B; the group
  // size is not recorded, so the world size (4) is assumed; its exposed part is 100 us.
  REQUIRE(a.collectives.size() == 1);
  const auto& c = a.collectives[0];
  CHECK(c.kind == TraceCollective::AllReduce);
  CHECK(c.bytes == Bytes{2048});
  CHECK(c.group_size == 4);
  CHECK(c.group_assumed);
  CHECK(c.exposed == Time::from_us(100));
  REQUIRE(a.table.size() == 1);
  // busbw = S / t * 2(n-1)/n = 2048 B / 150 us * 1.5
  CHECK(a.table[0].busbw_gbps == Approx(2048.0 / 150e-6 / 1e9 * 1.5));
}

// Catches: a host far ahead of its GPU (compiled code, CUDA graphs: the normal state of an
// efficient step) reported as a step of forward only, its phase ends clamped to the span.
// ProfilerStep#1 = [0, 1000] us; the backward starts at 200 and the optimizer at 800 on the host;
// the GPU runs each kernel 500 us after the host reached it: forward [600, 700], backward
// [700, 1300], optimizer [1300, 1500]. The step's kernels end 500 us past the span, so the phase
// ends are taken back by 500: forward 200, backward 600, optimizer 200 (the old clamp gave
// 700 / 300 / 0).
TEST_CASE("Phase ends of a GPU running behind the host are taken back by its lag", "[trace]") {
  const char* text = R"J({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 2, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 1, "ts": 200, "dur": 500},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 300, "dur": 2, "args": {"correlation": 2}},
  {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1, "tid": 1, "ts": 800, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 850, "dur": 2, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "fwd", "pid": 0, "tid": 7, "ts": 600, "dur": 100, "args": {"device": 0, "stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "bwd", "pid": 0, "tid": 7, "ts": 700, "dur": 600, "args": {"device": 0, "stream": 7, "correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "opt", "pid": 0, "tid": 7, "ts": 1300, "dur": 200, "args": {"device": 0, "stream": 7, "correlation": 3}}
  ]})J";
  const TraceAnalysis a = analyze_trace(read_kineto_trace_text(text, "lagging"), AnalyzeOptions{});
  REQUIRE(a.steps.size() == 1);
  const Metrics& m = a.steps[0].metrics;
  CHECK(m.forward == Time::from_us(200));
  CHECK(m.backward == Time::from_us(600));
  CHECK(m.optimizer == Time::from_us(200));
  CHECK(a.steps[0].kernels_end == Time::from_us(1500));
}

TEST_CASE("Collective sizes come from the kernel's own args when PyTorch records them", "[trace]") {
  // PyTorch 2.1+ copies record_param_comms' fields onto the NCCL kernel. All-gather's S is the
  // gathered output: Out msg nelems 4096 x 4 B = 16384 B on a group of 2.
  std::string text = R"J({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(x)", "pid": 0, "tid": 7, "ts": 10, "dur": 20,
     "args": {"stream": 7, "Collective name": "allgather", "In msg nelems": 2048, "Out msg nelems": 4096,
              "Group size": 2, "dtype": "Float", "Process Group Name": "1"}}]})J";
  TraceAnalysis a = analyze_trace(read_kineto_trace_text(text, "ag"), AnalyzeOptions{});
  REQUIRE(a.collectives.size() == 1);
  CHECK(a.collectives[0].kind == TraceCollective::AllGather);
  CHECK(a.collectives[0].bytes == Bytes{16384});
  CHECK(a.collectives[0].group_size == 2);
  CHECK_FALSE(a.collectives[0].group_assumed);
  CHECK(a.collectives[0].source == "kernel args");
}

TEST_CASE("A gzip trace reads the same as its plain text", "[trace]") {
  const test::TempDir dir;
  auto gz = dir / "mini.json.gz";
  auto plain = dir / "mini.json";
  {
    std::ofstream f(gz, std::ios::binary);
    boost::iostreams::filtering_ostream out;
    out.push(boost::iostreams::gzip_compressor());
    out.push(f);
    out << kTrace;
  }
  { std::ofstream(plain) << kTrace; }
  auto a = analyze_trace(read_kineto_trace(gz), AnalyzeOptions{});
  auto b = analyze_trace(read_kineto_trace(plain), AnalyzeOptions{});
  std::ostringstream gz_bytes;
  gz_bytes << std::ifstream(gz, std::ios::binary).rdbuf();
  auto c = analyze_trace(read_kineto_trace_text(gz_bytes.str(), "in memory"), AnalyzeOptions{});  // the fuzzer's way in
  a.file = b.file = c.file = "";
  CHECK(job_to_json(JobAnalysis{{a}, {}, {}, {}}) == job_to_json(JobAnalysis{{b}, {}, {}, {}}));
  CHECK(job_to_json(JobAnalysis{{c}, {}, {}, {}}) == job_to_json(JobAnalysis{{b}, {}, {}, {}}));
}

TEST_CASE("Malformed or step-less traces are input errors", "[trace]") {
  CHECK_THROWS_AS(read_kineto_trace_text(R"J({"traceEvents": [ {"ph": "X", )J", "bad"), InputError);
  CHECK_THROWS_AS(read_kineto_trace("/nonexistent/trace.json"), InputError);
  auto t = read_kineto_trace_text(R"J({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1}]})J", "nostep");
  CHECK_THROWS_AS(analyze_trace(t, AnalyzeOptions{}), InputError);
  AnalyzeOptions o;
  CHECK_THROWS_AS(parse_step_range("5-3", o), InputError);
  CHECK_THROWS_AS(parse_step_range("x", o), InputError);
  parse_step_range("3-", o);
  CHECK(*o.first_step == 3);
  CHECK_FALSE(o.last_step.has_value());
}

TEST_CASE("Each record store of a trace is bounded: one record past ReadOptions::max_records is an input error",
          "[trace]") {
  // Expectations: three kernels of one name are three GPU ops and one distinct name; with a bound
  // of 2 the third, event 2, is refused naming the count and the bound; with 3 they read.
  const char* kernels = R"J({"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1}]})J";
  ReadOptions o;
  o.max_records = 3;
  CHECK(read_kineto_trace_text(kernels, "t.json", o).gpu_ops.size() == 3);
  o.max_records = 2;
  try {
    read_kineto_trace_text(kernels, "t.json", o);
    FAIL("expected an input error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "t.json: /traceEvents/2: 3 GPU ops: expected at most 2 in one trace (docs/limits.md)");
  }
  // Distinct names are bounded too: "c" is the third (two GPU ops and a runtime call: no store full).
  const char* names = R"J({"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1, "dur": 1},
  {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 2, "dur": 1},
  {"ph": "X", "cat": "cuda_runtime", "name": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": {"correlation": 1}}]})J";
  CHECK_THROWS_WITH(read_kineto_trace_text(names, "n.json", o),
                    "n.json: /traceEvents/2: 3 distinct names: expected at most 2 in one trace (docs/limits.md)");
  // The same reader at the default bound, 2^22 of each.
  CHECK(ReadOptions{}.max_records == kMaxTraceRecords);
  CHECK(kMaxTraceRecords == std::size_t{1} << 22);
  CHECK(read_kineto_trace_text(names, "n.json").names.size() == 3);
}

TEST_CASE("Host operators and Python frames are kept only when asked for (analyze --idle)", "[trace]") {
  const char* host = R"J({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
  {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1, "tid": 1, "ts": 1, "dur": 90},
  {"ph": "X", "cat": "python_function", "name": "<built-in method run_backward of torch._C._EngineBase object at 0x1>",
   "pid": 1, "tid": 1, "ts": 20, "dur": 30}
 ]})J";
  const KinetoTrace with = read_kineto_trace_text(host, "h.json");
  CHECK(with.host_ops.size() == 2);
  CHECK(with.python_ops.size() == 2);
  const KinetoTrace without = read_kineto_trace_text(host, "h.json", ReadOptions{.host_ops = false});
  CHECK(without.host_ops.empty());
  CHECK(without.python_ops.empty());
  // The spans the analysis reads are kept either way: the step and run_backward.
  CHECK(without.cpu.size() == with.cpu.size());
  CHECK(without.cpu.size() == 2);
}
