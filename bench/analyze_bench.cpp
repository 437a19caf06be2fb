// analyze speed and memory on the real Kineto traces (data/traces): for each file,
// read + analyze on one thread, best of --reps runs (wall and CPU time), and the process's
// peak RSS (getrusage ru_maxrss, KiB) after that file. Files are processed smallest first so
// that the maxrss growth is attributable. Not a test: numbers go in the README section.
//   build-x/bench/analyze_bench [--reps N] [FILE...]

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_args.hpp"
#include "trace/trace_analysis.hpp"

namespace fs = std::filesystem;

static long maxrss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

static double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int main(int argc, char** argv) {
  int reps = 3;
  std::vector<fs::path> files;
  const stepsim::bench::Args args{"analyze_bench", "analyze_bench [--reps N] [FILE...]"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps") {
      if (i + 1 >= argc) args.fail("--reps: expected a number of runs");
      reps = args.count("--reps", argv[++i], 1000);
    } else if (a.starts_with("-")) {
      args.fail(a + ": unknown option");
    } else if (std::error_code ec; !fs::is_regular_file(a, ec)) {
      args.fail(a + ": cannot open: expected a readable trace file");
    } else {
      files.emplace_back(a);
    }
  }
  if (files.empty())
    for (const auto& e : fs::recursive_directory_iterator(fs::path(STEPSIM_TEST_DATA) / "traces"))
      if (e.is_regular_file() && e.path().extension() == ".gz") files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return fs::file_size(a) < fs::file_size(b) || (fs::file_size(a) == fs::file_size(b) && a < b);
  });
  std::cout << fmt::format("{:<58} {:>9} {:>9} {:>7} {:>8} {:>8} {:>9}\n", "file", "gz MB", "events", "steps",
                           "wall s", "cpu s", "maxrss MB");
  for (const auto& f : files) {
    double best_wall = 1e9, best_cpu = 1e9;
    std::int64_t events = 0;
    std::size_t steps = 0;
    for (int r = 0; r < reps; ++r) {
      auto w0 = std::chrono::steady_clock::now();
      double c0 = cpu_seconds();
      stepsim::trace::KinetoTrace t;
      if (args.run([&] {
            t = stepsim::trace::read_kineto_trace(f);
            return 0;
          }) != 0)
        return 2;
      auto a = stepsim::trace::analyze_trace(t, {});
      double c1 = cpu_seconds();
      auto w1 = std::chrono::steady_clock::now();
      best_wall = std::min(best_wall, std::chrono::duration<double>(w1 - w0).count());
      best_cpu = std::min(best_cpu, c1 - c0);
      events = t.event_count;
      steps = a.steps.size();
    }
    std::cout << fmt::format("{:<58} {:>9.2f} {:>9} {:>7} {:>8.3f} {:>8.3f} {:>9.1f}\n",
                             f.filename().string().substr(0, 58), static_cast<double>(fs::file_size(f)) / 1e6, events,
                             steps, best_wall, best_cpu, static_cast<double>(maxrss_kib()) / 1024.0);
  }
  return 0;
}
