// How much the ranks of one job differ, fitted from the traces of all its ranks
// (calibrate/from_trace/rank_variation.hpp, docs/scale.md "Ranks are not identical"): the two jobs
// in data/ with every rank traced, held to the profiles that ship their fits, and a hand-written
// pair of ranks whose optimizers differ.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate/from_trace/rank_variation.hpp"
#include "sim/hardware/profile.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

const std::string kData = STEPSIM_TEST_DATA;
const std::string kRoot = STEPSIM_SOURCE_DIR;

std::vector<KinetoTrace> traces_of(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kData + "/traces/" + dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<KinetoTrace> out;
  for (const auto& f : files) out.push_back(read_kineto_trace(f));
  return out;
}

nlohmann::json shipped_rank_variation(const std::string& profile) {
  std::ifstream in(kRoot + "/configs/hardware/" + profile);
  return nlohmann::json::parse(in).at("rank_variation");
}

double rounded(double v) { return std::round(v * 1e5) / 1e5; }

// Every class the fit measured is in the profile as fitted (to the profile's 5 decimals).
void check_profile_holds(const RankVariationFit& fit, const nlohmann::json& shipped) {
  for (int c = 0; c < kKernelClassCount; ++c) {
    const std::string cls = to_string(static_cast<KernelClass>(c));
    if (fit.kernels[static_cast<std::size_t>(c)] < kRankVariationMinKernels) continue;
    INFO(cls);
    REQUIRE(shipped.at("kernel_cv").contains(cls));
    CHECK(shipped.at("kernel_cv").at(cls).get<double>() == Approx(rounded(fit.variation.kernel_cv[static_cast<std::size_t>(c)])).margin(1e-9));
  }
  CHECK(shipped.at("persistent_cv").get<double>() == Approx(rounded(fit.variation.persistent_cv)).margin(1e-9));
}

}  // namespace

// Catches: a shipped profile whose rank_variation is not what its source says it was fitted from
// (the A800 and A100 profiles: li-plus's Megatron ranks, which ran the same kernels in the same
// order pair by pair), or a change of the fit that moves it.
TEST_CASE("the A800 and A100 profiles carry the fit of li-plus's eight Megatron ranks", "[calibrate][data]") {
  const auto fit = fit_rank_variation(traces_of("li-plus_playground", "megatron__rank_"));
  REQUIRE(fit);
  CHECK(fit->pairs.size() == 4);  // the four tensor-parallel pairs
  CHECK(fit->pairs_before_optimizer == 0);
  for (const char* profile : {"a800-sxm-8x.json", "a100-sxm-8x.json"}) {
    INFO(profile);
    const nlohmann::json shipped = shipped_rank_variation(profile);
    check_profile_holds(*fit, shipped);
    CHECK(shipped.at("kernel_cv").size() == 9);  // every class it measured, no other
  }
}

// Catches: ranks of a distributed optimizer (the 2025-12-11 modded-nanogpt record: NorMuon's
// matrices spread over the eight ranks) found unlike, so no H100 job could be fitted; their
// optimizer kernels compared (8-12 % apart where the collectives overlap them), which moves every
// class; the Hopper profiles not holding their own fit.
TEST_CASE("the Hopper profiles carry the fit of the eight modded-nanogpt H100 ranks, compared before the optimizer",
          "[calibrate][data]") {
  const auto traces = traces_of("modded-nanogpt", "2025-12-11_NorMuonOptimsAndFixes__rank");
  REQUIRE(traces.size() == 8);
  const auto fit = fit_rank_variation(traces);
  REQUIRE(fit);
  CHECK(fit->pairs.size() == 28);
  // Ranks 6 and 7 ran the same optimizer kernels, so their whole traces match; the rest differ.
  CHECK(fit->pairs_before_optimizer == 27);
  CHECK(fit->kernels[static_cast<std::size_t>(KernelClass::Optimizer)] == 0);
  const nlohmann::json h100 = shipped_rank_variation("h100-sxm-8x.json");
  check_profile_holds(*fit, h100);
  // What the ranks did not measure (copy: 12 kernels, optimizer: none) is the base's, the A800's.
  const nlohmann::json a800 = shipped_rank_variation("a800-sxm-8x.json");
  for (const char* cls : {"copy", "optimizer"}) CHECK(h100.at("kernel_cv").at(cls) == a800.at("kernel_cv").at(cls));
  const RankVariation with_base = fit->with_base(load_profile(kRoot + "/configs/hardware/a800-sxm-8x.json").rank_variation);
  CHECK(rounded(with_base.kernel_cv[static_cast<std::size_t>(KernelClass::Copy)]) == a800.at("kernel_cv").at("copy").get<double>());
  CHECK(with_base.kernel_cv[static_cast<std::size_t>(KernelClass::Gemm)] == fit->variation.kernel_cv[static_cast<std::size_t>(KernelClass::Gemm)]);
  CHECK(with_base.source.find("copy, optimizer not measured") != std::string::npos);
}

namespace {

// One rank of a hand-written job: ProfilerStep#1 over [0, 10000] us; a forward of `forward`
// kernels of 100 us (+ `slower` us each), a backward (autograd's evaluate_function) of 10 more,
// then an Optimizer.step# with `optimizer` kernels named after `opt_name`.
KinetoTrace rank_trace(int rank, int forward, double slower, int optimizer, const std::string& opt_name) {
  std::string ev = R"J({"distributedInfo": {"rank": )J" + std::to_string(rank) +
                   R"J(, "world_size": 2}, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10000})J";
  int corr = 1, ts = 10;
  auto launch = [&](const std::string& name, double dur) {
    ev += fmt::format(R"J(,
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 2, "args": {{"correlation": {}}}}},
  {{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {}, "dur": {}, "args": {{"device": 0, "stream": 7, "correlation": {}}}}})J",
                      ts, corr, name, 3000 + 150 * corr, dur, corr);
    ++corr, ts += 10;
  };
  for (int i = 0; i < forward; ++i) launch("fwd_kernel", 100 + slower);
  ev += fmt::format(R"J(,
  {{"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 1, "ts": {}, "dur": 200}})J", ts);
  for (int i = 0; i < 10; ++i) launch("bwd_kernel", 100 + slower);
  ev += fmt::format(R"J(,
  {{"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1, "tid": 1, "ts": {}, "dur": 500}})J", ts);
  for (int i = 0; i < optimizer; ++i) launch(opt_name, 50 + 10 * rank);
  ev += "]}";
  std::istringstream in(ev);
  return read_kineto_trace_stream(in, fmt::format("rank{}.json", rank));
}

}  // namespace

// Catches: ranks whose optimizers differ refused as unlike (the fit required whole traces to
// match), their optimizer kernels compared, or ranks whose forward differs compared at all.
TEST_CASE("ranks whose optimizers differ are compared over the kernels before the optimizer", "[calibrate]") {
  const KinetoTrace r0 = rank_trace(0, 20, 0, 3, "multi_tensor_apply_kernel");
  const KinetoTrace r1 = rank_trace(1, 20, 1, 2, "multi_tensor_apply_kernel");
  const auto fit = fit_rank_variation({r0, r1});
  REQUIRE(fit);
  CHECK(fit->pairs.size() == 1);
  CHECK(fit->pairs_before_optimizer == 1);
  CHECK(fit->steps_before_optimizer == 1);
  CHECK(fit->kernels[static_cast<std::size_t>(KernelClass::Optimizer)] == 0);
  int compared = 0;
  for (int n : fit->kernels) compared += n;
  CHECK(compared == 30);  // the 20 forward and 10 backward kernels
  // Rank 1 is 1 % slower on every kernel it shares: log(101 / 100) / sqrt(2).
  CHECK(fit->variation.persistent_cv == Approx(std::log(101.0 / 100.0) / std::sqrt(2.0)).epsilon(1e-9));
  CHECK(fit->variation.source.find("1 of them, whose optimizers differ, step by step before the optimizer") != std::string::npos);

  // Ranks that ran the same optimizer too are compared whole, optimizer kernels included.
  const auto same = fit_rank_variation({rank_trace(0, 20, 0, 3, "multi_tensor_apply_kernel"), rank_trace(1, 20, 1, 3, "multi_tensor_apply_kernel")});
  REQUIRE(same);
  CHECK(same->pairs_before_optimizer == 0);
  CHECK(same->kernels[static_cast<std::size_t>(KernelClass::Optimizer)] == 3);

  // A rank whose forward differs is not the same work.
  CHECK_FALSE(fit_rank_variation({r0, rank_trace(1, 19, 0, 3, "multi_tensor_apply_kernel")}));
}
