// The parallel sweep runner, its bounded summary, and the shard merge.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/explore/noise.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/core/error.hpp"
#include "sim/core/format.hpp"
#include "sim/config/experiment_keys.hpp"
#include "sim/core/input_files.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

double AxisValueStats::mean(Objective o) const {
  if (count == 0) return 0;
  const double n = static_cast<double>(count);
  switch (o) {
    case Objective::StepTime: return sum_step_ns / n / 1e6;
    case Objective::TokensPerS: return sum_tokens_per_s / n;
    case Objective::Mfu: return sum_mfu_pct / n;
  }
  return 0;
}

double AxisValueStats::mean_memory_gib() const {
  return count ? sum_memory_bytes / static_cast<double>(count) / (1024.0 * 1024 * 1024) : 0.0;
}

double AxisEffect::range(Objective o) const {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& [v, st] : by_value) {
    if (st.count == 0) continue;
    double mean = st.mean(o);
    if (!any) lo = hi = mean;
    lo = std::min(lo, mean);
    hi = std::max(hi, mean);
    any = true;
  }
  return hi - lo;
}

// In a full grid the other axes contribute the same mix to every value of this one, so the
// mean tokens per step differs between values only when this axis changes the work.
bool AxisEffect::changes_work() const {
  std::optional<double> first;
  for (const auto& [v, st] : by_value) {
    if (st.count == 0) continue;
    const double mean = st.sum_tokens_per_step / static_cast<double>(st.count);
    if (!first) first = mean;
    else if (std::fabs(*first - mean) > 1e-9 * std::max(1.0, std::fabs(mean))) return true;
  }
  return false;
}

std::vector<std::pair<std::string, AxisValueStats>> AxisEffect::ranked(Objective o) const {
  std::vector<std::pair<std::string, AxisValueStats>> out;
  for (const auto& bv : by_value)
    if (bv.second.count) out.push_back(bv);
  const bool higher = higher_is_better(o);
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return higher ? a.second.mean(o) > b.second.mean(o) : a.second.mean(o) < b.second.mean(o);
  });
  return out;
}

SweepSummary::SweepSummary(std::vector<std::string> columns, int top, std::optional<Objective> objective)
    : columns_(std::move(columns)), top_(static_cast<std::size_t>(std::max(top, 1))), requested_(objective) {
  for (const auto& c : columns_) effects_.push_back(AxisEffect{c, {}});
  value_slots_.resize(effects_.size());
}

void SweepSummary::add(const SweepPointBrief& p, const std::string& status) {
  ++total_;
  if (status != "ok") return;
  if (ok_ == 0) min_tokens_per_step_ = max_tokens_per_step_ = p.tokens_per_step;
  min_tokens_per_step_ = std::min(min_tokens_per_step_, p.tokens_per_step);
  max_tokens_per_step_ = std::max(max_tokens_per_step_, p.tokens_per_step);
  max_capacity_ = std::max(max_capacity_, p.capacity);
  max_mfu_pct_ = std::max(max_mfu_pct_, p.mfu_pct);
  ++ok_;
  if (scatter_.size() < kScatterMax) scatter_.push_back(p);
  const ObjectiveInputs in = p.inputs();
  for (std::size_t a = 0; a < effects_.size() && a < p.values.size(); ++a) {
    auto& bv = effects_[a].by_value;
    const auto [slot, first_seen] = value_slots_[a].try_emplace(p.values[a], bv.size());
    if (first_seen) bv.push_back({p.values[a], AxisValueStats{}});
    AxisValueStats& st = bv[slot->second].second;
    st.count += 1;
    st.sum_tokens_per_step += p.tokens_per_step;
    st.sum_step_ns += static_cast<double>(p.step_time.ns);
    st.sum_tokens_per_s += in.tokens_per_s();
    st.sum_mfu_pct += p.mfu_pct;
    st.sum_memory_bytes += static_cast<double>(p.memory().count);
    st.max_memory = std::max(st.max_memory, p.memory());
  }
  if (p.constraints_ok) ++feasible_;
  for (std::size_t k = 0; k < kObjectiveCount; ++k) {
    const Objective o = kObjectives[k];
    // Better under the objective; ties to the smaller index (the order points arrive in).
    auto before = [o](const SweepPointBrief& a, const SweepPointBrief& b) {
      if (objective_better(o, a.inputs(), b.inputs())) return true;
      if (objective_better(o, b.inputs(), a.inputs())) return false;
      return a.index < b.index;
    };
    if (p.constraints_ok) {
      auto& best = best_[k];
      best.insert(std::lower_bound(best.begin(), best.end(), p, before), p);
      if (best.size() > top_) best.pop_back();
    }
    // Pareto, over the points that satisfy the constraints (a point over the memory cap is no
    // trade-off a user can take): drop p if some kept point is at least as good in both; else
    // drop what p beats.
    if (!p.constraints_ok) continue;
    auto& front = pareto_[k];
    auto at_least_as_good = [o](const SweepPointBrief& a, const SweepPointBrief& b) {
      return !objective_better(o, b.inputs(), a.inputs()) && a.memory() <= b.memory();
    };
    if (std::any_of(front.begin(), front.end(), [&](const SweepPointBrief& q) { return at_least_as_good(q, p); })) continue;
    front.erase(std::remove_if(front.begin(), front.end(), [&](const SweepPointBrief& q) { return at_least_as_good(p, q); }),
                front.end());
    front.insert(std::lower_bound(front.begin(), front.end(), p, before), p);
  }
}

ObjectiveChoice SweepSummary::objective() const {
  ObjectiveChoice c;
  std::vector<std::string> axes;
  for (const auto& e : effects_)
    if (e.changes_work()) axes.push_back(e.path);
  std::string through;
  for (const auto& a : axes) through += (through.empty() ? ", through " : ", ") + a;
  const bool varies = ok_ > 0 && min_tokens_per_step_ != max_tokens_per_step_;
  if (requested_) {
    c.objective = *requested_;
    c.requested = true;
    c.reason = "as requested";
    if (*requested_ == Objective::Mfu && ok_ > 0 && max_mfu_pct_ <= 0)
      c.reason += "; note: MFU is 0 at every point (a toy workload, or no peak FLOP/s for the dtype in the profile), so the "
                  "ranking is the point order";
    if (*requested_ == Objective::StepTime && varies)
      c.reason += fmt::format("; note: the tokens per step differ between points, {:.0f} to {:.0f}{}: a faster step may do less work",
                              min_tokens_per_step_, max_tokens_per_step_, through);
    return c;
  }
  if (varies) {
    c.objective = Objective::TokensPerS;
    c.reason = fmt::format("the default when the work differs: {:.0f} to {:.0f} tokens per step{}", min_tokens_per_step_,
                           max_tokens_per_step_, through);
  } else {
    c.objective = Objective::StepTime;
    c.reason = ok_ ? fmt::format("the default when every point does the same work ({:.0f} tokens per step)", min_tokens_per_step_)
                   : "the default (no point ran)";
  }
  return c;
}

static std::size_t objective_slot(Objective o) {
  for (std::size_t k = 0; k < kObjectiveCount; ++k)
    if (kObjectives[k] == o) return k;
  return 0;
}

std::vector<SweepPointBrief> SweepSummary::best(Objective o) const { return best_[objective_slot(o)]; }
std::vector<SweepPointBrief> SweepSummary::pareto(Objective o) const { return pareto_[objective_slot(o)]; }

std::vector<AxisEffect> SweepSummary::effects(Objective o) const {
  std::vector<AxisEffect> out = effects_;
  std::stable_sort(out.begin(), out.end(), [o](const AxisEffect& a, const AxisEffect& b) { return a.range(o) > b.range(o); });
  return out;
}

void SweepSummary::set_memory_cap(Bytes cap, std::string what) {
  cap_ = cap;
  cap_what_ = std::move(what);
}

Bytes SweepSummary::memory_cap() const {
  if (cap_.count > 0 && (max_capacity_.count == 0 || cap_ < max_capacity_)) return cap_;
  return max_capacity_;
}

std::string SweepSummary::memory_cap_what() const {
  if (cap_.count > 0 && (max_capacity_.count == 0 || cap_ < max_capacity_)) return cap_what_;
  return max_capacity_.count ? "device capacity" : "";
}

namespace {

nlohmann::json brief_json(const std::vector<std::string>& cols, const SweepPointBrief& p) {
  nlohmann::json point = nlohmann::json::object();
  for (std::size_t i = 0; i < cols.size() && i < p.values.size(); ++i) point[cols[i]] = p.values[i];
  return {{"index", p.index},
          {"point", point},
          {"step_time_ns", p.step_time.ns},
          {"tokens_per_s", p.inputs().tokens_per_s()},
          {"mfu_pct", p.mfu_pct},
          {"peak_memory_bytes", p.peak_memory.count},
          {"peak_reserved_bytes", p.peak_reserved.count},
          {"constraints_ok", p.constraints_ok}};
}

// An axis value as the text summary shows it: as the CSV writes it, unless longer than 48
// characters (an inline profile, its includes resolved, is ~130 KB on one line): then, for a JSON
// object with a "name", {"name":...,...}; else its first characters and "...".
std::string shown_value(const std::string& v) {
  constexpr std::size_t kMax = 48;
  if (v.size() <= kMax) return v;
  if (v.front() == '{') {
    const auto j = nlohmann::json::parse(v, nullptr, false);
    if (j.is_object())
      if (auto n = j.find("name"); n != j.end() && n->is_string()) return fmt::format("{{\"name\":{},...}}", n->dump());
  }
  std::size_t cut = kMax - 3;
  while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
  return v.substr(0, cut) + "...";
}

// "4: 1.203 s, 2: 1.190 s, ..." best first; past 5 values, the best `shown`, how many were left
// out, and the worst: an axis of thousands of values stays one short line.
std::string value_means(const AxisEffect& e, Objective o, std::size_t shown = 3) {
  auto ranked = e.ranked(o);
  auto one = [&](const std::pair<std::string, AxisValueStats>& v) {
    const double m = v.second.mean(o);  // the unit is on the range column
    return fmt::format("{}: {}", shown_value(v.first), o == Objective::StepTime ? format_time(Time{static_cast<std::int64_t>(m * 1e6 + 0.5)})
                                          : o == Objective::TokensPerS ? fmt::format("{:.0f}", m)
                                                                       : fmt::format("{:.1f}%", m));
  };
  std::string s;
  const bool cut = ranked.size() > 5;
  for (std::size_t i = 0; i < ranked.size() && (!cut || i < shown); ++i) s += (s.empty() ? "" : ", ") + one(ranked[i]);
  if (cut) s += fmt::format(", ... {} more, worst {}", ranked.size() - shown - 1, one(ranked.back()));
  return s;
}

}  // namespace

nlohmann::json SweepSummary::to_json() const {
  const ObjectiveChoice oc = objective();
  nlohmann::json j{{"points", total_}, {"ok", ok_}, {"invalid", total_ - ok_}, {"feasible", feasible_}};
  j["objective"] = {{"name", to_string(oc.objective)}, {"requested", oc.requested}, {"reason", oc.reason}};
  j["best"] = nlohmann::json::array();
  for (const auto& p : best()) j["best"].push_back(brief_json(columns_, p));
  j["pareto"] = nlohmann::json::array();
  for (const auto& p : pareto()) j["pareto"].push_back(brief_json(columns_, p));
  j["knob_effects"] = nlohmann::json::array();
  for (const auto& e : effects()) {
    nlohmann::json means = nlohmann::json::object(), tokens = nlohmann::json::object(), mfu = nlohmann::json::object();
    for (const auto& [v, st] : e.by_value)
      if (st.count) {
        means[v] = static_cast<std::int64_t>(st.sum_step_ns / static_cast<double>(st.count));
        tokens[v] = st.mean(Objective::TokensPerS);
        mfu[v] = st.mean(Objective::Mfu);
      }
    j["knob_effects"].push_back({{"path", e.path},
                                 {"range_ns", static_cast<std::int64_t>(e.range_ns())},
                                 {"range", e.range(oc.objective)},
                                 {"changes_work", e.changes_work()},
                                 {"mean_step_time_ns", means},
                                 {"mean_tokens_per_s", tokens},
                                 {"mean_mfu_pct", mfu}});
  }
  return j;
}

void SweepSummary::write_text(std::ostream& out) const {
  const ObjectiveChoice oc = objective();
  const Objective o = oc.objective;
  out << fmt::format("sweep: {} points, {} ok, {} invalid, {} satisfy the constraints\n", total_, ok_, total_ - ok_, feasible_);
  out << fmt::format("objective: {} ({}{})\n", to_string(o), oc.reason,
                     oc.requested ? "" : "; --objective step_time|tokens_per_s|mfu to choose");
  auto describe = [&](const SweepPointBrief& p) {
    std::string s;
    for (std::size_t i = 0; i < columns_.size() && i < p.values.size(); ++i)
      s += fmt::format("{}{}={}", s.empty() ? "" : " ", columns_[i], shown_value(p.values[i]));
    return s;
  };
  const std::string head = fmt::format("  {:<7} {:>12} {:>12} {:>6} {:>11}  {}\n", "#", "step", "tokens/s", "MFU", "reserved", "configuration");
  auto line = [&](const SweepPointBrief& p, const std::string& note) {
    return fmt::format("  #{:<6} {:>12} {:>12.0f} {:>6} {:>11}  {}{}\n", p.index, format_time(p.step_time), p.inputs().tokens_per_s(),
                       p.mfu_pct > 0 ? fmt::format("{:.1f}%", p.mfu_pct) : "-", format_bytes(p.memory()), describe(p), note);
  };
  out << fmt::format("\nbest configurations ({} that satisfy the constraints):\n",
                     o == Objective::StepTime ? "fastest" : "highest " + objective_label(o));
  const auto best_points = best();
  if (best_points.empty()) out << "  (none)\n";
  else out << head;
  // A point whose objective is within the noise (the closest validated sources' step-time
  // error) of the first's is not distinguishable from it: marked as a tie.
  for (const auto& p : best_points) {
    const SweepPointBrief& first = best_points.front();
    const double a = objective_value(o, first.inputs()), b = objective_value(o, p.inputs());
    const bool tie = &p != &first && noise_pct_ > 0 && a > 0 && std::abs(b - a) <= noise_pct_ / 100.0 * a;
    out << line(p, tie ? fmt::format("  (tie with #{} within {:.1f} %)", first.index, noise_pct_) : "");
  }
  out << fmt::format("\nPareto front ({} vs peak reserved memory, of the points that satisfy the constraints):\n", objective_label(o));
  if (pareto().empty()) out << "  (none)\n";
  for (const auto& p : pareto()) out << line(p, "");
  out << fmt::format("\nknobs by effect on mean {} (max - min over their values; best values first):\n", objective_label(o));
  for (const auto& e : effects()) {
    double r = e.range(o);
    std::string range = o == Objective::StepTime ? format_time(Time{static_cast<std::int64_t>(r * 1e6 + 0.5)})
                        : o == Objective::TokensPerS ? fmt::format("{:.0f} tokens/s", r)
                                                     : fmt::format("{:.1f} pt MFU", r);
    out << fmt::format("  {:<36} {:>16}   ({})\n", e.path, range, value_means(e, o));
  }
}

namespace {

class Progress {
 public:
  Progress(bool on, std::uint64_t total) : on_(on), total_(total) {}
  void update(std::uint64_t done) {
    if (!on_) return;
    int pct = total_ ? static_cast<int>(100 * done / total_) : 100;
    if (pct == last_ && done != total_) return;
    last_ = pct;
    int filled = pct * 40 / 100;
    std::fprintf(stderr, "\r[%s%s] %3d%% %llu/%llu", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(40 - filled), ' ').c_str(), pct,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_));
    if (done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::uint64_t total_;
  int last_ = -1;
};

// The order the shard's points (k-th point: shard + k * shards) are evaluated in. Rows are
// emitted in point order whatever it is; it is chosen so that points which build the same
// workload run one after another: the points are taken in blocks of kEvaluationBlock, and a
// block's points are grouped by their values in the columns that may change the workload
// (SweepSpec::workload_group), groups in the order of their first point, points in order
// within a group. A sweep whose innermost axis is the sequence length (sweep_bench: 625 of
// them, 16 node counts outside) then builds each workload once per block where it built one
// at every point (each worker keeps the one it built last: worker_workloads); one whose workload
// columns are outermost, or that has none, is evaluated in point order.
class EvaluationOrder {
 public:
  EvaluationOrder(const SweepSpec& spec, std::uint64_t shard, std::uint64_t shards, std::uint64_t count)
      : spec_(spec), shard_(shard), shards_(shards), count_(count),
        grouped_(std::any_of(spec.columns.begin(), spec.columns.end(), SweepSpec::may_change_workload)) {}
  static constexpr std::uint64_t kBlock = SweepSpec::kEvaluationBlock;
  // Whether any point may be evaluated before one that precedes it.
  bool grouped() const { return grouped_; }
  // The point evaluated p-th (p < count). Thread-safe; a block's order is made when a point of
  // it is first asked for, and only the last two blocks' are kept (callers ask for points of at
  // most the current block and the next: run_points_in_parallel's room condition).
  std::uint64_t at(std::uint64_t p) {
    if (!grouped_) return p;
    std::lock_guard lock(mu_);
    return block_of(p).order[p % kBlock];
  }
  // The end of the run of positions from p (< count) that build p's workload: the first later
  // position of another group, of the next block, or p + max_run, whichever comes first (p + 1
  // when the order is not grouped). Thread-safe, as at().
  std::uint64_t run_end(std::uint64_t p, std::uint64_t max_run) {
    if (!grouped_) return p + 1;
    std::lock_guard lock(mu_);
    const Block& b = block_of(p);
    const std::uint64_t first = p - p % kBlock, end = std::min({first + b.order.size(), p + max_run, count_});
    std::uint64_t q = p + 1;
    while (q < end && b.group[q - first] == b.group[p - first]) ++q;
    return q;
  }

 private:
  struct Block {
    std::vector<std::uint64_t> order;  // the points, by position in the block
    std::vector<std::uint32_t> group;  // each position's workload group (equal groups are adjacent)
  };

  // Called with mu_ held.
  const Block& block_of(std::uint64_t p) {
    const std::uint64_t b = p / kBlock;
    auto it = blocks_.find(b);
    if (it == blocks_.end()) {
      it = blocks_.emplace(b, order_of_block(b)).first;
      while (blocks_.begin()->first + 1 < b) blocks_.erase(blocks_.begin());
    }
    return it->second;
  }

  Block order_of_block(std::uint64_t b) const {
    const std::uint64_t first = b * kBlock, n = std::min(kBlock, count_ - first);
    std::unordered_map<std::string, std::uint32_t> group_of;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> keyed;
    keyed.reserve(n);
    for (std::uint64_t k = first; k < first + n; ++k) {
      const auto g = group_of.emplace(spec_.workload_group(shard_ + k * shards_), static_cast<std::uint32_t>(group_of.size()));
      keyed.emplace_back(g.first->second, k);
    }
    std::sort(keyed.begin(), keyed.end());
    Block out;
    out.order.reserve(n);
    out.group.reserve(n);
    for (const auto& [group, k] : keyed) {
      out.order.push_back(k);
      out.group.push_back(group);
    }
    return out;
  }

  const SweepSpec& spec_;
  std::uint64_t shard_, shards_, count_;
  bool grouped_;
  std::mutex mu_;
  std::map<std::uint64_t, Block> blocks_;
};

// A worker's own workloads, in front of the sweep's (WorkloadCache's parent); none when the
// sweep keeps none.
std::optional<WorkloadCache> worker_workloads(const SweepSpec& spec) {
  if (!spec.workloads) return std::nullopt;
  return std::optional<WorkloadCache>(std::in_place, SweepSpec::kWorkerWorkloads, WorkloadCache::WhenFull::DropLeastRecent,
                                      spec.workloads.get());
}

// The shard's points on the calling thread, in evaluation order, rows emitted in point order.
void run_points_in_order(const SweepSpec& spec, std::uint64_t shard, std::uint64_t shards, std::uint64_t count,
                         const std::function<void(const SweepRow&)>& emit, Progress& progress) {
  EvaluationOrder order(spec, shard, shards, count);
  auto workloads = worker_workloads(spec);
  std::map<std::uint64_t, SweepRow> buffer;
  std::uint64_t written = 0;
  for (std::uint64_t p = 0; p < count; ++p) {
    const std::uint64_t k = order.at(p);
    buffer.emplace(k, run_sweep_point(spec, shard + k * shards, workloads ? &*workloads : nullptr));
    for (auto it = buffer.begin(); it != buffer.end() && it->first == written; it = buffer.erase(it)) {
      emit(it->second);
      progress.update(++written);
    }
  }
}

// The shard's points on `jobs` worker threads. Workers claim points in evaluation order, a run
// of the points that build one workload at a time (at most kMaxRun): claimed a point at a time,
// the workers took turns within each run, and each built every run's workload (the bench's 625
// workloads built 1,250 times by two workers). The calling thread emits rows in point order. A
// worker does not run further ahead of the writer than `window` points, or than the end of the
// block the writer is in, so the reorder buffer (and memory) stays bounded however large the
// sweep is.
void run_points_in_parallel(const SweepSpec& spec, std::uint64_t shard, std::uint64_t shards, std::uint64_t count, int jobs,
                            const std::function<void(const SweepRow&)>& emit, Progress& progress) {
  const std::uint64_t window = static_cast<std::uint64_t>(jobs) * 16;
  EvaluationOrder order(spec, shard, shards, count);
  std::mutex mu;
  std::condition_variable ready, room;
  std::map<std::uint64_t, SweepRow> buffer;
  std::uint64_t written = 0;
  bool stop = false;
  // Evaluating the p-th point cannot hold the writer: every point up to the one it waits for
  // (the written-th, in the writer's block) may run.
  const auto may_run = [&](std::uint64_t p) {
    return p < written + window || (order.grouped() && p / EvaluationOrder::kBlock == written / EvaluationOrder::kBlock);
  };
  // The writer is woken for a batch of rows, not for each: woken at every row it waited for (each
  // point of a sweep whose points all build their workload), it took a core from a worker most
  // of a million times in a 1,000,000-point sweep (0.8 M involuntary context switches). A worker wakes
  // it once the row it waits for is in and `batch` rows are, and also when no further row may come
  // without it: before the worker waits for room, and when it has no point left.
  const std::uint64_t batch = std::max<std::uint64_t>(1, window / 2);
  const auto writer_may_go = [&] { return !buffer.empty() && buffer.begin()->first == written; };
  // The points workers wait to run (at most one each). The writer wakes them only when one of
  // them may run: a wake-up per row written cost two context switches per waiting worker, 10,000
  // a 10,000-point sweep, as the writer wrote out a block the workers had finished.
  std::vector<std::uint64_t> waiting;
  // A run shorter than the sweep's groups keeps the workers together in one group (each builds
  // its workload once), and bounds the tail a worker runs alone.
  constexpr std::uint64_t kMaxRun = 32;
  std::mutex claim;
  std::uint64_t claimed = 0;  // positions before it are some worker's
  std::vector<std::thread> workers;
  for (int j = 0; j < jobs; ++j) {
    workers.emplace_back([&] {
      auto workloads = worker_workloads(spec);
      std::uint64_t p = 0, end = 0;  // this worker's run
      for (;;) {
        if (p == end) {
          std::lock_guard lock(claim);
          if (claimed >= count) {
            std::lock_guard rows(mu);
            if (writer_may_go()) ready.notify_one();
            return;
          }
          p = claimed;
          end = claimed = order.run_end(p, kMaxRun);
        }
        {
          std::unique_lock lock(mu);
          if (!stop && !may_run(p)) {
            if (writer_may_go()) ready.notify_one();
            waiting.push_back(p);
            room.wait(lock, [&] { return stop || may_run(p); });
            waiting.erase(std::find(waiting.begin(), waiting.end(), p));
          }
          if (stop) return;
        }
        const std::uint64_t k = order.at(p++);
        SweepRow row = run_sweep_point(spec, shard + k * shards, workloads ? &*workloads : nullptr);
        std::lock_guard lock(mu);
        buffer.emplace(k, std::move(row));
        if (buffer.size() >= batch && writer_may_go()) ready.notify_one();
      }
    });
  }
  try {
    std::vector<SweepRow> rows;  // the run of rows from `written` that the buffer holds
    while (written < count) {
      rows.clear();
      {
        std::unique_lock lock(mu);
        ready.wait(lock, writer_may_go);
        for (auto it = buffer.begin(); it != buffer.end() && it->first == written + rows.size(); it = buffer.erase(it))
          rows.push_back(std::move(it->second));
      }
      for (const SweepRow& row : rows) {
        emit(row);
        bool wake = false;
        {
          std::lock_guard lock(mu);
          ++written;
          wake = std::any_of(waiting.begin(), waiting.end(), may_run);
        }
        if (wake) room.notify_all();
        progress.update(written);
      }
    }
  } catch (...) {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    room.notify_all();
    for (auto& t : workers) t.join();
    throw;
  }
  for (auto& t : workers) t.join();
}

}  // namespace

SweepSummary empty_sweep_summary(const SweepSpec& spec) {
  SweepSummary summary(spec.columns, spec.top, spec.objective);
  if (auto cap = constraint_memory_cap(spec.constraints)) summary.set_memory_cap(cap->first, cap->second);
  // The noise of the base experiment's GPU and framework; a base that does not load has none
  // (its points report their own errors).
  try {
    const Experiment base = experiment_from_json(spec.base, spec.base_sources, spec.profiles.get());
    summary.set_noise_pct(noise_floor(base.cluster.profile->name, base.strategy->framework()).pct);
  } catch (const InputError&) {
  }
  return summary;
}

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink) {
  return run_sweep(spec, opts, sink, empty_sweep_summary(spec));
}

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink,
                       SweepSummary summary) {
  if (opts.shards < 1 || opts.shard < 0 || opts.shard >= opts.shards)
    throw InputError(fmt::format("--shard {}/{}: expected i/n with 0 <= i < n", opts.shard, opts.shards));
  const std::uint64_t n = spec.size();
  const auto shards = static_cast<std::uint64_t>(opts.shards);
  // Resumed: the shard's first `skip` points are done; the rest is a shard starting further on.
  const auto shard = static_cast<std::uint64_t>(opts.shard) + opts.skip * shards;
  const std::uint64_t count = n > shard ? (n - shard + shards - 1) / shards : 0;  // k-th point: shard + k * shards
  Progress progress(opts.progress, count);
  int jobs = opts.jobs > 0 ? opts.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(jobs), std::max<std::uint64_t>(count, 1)));
  const std::function<void(const SweepRow&)> emit = [&](const SweepRow& row) {
    sink(row);
    summary.add(brief_of(row), row.status);
  };
  if (jobs <= 1) run_points_in_order(spec, shard, shards, count, emit, progress);
  else run_points_in_parallel(spec, shard, shards, count, jobs, emit, progress);
  return summary;
}

namespace {

// At most 40 characters of `text` for a message, bytes outside printable ASCII shown as '?'
// (a shard of binary garbage must not write raw bytes to the terminal).
std::string printable(const std::string& text) {
  std::string out = text.substr(0, 40);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return out;
}

// One shard CSV read row by row: shards are written in point order, so the merge keeps one
// pending row per file (memory independent of the sweep's size).
struct ShardReader {
  std::filesystem::path file;
  std::ifstream in;
  std::size_t lineno = 1;
  std::string line;
  std::uint64_t index = 0;
  bool done = false;

  // Reads the next non-empty row; rows must come in increasing point order.
  void next() {
    const bool first = line.empty();
    const std::uint64_t previous = index;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      try {
        const std::string field = line.substr(0, line.find(','));
        // Digits only: stoull would take "-0", " 7" or "+7".
        if (field.empty() || field.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument(field);
        index = std::stoull(field);
      } catch (const std::exception&) {
        throw InputError(fmt::format("{}: line {}: {}: expected a row starting with its point index", file.string(), lineno,
                                     printable(line)));
      }
      if (!first && index <= previous)
        throw InputError(fmt::format("{}: line {}: point {} after point {}: expected a shard written by stepsim sweep "
                                     "(rows in increasing point order, each point once)",
                                     file.string(), lineno, index, previous));
      return;
    }
    done = true;
  }
};

// Opens every shard, checks that they share one header (returned in `header`) and reads each
// one's first row.
std::vector<std::unique_ptr<ShardReader>> open_shards(const std::vector<std::filesystem::path>& inputs, std::string& header) {
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& f : inputs) {
    auto r = std::make_unique<ShardReader>();
    r->file = f;
    std::error_code ec;
    if (std::filesystem::is_directory(f, ec)) throw InputError(f.string() + ": is a directory: expected a sweep CSV");
    r->in.open(f);
    if (!r->in) throw InputError(f.string() + ": cannot read the sweep CSV");
    std::string first;
    if (!std::getline(r->in, first)) throw InputError(f.string() + ": empty file: expected a sweep CSV header");
    if (header.empty()) header = first;
    else if (first != header) throw InputError(f.string() + ": header differs from " + inputs[0].string() + ": expected shards of one sweep");
    r->next();
    shards.push_back(std::move(r));
  }
  return shards;
}

// Where a sweep CSV keeps what the summary needs; the varied paths sit between "status" and
// "framework".
struct SweepCsvColumns {
  std::size_t status = 0, framework = 0, step = 0, memory = 0, constraints_ok = 0, points = 0;
  // Columns added with the objective (issue 17); a CSV without them merges with zeros there.
  std::optional<std::size_t> reserved, capacity, tokens, mfu;
};

SweepCsvColumns sweep_csv_columns(const std::vector<std::string>& head, const std::filesystem::path& file) {
  auto optional_col = [&](const std::string& name) -> std::optional<std::size_t> {
    auto it = std::find(head.begin(), head.end(), name);
    if (it == head.end()) return std::nullopt;
    return static_cast<std::size_t>(it - head.begin());
  };
  auto col = [&](const std::string& name) {
    if (auto c = optional_col(name)) return *c;
    throw InputError(file.string() + ": header lacks column " + name + ": expected a stepsim sweep CSV");
  };
  SweepCsvColumns c;
  c.status = col("status");
  c.framework = col("framework");
  c.step = col("step_time_ns");
  c.memory = col("peak_memory_bytes");
  c.constraints_ok = col("constraints_ok");
  c.points = col("points");
  c.reserved = optional_col("peak_reserved_bytes");
  c.capacity = optional_col("memory_capacity_bytes");
  c.tokens = optional_col("tokens_per_step");
  c.mfu = optional_col("mfu_pct");
  if (c.framework <= c.status)
    throw InputError(file.string() + ": header has framework before status: expected a stepsim sweep CSV");
  return c;
}

std::int64_t integer_field(const ShardReader& r, const std::string& text, const char* column) {
  try {
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument(text);
    std::size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("{}: line {}: {}: \"{}\": expected an integer >= 0 (a shard cut short?)", r.file.string(),
                               r.lineno, column, printable(text)));
}

double number_field(const ShardReader& r, const std::string& text, const char* column) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError(fmt::format("{}: line {}: {}: \"{}\": expected a number >= 0 (a shard cut short?)", r.file.string(), r.lineno,
                               column, printable(text)));
}

// What a sweep CSV's column holds: the writer's (sweep.cpp sweep_csv_row) formats.
enum class CsvKind { Framework, WorldSize, Integer, Number, Boolean, Phase, Error, Points, Other };

CsvKind csv_kind(const std::string& name) {
  if (name == "framework") return CsvKind::Framework;
  if (name == "world_size") return CsvKind::WorldSize;
  if (name == "error") return CsvKind::Error;
  if (name == "points") return CsvKind::Points;
  if (name == "fits" || name == "constraints_ok") return CsvKind::Boolean;
  if (name == "peak_memory_phase") return CsvKind::Phase;
  auto ends = [&](const char* suffix) {
    const std::string s = suffix;
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("_ns") || ends("_bytes") || name == "tokens_per_step" || name == "global_batch" || name == "extrapolated_comms")
    return CsvKind::Integer;
  if (ends("_ms") || ends("_gib") || ends("_pct") || name == "tokens_per_s" || name == "tokens_per_s_per_gpu") return CsvKind::Number;
  return CsvKind::Other;
}

// Digits only, as the writer prints a count (no sign, no "-0", no space).
bool integer_text(const std::string& t, std::int64_t lo, std::int64_t hi) {
  if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) return false;
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= lo && v <= hi;
}

bool number_text(const std::string& t) {
  double v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return !t.empty() && ec == std::errc() && end == t.data() + t.size() && std::isfinite(v) && v >= 0;
}

// A framework the strategy table declares (experiment_keys: strategy.framework's choices).
bool framework_text(const std::string& t) {
  const auto& choices = experiment_keys::strategy_common().find("framework")->choices;
  return std::find(choices.begin(), choices.end(), t) != choices.end();
}

// A phase of the host program (program.hpp Phase's names).
bool phase_text(const std::string& t) { return t == "setup" || t == "forward" || t == "backward" || t == "optimizer"; }

// Every field of a row (`f`, split; status already checked) as the writer leaves it, so a
// hand-edited or damaged shard is refused by name instead of merged (issue 50, F18): an ok row
// has every metric, a world size of 1 .. 2^20 and no error; an invalid or error row has its
// error and no metric. With `expected_axes` (the sweep file given), the varied paths' fields
// are those of the point the row's index names.
void check_row_fields(const ShardReader& r, const std::vector<std::string>& head, const std::vector<std::string>& f,
                      const SweepCsvColumns& c, const std::vector<std::string>* expected_axes) {
  const bool ok = f[c.status] == "ok";
  for (std::size_t i = c.status + 1; i < f.size(); ++i) {
    const std::string& t = f[i];
    std::string expected;
    if (i < c.framework) {
      if (expected_axes && t != (*expected_axes)[i - c.status - 1])
        expected = fmt::format("\"{}\", the value of point {} in the sweep file", printable((*expected_axes)[i - c.status - 1]), r.index);
    } else {
      switch (csv_kind(head[i])) {
        case CsvKind::Framework:
          if (!(framework_text(t) || (!ok && t.empty()))) expected = "a framework name (ddp, fsdp1, fsdp2 or zero)";
          break;
        case CsvKind::WorldSize:
          if (!(integer_text(t, 1, limits::kMaxWorldSize) || (!ok && t.empty())))
            expected = fmt::format("an integer from 1 to {}{}", limits::kMaxWorldSize, ok ? "" : " or nothing");
          break;
        case CsvKind::Integer:
          if (ok ? !integer_text(t, 0, std::numeric_limits<std::int64_t>::max()) : !t.empty())
            expected = ok ? "an integer >= 0" : "nothing (a row that is not ok has no metrics)";
          break;
        case CsvKind::Number:
          if (ok ? !number_text(t) : !t.empty()) expected = ok ? "a number >= 0" : "nothing (a row that is not ok has no metrics)";
          break;
        case CsvKind::Boolean:
          if (ok ? (t != "true" && t != "false") : !t.empty()) expected = ok ? "true or false" : "nothing (a row that is not ok has no metrics)";
          break;
        case CsvKind::Phase:
          if (ok ? !phase_text(t) : !t.empty()) expected = ok ? "setup, forward, backward or optimizer" : "nothing (a row that is not ok has no metrics)";
          break;
        case CsvKind::Error:
          if (ok != t.empty()) expected = ok ? "nothing (an ok row has no error)" : "the point's error message";
          break;
        case CsvKind::Points:  // MergeCoverage checks the count
        case CsvKind::Other:
          break;
      }
    }
    if (!expected.empty())
      throw InputError(fmt::format("{}: line {}: point {}: {}: \"{}\": expected {}", r.file.string(), r.lineno, r.index,
                                   printable(head[i]), printable(t), expected));
  }
}

// What the summary keeps of one CSV row (`f`, the reader's current line split).
SweepPointBrief brief_of_csv_row(const ShardReader& r, const std::vector<std::string>& f, const SweepCsvColumns& c) {
  SweepPointBrief b;
  b.index = r.index;
  b.values.assign(f.begin() + static_cast<std::ptrdiff_t>(c.status) + 1, f.begin() + static_cast<std::ptrdiff_t>(c.framework));
  if (f[c.status] == "ok") {
    b.step_time = Time{integer_field(r, f[c.step], "step_time_ns")};
    b.peak_memory = Bytes{integer_field(r, f[c.memory], "peak_memory_bytes")};
    if (c.reserved) b.peak_reserved = Bytes{integer_field(r, f[*c.reserved], "peak_reserved_bytes")};
    if (c.capacity) b.capacity = Bytes{integer_field(r, f[*c.capacity], "memory_capacity_bytes")};
    if (c.tokens) b.tokens_per_step = static_cast<double>(integer_field(r, f[*c.tokens], "tokens_per_step"));
    if (c.mfu) b.mfu_pct = number_field(r, f[*c.mfu], "mfu_pct");
    b.constraints_ok = f[c.constraints_ok] == "true";
  }
  return b;
}

// The shard whose pending row has the lowest point index, or null when all are read (a
// handful of shards: a linear scan beats a heap).
ShardReader* lowest_pending(const std::vector<std::unique_ptr<ShardReader>>& shards) {
  ShardReader* r = nullptr;
  for (const auto& s : shards)
    if (!s->done && (!r || s->index < r->index)) r = s.get();
  return r;
}

// Checks the merged rows as they come: each point once, one point count across the shards and
// (at the end) every point from 0 to points-1 read (rows are unique and increasing, so counting
// them suffices).
class MergeCoverage {
 public:
  void check_not_repeated(const ShardReader& r) {
    if (last_from_ && r.index == last_)
      throw InputError(fmt::format("{}: line {}: point {} appears twice (also in {}): expected disjoint shards", r.file.string(),
                                   r.lineno, r.index, last_from_->file.string()));
    last_ = r.index;
    last_from_ = &r;
  }

  // `points`: the row's count of the sweep's points.
  void check_point_count(const ShardReader& r, std::uint64_t points) {
    if (!points_from_) {
      points_ = points;
      points_from_ = &r;
    } else if (points != points_) {
      throw InputError(fmt::format("{}: line {}: points {}: expected {} as in {} (shards of one sweep)", r.file.string(), r.lineno,
                                   points, points_, points_from_->file.string()));
    }
    if (r.index >= points_)
      throw InputError(fmt::format("{}: line {}: point {}: expected a point index below the sweep's {} points", r.file.string(),
                                   r.lineno, r.index, points_));
    if (r.index != merged_ && !first_missing_) first_missing_ = merged_;  // rows increase: the first gap
    ++merged_;
  }

  void check_complete(std::size_t files) const {
    if (merged_ == points_) return;
    throw InputError(fmt::format("sweep --merge: {} of the sweep's {} points are in the {} file(s) given (point {} is missing): "
                                 "expected every shard (one is missing or was cut short)",
                                 merged_, points_, files, first_missing_ ? *first_missing_ : merged_));
  }

 private:
  std::uint64_t points_ = 0, merged_ = 0, last_ = 0;
  std::optional<std::uint64_t> first_missing_;
  const ShardReader* points_from_ = nullptr;  // the first row's shard, named when another disagrees
  const ShardReader* last_from_ = nullptr;    // the shard of the row merged last
};

}  // namespace

SweepSummary merge_sweep_csv(const std::vector<std::filesystem::path>& inputs, std::ostream& out, int top,
                             std::optional<Objective> objective, const SweepSpec* spec) {
  if (inputs.empty()) throw InputError("sweep --merge: expected at least one CSV file");
  std::string header;
  const auto shards = open_shards(inputs, header);
  if (spec && header != sweep_csv_header(*spec))
    throw InputError(fmt::format("{}: line 1: {}...: expected the header of the sweep {} ({}...): shards of another sweep?",
                                 inputs[0].string(), printable(header), spec->file, printable(sweep_csv_header(*spec))));
  const auto head = split_csv_line(header);
  const SweepCsvColumns c = sweep_csv_columns(head, inputs[0]);
  std::vector<std::string> columns(head.begin() + static_cast<std::ptrdiff_t>(c.status) + 1,
                                   head.begin() + static_cast<std::ptrdiff_t>(c.framework));
  SweepSummary summary(columns, top, objective);
  out << header << "\n";
  MergeCoverage coverage;
  while (ShardReader* r = lowest_pending(shards)) {
    coverage.check_not_repeated(*r);
    out << r->line << "\n";
    auto f = split_csv_line(r->line);
    if (f.size() != head.size())
      throw InputError(fmt::format("{}: line {}: point {}: {} fields, header has {}: expected a complete row (a shard cut short?)",
                                   r->file.string(), r->lineno, r->index, f.size(), head.size()));
    const auto points = static_cast<std::uint64_t>(integer_field(*r, f[c.points], "points"));
    if (spec && points != spec->size())
      throw InputError(fmt::format("{}: line {}: points {}: expected the {} points of the sweep {}", r->file.string(), r->lineno,
                                   points, spec->size(), spec->file));
    coverage.check_point_count(*r, points);
    // run_sweep_point writes these three; anything else (a hand-edited "OK") would count as invalid.
    if (f[c.status] != "ok" && f[c.status] != "invalid" && f[c.status] != "error")
      throw InputError(fmt::format("{}: line {}: status \"{}\": expected ok, invalid or error", r->file.string(), r->lineno,
                                   printable(f[c.status])));
    if (spec) {
      const std::vector<std::string> axes = sweep_point_csv_fields(*spec, r->index);
      check_row_fields(*r, head, f, c, &axes);
    } else {
      check_row_fields(*r, head, f, c, nullptr);
    }
    summary.add(brief_of_csv_row(*r, f, c), f[c.status]);
    r->next();
  }
  coverage.check_complete(inputs.size());
  return summary;
}

std::uint64_t resume_sweep_csv(const std::filesystem::path& partial, const SweepSpec& spec, const SweepOptions& opts,
                               std::ostream& out, SweepSummary& summary) {
  note_input_file(partial);
  ShardReader r;
  r.file = partial;
  r.in.open(partial, std::ios::binary);
  if (!r.in)
    throw InputError(fmt::format("{}: cannot open: expected the rows an interrupted sweep left (nothing to resume?)",
                                 partial.string()));
  const std::string header = sweep_csv_header(spec);
  std::string first;
  if (!std::getline(r.in, first) || first != header)
    throw InputError(fmt::format("{}: line 1: expected the header of this sweep ({}...): a partial CSV of another sweep?",
                                 partial.string(), header.substr(0, 40)));
  out << header << "\n";
  const auto head = split_csv_line(header);
  const SweepCsvColumns c = sweep_csv_columns(head, partial);
  const auto shards = static_cast<std::uint64_t>(opts.shards), shard = static_cast<std::uint64_t>(opts.shard);
  std::uint64_t done = 0;
  while (std::getline(r.in, r.line)) {
    ++r.lineno;
    if (r.in.eof()) break;  // no newline: the last row, cut short by the interruption
    const auto f = split_csv_line(r.line);
    r.index = static_cast<std::uint64_t>(integer_field(r, f.empty() ? std::string() : f[0], "index"));
    if (f.size() != head.size() || r.index != shard + done * shards ||
        static_cast<std::uint64_t>(integer_field(r, f[c.points], "points")) != spec.size())
      throw InputError(fmt::format("{}: line {}: {}: expected point {} of this sweep's {} points with {} fields (rows of this "
                                   "shard, in order)",
                                   partial.string(), r.lineno, printable(r.line), shard + done * shards, spec.size(),
                                   head.size()));
    if (f[c.status] != "ok" && f[c.status] != "invalid" && f[c.status] != "error")
      throw InputError(fmt::format("{}: line {}: status \"{}\": expected ok, invalid or error", r.file.string(), r.lineno,
                                   printable(f[c.status])));
    const std::vector<std::string> axes = sweep_point_csv_fields(spec, r.index);
    check_row_fields(r, head, f, c, &axes);
    out << r.line << "\n";
    summary.add(brief_of_csv_row(r, f, c), f[c.status]);
    ++done;
  }
  return done;
}

}  // namespace stepsim
