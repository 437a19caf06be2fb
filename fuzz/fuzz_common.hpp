#pragma once
// Shared by the libFuzzer harnesses: a per-process scratch directory for inputs that must be
// files (includes, shard CSVs, XLA tables), and the contract every harness checks: a reader
// of user input either succeeds or throws InputError. Anything else (another exception, a
// crash, a sanitizer report, a hang) is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"

namespace stepsim::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("stepsim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_file(const std::string& name, std::string_view text) {
  auto p = scratch_dir() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
  return p;
}

// Splits `data` at each occurrence of `sep` (for inputs made of several files).
inline std::vector<std::string_view> split(std::string_view data, std::string_view sep) {
  std::vector<std::string_view> out;
  for (;;) {
    auto p = data.find(sep);
    if (p == std::string_view::npos) {
      out.push_back(data);
      return out;
    }
    out.push_back(data.substr(0, p));
    data.remove_prefix(p + sep.size());
  }
}

// The `--set` overrides after an input's "\n--set--\n" part (`parts` as split there), one per
// non-empty line.
inline std::vector<std::string> set_lines(const std::vector<std::string_view>& parts) {
  std::vector<std::string> sets;
  if (parts.size() > 1)
    for (auto line : split(parts[1], "\n"))
      if (!line.empty()) sets.emplace_back(line);
  return sets;
}

// Runs `body`; InputError is the expected rejection, any other exception aborts (a finding).
template <class F>
void expect_ok_or_input_error(F&& body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: exception other than InputError: %s\n", e.what());
    std::abort();
  }
}

}  // namespace stepsim::fuzz
