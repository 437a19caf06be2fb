#pragma once
// Arguments of the bench binaries. A bad one ends in one line naming the binary, the argument and
// what was expected, and exit 2, as stepsim's own commands do; so does an input file that cannot
// be used (the InputError of loading it), instead of an uncaught exception or, with a count of 0,
// the median of no runs.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"

namespace stepsim::bench {

struct Args {
  std::string_view tool;   // "engine_bench"
  std::string_view usage;  // "engine_bench [EXP.json] [reps]"

  [[noreturn]] void fail(std::string_view what) const {
    std::fputs(fmt::format("{}: {} (usage: {})\n", tool, what, usage).c_str(), stderr);
    std::exit(2);
  }

  // `arg` as a whole number in [1, max]; `name` says which argument it is.
  int count(std::string_view name, std::string_view arg, int max) const {
    const std::string s(arg);
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (s.empty() || used != s.size() || v < 1 || v > max) fail(fmt::format("{} '{}': expected 1 to {}", name, s, max));
    return static_cast<int>(v);
  }

  // Runs the benchmark; an InputError (a file that cannot be read, bad JSON, a bad config) ends in
  // one line and exit 2. The benches read the repository's configs, whose profile names
  // ("configs/hardware/...") resolve against the data directory when not against the working
  // directory (sim/core/data_dir.hpp): the repository is the benches' data directory, so they run
  // from any directory (callgrind's output directory, say), as an installed stepsim does.
  template <class Body>
  int run(Body body) const {
    set_default_data_dir(STEPSIM_SOURCE_DIR);
    try {
      return body();
    } catch (const InputError& e) {
      std::fputs(fmt::format("{}: {}\n", tool, e.what()).c_str(), stderr);
      return 2;
    }
  }
};

}  // namespace stepsim::bench
