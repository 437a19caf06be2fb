// The parallel sweep runner, its bounded summary, and the shard merge.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "sim/explore/sweep.hpp"
#include "sim/core/error.hpp"
#include "sim/core/format.hpp"

namespace stepsim {

double AxisEffect::range_ns() const {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& [v, sc] : by_value) {
    if (sc.second == 0) continue;
    double mean = sc.first / static_cast<double>(sc.second);
    if (!any) lo = hi = mean;
    lo = std::min(lo, mean);
    hi = std::max(hi, mean);
    any = true;
  }
  return hi - lo;
}

SweepSummary::SweepSummary(std::vector<std::string> columns, int top)
    : columns_(std::move(columns)), top_(static_cast<std::size_t>(std::max(top, 1))) {
  for (const auto& c : columns_) effects_.push_back(AxisEffect{c, {}});
}

void SweepSummary::add(const SweepPointBrief& p, const std::string& status) {
  ++total_;
  if (status != "ok") return;
  ++ok_;
  if (scatter_.size() < kScatterMax) scatter_.push_back(p);
  for (std::size_t a = 0; a < effects_.size() && a < p.values.size(); ++a) {
    auto& bv = effects_[a].by_value;
    auto it = std::find_if(bv.begin(), bv.end(), [&](const auto& e) { return e.first == p.values[a]; });
    if (it == bv.end()) {
      bv.push_back({p.values[a], {0.0, 0}});
      it = bv.end() - 1;
    }
    it->second.first += static_cast<double>(p.step_time.ns);
    it->second.second += 1;
  }
  auto faster = [](const SweepPointBrief& a, const SweepPointBrief& b) {
    return a.step_time != b.step_time ? a.step_time < b.step_time : a.index < b.index;
  };
  if (p.constraints_ok) {
    ++feasible_;
    auto pos = std::lower_bound(best_.begin(), best_.end(), p, faster);
    best_.insert(pos, p);
    if (best_.size() > top_) best_.pop_back();
  }
  // Pareto: drop p if some kept point is at least as good in both; else drop what p beats.
  for (const auto& q : pareto_)
    if (q.step_time <= p.step_time && q.peak_memory <= p.peak_memory) return;
  pareto_.erase(std::remove_if(pareto_.begin(), pareto_.end(),
                               [&](const SweepPointBrief& q) {
                                 return p.step_time <= q.step_time && p.peak_memory <= q.peak_memory;
                               }),
                pareto_.end());
  pareto_.insert(std::lower_bound(pareto_.begin(), pareto_.end(), p, faster), p);
}

std::vector<SweepPointBrief> SweepSummary::best() const { return best_; }
std::vector<SweepPointBrief> SweepSummary::pareto() const { return pareto_; }

std::vector<AxisEffect> SweepSummary::effects() const {
  std::vector<AxisEffect> out = effects_;
  std::stable_sort(out.begin(), out.end(), [](const AxisEffect& a, const AxisEffect& b) { return a.range_ns() > b.range_ns(); });
  return out;
}

static nlohmann::json brief_json(const std::vector<std::string>& cols, const SweepPointBrief& p) {
  nlohmann::json point = nlohmann::json::object();
  for (std::size_t i = 0; i < cols.size() && i < p.values.size(); ++i) point[cols[i]] = p.values[i];
  return {{"index", p.index},
          {"point", point},
          {"step_time_ns", p.step_time.ns},
          {"peak_memory_bytes", p.peak_memory.count},
          {"constraints_ok", p.constraints_ok}};
}

nlohmann::json SweepSummary::to_json() const {
  nlohmann::json j{{"points", total_}, {"ok", ok_}, {"invalid", total_ - ok_}, {"feasible", feasible_}};
  j["best"] = nlohmann::json::array();
  for (const auto& p : best_) j["best"].push_back(brief_json(columns_, p));
  j["pareto"] = nlohmann::json::array();
  for (const auto& p : pareto_) j["pareto"].push_back(brief_json(columns_, p));
  j["knob_effects"] = nlohmann::json::array();
  for (const auto& e : effects()) {
    nlohmann::json means = nlohmann::json::object();
    for (const auto& [v, sc] : e.by_value)
      if (sc.second) means[v] = static_cast<std::int64_t>(sc.first / static_cast<double>(sc.second));
    j["knob_effects"].push_back({{"path", e.path}, {"range_ns", static_cast<std::int64_t>(e.range_ns())}, {"mean_step_time_ns", means}});
  }
  return j;
}

void SweepSummary::write_text(std::ostream& out) const {
  out << fmt::format("sweep: {} points, {} ok, {} invalid, {} satisfy the constraints\n", total_, ok_, total_ - ok_, feasible_);
  auto describe = [&](const SweepPointBrief& p) {
    std::string s;
    for (std::size_t i = 0; i < columns_.size() && i < p.values.size(); ++i)
      s += fmt::format("{}{}={}", s.empty() ? "" : " ", columns_[i], p.values[i]);
    return s;
  };
  out << "\nbest configurations (fastest that satisfy the constraints):\n";
  if (best_.empty()) out << "  (none)\n";
  for (const auto& p : best_)
    out << fmt::format("  #{:<6} {:>12} {:>11}  {}\n", p.index, format_time(p.step_time), format_bytes(p.peak_memory), describe(p));
  out << "\nPareto front (step time vs peak memory):\n";
  for (const auto& p : pareto_)
    out << fmt::format("  #{:<6} {:>12} {:>11}  {}{}\n", p.index, format_time(p.step_time), format_bytes(p.peak_memory),
                       describe(p), p.constraints_ok ? "" : "  (violates constraints)");
  out << "\nknobs by effect on mean step time (max - min over their values):\n";
  for (const auto& e : effects()) {
    std::string means;
    for (const auto& [v, sc] : e.by_value)
      if (sc.second)
        means += fmt::format("{}{}: {}", means.empty() ? "" : ", ", v,
                             format_time(Time{static_cast<std::int64_t>(sc.first / static_cast<double>(sc.second))}));
    out << fmt::format("  {:<36} {:>12}   ({})\n", e.path, format_time(Time{static_cast<std::int64_t>(e.range_ns())}), means);
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

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& opts, const std::function<void(const SweepRow&)>& sink) {
  if (opts.shards < 1 || opts.shard < 0 || opts.shard >= opts.shards)
    throw InputError(fmt::format("--shard {}/{}: expected i/n with 0 <= i < n", opts.shard, opts.shards));
  const std::uint64_t n = spec.size();
  const auto shards = static_cast<std::uint64_t>(opts.shards);
  const auto shard = static_cast<std::uint64_t>(opts.shard);
  const std::uint64_t count = n > shard ? (n - shard + shards - 1) / shards : 0;  // k-th point: shard + k * shards
  SweepSummary summary(spec.columns, spec.top);
  Progress progress(opts.progress, count);
  int jobs = opts.jobs > 0 ? opts.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(jobs), std::max<std::uint64_t>(count, 1)));
  auto emit = [&](const SweepRow& row) {
    sink(row);
    summary.add(brief_of(row), row.status);
  };
  if (jobs <= 1) {
    for (std::uint64_t k = 0; k < count; ++k) {
      emit(run_sweep_point(spec, shard + k * shards));
      progress.update(k + 1);
    }
    return summary;
  }
  // Workers claim point numbers in order; the calling thread writes rows in order. A worker
  // does not run further than `window` points ahead of the writer, so the reorder buffer
  // (and memory) stays bounded however large the sweep is.
  const std::uint64_t window = static_cast<std::uint64_t>(jobs) * 16;
  std::atomic<std::uint64_t> next{0};
  std::mutex mu;
  std::condition_variable ready, room;
  std::map<std::uint64_t, SweepRow> buffer;
  std::uint64_t written = 0;
  bool stop = false;
  std::vector<std::thread> workers;
  for (int j = 0; j < jobs; ++j) {
    workers.emplace_back([&] {
      for (;;) {
        std::uint64_t k = next.fetch_add(1);
        if (k >= count) return;
        {
          std::unique_lock lock(mu);
          room.wait(lock, [&] { return stop || k < written + window; });
          if (stop) return;
        }
        SweepRow row = run_sweep_point(spec, shard + k * shards);
        std::lock_guard lock(mu);
        buffer.emplace(k, std::move(row));
        ready.notify_one();
      }
    });
  }
  try {
    while (written < count) {
      SweepRow row;
      {
        std::unique_lock lock(mu);
        ready.wait(lock, [&] { return buffer.count(written) > 0; });
        auto it = buffer.find(written);
        row = std::move(it->second);
        buffer.erase(it);
      }
      emit(row);
      {
        std::lock_guard lock(mu);
        ++written;
      }
      room.notify_all();
      progress.update(written);
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
  return summary;
}

namespace {

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
        index = std::stoull(line.substr(0, line.find(',')));
      } catch (const std::exception&) {
        throw InputError(fmt::format("{}: line {}: {}: expected a row starting with its point index", file.string(), lineno,
                                     line.substr(0, 40)));
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

}  // namespace

SweepSummary merge_sweep_csv(const std::vector<std::filesystem::path>& inputs, std::ostream& out, int top) {
  if (inputs.empty()) throw InputError("sweep --merge: expected at least one CSV file");
  std::string header;
  std::vector<std::unique_ptr<ShardReader>> shards;
  for (const auto& f : inputs) {
    auto r = std::make_unique<ShardReader>();
    r->file = f;
    r->in.open(f);
    if (!r->in) throw InputError(f.string() + ": cannot read the sweep CSV");
    std::string first;
    if (!std::getline(r->in, first)) throw InputError(f.string() + ": empty file: expected a sweep CSV header");
    if (header.empty()) header = first;
    else if (first != header) throw InputError(f.string() + ": header differs from " + inputs[0].string() + ": expected shards of one sweep");
    r->next();
    shards.push_back(std::move(r));
  }
  // Rebuild the summary from the columns: varied paths sit between "status" and "framework".
  auto head = split_csv_line(header);
  auto col = [&](const std::string& name) {
    auto it = std::find(head.begin(), head.end(), name);
    if (it == head.end()) throw InputError(inputs[0].string() + ": header lacks column " + name + ": expected a stepsim sweep CSV");
    return static_cast<std::size_t>(it - head.begin());
  };
  const std::size_t c_status = col("status"), c_fw = col("framework"), c_step = col("step_time_ns"),
                    c_mem = col("peak_memory_bytes"), c_ok = col("constraints_ok"), c_points = col("points");
  // Every row names the sweep's point count; the merge is complete only when every point from
  // 0 to points-1 was read (rows are unique and increasing, so counting them suffices).
  std::uint64_t points = 0, merged = 0;
  std::optional<std::uint64_t> first_missing;
  const ShardReader* points_from = nullptr;
  auto number_field = [&](const ShardReader& r, const std::string& text, const char* column) -> std::int64_t {
    try {
      std::size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used == text.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    throw InputError(fmt::format("{}: line {}: {}: \"{}\": expected an integer >= 0 (a shard cut short?)", r.file.string(),
                                 r.lineno, column, text.substr(0, 40)));
  };
  if (c_fw <= c_status)
    throw InputError(inputs[0].string() + ": header has framework before status: expected a stepsim sweep CSV");
  std::vector<std::string> columns(head.begin() + static_cast<std::ptrdiff_t>(c_status) + 1,
                                   head.begin() + static_cast<std::ptrdiff_t>(c_fw));
  SweepSummary summary(columns, top);
  out << header << "\n";
  // k-way merge on the point index (a handful of shards: a linear scan beats a heap).
  bool have_last = false;
  std::uint64_t last = 0;
  const ShardReader* last_from = nullptr;
  for (;;) {
    ShardReader* r = nullptr;
    for (auto& s : shards)
      if (!s->done && (!r || s->index < r->index)) r = s.get();
    if (!r) break;
    const std::uint64_t index = r->index;
    if (have_last && index == last)
      throw InputError(fmt::format("{}: line {}: point {} appears twice (also in {}): expected disjoint shards", r->file.string(),
                                   r->lineno, index, last_from->file.string()));
    have_last = true;
    last = index;
    last_from = r;
    out << r->line << "\n";
    auto f = split_csv_line(r->line);
    if (f.size() != head.size())
      throw InputError(fmt::format("{}: line {}: point {}: {} fields, header has {}: expected a complete row (a shard cut short?)",
                                   r->file.string(), r->lineno, index, f.size(), head.size()));
    const auto n = static_cast<std::uint64_t>(number_field(*r, f[c_points], "points"));
    if (!points_from) {
      points = n;
      points_from = r;
    } else if (n != points) {
      throw InputError(fmt::format("{}: line {}: points {}: expected {} as in {} (shards of one sweep)", r->file.string(), r->lineno, n,
                                   points, points_from->file.string()));
    }
    if (index >= points)
      throw InputError(fmt::format("{}: line {}: point {}: expected a point index below the sweep's {} points", r->file.string(),
                                   r->lineno, index, points));
    if (index != merged && !first_missing) first_missing = merged;  // rows increase: the first gap
    ++merged;
    SweepPointBrief b;
    b.index = index;
    b.values.assign(f.begin() + static_cast<std::ptrdiff_t>(c_status) + 1, f.begin() + static_cast<std::ptrdiff_t>(c_fw));
    if (f[c_status] == "ok") {
      b.step_time = Time{number_field(*r, f[c_step], "step_time_ns")};
      b.peak_memory = Bytes{number_field(*r, f[c_mem], "peak_memory_bytes")};
      b.constraints_ok = f[c_ok] == "true";
    }
    summary.add(b, f[c_status]);
    r->next();
  }
  if (merged != points) {
    throw InputError(fmt::format("sweep --merge: {} of the sweep's {} points are in the {} file(s) given (point {} is missing): "
                                 "expected every shard (one is missing or was cut short)",
                                 merged, points, inputs.size(), first_missing ? *first_missing : merged));
  }
  return summary;
}

}  // namespace stepsim
