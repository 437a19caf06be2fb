// Issue 16 regressions: every input that cannot describe a real training step or a real
// measurement is exit 2 with one line; no output ever destroys an input or is left half
// written. Each case is a reproducer from the issue, run through the real binary.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/explore/sweep.hpp"
#include "sim/program/builder.hpp"
#include "test_support.hpp"

using stepsim::test::run_capture;
using stepsim::test::scratch_dir;
using stepsim::test::write_text;
namespace fs = std::filesystem;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kFsdp2 = kSrc + "/configs/examples/llama3-8b-fsdp2-8xh100.json";
const std::string kC1 = kSrc + "/configs/examples/seed/c1-ddp-buckets.json";


std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Runs `args`; expects exit 2 and exactly one line that contains `needle`.
void expect_input_error(const std::string& args, const std::string& needle) {
  std::string out;
  int rc = run_capture(kBin + " " + args, out);
  INFO(args << "\n" << out);
  CHECK(rc == 2);
  CHECK(count_lines(out) == 1);
  CHECK_THAT(out, Catch::Contains(needle));
}

// A copy of the toy-ideal profile with `patch` merged over it (JSON pointer-free: top-level
// objects are replaced key by key).
std::string profile_with(const fs::path& dir, const nlohmann::json& patch) {
  std::ifstream in(kSrc + "/configs/hardware/toy-ideal.json");
  nlohmann::json p = nlohmann::json::parse(in, nullptr, true, true);
  p.merge_patch(patch);
  return write_text(dir / "profile.json", p.dump());
}

std::string c1_with_profile(const fs::path& dir, const std::string& profile) {
  return write_text(dir / "exp.json", R"({"workload": {"toy": {"layers": 2, "backward_ms": 5, "params_per_layer": 1000}},
    "cluster": {"profile": ")" + profile + R"(", "nodes": 1, "gpus_per_node": 8}, "strategy": {"framework": "ddp"}})");
}

const std::string kNcclHeader =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n";
const std::string kNcclRankLines =
    "#  Rank  0 Group  0 Pid 1 on host0 device  0 [0x00] NVIDIA H100\n"
    "#  Rank  1 Group  0 Pid 2 on host0 device  1 [0x00] NVIDIA H100\n";
}  // namespace

TEST_CASE("item 1: integers out of their key's range are exit 2 naming the key, the --set and the range", "[cli][hardening]") {
  // 2^32 nodes once printed "0 x 8 GPUs" (stored in 32 bits); 2^32 GPUs per node died on SIGFPE.
  expect_input_error("simulate " + kFsdp2 + " --set cluster.gpus_per_node=4294967296",
                     "--set cluster.gpus_per_node=4294967296: /cluster/gpus_per_node: 4294967296: expected an integer from 1 to 1024");
  expect_input_error("simulate " + kFsdp2 + " --set cluster.nodes=4294967296", "/cluster/nodes: 4294967296: expected an integer from 1 to 65536");
  expect_input_error("simulate " + kFsdp2 + " --set cluster.nodes=1e18", "/cluster/nodes");
  // 65536 nodes x 1024 GPUs is 2^26 ranks, above the 2^20 world-size bound (nodes x 8 overflowed int at 2^28 nodes).
  expect_input_error("simulate " + kFsdp2 + " --set cluster.nodes=65536 --set cluster.gpus_per_node=1024", "a world size");
  expect_input_error("simulate " + kFsdp2 + " --set training.grad_accum=4294967295", "/training/grad_accum: 4294967295: expected an integer from 1 to 65536");
  expect_input_error("simulate " + kFsdp2 + " --set strategy.reduce_scatter_max_input_buffers=4294967296",
                     "/strategy/reduce_scatter_max_input_buffers: 4294967296: expected an integer from 1 to 1024");
}

TEST_CASE("item 2: workload sizes whose products overflow are exit 2, never a result", "[cli][hardening]") {
  auto dir = scratch_dir("item2");
  // 2^50 micro-batch once reported a 138 ms step that "fits": above the 2^20 per-key maximum.
  expect_input_error("simulate " + kFsdp2 + " --set workload.micro_batch=1125899906842624", "/workload/micro_batch");
  // Inside every per-key maximum, but 2^20 x 2^24 tokens x (per-token bytes) overflows int64.
  expect_input_error("simulate " + kFsdp2 + " --set workload.micro_batch=1048576 --set workload.seq_len=16777216",
                     "/workload/micro_batch: 1048576: expected a size whose activations fit in 2^56 bytes");
  // A vocabulary of 2^63-1 once gave 0.38 B parameters (vocab x hidden wrapped).
  std::string model = write_text(dir / "model.json", R"({"workload": {"model": {"hidden": 4096, "layers": 2, "heads": 32, "ffn": 14336,
      "vocab": 9223372036854775807}}, "cluster": {"profile": ")" + kSrc + R"(/configs/hardware/toy-ideal.json"},
      "strategy": {"framework": "ddp"}})");
  expect_input_error("simulate " + model, "/workload/model/vocab: 9223372036854775807: expected an integer from 1 to 4294967296");
  // Inside the per-key maxima, the parameter states (32 B each) of 2^20 x 2^20 x 4 x 100000 overflow.
  std::string huge = write_text(dir / "huge.json", R"({"workload": {"model": {"hidden": 1048576, "layers": 100000, "heads": 1, "ffn": 4194304,
      "vocab": 4294967296}}, "cluster": {"profile": ")" + kSrc + R"(/configs/hardware/toy-ideal.json"},
      "strategy": {"framework": "ddp"}})");
  expect_input_error("simulate " + huge, "parameters\": expected a model whose parameter states (32 B per parameter) fit in 2^56 bytes");
}

TEST_CASE("item 3: an output that names an input is refused and the input is left byte-identical", "[cli][hardening]") {
  auto dir = scratch_dir("item3");
  // simulate E.json --trace/--report/--json-out E.json once overwrote the experiment, exit 0.
  std::string exp = c1_with_profile(dir, kSrc + "/configs/hardware/toy-ideal.json");
  const std::string before = slurp(exp);
  for (const char* flag : {"--trace", "--report", "--json-out"}) {
    expect_input_error("simulate " + exp + " " + flag + " " + exp, "is an input of this run");
    CHECK(slurp(exp) == before);
  }
  // Another spelling of the same file (../dir/e.json) is the same file by identity.
  expect_input_error("simulate " + exp + " --trace " + (dir / ".." / dir.filename() / "exp.json").string(), "is an input of this run");
  // A profile included by the experiment is an input too.
  std::string prof = write_text(dir / "p.json", slurp(kSrc + "/configs/hardware/toy-ideal.json"));
  std::string exp2 = c1_with_profile(dir, prof);
  expect_input_error("simulate " + exp2 + " --json-out " + prof, "is an input of this run");

  // sweep --merge p0.csv p1.csv --out p0.csv once truncated p0.csv to 0 bytes.
  std::string sweep = write_text(dir / "s.json", R"({"base": {"include": ")" + kC1 + R"("}, "axes": {"strategy.bucket_cap_bytes": [1000000, 2000000, 3000000]}})");
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + sweep + " --shard 0/2 --no-progress --out " + (dir / "p0.csv").string(), out) == 0);
  REQUIRE(run_capture(kBin + " sweep " + sweep + " --shard 1/2 --no-progress --out " + (dir / "p1.csv").string(), out) == 0);
  const std::string p0 = slurp(dir / "p0.csv");
  REQUIRE(!p0.empty());
  expect_input_error("sweep --merge " + (dir / "p0.csv").string() + " " + (dir / "p1.csv").string() + " --out " + (dir / "p0.csv").string(),
                     "is an input of this run");
  CHECK(slurp(dir / "p0.csv") == p0);
  expect_input_error("sweep " + sweep + " --no-progress --out " + sweep, "is an input of this run");

  // When --json-out cannot be opened, an existing --out file is left as it was (it was cut to
  // its header before), and no temporary file is left beside it.
  std::string keep = write_text(dir / "keep.csv", "precious\n");
  expect_input_error("sweep " + sweep + " --no-progress --out " + keep + " --json-out " + (dir / "no-such-dir" / "x.json").string(),
                     "cannot write the JSON");
  CHECK(slurp(keep) == "precious\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename().string().rfind(".keep.csv.tmp", 0) == 0;
  CHECK(entries == 0);

  // A successful run writes the file through the rename: the whole JSON is there.
  REQUIRE(run_capture(kBin + " simulate " + kC1 + " --json-out " + (dir / "r.json").string(), out) == 0);
  CHECK(nlohmann::json::parse(slurp(dir / "r.json"))["metrics"]["step_time_ns"] == 56000000);  // the seed case C1
}

TEST_CASE("item 4: profile numbers outside their physical range are exit 2 naming the key", "[cli][hardening]") {
  auto dir = scratch_dir("item4");
  struct Case {
    nlohmann::json patch;
    const char* needle;
  };
  const Case cases[] = {
      // 1e300 GiB once printed "-9223372036854775808 B: DOES NOT FIT".
      {{{"memory_capacity_GiB", 1e300}}, "/memory_capacity_GiB: 1e+300: expected a positive number of at most 65536"},
      // 2^63 us and 1e30 us of host overhead once left the step unchanged (wrapped).
      {{{"host", {{"collective_overhead_us", 9223372036854775808.0}}}}, "/host/collective_overhead_us"},
      {{{"host", {{"launch_overhead_us", 1e30}}}}, "/host/launch_overhead_us: 1e+30: expected a number from 0 to 1e+06"},
      // A 1e300 slowdown once put the memory peak at a negative time.
      {{{"contention", {{"compute_slowdown", 1e300}}}}, "/contention/compute_slowdown: 1e+300: expected a number from 0 to 100"},
      // A collective holding every SM would leave a GEMM beside it no rate at all.
      {{{"contention", {{"gpu_sms", 108}, {"collective_sms", 108}}}}, "/contention/collective_sms: 108: expected fewer SMs than contention.gpu_sms (108)"},
      {{{"compute", {{"peak_tflops", {{"bf16", 1e30}}}}}}, "/compute/peak_tflops/bf16"},
  };
  for (const auto& c : cases) {
    std::string prof = profile_with(dir, c.patch);
    expect_input_error("simulate " + c1_with_profile(dir, prof), c.needle);
  }
}

TEST_CASE("item 5: a program above the instruction limit is exit 2, not a run to bad_alloc", "[cli][hardening]") {
  // grad_accum 1e6 once ran 28 s to bad_alloc: now above the key's maximum (65536).
  expect_input_error("simulate " + kFsdp2 + " --set training.grad_accum=1000000", "/training/grad_accum: 1000000");
  // 100,000 toy layers x grad_accum 64 x at least 2 kernels = 12.8e6 instructions, over the
  // 1,000,000 limit: refused before any build; the largest allowed is 1e6 / (2 x 100,000) = 5.
  auto dir = scratch_dir("item5");
  std::string exp = write_text(dir / "big.json", R"({"workload": {"toy": {"layers": 100000, "forward_ms": 1, "backward_ms": 1, "params_per_layer": 10}},
    "cluster": {"profile": ")" + kSrc + R"(/configs/hardware/toy-ideal.json"}, "strategy": {"framework": "ddp"},
    "training": {"grad_accum": 64}})");
  expect_input_error("simulate " + exp, "/training/grad_accum: 64: expected at most 5 micro-batches for 100000 layers");
}

TEST_CASE("item 5: the program builder stops at the instruction limit with an input error", "[hardening]") {
  // The backstop behind the config check: the (limit + 1)-th instruction throws ProgramTooLarge,
  // an InputError (exit 2), and the program never grows past the limit.
  stepsim::ProgramBuilder b;
  for (std::size_t i = 0; i < stepsim::kMaxProgramInstructions; ++i) b.host_work(stepsim::Time{1}, "w");
  CHECK(b.program().instructions.size() == stepsim::kMaxProgramInstructions);
  CHECK_THROWS_AS(b.host_work(stepsim::Time{1}, "w"), stepsim::InputError);
  CHECK(b.program().instructions.size() == stepsim::kMaxProgramInstructions);
}

TEST_CASE("item 6: directories, empty or over-long includes, 1e999 and absurd log rows are exit 2, not internal errors", "[cli][hardening]") {
  auto dir = scratch_dir("item6");
  expect_input_error("simulate " + dir.string(), "is a directory");
  fs::create_directories(dir / "prof.d");
  expect_input_error("simulate " + c1_with_profile(dir, (dir / "prof.d").string()), "directory");
  expect_input_error("simulate " + write_text(dir / "inc.json", R"({"include": ""})"), "/include: \"\": expected a file name string");
  expect_input_error("simulate " + write_text(dir / "long.json", R"({"include": ")" + std::string(5000, 'x') + R"("})"), "/include");
  expect_input_error("simulate " + write_text(dir / "big.json", R"({"workload": {"micro_batch": 1e999}})"), "invalid JSON");
  expect_input_error("simulate " + kC1 + " --set strategy.bucket_cap_mb=1e999", "--set strategy.bucket_cap_mb=1e999");
  expect_input_error("fit --nccl-tests " + write_text(dir / "t.log", kNcclRankLines + kNcclHeader +
                                                                 "         1024           256     float     sum      -1   1e-300    0.02    0.05      0\n") +
                         " --base " + kSrc + "/configs/hardware/toy-ideal.json --out " + (dir / "o.json").string(),
                     "t.log:5: time 1e-300: expected microseconds from 0.001 to 1e12");
  expect_input_error("fit --nccl-tests " + write_text(dir / "t2.log", kNcclRankLines + kNcclHeader +
                                                                  "  9223372036854775808   256   float   sum   -1   41.0    0.02    0.05      0\n") +
                         " --base " + kSrc + "/configs/hardware/toy-ideal.json --out " + (dir / "o.json").string(),
                     "t2.log:5: size '9223372036854775808'");
  expect_input_error("analyze " + kSrc + "/tests/data/traces/none.json --steps 99999999999999999999", "--steps");
}

TEST_CASE("item 7: a trace timestamp beyond 2^62 ns is exit 2 naming the file, not a wrapped time", "[cli][hardening]") {
  auto dir = scratch_dir("item7");
  std::string trace = write_text(dir / "t.json", R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 99999999999999999999.5, "dur": 5, "args": {"stream": 7, "device": 0}}]})");
  expect_input_error("analyze " + trace, trace + ": ");
  std::string trace2 = write_text(dir / "t2.json", R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 9223372036854775, "dur": 5, "args": {"stream": 7, "device": 0}}]})");
  expect_input_error("analyze " + trace2, "expected a time within 2^62 ns");
}

TEST_CASE("item 8: compare refuses impossible measurements with exit 2 naming the field", "[cli][hardening]") {
  auto dir = scratch_dir("item8");
  std::string pred = (dir / "pred.json").string(), out;
  REQUIRE(run_capture(kBin + " simulate " + kC1 + " --json-out " + pred, out) == 0);
  nlohmann::json base = nlohmann::json::parse(slurp(pred));
  struct Case {
    nlohmann::json value;
    const char* needle;
  };
  const Case cases[] = {{-5, "/metrics/step_time_ns: -5: expected an integer from 1 to 2^62"},
                        {0, "/metrics/step_time_ns: 0: expected an integer from 1"},
                        {1e300, "/metrics/step_time_ns: 1e+300"},
                        {"fast", "/metrics/step_time_ns: \"fast\""}};
  for (const auto& c : cases) {
    nlohmann::json m = base;
    m["metrics"]["step_time_ns"] = c.value;
    std::string meas = write_text(dir / "meas.json", m.dump());
    expect_input_error("compare " + pred + " " + meas, c.needle);
  }
}

TEST_CASE("item 9: sweep --merge refuses a missing or truncated shard", "[cli][hardening]") {
  auto dir = scratch_dir("item9");
  std::string sweep = write_text(dir / "s.json", R"({"base": {"include": ")" + kC1 + R"("}, "axes": {"strategy.bucket_cap_bytes": [1000000, 2000000, 3000000, 4000000]}})");
  std::string out;
  for (int i = 0; i < 2; ++i)
    REQUIRE(run_capture(kBin + " sweep " + sweep + " --no-progress --shard " + std::to_string(i) + "/2 --out " +
                            (dir / ("p" + std::to_string(i) + ".csv")).string(),
                        out) == 0);
  const std::string p0 = (dir / "p0.csv").string(), p1 = (dir / "p1.csv").string(), m = (dir / "m.csv").string();
  // Both shards: the 4 points merge, exit 0.
  REQUIRE(run_capture(kBin + " sweep --merge " + p0 + " " + p1 + " --out " + m, out) == 0);
  // One shard only: points 1 and 3 are missing.
  expect_input_error("sweep --merge " + p0 + " --out " + m, "2 of the sweep's 4 points");
  // A shard cut short by its last row (a killed job copied by hand): point 3 is missing.
  std::string text = slurp(p1);
  text = text.substr(0, text.rfind('\n', text.size() - 2) + 1);
  std::string cut = write_text(dir / "cut.csv", text);
  expect_input_error("sweep --merge " + p0 + " " + cut + " --out " + m, "(point 3 is missing)");
  // Cut inside a row: the row is incomplete.
  std::string cut2 = write_text(dir / "cut2.csv", slurp(p1).substr(0, slurp(p1).size() - 3));
  expect_input_error("sweep --merge " + p0 + " " + cut2 + " --out " + m, "cut2.csv: line 3");
}

TEST_CASE("item 10: an invalid sweep base, duplicate keys, silent log rows and negative counts are exit 2", "[cli][hardening]") {
  auto dir = scratch_dir("item10");
  std::string bad_base = write_text(dir / "s.json", R"({"base": {"include": ")" + kC1 + R"(", "strategy": {"bucket_cap_mb": -1}},
    "axes": {"training.grad_accum": [1, 2]}})");
  expect_input_error("sweep " + bad_base + " --no-progress", "none of the 2 points is a valid experiment");
  expect_input_error("simulate " + write_text(dir / "dup.json", R"({"workload": {"toy": {"layers": 2}, "toy": {"layers": 3}}})"),
                     "/workload/toy: duplicate key");
  for (const char* size : {"-5", "1e30"})
    expect_input_error("fit --nccl-tests " + write_text(dir / "t.log", kNcclRankLines + kNcclHeader + "  " + size +
                                                                   "   256   float   sum   -1   41.0    0.02    0.05      0\n") +
                           " --base " + kSrc + "/configs/hardware/toy-ideal.json --out " + (dir / "o.json").string(),
                       std::string("t.log:5: size '") + size + "'");
  expect_input_error("analyze " + kSrc + "/tests/data/traces/none.json --top -1", "--top -1");
  expect_input_error("sweep " + bad_base + " --jobs -1", "--jobs -1");
  // A --set error names the --set argument, not the file the key was included from.
  expect_input_error("simulate " + kFsdp2 + " --set workload.micro_batch=-3", "--set workload.micro_batch=-3: /workload/micro_batch: -3");
  fs::create_directories(dir / "gemm.d");
  expect_input_error("fit --xla-gemm " + (dir / "gemm.d").string() + " --base " + kSrc + "/configs/hardware/toy-ideal.json --out " + (dir / "o.json").string(), "is a directory");
}

TEST_CASE("fuzz finding: a shard header with framework before status is an input error, not a length_error", "[hardening][sweep]") {
  // fuzz_sweep_merge: the varied columns sit between status and framework; reversed, the
  // range was negative and std::vector threw length_error (exit 1).
  auto dir = scratch_dir("fuzz-merge");
  std::string a = write_text(dir / "a.csv", "index,framework,status,step_time_ns,peak_memory_bytes,constraints_ok,points\n0,ddp,ok,5,7,true,1\n");
  std::ostringstream out;
  CHECK_THROWS_AS(stepsim::merge_sweep_csv({a}, out), stepsim::InputError);
}
