#pragma once
// Shared helpers for tests: a textbook hardware profile and small program fixtures.

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "sim/config/experiment.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/program/builder.hpp"

namespace stepsim::test {

// Zero host cost, no contention, memory-bound kernels free, collectives t = alpha + S / beta
// with alpha 0 and beta 1 GB/s, so a collective of S bytes takes S ns.
inline HardwareProfile ideal_profile() {
  HardwareProfile hw;
  hw.name = "test-ideal";
  hw.memory_capacity = Bytes::from_gib(80);
  hw.compute.peak[Dtype::BF16] = FlopRate::from_tflops(1000);
  hw.compute.hbm = Bandwidth::from_gbps(3000);
  hw.compute.model_memory_kernels = false;
  hw.intra_node.kind = CollectiveModelKind::AlphaBeta;
  hw.intra_node.default_ranges = {AlphaBetaRange{Bytes{std::numeric_limits<std::int64_t>::max()}, Time::zero(), Bandwidth::from_gbps(1)}};
  hw.inter_node = hw.intra_node;
  return hw;
}

inline Kernel fixed_kernel(const std::string& name, Time t) {
  Kernel k;
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
