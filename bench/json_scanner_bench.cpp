// The trace reader's JSON scanner (trace/json_stream.hpp) against simdjson's On-Demand parser
// (Debian libsimdjson-dev), per byte, on the repository's traces (issue 49).
//
// Each trace is decompressed into memory first (not timed); then each parser walks every event
// and does the work the reader (trace/kineto_reader.cpp) asks of its scanner: the event's ph,
// cat, name (strings), pid, tid, ts, dur (numbers); every member of "args" of the events whose
// records use them (GPU ops, runtime calls, "[memory]" instants, counters), strings and numbers;
// the args of other events (cpu_op, python_function: most of the bytes) skipped. What each read
// goes into a checksum, compared between the two outside the timed region, so both did the
// same work. JsonStream reads through an istream in its 64 KiB window, as the reader does;
// simdjson parses the whole document, padded, in one buffer (its On-Demand API has no window:
// memory is the document's size, where the scanner's is the window's).
//
// simdjson's On-Demand code is inlined into its caller for the kernel the caller is compiled
// for: json_scanner_bench (the project's flags, the x86-64 baseline) runs its portable
// "fallback" kernel, json_scanner_bench_haswell (-march=haswell; AVX2 CPUs only) its SIMD one.
//
// Prints, per file, the best of --reps runs of each in ns per byte and MB/s. For instruction
// counts run it under callgrind (bench/run_all does): the two are the functions scan_json_stream
// and scan_simdjson.
//   build/bench/json_scanner_bench[_haswell] [--reps N] [FILE...]     default: data/traces/*/*.gz

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <istream>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "bench/bench_args.hpp"
#include "trace/gunzip.hpp"
#include "trace/json_stream.hpp"

namespace fs = std::filesystem;

namespace {

#ifndef STEPSIM_BENCH_NAME
#define STEPSIM_BENCH_NAME "json_scanner_bench"
#endif
const stepsim::bench::Args kArgs{STEPSIM_BENCH_NAME, STEPSIM_BENCH_NAME " [--reps N] [FILE...]"};

std::string read_trace(const fs::path& f) {
  std::ifstream raw(f, std::ios::binary);
  if (!raw) kArgs.fail(f.string() + ": cannot open: expected a readable trace file");
  if (f.extension() == ".gz") {
    stepsim::trace::Gunzip in(raw);
    std::string text;
    char block[1 << 16];
    for (std::size_t got = sizeof block; got == sizeof block;) {
      got = in.read(block, sizeof block);
      text.append(block, got);
    }
    return text;
  }
  std::ostringstream text;
  text << raw.rdbuf();
  return std::move(text).str();
}

// A read-only streambuf over memory: the scanner reads it through istream::read, as it reads a file.
struct MemoryBuf : std::streambuf {
  explicit MemoryBuf(std::string_view s) {
    char* p = const_cast<char*>(s.data());  // NOLINT: get area only, never written
    setg(p, p, p + s.size());
  }
};

// The same rules on both sides: whose args are read.
bool args_wanted(std::string_view ph, std::string_view cat, std::string_view name, bool cat_seen) {
  if (ph == "C") return true;
  if (ph == "i") return name == "[memory]";
  if (ph != "X") return ph.empty();  // not seen yet: read them (the reader is conservative too)
  if (!cat_seen) return true;
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_runtime" || cat == "cuda_driver";
}

struct Sums {
  std::uint64_t events = 0, strings = 0, numbers = 0, skipped = 0;
  bool operator==(const Sums&) const = default;
};

std::uint64_t number_sum(bool is_int, std::int64_t i, double d) {
  return is_int ? static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(std::llround(std::fmod(d, 1e15)));
}

[[gnu::noinline]] Sums scan_json_stream(std::string_view text) {
  using stepsim::trace::JsonStream;
  MemoryBuf buf(text);
  std::istream in(&buf);
  JsonStream s(in, "bench", std::size_t{1} << 16);
  // A step may be re-run from its start when it needs more input: it counts into `sum`, which
  // is added to the total once the step is through.
  Sums sum, total;
  auto number = [&](JsonStream& st) {
    const auto n = st.number();
    sum.numbers += number_sum(n.is_int, n.i, n.is_int ? 0.0 : n.to_double());
  };
  auto event = [&] {
    s.advance();
    std::string_view key, ph, cat, name;
    bool cat_seen = false;
    for (bool first = true; s.next_member(first, key); first = false) {
      const char c = s.peek();
      if (key == "args" && c == '{') {
        if (!args_wanted(ph, cat, name, cat_seen)) {
          s.skip_value();
          ++sum.skipped;
          continue;
        }
        s.advance();
        std::string_view k;
        for (bool f = true; s.next_member(f, k); f = false) {
          sum.strings += k.size();
          const char v = s.peek();
          if (v == '"') sum.strings += s.string().size();
          else if (JsonStream::starts_number(v)) number(s);
          else {
            s.skip_value();
            ++sum.skipped;
          }
        }
        continue;
      }
      if (c == '"') {
        const std::string_view v = s.string();
        sum.strings += v.size();
        if (key == "ph") ph = v;
        else if (key == "cat") cat = v, cat_seen = true;
        else if (key == "name") name = v;
      } else if (JsonStream::starts_number(c)) {
        number(s);
      } else {
        s.skip_value();
        ++sum.skipped;
      }
    }
    ++sum.events;
  };
  s.step([&] {
    if (s.peek() != '{') s.unexpected("'{'");
    s.advance();
  });
  for (bool first = true;; first = false) {
    bool done = false, events = false;
    s.step([&] {
      std::string_view key;
      if (!s.next_member(first, key)) {
        done = true;
        return;
      }
      if (key == "traceEvents" && s.peek() == '[') {
        s.advance();
        events = true;
      } else {
        s.skip_value();
      }
    });
    if (done) break;
    if (!events) continue;
    for (bool f = true;; f = false) {
      bool end = false;
      s.step([&] {
        sum = Sums{};
        if (!s.next_element(f)) {
          end = true;
          return;
        }
        if (s.peek() == '{') event();
        else s.skip_value();
      });
      if (end) break;
      total.events += sum.events;
      total.strings += sum.strings;
      total.numbers += sum.numbers;
      total.skipped += sum.skipped;
    }
  }
  return total;
}

[[gnu::noinline]] Sums scan_simdjson(simdjson::ondemand::parser& parser, const simdjson::padded_string& text) {
  using simdjson::ondemand::json_type;
  Sums sum;
  auto number = [&](simdjson::ondemand::value v) {
    simdjson::ondemand::number n = v.get_number();
    if (n.is_int64()) sum.numbers += number_sum(true, n.get_int64(), 0);
    else if (n.is_uint64()) sum.numbers += number_sum(true, static_cast<std::int64_t>(n.get_uint64()), 0);
    else sum.numbers += number_sum(false, 0, n.get_double());
  };
  simdjson::ondemand::document doc = parser.iterate(text);
  for (auto member : doc.get_object()) {
    const std::string_view key = member.unescaped_key();
    simdjson::ondemand::value events = member.value();
    if (key != "traceEvents") continue;  // skipped unread
    if (const json_type t = events.type(); t != json_type::array) continue;
    for (simdjson::ondemand::value ev : events.get_array()) {
      if (const json_type t = ev.type(); t != json_type::object) continue;
      std::string_view ph, cat, name;
      bool cat_seen = false;
      for (auto field : ev.get_object()) {
        const std::string_view k = field.unescaped_key();
        simdjson::ondemand::value v = field.value();
        const json_type t = v.type();
        if (k == "args" && t == json_type::object) {
          if (!args_wanted(ph, cat, name, cat_seen)) {
            ++sum.skipped;
            continue;
          }
          for (auto arg : v.get_object()) {
            sum.strings += std::string_view(arg.unescaped_key()).size();
            simdjson::ondemand::value a = arg.value();
            const json_type at = a.type();
            if (at == json_type::string) sum.strings += std::string_view(a.get_string()).size();
            else if (at == json_type::number) number(a);
            else ++sum.skipped;
          }
          continue;
        }
        if (t == json_type::string) {
          const std::string_view s = v.get_string();
          sum.strings += s.size();
          if (k == "ph") ph = s;
          else if (k == "cat") cat = s, cat_seen = true;
          else if (k == "name") name = s;
        } else if (t == json_type::number) {
          number(v);
        } else {
          ++sum.skipped;
        }
      }
      ++sum.events;
    }
  }
  return sum;
}

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps") {
      if (i + 1 >= argc) kArgs.fail("--reps: expected a number of runs");
      reps = kArgs.count("--reps", argv[++i], 1000);
    } else if (a.starts_with("-")) {
      kArgs.fail(a + ": unknown option");
    } else if (std::error_code ec; !fs::is_regular_file(a, ec)) {
      kArgs.fail(a + ": cannot open: expected a readable trace file");
    } else {
      files.emplace_back(a);
    }
  }
  if (files.empty())
    for (const auto& e : fs::recursive_directory_iterator(fs::path(STEPSIM_TEST_DATA) / "traces"))
      if (e.is_regular_file() && e.path().extension() == ".gz") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::cout << "simdjson On-Demand kernel \"" SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION) "\" (chosen at compile time)\n";
  std::cout << fmt::format("{:<44} {:>8} {:>9}  {:>18}  {:>18}  {:>6}\n", "file", "JSON MB", "events",
                           "json_stream ns/B", "simdjson ns/B", "ratio");
  std::uint64_t total_bytes = 0;
  double total_stream = 0, total_simd = 0;
  simdjson::ondemand::parser parser;
  return kArgs.run([&] {
    for (const auto& f : files) {
      const std::string text = read_trace(f);
      const simdjson::padded_string padded(text);
      Sums a, b;
      const double ts = best_seconds(reps, [&] { a = scan_json_stream(text); });
      double tj = 0;
      try {
        tj = best_seconds(reps, [&] { b = scan_simdjson(parser, padded); });
      } catch (const simdjson::simdjson_error& e) {
        kArgs.fail(f.string() + ": simdjson: " + e.what());
      }
      if (!(a == b))
        kArgs.fail(fmt::format("{}: the two parsers read different values (events {} vs {}, strings {} vs {}, numbers {} vs {})",
                               f.string(), a.events, b.events, a.strings, b.strings, a.numbers, b.numbers));
      const auto n = static_cast<double>(text.size());
      total_bytes += text.size();
      total_stream += ts;
      total_simd += tj;
      std::cout << fmt::format("{:<44} {:>8.1f} {:>9}  {:>8.3f} ({:>5.0f} MB/s)  {:>8.3f} ({:>5.0f} MB/s)  {:>6.2f}\n",
                               f.filename().string().substr(0, 44), n / 1e6, a.events, ts * 1e9 / n, n / ts / 1e6,
                               tj * 1e9 / n, n / tj / 1e6, ts / tj);
    }
    const auto n = static_cast<double>(total_bytes);
    std::cout << fmt::format("all {} files, {:.1f} MB: json_stream {:.3f} ns/B, simdjson {:.3f} ns/B (best of {} each)\n",
                             files.size(), n / 1e6, total_stream * 1e9 / n, total_simd * 1e9 / n, reps);
    return 0;
  });
}
