#include "calibrate/from_trace/rank_variation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/core/stats.hpp"
#include "trace/trace_analysis.hpp"
#include "trace/trace_index.hpp"

namespace stepsim::trace {

namespace {

constexpr double kRankVariationOutlier = 0.25;  // |log(d1 / d2)| above this is a stall, not a speed

struct Kernel {
  int name;
  KernelClass cls;
  double us;
};

// A trace's compute kernels on its main device in start order (no NCCL kernels: their time is
// the wait this model predicts): all of them, and per ProfilerStep number those launched before
// the step's optimizer phase.
struct RankKernels {
  std::vector<Kernel> all;
  std::map<std::int64_t, std::vector<Kernel>> before_optimizer;
};

RankKernels compute_kernels(const KinetoTrace& t) {
  std::vector<const GpuOp*> ops;
  const int device = t.main_device();
  for (const auto& op : t.gpu_ops)
    if (op.kind == GpuOp::Kind::Kernel && !op.collective && op.device == device) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(), [](const GpuOp* a, const GpuOp* b) { return a->start < b->start; });
  RankKernels out;
  out.all.reserve(ops.size());
  KernelClassOfName class_of(t);
  const TraceIndex idx(t);
  for (const GpuOp* op : ops) {
    const Kernel k{op->name, class_of(*op), static_cast<double>((op->end - op->start).ns) / 1e3};
    out.all.push_back(k);
    if (auto s = idx.step_of(*op); s && idx.phase_of(*s, *op) != Phase::Optimizer)
      out.before_optimizer[idx.steps()[*s]->step_number].push_back(k);
  }
  return out;
}

bool same_sequence(const KinetoTrace& ta, const std::vector<Kernel>& a, const KinetoTrace& tb, const std::vector<Kernel>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ta.names[static_cast<std::size_t>(a[i].name)] != tb.names[static_cast<std::size_t>(b[i].name)]) return false;
  return true;
}

// What two ranks ran alike, as pairs of kernel sequences to compare kernel by kernel: the whole
// traces when they ran the same kernels in the same order (data-parallel replicas, the two GPUs of
// a tensor-parallel pair); else, step by step, the kernels before each step's optimizer, where
// those match. Ranks of a distributed optimizer (ZeRO, FSDP's uneven shards, Muon's matrices
// spread over the ranks) run different optimizer kernels but the same forward and backward; their
// optimizer kernels, where the names match, also differ by the collectives overlapping them
// (8-12 % spread on the 2025-12-11 modded-nanogpt ranks, against 1.0 % before the optimizer).
struct Alike {
  std::vector<std::pair<const std::vector<Kernel>*, const std::vector<Kernel>*>> runs;
  std::size_t steps = 0;  // > 0: compared step by step, before the optimizer
};

Alike alike(const KinetoTrace& ta, const RankKernels& a, const KinetoTrace& tb, const RankKernels& b) {
  Alike out;
  if (same_sequence(ta, a.all, tb, b.all)) {
    out.runs.emplace_back(&a.all, &b.all);
    return out;
  }
  for (const auto& [step, ka] : a.before_optimizer) {
    auto kb = b.before_optimizer.find(step);
    if (kb == b.before_optimizer.end() || !same_sequence(ta, ka, tb, kb->second)) continue;
    out.runs.emplace_back(&ka, &kb->second);
    ++out.steps;
  }
  return out;
}

double robust_sd(const std::vector<double>& v) {
  const double m = median(v);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::abs(x - m));
  return 1.4826 * median(dev);
}

std::string rank_name(const KinetoTrace& t, std::size_t index) {
  return t.rank >= 0 ? fmt::format("rank {}", t.rank) : fmt::format("trace {}", index + 1);
}

}  // namespace

std::optional<RankVariationFit> fit_rank_variation(const std::vector<KinetoTrace>& traces) {
  std::vector<RankKernels> kernels;
  for (const auto& t : traces) kernels.push_back(compute_kernels(t));
  RankVariationFit fit;
  std::array<std::vector<double>, kKernelClassCount> spread;
  double offsets_sq = 0;
  int pairs = 0;
  for (std::size_t i = 0; i < traces.size(); ++i)
    for (std::size_t j = i + 1; j < traces.size(); ++j) {
      const Alike same = alike(traces[i], kernels[i], traces[j], kernels[j]);
      std::array<std::vector<double>, kKernelClassCount> rel;
      double sum_a = 0, sum_b = 0;
      for (const auto& [ka, kb] : same.runs)
        for (std::size_t k = 0; k < ka->size(); ++k) {
          const double a = (*ka)[k].us, b = (*kb)[k].us;
          if (a < kRankVariationMinKernelUs || b < kRankVariationMinKernelUs) continue;
          rel[static_cast<std::size_t>((*ka)[k].cls)].push_back((a - b) / ((a + b) / 2) / std::sqrt(2.0));
          // The pair's offset: time-weighted over the kernels within 25 % of each other (a one-off
          // stall is not a rank's speed; per kernel the trace's microsecond steps tie short ones).
          if (std::abs(std::log(a / b)) <= kRankVariationOutlier) sum_a += a, sum_b += b;
        }
      if (sum_a <= 0 || sum_b <= 0) continue;
      // The pair's offset, then each class's spread around it.
      const double offset = std::log(sum_a / sum_b);
      for (std::size_t c = 0; c < rel.size(); ++c)
        for (double r : rel[c]) spread[c].push_back(r - offset / std::sqrt(2.0));
      offsets_sq += offset * offset / 2;
      ++pairs;
      fit.pairs.push_back(rank_name(traces[i], i) + " / " + rank_name(traces[j], j));
      if (same.steps > 0) ++fit.pairs_before_optimizer, fit.steps_before_optimizer = std::max(fit.steps_before_optimizer, same.steps);
    }
  if (pairs == 0) return std::nullopt;
  for (std::size_t c = 0; c < spread.size(); ++c) {
    fit.kernels[c] = static_cast<int>(spread[c].size());
    if (fit.kernels[c] >= kRankVariationMinKernels) fit.variation.kernel_cv[c] = std::min(1.0, robust_sd(spread[c]));
  }
  fit.variation.persistent_cv = std::min(1.0, std::sqrt(offsets_sq / pairs));
  const std::string by_step =
      fit.pairs_before_optimizer == 0
          ? ""
          : fmt::format("; {} of them, whose optimizers differ, step by step before the optimizer ({} steps)", fit.pairs_before_optimizer,
                        fit.steps_before_optimizer);
  fit.variation.source = fmt::format("stepsim fit --trace: {} rank pair(s) with the same kernel sequence ({}){}, kernels >= {} us; "
                                     "provenance.rank_variation",
                                     pairs, fmt::join(fit.pairs, ", "), by_step, kRankVariationMinKernelUs);
  return fit;
}

nlohmann::json RankVariationFit::to_json() const {
  nlohmann::json cv = nlohmann::json::object(), n = nlohmann::json::object();
  for (int c = 0; c < kKernelClassCount; ++c) {
    if (kernels[c] == 0) continue;
    n[to_string(static_cast<KernelClass>(c))] = kernels[c];
    if (variation.kernel_cv[c] > 0) cv[to_string(static_cast<KernelClass>(c))] = variation.kernel_cv[c];
  }
  return {{"pairs", pairs},
          {"pairs_before_optimizer", pairs_before_optimizer},
          {"kernels_compared", n},
          {"kernel_cv", cv},
          {"persistent_cv", variation.persistent_cv},
          {"method", "per class: 1.4826 x MAD of (d1 - d2) / mean / sqrt(2) after the pair's offset; persistent: RMS over pairs of "
                     "the offset / sqrt(2), the offset log(sum d1 / sum d2) over kernels within 25 % of each other; kernels >= 5 us, "
                     "NCCL kernels left out; ranks whose whole kernel sequences differ are compared step by step over the "
                     "kernels before each step's optimizer, where those match (docs/scale.md)"}};
}

RankVariation RankVariationFit::with_base(const RankVariation& base) const {
  RankVariation out = variation;
  out.host_cv = base.host_cv;  // not fitted here
  std::vector<std::string> kept;
  for (int c = 0; c < kKernelClassCount; ++c) {
    const auto i = static_cast<std::size_t>(c);
    if (kernels[i] >= kRankVariationMinKernels || base.kernel_cv[i] <= 0) continue;
    out.kernel_cv[i] = base.kernel_cv[i];
    kept.push_back(to_string(static_cast<KernelClass>(c)));
  }
  if (!kept.empty())
    out.source += fmt::format("; {} not measured (fewer than {} kernels compared): kept from the base profile", fmt::join(kept, ", "),
                              kRankVariationMinKernels);
  return out;
}

std::string RankVariationFit::summary() const {
  std::string classes;
  for (int c = 0; c < kKernelClassCount; ++c)
    if (variation.kernel_cv[c] > 0)
      classes += fmt::format("{}{} {:.2f}% ({})", classes.empty() ? "" : ", ", to_string(static_cast<KernelClass>(c)),
                             100 * variation.kernel_cv[c], kernels[c]);
  return fmt::format("rank variation from {} rank pair(s): per kernel {}; persistent {:.2f}%", pairs.size(),
                     classes.empty() ? "none" : classes, 100 * variation.persistent_cv);
}

}  // namespace stepsim::trace
