#pragma once
// Shared helpers for tests: a textbook hardware profile, small program fixtures, and private
// temporary directories.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <catch2/catch.hpp>

#include "sim/core/error.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/load_experiment.hpp"

namespace stepsim::test {

#ifdef STEPSIM_TEST_DATA
// The li-plus DeepSpeed-Chat ZeRO-1 trace (8x A800, OPT-1.3B; data/traces/README.md).
inline const std::string kLiPlusZero1Trace =
    std::string(STEPSIM_TEST_DATA) + "/traces/li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz";
#endif

// Zero host cost, no contention, memory-bound kernels free, collectives t = alpha + S / beta
// with alpha 0 and beta 1 GB/s, so a collective of S bytes takes S ns.
inline HardwareProfile ideal_profile() {
  HardwareProfile hw;
  hw.name = "test-ideal";
  hw.memory_capacity = Bytes::from_gib(80);
  hw.compute.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  hw.compute.hbm = Bandwidth::from_gbps(3000);
  hw.compute.model_memory_kernels = false;
  hw.intra_node = AlphaBetaModel{
      .default_ranges = {AlphaBetaRange{Bytes{std::numeric_limits<std::int64_t>::max()}, Time::zero(), Bandwidth::from_gbps(1)}}};
  hw.inter_node = hw.intra_node;
  return hw;
}

// A kernel of fixed time, its name a string (ProgramBuilder::launch stores it in the program).
inline KernelSpec fixed_kernel(const std::string& name, Time t) {
  KernelSpec k;
  k.name = name;
  k.work.fixed = t;
  return k;
}


// An experiment from an in-memory document (relative paths resolve from the working directory).
inline Experiment experiment_from_doc(const nlohmann::json& doc) {
  SourceMap sources;
  sources.root_file = "test.json";
  return experiment_from_json(doc, sources);
}

// The one-line error loading `doc` as an experiment gives, or "" when it loads.
inline std::string experiment_error_of(const nlohmann::json& doc) {
  try {
    experiment_from_doc(doc);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Llama-2-7B (sequence 1024, micro-batch 1, full checkpointing) on one node of 8 H100s under
// `framework` (its defaults), with `training`: a JSON object's text.
inline Experiment llama2_7b_on_8_h100(const std::string& framework, const std::string& training) {
  nlohmann::json doc = {
      {"workload", {{"preset", "llama2-7b"}, {"seq_len", 1024}, {"micro_batch", 1}, {"activation_checkpointing", "full"}}},
      {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
      {"strategy", {{"framework", framework}}},
      {"training", nlohmann::json::parse(training)}};
  return experiment_from_doc(doc);
}

// Runs a command line, returns its exit status (0-255), capturing stdout+stderr into `out`.
inline int run_capture(const std::string& cmd, std::string& out) {
  out.clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A fresh, empty directory for one test's files, removed with everything in it when it goes
// out of scope: <temp>/stepsim-<pid>-<n>-<what>-<test name>, where n counts the directories
// this process has made. The pid keeps concurrent processes apart (ctest -j, two checkouts on
// one machine), the counter two directories of one process, and the test name says whose
// leftovers a crash left behind. Tests put every file they write in one: never a fixed name
// under /tmp, which a parallel run of the same test would share.
class TempDir {
 public:
  explicit TempDir(const std::string& what = "") {
    static std::atomic<unsigned> counter{0};
    std::string name = "stepsim-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    for (const std::string& part : {what, current_test_name()}) {
      std::string slug = slug_of(part);
      if (!slug.empty()) name += "-" + slug;
    }
    path_ = std::filesystem::temp_directory_path() / name;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);  // a crashed run with a recycled pid
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // A path inside the directory (the file is not created).
  std::filesystem::path operator/(const std::string& file) const { return path_ / file; }
  // The same as a string, for command lines.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `j` (indented) to a file of the directory and returns its path.
  std::string write_json(const std::string& name, const nlohmann::json& j) const {
    std::ofstream(path_ / name) << j.dump(1);
    return file(name);
  }

 private:
  static std::string current_test_name() {
    try {
      return Catch::getResultCapture().getCurrentTestName();
    } catch (...) {
      return "";  // outside a running test case
    }
  }
  // Lower-case letters and digits, other runs as one '-', at most 40 characters.
  static std::string slug_of(const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
      if (out.size() >= 40) break;
      if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
      else if (!out.empty() && out.back() != '-') out += '-';
    }
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out;
  }
  std::filesystem::path path_;
};

// A fresh, empty directory `name` under one TempDir of this process (removed at exit), for the
// CLI tests that write many small files.
inline std::filesystem::path scratch_dir(const std::string& name) {
  static const TempDir root("scratch");
  std::filesystem::path dir = root / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `text` to `p` (bytes as given) and returns the path as a string.
inline std::string write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

}  // namespace stepsim::test

namespace Catch {
template <>
struct StringMaker<stepsim::Time> {
  static std::string convert(const stepsim::Time& t) { return std::to_string(t.ns) + " ns"; }
};
template <>
struct StringMaker<stepsim::Bytes> {
  static std::string convert(const stepsim::Bytes& b) { return std::to_string(b.count) + " B"; }
};
}  // namespace Catch
