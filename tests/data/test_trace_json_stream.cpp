// The streaming trace reader (trace/json_stream + kineto_reader): it must read every
// trace the same whatever the window size (a token or an event may straddle any boundary), and
// accept exactly the JSON that nlohmann accepts (it replaced nlohmann's SAX parser for speed).

#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "trace/kineto_trace.hpp"
#include "sim/core/error.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

bool same_comm(const CommParams& a, const CommParams& b) {
  return a.kind == b.kind && a.in_elems == b.in_elems && a.out_elems == b.out_elems && a.elem_bytes == b.elem_bytes &&
         a.dtype == b.dtype && a.group_size == b.group_size && a.group_name == b.group_name && a.bytes == b.bytes;
}

// "" if a and b hold the same records, else what differs first.
std::string first_difference(const KinetoTrace& a, const KinetoTrace& b) {
  if (a.rank != b.rank || a.world_size != b.world_size || a.backend != b.backend) return "distributedInfo";
  if (a.devices.size() != b.devices.size()) return "device count";
  for (std::size_t i = 0; i < a.devices.size(); ++i) {
    const auto &x = a.devices[i], &y = b.devices[i];
    if (x.id != y.id || x.name != y.name || x.memory != y.memory || x.sms != y.sms ||
        x.compute_major != y.compute_major || x.compute_minor != y.compute_minor)
      return "device " + std::to_string(i);
  }
  if (a.stepsim_trace != b.stepsim_trace || a.stepsim_device != b.stepsim_device ||
      a.stepsim_capacity != b.stepsim_capacity)
    return "stepsim";
  if (a.names != b.names) return "names";
  if (a.event_count != b.event_count) return "event_count";
  if (a.gpu_ops.size() != b.gpu_ops.size()) return "gpu op count";
  for (std::size_t i = 0; i < a.gpu_ops.size(); ++i) {
    const auto &x = a.gpu_ops[i], &y = b.gpu_ops[i];
    if (x.kind != y.kind || x.name != y.name || x.device != y.device || x.stream != y.stream || x.start != y.start ||
        x.end != y.end || x.correlation != y.correlation || x.bytes != y.bytes || x.collective != y.collective ||
        !same_comm(a.comm_of(x), b.comm_of(y)) || a.phase_of(x) != b.phase_of(y))
      return "gpu op " + std::to_string(i);
  }
  if (a.runtime.size() != b.runtime.size()) return "runtime count";
  for (std::size_t i = 0; i < a.runtime.size(); ++i) {
    const auto &x = a.runtime[i], &y = b.runtime[i];
    if (x.correlation != y.correlation || x.thread != y.thread || x.start != y.start || x.end != y.end)
      return "runtime " + std::to_string(i);
  }
  if (a.cpu.size() != b.cpu.size()) return "cpu span count";
  for (std::size_t i = 0; i < a.cpu.size(); ++i) {
    const auto &x = a.cpu[i], &y = b.cpu[i];
    if (x.kind != y.kind || x.thread != y.thread || x.start != y.start || x.end != y.end ||
        x.step_number != y.step_number || !same_comm(a.comm_of(x), b.comm_of(y)) || x.comm_has_params != y.comm_has_params ||
        a.inputs_of(x).dims != b.inputs_of(y).dims || a.inputs_of(x).type != b.inputs_of(y).type || x.name != y.name)
      return "cpu span " + std::to_string(i);
  }
  if (a.memory.size() != b.memory.size()) return "memory sample count";
  for (std::size_t i = 0; i < a.memory.size(); ++i) {
    const auto &x = a.memory[i], &y = b.memory[i];
    if (x.time != y.time || x.device != y.device || x.total != y.total || a.categories_of(x) != b.categories_of(y))
      return "memory sample " + std::to_string(i);
  }
  return "";
}

KinetoTrace read_windowed(const std::string& text, std::size_t window) {
  std::istringstream in(text);
  return read_kineto_trace_stream(in, "text", window);
}

// Escapes (\" \/ \t \n \u0063, a surrogate pair), raw UTF-8, integer / float / exponent /
// string timestamps, a 30-digit integer, INT64_MIN, args before "ph", nested args, a later
// duplicate "name" that turns an ignored cpu_op into a GEMM, a counter event, and elements of
// traceEvents that are not events.
const char* kTricky = R"J({"distributedInfo": {"backend": "nc\u0063l", "rank": 1, "world_size": 4, "x": {"rank": 9}},
 "deviceProperties": [{"id": 0, "name": "GPU \"0\" \u00e9\ud83d\ude00 ü", "totalGlobalMem": 8e3}, 7],
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 1, "ts": "1000.5", "dur": 1000.25},
  {"args": {"correlation": 3}, "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 1,
   "ts": 1050, "dur": 5},
  {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(\u0078\/\t)", "pid": 0, "tid": 7,
   "ts": 1100.0005, "dur": 2e2, "args": {"device": 0, "stream": -7, "correlation": 3, "Group size": 2, "dtype": "Float",
   "comm": "pg\n1", "grid": [1, [2, {"a": true}]], "big": 123456789012345678901234567890, "min": -9223372036854775808}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 10, "tid": 1, "ts": 1400, "dur": 10,
   "args": {"Input Dims": [[4, 4], []], "Input type": ["float", ""]}, "name": "aten::bmm"},
  {"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 10, "tid": 1, "ts": 1500, "dur": 10,
   "args": {"Python id": 1, "Python parent id": null, "deep": [[[{"k": [-0.5e-3, false]}]]]}},
  {"ph": "C", "name": "memory (bytes)", "pid": 0, "ts": 1.5, "args": {"x\u00e9": 1, "total_bytes": 9, "y": 2.5}},
  [1, 2], "not an event", null, {}
 ]}
)J";

}  // namespace

TEST_CASE("The streaming reader decodes escapes, unicode and every number form of a trace", "[trace]") {
  KinetoTrace t = read_kineto_trace_text(kTricky, "tricky");
  CHECK(t.backend == "nccl");
  CHECK(t.rank == 1);  // the nested "rank": 9 is not distributedInfo's
  REQUIRE(t.devices.size() == 1);
  CHECK(t.devices[0].name == "GPU \"0\" \xc3\xa9\xf0\x9f\x98\x80 \xc3\xbc");
  CHECK(t.devices[0].memory == Bytes{8000});
  CHECK(t.event_count == 7);  // the six events and {}; the array, string and null are not events

  // ProfilerStep#7: ts "1000.5" us (a string) = 1000500 ns; dur 1000.25 us = 1000250 ns.
  REQUIRE(t.cpu.size() == 2);
  CHECK(t.cpu[0].kind == CpuSpan::Kind::Step);
  CHECK(t.cpu[0].step_number == 7);
  CHECK(t.cpu[0].start == Time{1000500});
  CHECK(t.cpu[0].end == Time{2000750});
  // aten::add became aten::bmm by a later key: read again with its args, a GEMM [[4, 4], []].
  CHECK(t.cpu[1].kind == CpuSpan::Kind::Gemm);
  CHECK(t.names[static_cast<std::size_t>(t.cpu[1].name)] == "aten::bmm");
  CHECK(t.inputs_of(t.cpu[1]).dims == std::vector<std::vector<std::int64_t>>{{4, 4}, {}});
  CHECK(t.inputs_of(t.cpu[1]).type == "float");

  // The launch's args precede its "ph": kept all the same.
  REQUIRE(t.runtime.size() == 1);
  CHECK(t.runtime[0].correlation == 3);
  CHECK(t.runtime[0].start == Time{1050000});

  // The kernel: ts 1100.0005 us rounds half up on the 4th decimal to 1100001 ns; dur 2e2 us.
  REQUIRE(t.gpu_ops.size() == 1);
  const GpuOp& k = t.gpu_ops[0];
  CHECK(t.name_of(k) == "ncclKernel_AllReduce_RING_LL_Sum_float(x/\t)");
  CHECK(k.start == Time{1100001});
  CHECK(k.end == Time{1300001});
  CHECK(k.stream == -7);
  CHECK(k.correlation == 3);
  CHECK(k.collective);
  CHECK(t.comm_of(k).group_size == 2);
  CHECK(t.comm_of(k).elem_bytes == 4);
  CHECK(t.comm_of(k).group_name == "pg\n1");

  // The counter: ts 1.5 us; total from total_bytes; series xé = 1 and y = 2.5 rounded to 3.
  REQUIRE(t.memory.size() == 1);
  CHECK(t.memory[0].time == Time{1500});
  CHECK(t.memory[0].total == Bytes{9});
  CHECK(t.categories_of(t.memory[0]) ==
        std::vector<std::pair<std::string, Bytes>>{{"x\xc3\xa9", Bytes{1}}, {"y", Bytes{3}}});
}

TEST_CASE("A trace reads the same in windows of any size, tokens cut at every boundary", "[trace]") {
  const std::string text = kTricky;
  KinetoTrace whole = read_kineto_trace_text(text, "text");
  for (std::size_t window = 1; window <= 80; ++window) {
    INFO("window " << window);
    CHECK(first_difference(whole, read_windowed(text, window)).empty());
  }
  // A document that is one number, cut by the window, is still one number (not "12" then "34").
  CHECK_NOTHROW(read_windowed(" 12345678 ", 3));
  // A UTF-8 byte order mark is skipped, as nlohmann does.
  CHECK(first_difference(whole, read_windowed("\xef\xbb\xbf" + text, 2)).empty());
}

TEST_CASE("The reader rejects what nlohmann rejects, naming the byte", "[trace]") {
  const std::vector<std::string> bad = {
      "",
      "{\"traceEvents\": [",
      "{\"traceEvents\": [{\"ph\": \"X\",}]}",          // trailing comma
      "{\"traceEvents\": [{\"ph\" \"X\"}]}",            // missing colon
      "{\"traceEvents\": [{\"ph\": \"X\"}]} x",         // content after the document
      "{\"traceEvents\": [{\"ph\": \"X\"]}",            // mismatched bracket
      "{\"traceEvents\": [{\"ts\": 01}]}",              // leading zero
      "{\"traceEvents\": [{\"ts\": 1.}]}",
      "{\"traceEvents\": [{\"ts\": .5}]}",
      "{\"traceEvents\": [{\"ts\": -}]}",
      "{\"traceEvents\": [{\"ts\": 1e}]}",
      "{\"traceEvents\": [{\"ts\": 1e400}]}",           // overflows a double
      "{\"traceEvents\": [{\"ts\": NaN}]}",
      "{\"traceEvents\": [{\"ts\": tru}]}",
      "{\"traceEvents\": [{'ph': 'X'}]}",
      "{\"traceEvents\": [/* c */]}",
      "{\"traceEvents\": [{\"name\": \"a\\x\"}]}",      // invalid escape
      "{\"traceEvents\": [{\"name\": \"\\u12G4\"}]}",
      "{\"traceEvents\": [{\"name\": \"\\ud800\"}]}",   // lone high surrogate
      "{\"traceEvents\": [{\"name\": \"\\udc00\"}]}",   // lone low surrogate
      "{\"traceEvents\": [{\"name\": \"a\tb\"}]}",      // unescaped control character
      "{\"traceEvents\": [{\"name\": \"\xc3\"}]}",      // truncated UTF-8
      "{\"traceEvents\": [{\"name\": \"\xe0\x80\x80\"}]}",  // overlong UTF-8
      "{\"traceEvents\": [{\"name\": \"\xed\xa0\x80\"}]}",  // a surrogate in UTF-8
      "{\"traceEvents\": [{\"name\": \"\xff\"}]}",
      "\xef\xbb{}",                                      // broken byte order mark
      // Invalid content inside skipped values is found too.
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"python_function\", \"args\": {\"a\": [1, 2,]}}]}",
      "{\"other\": {\"a\": \"\\q\"}, \"traceEvents\": []}",
  };
  for (const auto& text : bad) {
    INFO("input: " << text);
    CHECK_FALSE(nlohmann::json::accept(text));
    for (std::size_t window : {std::size_t{1}, std::size_t{3}, std::size_t{1} << 20}) {
      try {
        read_windowed(text, window);
        FAIL_CHECK("accepted in windows of " << window);
      } catch (const InputError& e) {
        CHECK_THAT(e.what(), Catch::Contains("text: byte "));
      }
    }
  }
}

TEST_CASE("The reader accepts exactly the mutated traces that nlohmann accepts", "[trace]") {
  // Random edits of kTricky (deletions, insertions of JSON-significant text, copied slices);
  // about 1 in 5 stays valid JSON. A valid one must read the same in small windows.
  const std::string base = kTricky;
  const std::vector<std::string> pieces = {
      "{", "}", "[", "]", ":", ",", "\"", "\\", " ", "\n", "0", "7", "-", ".", "e", "E", "+", "t", "n", "u",
      "\x01", "\xc3\xa9", "\xed\xa0\x80", "\xff", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "1e400",
      "18446744073709551616", "-0", ", \"ph\": \"C\"", ", \"name\": \"aten::mm\"", ", \"cat\": \"kernel\"",
      "\"args\": {\"x\": 1}, "};
  std::mt19937_64 rng(20261121);
  auto below = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  int valid = 0, mismatches = 0;
  std::string first_mismatch;
  for (int i = 0; i < 3000; ++i) {
    std::string s = base;
    for (std::size_t edits = 1 + below(3); edits > 0; --edits) {
      std::size_t at = below(s.size() + 1);
      switch (below(4)) {
        case 0: s.erase(at, 1 + below(8)); break;
        case 1: s.insert(at, pieces[below(pieces.size())]); break;
        case 2: s.insert(below(s.size() + 1), s.substr(at, below(24))); break;
        default:
          if (at < s.size()) s[at] = pieces[below(pieces.size())][0];
      }
    }
    bool accepted = nlohmann::json::accept(s);
    std::size_t window = 1 + below(48);
    std::string outcome;
    try {
      KinetoTrace t = read_windowed(s, window);
      outcome = accepted ? first_difference(read_kineto_trace_text(s, "text"), t) : "accepted invalid JSON";
    } catch (const InputError& e) {
      // Valid JSON may still be a bad trace: a time beyond 2^62 ns (issue 16) is refused by
      // design, whatever the window.
      const std::string what = e.what();
      // Nor may a GPU event or a step without ts/dur/ph or with a negative duration, a repeated
      // step, a bad world size or a root key twice (issue 50: they vanished from the totals).
      bool out_of_range = what.find("expected a time within 2^62 ns") != std::string::npos ||
                          what.find("args sum beyond 2^63") != std::string::npos;
      for (const char* semantic : {"no \"ts\"", "no \"dur\"", "no \"ph\"", "/ph: ", "expected a duration >= 0",
                                   "expected a positive duration", "expected each ProfilerStep number once",
                                   "duplicate key: expected each key once in the root object", "/distributedInfo/"})
        out_of_range = out_of_range || what.find(semantic) != std::string::npos;
      outcome = accepted && !out_of_range ? std::string("rejected valid JSON: ") + e.what() : "";
    }
    valid += accepted ? 1 : 0;
    if (!outcome.empty() && mismatches++ == 0)
      first_mismatch = outcome + " (window " + std::to_string(window) + "): " + s;
  }
  INFO(first_mismatch);
  CHECK(mismatches == 0);
  CHECK(valid > 100);
}

TEST_CASE("Deep nesting and an event larger than the window are read, not refused", "[trace]") {
  // Skipped values are walked without recursion; the window grows to hold the largest event.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string big(3 << 20, 'x');
  std::string text = R"({"traceEvents": [{"ph": "X", "cat": "python_function", "args": {"a": )" + deep +
                     R"(}}, {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"s": ")" + big +
                     R"(", "stream": 3}}]})";
  REQUIRE(nlohmann::json::accept(text));
  KinetoTrace t = read_windowed(text, 4096);
  CHECK(t.event_count == 2);
  REQUIRE(t.gpu_ops.size() == 1);
  CHECK(t.gpu_ops[0].stream == 3);
  CHECK(t.gpu_ops[0].end == Time{3000});
}

TEST_CASE("A real gzip trace reads the same as its text in 4 KiB windows", "[trace][data]") {
  const std::string file = std::string(STEPSIM_TEST_DATA) + "/traces/hta/trace_filter__sampled_rank-0.json.gz";
  std::ifstream raw(file, std::ios::binary);
  REQUIRE(raw);
  boost::iostreams::filtering_istream gz;
  gz.push(boost::iostreams::gzip_decompressor());
  gz.push(raw);
  std::ostringstream text;
  text << gz.rdbuf();
  KinetoTrace from_gzip = read_kineto_trace(file);
  CHECK(from_gzip.event_count == 4855);
  CHECK(first_difference(from_gzip, read_windowed(text.str(), 4096)).empty());
}
