// Issue 50 regressions (the reliability campaign on 97d6b31, F-numbers as in its report): each
// reproducer is exit 2 with one line naming the file, the JSON path and what was expected, or a
// correct answer; never a signal, an exit 0 with a wrong number, or a file left behind. The
// reproducers are copied under tests/data/repro/; the large ones are generated here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;
using stepsim::test::scratch_dir;
using stepsim::test::write_text;
namespace fs = std::filesystem;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;
const std::string kRepro = kSrc + "/tests/data/repro/";
const std::string kC1 = kSrc + "/configs/examples/seed/c1-ddp-buckets.json";
const std::string kFsdp2 = kSrc + "/configs/examples/llama3-8b-fsdp2-8xh100.json";


int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Runs `args`; expects exit 2 and exactly one line that contains every needle.
void expect_input_error(const std::string& args, std::initializer_list<std::string> needles) {
  std::string out;
  const int rc = run_capture(kBin + " " + args, out);
  INFO(args << "\n" << out);
  CHECK(rc == 2);
  CHECK(count_lines(out) == 1);
  CHECK_THAT(out, !Catch::Contains("internal error"));
  for (const auto& n : needles) CHECK_THAT(out, Catch::Contains(n));
}

// Files in `dir` whose names say they are an output's temporary.
int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

// A small Kineto trace: two steps on thread 1, one compute kernel each, world size 8. `kernel`
// and `step` are spliced into every kernel and step event (a mutation), `root` into the root.
std::string trace(const std::string& kernel = "\"ph\": \"X\", \"ts\": 1100, \"dur\": 200",
                  const std::string& step = "\"ph\": \"X\", \"dur\": 1000", const std::string& root = "",
                  const std::string& step_names = "") {
  std::string events;
  for (int i = 0; i < 2; ++i) {
    const std::string name = step_names.empty() ? "ProfilerStep#" + std::to_string(3 + i) : step_names;
    const std::string kernel_i = std::regex_replace(kernel, std::regex("1100"), std::to_string(1100 + 1000 * i));
    events += (i ? ",\n" : "") + std::string("{\"cat\": \"user_annotation\", \"name\": \"") + name +
              "\", \"pid\": 10, \"tid\": 1, \"ts\": " + std::to_string(1000 + 1000 * i) + ", " + step + "},\n" +
              "{\"cat\": \"kernel\", \"name\": \"gemm_A\", \"pid\": 0, \"tid\": 7, " + kernel_i +
              ", \"args\": {\"device\": 0, \"stream\": 7}}";
  }
  return "{" + root + "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n\"traceEvents\": [\n" +
         events + "]}";
}

}  // namespace

// ---- crashes ----------------------------------------------------------------------------

TEST_CASE("A DeepSpeed experiment with zero nodes names /cluster/nodes instead of dividing by zero (F1)", "[cli][issue50]") {
  expect_input_error("simulate " + kRepro + "r01-ds-nodes0.json", {"r01-ds-nodes0.json", "/cluster/nodes: 0", "from 1 to"});
  expect_input_error("simulate " + kSrc + "/configs/examples/opt-1.3b-zero2-8xa800-dsconfig.json --set cluster.gpus_per_node=0",
                     {"/cluster/gpus_per_node: 0", "from 1 to"});
  // -1 blames the experiment's key, not a micro-batch derived from it (F15).
  expect_input_error("simulate " + kRepro + "r01-ds-nodes0.json --set cluster.nodes=-1", {"/cluster/nodes: -1"});
}

TEST_CASE("A DeepSpeed micro-batch whose product with the world wraps is refused, not divided by (F1)", "[cli][issue50]") {
  // 2^61 x 8 GPUs wraps to 0 (SIGFPE); 2^61+1 x 8 x 8 wraps to 64 and passed the check (UB).
  expect_input_error("simulate " + kRepro + "r02-ds-micro-overflow.json",
                     {"ds-micro-2e61.ds_config.json", "/train_micro_batch_size_per_gpu: 2305843009213693952", "up to 1048576"});
  expect_input_error("simulate " + kRepro + "r02b-ds-signed-overflow.json",
                     {"ds-wrap-eq.ds_config.json", "/train_micro_batch_size_per_gpu: 2305843009213693953"});
}

TEST_CASE("JSON nested 30,000 deep is an input error, not a stack overflow (F2)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("deep");
  const std::string deep = write_text(dir / "deep.json", std::string(30000, '[') + std::string(30000, ']'));
  expect_input_error("simulate " + deep, {"deep.json", "nesting deeper than 256"});
  // The same in an hf_config (the error printer recursed) and in an include.
  write_text(dir / "deep-100000.json", std::string(100000, '[') + std::string(100000, ']'));
  fs::copy_file(kRepro + "r03-hf-deep.json", dir / "r03-hf-deep.json");
  expect_input_error("simulate " + (dir / "r03-hf-deep.json").string(), {"deep-100000.json", "nesting deeper than 256"});
  const std::string inc = write_text(dir / "inc.json", "{\"include\": \"deep.json\"}");
  expect_input_error("simulate " + inc, {"deep.json", "nesting deeper than 256"});
  expect_input_error("simulate " + kC1 + " --set 'strategy.x=" + std::string(1000, '[') + std::string(1000, ']') + "'",
                     {"--set strategy.x", "nesting deeper than 256"});
}

TEST_CASE("tune --max-grid takes a positive count: -1 no longer wraps to 2^64-1, 0 is refused (F3)", "[cli][issue50]") {
  expect_input_error("tune " + kC1 + " --memory-cap 80GiB --max-grid -1", {"--max-grid -1", "expected an integer from 1"});
  expect_input_error("tune " + kC1 + " --memory-cap 80GiB --max-grid 0", {"--max-grid 0", "expected an integer from 1"});
}

// ---- unclear errors -----------------------------------------------------------------------

TEST_CASE("A wrong type in or beside a DeepSpeed config names the file and the key, not a type_error (F4)", "[cli][issue50]") {
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-hybrid-str.json",
                     {"ds-hybrid-str.ds_config.json", "/hybrid_engine/enabled: \"true\"", "true or false"});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-amp-auto.json",
                     {"ds-amp-auto.ds_config.json", "/amp/enabled: \"auto\"", "true or false"});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-actckpt.json",
                     {"ds-actckpt.ds_config.json", "/activation_checkpointing/partition_activations: \"true\""});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-offload-null.json",
                     {"ds-offload-null.ds_config.json", "/zero_optimization/offload_param", "no offload"});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-nodes-string.json",
                     {"r04-ds-typeerror-nodes-string.json", "/cluster/nodes: \"1\"", "an integer"});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-nodes-string.json --set 'cluster=[1]'", {"/cluster: [1]", "an object"});
  expect_input_error("simulate " + kRepro + "r04-ds-typeerror-nodes-string.json --set cluster.nodes=1 --set cluster.gpus_per_node=null",
                     {"/cluster/gpus_per_node: null"});
}

TEST_CASE("A DeepSpeed file without a bf16 or fp16 block is blamed for fp32 without naming a key it lacks (F15)",
          "[cli][issue50]") {
  const fs::path dir = scratch_dir("ds-fp32");
  write_text(dir / "ds.json", R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})");
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "dtype": "bf16"},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"deepspeed_config": "ds.json"}})");
  std::string out;
  CHECK(run_capture(kBin + " simulate " + exp, out) == 2);
  CHECK_THAT(out, Catch::Contains("no bf16 or fp16 block"));
  CHECK_THAT(out, !Catch::Contains("/bf16/enabled"));
}

// ---- wrong answers ----------------------------------------------------------------------

TEST_CASE("analyze refuses kernels and steps without ts, dur or ph, and negative durations (F11)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("trace-events");
  const std::string good = write_text(dir / "good.json", trace());
  std::string out;
  REQUIRE(run_capture(kBin + " analyze " + good, out) == 0);
  struct Case {
    std::string name, text, needle;
  };
  const std::vector<Case> cases = {
      {"nots", trace("\"ph\": \"X\", \"dur\": 200"), "no \"ts\""},
      {"nodur", trace("\"ph\": \"X\", \"ts\": 1100"), "no \"dur\""},
      {"noph", trace("\"ts\": 1100, \"dur\": 200"), "no \"ph\""},
      {"durneg", trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": -5"), "/dur: -5: expected a duration >= 0"},
      {"stepneg", trace(), ""},
      {"stepzero", trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": 200", "\"ph\": \"X\", \"dur\": 0"), "/dur: 0: expected a positive duration"},
      {"samestep", trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": 200", "\"ph\": \"X\", \"dur\": 1000", "", "ProfilerStep#3"),
       "expected each ProfilerStep number once"},
      {"dup", trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": 200", "\"ph\": \"X\", \"dur\": 1000", "\"traceEvents\": [],\n"),
       "/traceEvents: duplicate key"},
  };
  for (const auto& c : cases) {
    std::string text = c.text, needle = c.needle;
    if (c.name == "stepneg") {
      text = trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": 200", "\"ph\": \"X\", \"dur\": -100");
      needle = "/dur: -100: expected a positive duration";
    }
    const std::string f = write_text(dir / (c.name + ".json"), text);
    expect_input_error("analyze " + f, {c.name + ".json", "/traceEvents", needle});
  }
}

TEST_CASE("A trace's world size must be 1 to 2^20 and its rank inside it (F11)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("trace-world");
  for (const std::string ws : {"-8", "0", "1099511627776"}) {
    std::string text = trace();
    text.replace(text.find("\"world_size\": 8"), 15, "\"world_size\": " + ws);
    const std::string f = write_text(dir / "ws.json", text);
    expect_input_error("analyze " + f, {"ws.json", "/distributedInfo/world_size: " + ws, "from 1 to 1048576"});
  }
  std::string text = trace();
  text.replace(text.find("\"rank\": 0"), 9, "\"rank\": 99");
  const std::string f = write_text(dir / "rank.json", text);
  expect_input_error("analyze " + f, {"rank.json", "/distributedInfo/rank: 99", "below world_size 8"});
}

TEST_CASE("A grid of 2^64 points is refused instead of wrapping to \"0 points\", and a grid above --max-points is refused (F9)",
          "[cli][issue50]") {
  expect_input_error("sweep " + kRepro + "r10-sweep-64-axes.json --no-progress", {"r10-sweep-64-axes.json", "/axes", "a grid of at most"});
  const fs::path dir = scratch_dir("grid");
  nlohmann::json g = {{"name", "1e9"}, {"base", {{"include", kC1}}}};
  for (const char* axis : {"strategy.bucket_cap_bytes", "strategy.first_bucket_bytes", "training.grad_accum"}) {
    nlohmann::json v = nlohmann::json::array();
    for (int i = 0; i < 1000; ++i) v.push_back(std::string(axis) == "training.grad_accum" ? 1 + i % 4 : 1000000 * (i + 1));
    g["axes"][axis] = v;
  }
  const std::string grid = write_text(dir / "g.json", g.dump());
  expect_input_error("sweep " + grid + " --no-progress --out " + (dir / "g.csv").string(),
                     {"g.json", "1000000000 points", "expected at most 1000000", "--max-points"});
  CHECK_FALSE(fs::exists(dir / "g.csv"));
  CHECK(temporaries_in(dir) == 0);
  // A shard is counted alone; --max-points lowers and raises the limit.
  const std::string small = write_text(dir / "s.json", nlohmann::json{{"base", {{"include", kC1}}},
                                                                  {"axes", {{"training.grad_accum", {1, 2, 3}}}}}.dump());
  expect_input_error("sweep " + small + " --no-progress --max-points 2", {"3 points", "expected at most 2"});
  std::string out;
  CHECK(run_capture(kBin + " sweep " + small + " --no-progress --max-points 3", out) == 0);
  CHECK(run_capture(kBin + " sweep " + small + " --no-progress --max-points 2 --shard 0/2", out) == 0);
  expect_input_error("sweep " + small + " --no-progress --max-points 0", {"--max-points 0", "expected an integer from 1"});
}

TEST_CASE("A GPT-2 config runs no sequence longer than its position table, whose size is bounded (F14)", "[cli][issue50]") {
  expect_input_error("simulate " + kRepro + "r06-gpt2-seq-over-n_positions.json",
                     {"hf-gpt2.config.json", "/n_positions: 1024", "at least workload.seq_len 4096"});
  expect_input_error("simulate " + kRepro + "r07-gpt2-n_positions-2e40.json",
                     {"hf-gpt2-npos-2e40.config.json", "/n_positions: 1099511627776", "at most 16777216"});
  std::string out;
  CHECK(run_capture(kBin + " simulate " + kRepro + "r06-gpt2-seq-over-n_positions.json --set workload.seq_len=1024", out) == 0);
}

TEST_CASE("tune --memory-cap nan is refused instead of becoming the device's capacity (F16)", "[cli][issue50]") {
  for (const std::string cap : {"nan", "NaNGiB", "inf", "1e30GiB"})
    expect_input_error("tune " + kC1 + " --memory-cap " + cap, {"--memory-cap " + cap, "expected a positive size"});
}

TEST_CASE("compare and analyze --steps outside the trace's steps is exit 2, not a FAIL against zeros (F17)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("steps");
  const std::string t = write_text(dir / "t.json", trace());
  expect_input_error("analyze " + t + " --steps 100-200", {"t.json", "--steps 100-200", "no ProfilerStep", "3 to 4"});
  std::string out;
  REQUIRE(run_capture(kBin + " simulate " + kC1 + " --json > " + (dir / "p.json").string(), out) == 0);
  expect_input_error("compare " + (dir / "p.json").string() + " " + t + " --steps 100-200", {"no ProfilerStep"});
}

TEST_CASE("An HF model name with control characters is printed without them, and cut (F19)", "[cli][issue50]") {
  std::string out;
  REQUIRE(run_capture(kBin + " simulate " + kRepro + "r16-hf-name-control-chars.json", out) == 0);
  CHECK(out.find('\x1b') == std::string::npos);
  CHECK(out.find(std::string(1, '\0')) == std::string::npos);
}

// ---- lost or clobbered output -------------------------------------------------------------

TEST_CASE("A write error on stdout is exit 2, not exit 0 with nothing written (F6)", "[cli][issue50]") {
  if (!fs::exists("/dev/full")) return;
  for (const std::string args : {"simulate " + kC1 + " --json", "simulate " + kC1, "explain " + kC1, std::string("schema")}) {
    std::string out;
    const int rc = run_capture("{ " + kBin + " " + args + " > /dev/full; }", out);  // stderr to the pipe
    INFO(args << "\n" << out);
    CHECK(rc == 2);
    CHECK_THAT(out, Catch::Contains("cannot write the standard output"));
  }
}

TEST_CASE("Two outputs of one run naming one file are refused before either is written (F7)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("same-out");
  const std::string same = (dir / "same.out").string();
  expect_input_error("simulate " + kC1 + " --trace " + same + " --report " + same, {"same.out", "is also the trace file"});
  CHECK_FALSE(fs::exists(same));
  // Another spelling of the same file.
  expect_input_error("simulate " + kC1 + " --trace " + same + " --json-out " + dir.string() + "/./same.out", {"is also"});
  const std::string small = write_text(dir / "s.json", nlohmann::json{{"base", {{"include", kC1}}},
                                                                  {"axes", {{"training.grad_accum", {1, 2}}}}}.dump());
  expect_input_error("sweep " + small + " --no-progress --out " + same + " --json-out " + same, {"is also the CSV"});
  CHECK_FALSE(fs::exists(same));
  CHECK(temporaries_in(dir) == 0);
  // /dev/null takes any number of outputs.
  std::string out;
  CHECK(run_capture(kBin + " simulate " + kC1 + " --trace /dev/null --report /dev/null", out) == 0);
}

#ifdef STEPSIM_TEST_DATA
TEST_CASE("init refuses --out equal to --profile-out or to its trace, and leaves no file behind (F7, F8)", "[cli][issue50][data]") {
  const fs::path dir = scratch_dir("init-out");
  const std::string t = std::string(STEPSIM_TEST_DATA) +
                        "/traces/li-plus_playground/ddp__rank_0__n31-145-242_966278.1702612104595.pt.trace.json.gz";
  const std::string copy = (dir / "T.json.gz").string();
  fs::copy_file(t, copy);
  expect_input_error("init --from-trace " + copy + " --out " + copy, {"is an input of this run"});
  CHECK_FALSE(fs::exists(dir / "T.json.profile.json"));
  const std::string same = (dir / "same.json").string();
  expect_input_error("init --from-trace " + copy + " --out " + same + " --profile-out " + same, {"is also the profile"});
  CHECK_FALSE(fs::exists(same));
  CHECK(temporaries_in(dir) == 0);
}

TEST_CASE("init --from-trace fits a trace whose Broadcast kernels all read 0 us (F5)", "[cli][issue50][data]") {
  const fs::path dir = scratch_dir("init-dur0");
  const std::string t = std::string(STEPSIM_TEST_DATA) +
                        "/traces/li-plus_playground/ddp__rank_0__n31-145-242_966278.1702612104595.pt.trace.json.gz";
  std::string out;
  REQUIRE(run_capture("gzip -dc " + t + " > " + (dir / "t.json").string(), out) == 0);
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(dir / "t.json"));
  int zeroed = 0;
  for (auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "kernel" && e.value("name", "").find("Broadcast") != std::string::npos) {
      e["dur"] = 0;
      ++zeroed;
    }
  REQUIRE(zeroed > 0);
  const std::string mutant = write_text(dir / "bcast-dur0.json", doc.dump());
  const int rc = run_capture(kBin + " init --from-trace " + mutant + " --out " + (dir / "x.json").string(), out);
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, !Catch::Contains("internal error"));
}
#endif

// A sweep of the C1 case over 4 x 20,000 points, long enough to be interrupted (a shard of
// half of it ran in 6.7 s on one thread of the 2-core machine).
std::string long_sweep(const fs::path& dir) {
  nlohmann::json g = {{"base", {{"include", kC1}}}};
  nlohmann::json v = nlohmann::json::array();
  // 240,000 points (a shard 120,000): a whole shard takes ~5 s on one core, over 3x the 1.5 s
  // the interruptions wait (20,000 values, 1.65 s a shard, finished before the signal on an idle
  // machine).
  for (int i = 0; i < 60000; ++i) v.push_back(1000 * (i + 1));
  g["axes"]["training.grad_accum"] = {1, 2, 3, 4};
  g["axes"]["strategy.bucket_cap_bytes"] = v;
  return write_text(dir / "g.json", g.dump());
}

// Runs `args` in the background in `dir`, sends SIGTERM after `seconds`, and returns what the
// shell printed, ending in "rc=STATUS".
std::string interrupt(const fs::path& dir, const std::string& args, const std::string& seconds) {
  std::string out;
  run_capture("cd " + dir.string() + " && (" + kBin + " " + args + " & pid=$!; sleep " + seconds +
                  "; kill -TERM $pid; wait $pid; echo rc=$?)",
              out);
  return out;
}

TEST_CASE("SIGTERM during a sweep removes the outputs' temporaries and keeps the CSV rows for --resume (F10)",
          "[cli][issue50]") {
  const fs::path dir = scratch_dir("sigterm");
  const std::string grid = long_sweep(dir);
  const std::string csv = (dir / "g.csv").string(), js = (dir / "g.sweep.json").string();
  const std::string out = interrupt(dir, "sweep " + grid + " --no-progress --jobs 1 --out " + csv + " --json-out " + js, "1.5");
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rc=143"));  // died of the signal, as before
  CHECK_THAT(out, Catch::Contains("g.csv.partial"));
  CHECK(temporaries_in(dir) == 0);
  CHECK_FALSE(fs::exists(csv));
  CHECK_FALSE(fs::exists(js));
  CHECK(fs::exists(csv + ".partial"));
}

TEST_CASE("sweep --resume finishes an interrupted shard with the same CSV an uninterrupted run writes (F10)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("resume");
  const std::string grid = long_sweep(dir);
  const std::string csv = (dir / "g.csv").string(), whole = (dir / "whole.csv").string();
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + grid + " --no-progress --shard 1/2 --out " + whole, out) == 0);
  out = interrupt(dir, "sweep " + grid + " --no-progress --jobs 1 --shard 1/2 --out " + csv, "1.5");
  INFO(out);
  REQUIRE(fs::exists(csv + ".partial"));
  // Another shard's command line does not match the rows kept.
  expect_input_error("sweep " + grid + " --no-progress --shard 0/2 --out " + csv + " --resume", {"g.csv.partial", "expected point 0"});
  const int rc = run_capture(kBin + " sweep " + grid + " --no-progress --shard 1/2 --out " + csv + " --resume", out);
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("resuming:"));
  std::ifstream a(csv), b(whole);
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  CHECK(sa.str() == sb.str());
  CHECK_FALSE(fs::exists(csv + ".partial"));
  expect_input_error("sweep " + grid + " --no-progress --out " + csv + " --resume", {"g.csv.partial", "nothing to resume"});
}

// ---- unbounded ---------------------------------------------------------------------------

TEST_CASE("A trace with 80 MiB of whitespace between two events is refused instead of buffered (F12)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("ws-bomb");
  std::string text = trace();
  const std::size_t at = text.find("},\n{") + 2;
  text.insert(at, std::string(std::size_t{80} << 20, ' '));
  const std::string f = write_text(dir / "bomb.json", text);
  expect_input_error("analyze " + f, {"bomb.json", "longer than 64 MiB"});
}

TEST_CASE("An include that is a FIFO without a writer is an error, not a hang; a cycle names its include (F20)",
          "[cli][issue50]") {
  const fs::path dir = scratch_dir("fifo");
  const std::string fifo = (dir / "fifo.json").string();
  std::string out;
  REQUIRE(run_capture("mkfifo " + fifo, out) == 0);
  const std::string exp = write_text(dir / "exp.json", "{\"include\": \"fifo.json\"}");
  expect_input_error("simulate " + exp, {"fifo.json", "empty file"});
  const std::string self = write_text(dir / "self.json", "{\"include\": \"self.json\"}");
  expect_input_error("simulate " + self, {"self.json: /include: \"self.json\"", "includes nested at most 16 deep"});
}

// ---- messages ----------------------------------------------------------------------------

TEST_CASE("--set refuses a path with '/' and the same path twice (F23)", "[cli][issue50]") {
  expect_input_error("simulate " + kC1 + " --set strategy/bucket_cap_bytes=1", {"expected a dotted path"});
  expect_input_error("simulate " + kC1 + " --set training.grad_accum=2 --set training.grad_accum=3",
                     {"--set training.grad_accum=3", "also set by --set training.grad_accum=2"});
}

TEST_CASE("validate refuses an unknown top-level key in a baseline (F24)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("baseline");
  nlohmann::json b = nlohmann::json::parse(std::ifstream(kSrc + "/validation/baseline.json"));
  b["bogus"] = 1;
  const std::string f = write_text(dir / "baseline.json", b.dump());
  expect_input_error("validate " + kSrc + "/validation/suite.json --baseline " + f, {"baseline.json: /bogus: 1", "unknown key"});
}

TEST_CASE("sweep --merge refuses an unknown status, a directory and raw bytes by name (F18)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("merge");
  const std::string small = write_text(dir / "s.json", nlohmann::json{{"base", {{"include", kC1}}},
                                                                  {"axes", {{"training.grad_accum", {1, 2}}}}}.dump());
  const std::string csv = (dir / "s.csv").string();
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + small + " --no-progress --out " + csv, out) == 0);
  std::ifstream in(csv);
  std::stringstream text;
  text << in.rdbuf();
  const std::string good = text.str();
  const std::string ok_upper = write_text(dir / "upper.csv", std::regex_replace(good, std::regex(",ok,"), ",OK,"));
  expect_input_error("sweep --merge " + ok_upper + " --out " + (dir / "m.csv").string(), {"upper.csv", "status \"OK\"", "expected ok"});
  fs::create_directories(dir / "d.csv");
  expect_input_error("sweep --merge " + (dir / "d.csv").string() + " --out " + (dir / "m.csv").string(), {"is a directory"});
  const std::string binary = write_text(dir / "bin.csv", good.substr(0, good.find('\n') + 1) + "\xff\xfe" + std::string(1, '\0') + "\n");
  out.clear();
  CHECK(run_capture(kBin + " sweep --merge " + binary + " --out " + (dir / "m.csv").string(), out) == 2);
  CHECK(out.find('\xff') == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "m.csv"));
}

TEST_CASE("An hf_config with a DeepSpeed config whose buckets are \"auto\" resolves them from the config's hidden size (F13)",
          "[cli][issue50]") {
  std::string out;
  const int rc = run_capture(kBin + " simulate " + kRepro + "r05-hfconfig-plus-ds-auto.json --json", out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(nlohmann::json::parse(out)["metrics"]["step_time_ns"].get<double>() > 0);
  CHECK(nlohmann::json::parse(out)["strategy"]["reduce_bucket_size"] == 4096 * 4096);  // hidden^2
}

TEST_CASE("An MPT config whose attn_config.alibi is not a boolean names the key instead of a type_error (F4)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("mpt-alibi");
  write_text(dir / "mpt.json", R"({"model_type": "mpt", "d_model": 2048, "n_layers": 24, "n_heads": 16, "vocab_size": 50368,
    "max_seq_len": 2048, "attn_config": {"alibi": "no"}})");
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"model": {"hf_config": "mpt.json"}, "seq_len": 2048},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"framework": "fsdp2"}})");
  expect_input_error("simulate " + exp, {"mpt.json", "/attn_config", "alibi true or false"});
}

TEST_CASE("A --set value that is not UTF-8 is exit 2, not a json type_error (fuzz_config finding, issue 50)", "[cli][issue50]") {
  // fuzz_config's first run with the DeepSpeed seeds: --set cluster.nodes=\xe9\xe9...2 was kept as
  // a string and the error message about it threw json type_error 316 (internal error).
  expect_input_error("simulate " + kC1 + " --set \"cluster.nodes=$(printf '\\351\\3512')\"", {"--set cluster.nodes", "UTF-8"});
}

// ---- the findings fixed second: F15, F18, F21, F22, F23 ------------------------------------

TEST_CASE("A value DeepSpeed itself would fail on is refused even where stepsim does not read the key (F15)", "[cli][issue50]") {
  expect_input_error("simulate " + kRepro + "r15-ds-gradclip-banana.json",
                     {"ds-gradclip-banana.ds_config.json", "/gradient_clipping: \"banana\"", "expected number | one of auto"});
  expect_input_error("simulate " + kRepro + "r15-ds-steps-per-print-object.json",
                     {"ds-steps-per-print-object.ds_config.json", "/steps_per_print: {\"a\":1}", "integer >= 1"});
  expect_input_error("simulate " + kRepro + "r15-ds-scheduler-nope.json",
                     {"ds-scheduler-nope.ds_config.json", "/scheduler/type: \"Nope\"", "WarmupLR", "CosineAnnealingLR"});
  // The class: every declared key, top level and zero_optimization, read or not.
  const fs::path dir = scratch_dir("ds-values");
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "dtype": "bf16"},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"deepspeed_config": "ds.json"}})");
  auto ds = [&](const std::string& extra, const std::string& zero_extra = "") {
    write_text(dir / "ds.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3)" +
                                    zero_extra + "}" + extra + "}");
    return "simulate " + exp;
  };
  expect_input_error(ds(R"(, "wall_clock_breakdown": "no")"), {"ds.json", "/wall_clock_breakdown: \"no\"", "boolean"});
  expect_input_error(ds(R"(, "gradient_predivide_factor": 0)"), {"ds.json", "/gradient_predivide_factor: 0", "number > 0"});
  expect_input_error(ds(R"(, "optimizer": {"type": "AdamW", "params": 5})"), {"ds.json", "/optimizer/params: 5", "an object"});
  // DeepSpeed's Lion (runtime/config.py LION_OPTIMIZER; the engine builds FusedLion) is read as training.optimizer lion.
  {
    std::string json_out;
    REQUIRE(run_capture(kBin + " " + ds(R"(, "optimizer": {"type": "Lion", "params": {"lr": 1e-4}})") + " --json", json_out) == 0);
    CHECK(nlohmann::json::parse(json_out)["experiment"]["training"]["optimizer"] == "lion");
  }
  expect_input_error(ds(R"(, "optimizer": {"type": "Adafactor"})"), {"ds.json", "/optimizer/type: \"Adafactor\"", "Lion"});
  expect_input_error(ds("", R"(, "memory_efficient_linear": "x")"), {"ds.json", "/zero_optimization/memory_efficient_linear: \"x\"", "boolean"});
  // "auto" stays accepted where the HF Trainer fills it.
  std::string out;
  CHECK(run_capture(kBin + " " + ds(R"(, "gradient_clipping": "auto", "steps_per_print": 2000, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": "auto"}})"), out) == 0);
}

TEST_CASE("An error about a value translated from a DeepSpeed file names that file's key, not the experiment key it became (F15)",
          "[cli][issue50]") {
  const fs::path dir = scratch_dir("ds-blame");
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "dtype": "bf16"},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"deepspeed_config": "ds.json"}})");
  auto ds = [&](const std::string& top, const std::string& zero = "") {
    write_text(dir / "ds.json", R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2)" + zero + "}" + top + "}");
    return "simulate " + exp;
  };
  // The zero strategy's table checks these; its message names the DeepSpeed path.
  for (const std::string args : {ds(R"(, "train_micro_batch_size_per_gpu": 1)", R"(, "reduce_bucket_size": -1)"),
                                 ds(R"(, "train_micro_batch_size_per_gpu": 1)", R"(, "reduce_bucket_size": "x")")}) {
    expect_input_error(args, {"ds.json: /zero_optimization/reduce_bucket_size: "});
    std::string out;
    run_capture(kBin + " " + args, out);
    CHECK_THAT(out, !Catch::Contains("/strategy/"));
  }
  expect_input_error(ds(R"(, "train_micro_batch_size_per_gpu": 1, "communication_data_type": "fp64")"),
                     {"ds.json: /communication_data_type: \"fp64\"", "one of fp32"});
  expect_input_error(ds(R"(, "train_micro_batch_size_per_gpu": 1, "communication_data_type": 5)"),
                     {"ds.json: /communication_data_type: 5", "null | string"});
  expect_input_error(ds(R"(, "train_micro_batch_size_per_gpu": 1, "data_types": {"grad_accum_dtype": "fp64"})"),
                     {"ds.json: /data_types/grad_accum_dtype: \"fp64\""});
  // A micro-batch or accumulation derived from train_batch_size past the experiment's range
  // names train_batch_size (before: "ds.json: /workload/micro_batch", a key the file lacks).
  expect_input_error(ds(R"(, "train_batch_size": 4611686018427387904)"),
                     {"ds.json: /train_batch_size: 4611686018427387904", "micro-batch of 576460752303423488"});
  expect_input_error(ds(R"(, "train_batch_size": 4611686018427387904, "train_micro_batch_size_per_gpu": 1)"),
                     {"ds.json: /train_batch_size: 4611686018427387904", "accumulation of 576460752303423488"});
}

TEST_CASE("ZeRO element counts of 0, which DeepSpeed accepts, run as DeepSpeed runs them (F15)", "[cli][issue50]") {
  // DeepSpeed's zero config declares them ge=0. stage3_max_live_parameters 0 leaves no room to
  // prefetch (PartitionedParameterCoordinator: min(max_live - available, prefetch_bucket) <= 0),
  // so the step is the one without prefetching: prefetch_bucket_size 0.
  auto step_ns = [](const std::string& args) {
    std::string out;
    const int rc = run_capture(kBin + " simulate " + args + " --json", out);
    INFO(args << "\n" << out);
    REQUIRE(rc == 0);
    return nlohmann::json::parse(out)["metrics"]["step_time_ns"].get<std::int64_t>();
  };
  const std::string zeros = kRepro + "r15-ds-zero3-zeros.json";
  const std::int64_t no_room = step_ns(zeros);
  CHECK(no_room == step_ns(zeros + " --set strategy.stage3_prefetch_bucket_size=0"));
  // Not a vacuous equality: with room to prefetch (the default 1e9 live elements) the step differs.
  const fs::path dir = scratch_dir("ds-zeros");
  write_text(dir / "ds.json", R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 0, "sub_group_size": 0}})");
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"preset": "llama3-8b", "seq_len": 4096, "micro_batch": 1, "dtype": "bf16"},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json", "nodes": 1, "gpus_per_node": 8},
    "strategy": {"deepspeed_config": "ds.json"}, "training": {"optimizer": "adamw"}})");
  CHECK(step_ns(exp) != no_room);
}

namespace {
// The two shard CSVs of r18-merge-sweep.json (texts), and their merge run without mutation.
std::pair<std::string, std::string> f18_shards(const fs::path& dir) {
  std::string out;
  const std::string sweep = kRepro + "r18-merge-sweep.json";
  for (int i = 0; i < 2; ++i)
    REQUIRE(run_capture(kBin + " sweep " + sweep + " --no-progress --shard " + std::to_string(i) + "/2 --out " +
                            (dir / ("p" + std::to_string(i) + ".csv")).string(),
                        out) == 0);
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  return {read(dir / "p0.csv"), read(dir / "p1.csv")};
}
}  // namespace

TEST_CASE("sweep --merge checks every field of every row, and with the sweep file each row's configuration (F18)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("merge-fields");
  const auto [p0, p1] = f18_shards(dir);
  const std::string sweep = kRepro + "r18-merge-sweep.json", m = (dir / "m.csv").string();
  write_text(dir / "b.csv", p1);
  auto merge = [&](const std::string& a, bool with_sweep = false) {
    write_text(dir / "a.csv", a);
    return "sweep " + (with_sweep ? sweep + " " : std::string()) + "--merge " + (dir / "a.csv").string() + " " +
           (dir / "b.csv").string() + " --out " + m;
  };
  std::string out;
  REQUIRE(run_capture(kBin + " " + merge(p0, true), out) == 0);
  fs::remove(m);  // the refused merges below must not write it
  // world_size -8 on an ok row (the writer's column after framework).
  const std::string ws = std::regex_replace(p0, std::regex(",ddp,8,"), ",ddp,-8,");
  REQUIRE(ws != p0);
  expect_input_error(merge(ws), {"a.csv: line 2: point 0: world_size: \"-8\"", "expected an integer from 1 to 1048576"});
  // A framework no table declares, an index the writer never prints.
  expect_input_error(merge(std::regex_replace(p0, std::regex(",ddp,8,"), ",nope,8,")),
                     {"a.csv: line 2: point 0: framework: \"nope\"", "ddp, fsdp1, fsdp2 or zero"});
  expect_input_error(merge(std::regex_replace(p0, std::regex("\n0,ok,"), "\n-0,ok,")), {"a.csv: line 2", "-0,ok", "point index"});
  // A metric that is not a number.
  const std::string bad_metric = std::regex_replace(p0, std::regex(",ddp,8,([0-9]+),"), ",ddp,8,12abc,");
  REQUIRE(bad_metric != p0);
  expect_input_error(merge(bad_metric), {"a.csv: line 2: point 0: step_time_ns: \"12abc\"", "an integer >= 0"});
  // The axis value: only the sweep file says what point 0 is.
  const std::string axis = std::regex_replace(p0, std::regex("\n0,ok,1000000,"), "\n0,ok,1000000abc,");
  REQUIRE(axis != p0);
  expect_input_error(merge(axis, true), {"a.csv: line 2: point 0: strategy.bucket_cap_bytes: \"1000000abc\"",
                                         "expected \"1000000\", the value of point 0 in the sweep file"});
  // Shards of another sweep: its header.
  const std::string other = write_text(dir / "other.json", nlohmann::json{{"base", {{"include", kC1}}},
                                                                       {"axes", {{"training.grad_accum", {1, 2}}}}}.dump());
  expect_input_error("sweep " + other + " --merge " + (dir / "b.csv").string() + " --out " + m,
                     {"b.csv: line 1", "expected the header of the sweep"});
  CHECK_FALSE(fs::exists(m));
  CHECK(temporaries_in(dir) == 0);
}

TEST_CASE("sweep --resume refuses kept rows whose configuration is not the sweep's point (F18)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("resume-fields");
  const auto [p0, p1] = f18_shards(dir);
  (void)p1;
  const std::string csv = (dir / "r.csv").string();
  // A partial shard 0/2 of one row whose axis value was edited, as an interrupted run leaves it.
  write_text(csv + ".partial", std::regex_replace(p0, std::regex("\n0,ok,1000000,"), "\n0,ok,1000000abc,"));
  expect_input_error("sweep " + kRepro + "r18-merge-sweep.json --no-progress --shard 0/2 --out " + csv + " --resume",
                     {"r.csv.partial: line 2: point 0: strategy.bucket_cap_bytes: \"1000000abc\""});
}

TEST_CASE("analyze says when a step's kernels ran past its span, which is how compute exceeds the step (F21)", "[cli][issue50]") {
  const fs::path dir = scratch_dir("trace-lag");
  // Each step's kernel starts 0.1 ms into its 1 ms span and runs 2.5 ms: compute 2.5 ms.
  const std::string lag = write_text(dir / "lag.json", trace("\"ph\": \"X\", \"ts\": 1100, \"dur\": 2500"));
  std::string out;
  REQUIRE(run_capture(kBin + " analyze " + lag, out) == 0);
  INFO(out);
  // 1100 + 2500 = 3600 us, the span ends at 2000: 1.6 ms after it.
  CHECK_THAT(out, Catch::Contains("#3: its kernels ran until 1.600 ms after its span"));
  CHECK_THAT(out, Catch::Contains("compute U comm = 2.500 ms exceeds the 1.000 ms step"));
  const std::string fits = write_text(dir / "fits.json", trace());
  REQUIRE(run_capture(kBin + " analyze " + fits, out) == 0);
  CHECK_THAT(out, !Catch::Contains("its kernels ran until"));
}

#ifdef STEPSIM_TEST_DATA
TEST_CASE("analyze of the li-plus DDP trace names step #3, whose compute exceeds its span (F21)", "[cli][issue50][data]") {
  std::string out;
  REQUIRE(run_capture(kBin + " analyze " + std::string(STEPSIM_TEST_DATA) +
                          "/traces/li-plus_playground/ddp__rank_0__n31-145-242_966278.1702612104595.pt.trace.json.gz",
                      out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("#3: its kernels ran until"));
  CHECK_THAT(out, !Catch::Contains("#4: its kernels ran until"));
}
#endif

TEST_CASE("A config.json with expert or quantization keys is refused whatever its model_type (F22)", "[cli][issue50]") {
  expect_input_error("simulate " + kRepro + "r22-hf-llama-moe-keys.json",
                     {"hf-llama-moe-keys.config.json", "/num_local_experts: 8", "a mixture of experts is not modelled",
                      "remove the key"});
  const fs::path dir = scratch_dir("hf-structure");
  nlohmann::json hf = nlohmann::json::parse(std::ifstream(kRepro + "hf-llama31-8b.config.json"));
  const std::string exp = write_text(dir / "exp.json", R"({"workload": {"model": {"hf_config": "hf.json"}, "seq_len": 4096},
    "cluster": {"profile": "configs/hardware/h100-sxm-8x.json"}, "strategy": {"framework": "fsdp2"}})");
  nlohmann::json q = hf;
  q["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
  write_text(dir / "hf.json", q.dump());
  expect_input_error("simulate " + exp, {"hf.json: /quantization_config", "not modelled"});
  // Keys stepsim does not read keep their type (torch_dtype a string).
  nlohmann::json t = hf;
  t["torch_dtype"] = 5;
  write_text(dir / "hf.json", t.dump());
  expect_input_error("simulate " + exp, {"hf.json: /torch_dtype: 5", "null | string"});
  // null is "no experts": the dense model.
  nlohmann::json n = hf;
  n["num_local_experts"] = nullptr;
  write_text(dir / "hf.json", n.dump());
  std::string out;
  CHECK(run_capture(kBin + " simulate " + exp, out) == 0);
}

TEST_CASE("A key the configuration does not use names the keys it does use, not the whole table (F23)", "[cli][issue50]") {
  expect_input_error("simulate " + kC1 + " --set workload.micro_batch=0",
                     {"--set workload.micro_batch=0: /workload/micro_batch: 0", "this configuration does not use it",
                      "(it reads toy, dtype)"});
  std::string out;
  run_capture(kBin + " simulate " + kC1 + " --set workload.micro_batch=0", out);
  CHECK_THAT(out, !Catch::Contains("this object takes"));
}
