#include "sim/explore/tune.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sim/config/experiment_keys.hpp"
#include "sim/core/checked.hpp"
#include "sim/core/error.hpp"
#include "sim/core/format.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

namespace stepsim {

namespace {

const nlohmann::json* at_path(const nlohmann::json& doc, const std::string& dotted) {
  const nlohmann::json* node = &doc;
  std::size_t pos = 0;
  while (pos <= dotted.size()) {
    std::size_t dot = dotted.find('.', pos);
    std::string part = dotted.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return node;
}

nlohmann::json point_of(const std::vector<TuneKnob>& knobs, const std::vector<std::size_t>& combo) {
  nlohmann::json p = nlohmann::json::object();
  for (std::size_t k = 0; k < knobs.size(); ++k)
    if (combo[k] != 0)  // setting 0 is the baseline's own value: leave the document alone
      for (const auto& [path, v] : knobs[k].settings[combo[k]]) p[path] = v;
  return p;
}

}  // namespace

Bytes parse_memory_size(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double mult = unit.empty() || unit == "b" ? 1 : unit == "gib" || unit == "g" ? 1024.0 * 1024 * 1024 : unit == "gb" ? 1e9
              : unit == "mib" || unit == "m" ? 1024.0 * 1024 : unit == "mb" ? 1e6 : unit == "tib" ? 1024.0 * 1024 * 1024 * 1024 : -1;
  // !(v > 0) also refuses nan ("nan" parses, and compares false with everything); the bytes
  // must fit an int64 (inf, 1e30GiB).
  const auto bytes = used == 0 || mult < 0 || !(v > 0) ? std::nullopt : checked_to_int64(v * mult);
  if (!bytes || *bytes <= 0)
    throw InputError(fmt::format("--memory-cap {}: expected a positive size such as 80GiB, 80GB or 512MiB", text));
  return Bytes{*bytes};
}

std::vector<TuneKnob> tune_knobs(const nlohmann::json& doc, const SourceMap& sources) {
  Experiment e = experiment_from_json(doc, sources);
  std::vector<TuneKnob> knobs;
  // The knobs are the framework's keys that declare `tune` settings (strategy_keys.cpp), in
  // the order effective_config reports them; the current value is the document's, else the
  // effective default.
  const ConfigObject* table = strategy_keys::for_framework(e.strategy->framework());
  nlohmann::json eff = e.strategy->effective_config();
  for (auto it = eff.begin(); it != eff.end(); ++it) {
    const ConfigKey* key = table ? table->find(it.key()) : nullptr;
    if (!key || key->tune.empty() || key->reported_only) continue;
    std::string path = "strategy." + it.key();
    const nlohmann::json* given = at_path(doc, path);
    // The document may write the setting in another unit (bucket_cap_mb): search it there,
    // since setting both keys is an input error.
    double scale = 1;
    for (const auto& alias : table->keys)
      if (alias.same_as == it.key())
        if (const nlohmann::json* a = at_path(doc, "strategy." + alias.name)) {
          path = "strategy." + alias.name, given = a, scale = alias.same_as_scale;
          break;
        }
    nlohmann::json cur = given ? *given : it.value();
    TuneKnob k{path, {KnobSetting{{path, cur}}}};
    for (nlohmann::json c : key->tune) {
      if (scale != 1) c = c.get<double>() / scale;
      if (c != cur && !(c.is_number() && cur.is_number() && c.get<double>() == cur.get<double>())) k.settings.push_back({{path, c}});
    }
    if (k.settings.size() > 1) knobs.push_back(std::move(k));
  }
  // Workload knobs exist for model workloads (toy workloads have fixed times).
  const nlohmann::json& w = doc.at("workload");
  if (!w.contains("toy")) {
    std::int64_t mb = w.value("micro_batch", std::int64_t{1});
    std::int64_t ga = doc.contains("training") ? doc["training"].value("grad_accum", std::int64_t{1}) : 1;
    std::int64_t global = mb * ga;
    TuneKnob k{"micro_batch x grad_accum (global batch " + std::to_string(global) + " per rank)",
               {KnobSetting{{"workload.micro_batch", mb}, {"training.grad_accum", ga}}}};
    for (std::int64_t d = 1; d <= global && d <= 64; ++d)
      if (global % d == 0 && d != mb) k.settings.push_back({{"workload.micro_batch", d}, {"training.grad_accum", global / d}});
    if (k.settings.size() > 1) knobs.push_back(std::move(k));
    std::string ck = w.value("activation_checkpointing", std::string("none"));
    TuneKnob c{"workload.activation_checkpointing", {KnobSetting{{"workload.activation_checkpointing", ck}}}};
    for (const auto& v : experiment_keys::workload().find("activation_checkpointing")->tune)
      if (v != ck) c.settings.push_back({{"workload.activation_checkpointing", v}});
    knobs.push_back(std::move(c));
  }
  return knobs;
}

namespace {

// Evaluates combos (setting index per knob) as one parallel sweep of explicit points, counting
// in the result the configurations evaluated, invalid and over the memory cap.
struct ComboEvaluator {
  const nlohmann::json& doc;
  const SourceMap& sources;
  const TuneOptions& opts;
  TuneResult& res;
  std::shared_ptr<ProfileCache> profiles = std::make_shared<ProfileCache>();
  std::shared_ptr<WorkloadCache> workloads = std::make_shared<WorkloadCache>(SweepSpec::kSweepWorkloads);

  std::vector<SweepRow> operator()(const std::vector<std::vector<std::size_t>>& combos) const {
    SweepSpec spec;
    spec.profiles = profiles;
    spec.workloads = workloads;
    spec.file = sources.root_file;
    spec.base = doc;
    spec.base_sources = sources;
    for (const auto& c : combos) spec.points.push_back(point_of(res.knobs, c));
    for (const auto& p : spec.points)
      for (auto it = p.begin(); it != p.end(); ++it)
        if (std::find(spec.columns.begin(), spec.columns.end(), it.key()) == spec.columns.end()) spec.columns.push_back(it.key());
    if (res.memory_cap.count > 0)
      spec.constraints.push_back(parse_constraint(fmt::format("peak_reserved_bytes <= {}", res.memory_cap.count), "--memory-cap"));
    std::vector<SweepRow> rows;
    SweepOptions so;
    so.jobs = opts.jobs;
    run_sweep(spec, so, [&](const SweepRow& r) {
      ++res.evaluated;
      if (r.status != "ok") ++res.invalid;
      else if (!r.constraints_ok) ++res.over_cap;
      rows.push_back(r);
    });
    return rows;
  }
};

ObjectiveInputs objective_inputs(const SweepRow& r) {
  return ObjectiveInputs{r.metrics.overlap.step_time, r.throughput.tokens_per_step, r.throughput.mfu_pct};
}

// Whether `a` runs, fits the cap and beats `b` (or there is no `b` yet).
bool better_row(Objective objective, const SweepRow& a, const SweepRow* b) {
  return a.status == "ok" && a.constraints_ok && (!b || objective_better(objective, objective_inputs(a), objective_inputs(*b)));
}

// Every combination of the knobs' settings, last knob fastest.
std::vector<std::vector<std::size_t>> grid_combos(const std::vector<TuneKnob>& knobs, std::uint64_t grid) {
  std::vector<std::vector<std::size_t>> combos;
  std::vector<std::size_t> c(knobs.size(), 0);
  for (std::uint64_t i = 0; i < grid; ++i) {
    combos.push_back(c);
    for (std::size_t k = knobs.size(); k-- > 0;) {  // odometer, last knob fastest
      if (++c[k] < knobs[k].settings.size()) break;
      c[k] = 0;
    }
  }
  return combos;
}

// Searches the whole grid; the first combination (all knobs at setting 0) is the baseline.
std::optional<SweepRow> search_grid(const ComboEvaluator& evaluate, std::uint64_t grid, TuneResult& res,
                                    std::vector<std::size_t>& best_combo) {
  res.method = "grid";
  const std::vector<std::vector<std::size_t>> combos = grid_combos(res.knobs, grid);
  auto rows = evaluate(combos);
  res.baseline = rows[0].metrics;
  res.baseline_throughput = rows[0].throughput;
  res.baseline_fits = rows[0].status == "ok" && rows[0].constraints_ok;
  if (rows[0].status != "ok") throw InputError(evaluate.sources.root_file + ": the experiment itself does not run: " + rows[0].error);
  std::optional<SweepRow> best;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (better_row(res.objective.objective, rows[i], best ? &*best : nullptr)) {
      best = rows[i];
      best_combo = combos[i];
    }
  return best;
}

// From the baseline, moves one knob at a time to its best setting, at most 16 rounds.
std::optional<SweepRow> search_coordinate_descent(const ComboEvaluator& evaluate, TuneResult& res,
                                                  std::vector<std::size_t>& best_combo) {
  const auto& knobs = res.knobs;
  const Objective objective = res.objective.objective;
  res.method = "coordinate descent";
  auto rows = evaluate({best_combo});
  if (rows[0].status != "ok") throw InputError(evaluate.sources.root_file + ": the experiment itself does not run: " + rows[0].error);
  res.baseline = rows[0].metrics;
  res.baseline_throughput = rows[0].throughput;
  res.baseline_fits = rows[0].constraints_ok;
  std::optional<SweepRow> best;
  if (res.baseline_fits) best = rows[0];
  for (int round = 0; round < 16; ++round) {
    std::vector<std::vector<std::size_t>> combos;
    for (std::size_t k = 0; k < knobs.size(); ++k)
      for (std::size_t s = 0; s < knobs[k].settings.size(); ++s)
        if (s != best_combo[k]) {
          combos.push_back(best_combo);
          combos.back()[k] = s;
        }
    auto rs = evaluate(combos);
    std::optional<std::size_t> pick;
    for (std::size_t i = 0; i < rs.size(); ++i)
      if (better_row(objective, rs[i], best ? &*best : nullptr) &&
          (!pick || objective_better(objective, objective_inputs(rs[i]), objective_inputs(rs[*pick]))))
        pick = i;
    if (!pick) break;
    best = rs[*pick];
    best_combo = combos[*pick];
  }
  return best;
}

// The best configuration's numbers and the settings where it differs from the experiment.
void record_best(TuneResult& res, const SweepRow& best, const std::vector<std::size_t>& best_combo) {
  const auto& knobs = res.knobs;
  res.found = true;
  res.best = best.metrics;
  res.best_throughput = best.throughput;
  res.best_extrapolations = best.extrapolations;
  for (std::size_t k = 0; k < knobs.size(); ++k) {
    for (std::size_t p = 0; p < knobs[k].settings[best_combo[k]].size(); ++p) {
      const auto& [path, v] = knobs[k].settings[best_combo[k]][p];
      const auto& old = knobs[k].settings[0][p].second;
      if (old != v) res.diff.push_back({path, old, v});
    }
  }
}

}  // namespace

TuneResult tune(const nlohmann::json& doc, const SourceMap& sources, const TuneOptions& opts) {
  TuneResult res;
  Experiment base = experiment_from_json(doc, sources);
  res.framework = base.strategy->framework();
  res.noise = noise_floor(base.cluster.profile->name, res.framework);
  res.memory_cap = opts.memory_cap.count > 0 ? opts.memory_cap : base.cluster.profile->memory_capacity;
  res.knobs = tune_knobs(doc, sources);
  const auto& knobs = res.knobs;
  res.objective.objective = opts.objective.value_or(Objective::StepTime);
  res.objective.requested = opts.objective.has_value();
  res.objective.reason = std::string(res.objective.requested ? "as requested" : "the default") +
                         "; tune keeps the global batch fixed, so step time, tokens/s and MFU rank alike";

  const ComboEvaluator evaluate{doc, sources, opts, res};
  std::vector<std::size_t> best_combo(knobs.size(), 0);
  std::uint64_t grid = 1;
  for (const auto& k : knobs) grid = std::min<std::uint64_t>(grid * k.settings.size(), opts.max_grid + 1);
  const std::optional<SweepRow> best =
      grid <= opts.max_grid ? search_grid(evaluate, grid, res, best_combo) : search_coordinate_descent(evaluate, res, best_combo);
  if (!best) return res;
  nlohmann::json eff = base.strategy->effective_config();
  record_best(res, *best, best_combo);
  return res;
}

std::vector<KnobMove> single_knob_moves(const nlohmann::json& doc, const SourceMap& sources, Time baseline, int jobs) {
  TuneOptions opts;
  opts.jobs = jobs;
  TuneResult res;  // the evaluator's counters; no cap beyond the device check every sweep row makes
  res.knobs = tune_knobs(doc, sources);
  std::vector<std::vector<std::size_t>> combos;
  for (std::size_t k = 0; k < res.knobs.size(); ++k)
    for (std::size_t s = 1; s < res.knobs[k].settings.size(); ++s) {
      combos.emplace_back(res.knobs.size(), 0);
      combos.back()[k] = s;
    }
  if (combos.empty()) return {};
  const ComboEvaluator evaluate{doc, sources, opts, res};
  const std::vector<SweepRow> rows = evaluate(combos);
  std::vector<KnobMove> moves;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].status != "ok" || !rows[i].constraints_ok) continue;
    const Time step = rows[i].metrics.overlap.step_time;
    if (step.ns <= 0) continue;
    std::size_t k = 0;
    while (combos[i][k] == 0) ++k;
    std::string what;
    const KnobSetting& to = res.knobs[k].settings[combos[i][k]];
    for (std::size_t p = 0; p < to.size(); ++p)
      what += fmt::format("{}{}: {} -> {}", what.empty() ? "" : ", ", to[p].first, res.knobs[k].settings[0][p].second.dump(),
                          to[p].second.dump());
    moves.push_back({what, rows[i].metrics, static_cast<double>(baseline.ns) / static_cast<double>(step.ns)});
  }
  std::stable_sort(moves.begin(), moves.end(), [](const KnobMove& a, const KnobMove& b) { return a.speedup > b.speedup; });
  return moves;
}

TuneResult tune_file(const std::filesystem::path& file, const std::vector<std::string>& overrides, const TuneOptions& opts) {
  SourceMap sources;
  nlohmann::json doc = load_with_includes(file, sources);
  for (const auto& o : overrides) apply_override(doc, o, &sources);
  return tune(doc, sources, opts);
}

double TuneResult::gain_pct() const {
  if (!found || baseline.overlap.step_time.ns <= 0) return 0;
  return 100.0 * static_cast<double>((baseline.overlap.step_time - best.overlap.step_time).ns) /
         static_cast<double>(baseline.overlap.step_time.ns);
}

void write_tune_text(std::ostream& out, const TuneResult& r) {
  out << fmt::format("framework {}; memory cap {} (peak reserved); searched {} knobs by {} ({} configurations, {} invalid, {} over the cap)\n", r.framework,
                     format_bytes(r.memory_cap), r.knobs.size(), r.method, r.evaluated, r.invalid, r.over_cap);
  for (const auto& k : r.knobs) out << fmt::format("  knob {} ({} settings)\n", k.name, k.settings.size());
  out << fmt::format("objective: {} ({})\n", to_string(r.objective.objective), r.objective.reason);
  auto rate = [](const Throughput& t) {
    std::string s = t.tokens_per_s > 0 ? fmt::format(", {:.0f} tokens/s", t.tokens_per_s) : "";
    if (t.mfu_pct > 0) s += fmt::format(", MFU {:.1f}%", t.mfu_pct);
    return s;
  };
  out << fmt::format("baseline: step {}{}, peak memory {}, reserved {}{}\n", format_time(r.baseline.overlap.step_time),
                     rate(r.baseline_throughput), format_bytes(r.baseline.peak_memory), format_bytes(r.baseline.peak_reserved),
                     r.baseline_fits ? "" : " (DOES NOT FIT the cap)");
  if (!r.found) {
    out << "no configuration fits the memory cap\n";
    return;
  }
  if (r.diff.empty()) {
    out << fmt::format("the baseline is already the {} configuration that fits\n",
                       r.objective.objective == Objective::StepTime ? "fastest" : "highest-" + objective_label(r.objective.objective));
    return;
  }
  const double gain = r.gain_pct();
  if (r.noise.pct > 0) {
    std::string from;
    for (const auto& s : r.noise.sources) from += (from.empty() ? "" : ", ") + s;
    const std::string noise = fmt::format("{:.1f} %: the step-time median |error| of the closest validated sources ({}; {})",
                                          r.noise.pct, r.noise.closeness, from);
    if (!r.beats_noise())
      out << fmt::format("\nnothing beats the baseline by more than {}.\nThe best found is {:.1f}% faster, a tie within that error:\n",
                         noise, gain);
    else out << fmt::format("\nnoise: {}\n", noise);
  }
  out << "\nconfig diff (JSON path: old -> new):\n";
  for (const auto& d : r.diff) out << fmt::format("  {}: {} -> {}\n", d.path, d.old_value.dump(), d.new_value.dump());
  out << fmt::format("\npredicted: step {} -> {} ({:.1f}% faster, {:.3f}x), peak memory {} -> {}, reserved {} -> {}\n",
                     format_time(r.baseline.overlap.step_time), format_time(r.best.overlap.step_time), gain,
                     r.best.overlap.step_time.ns ? static_cast<double>(r.baseline.overlap.step_time.ns) / static_cast<double>(r.best.overlap.step_time.ns) : 1.0,
                     format_bytes(r.baseline.peak_memory), format_bytes(r.best.peak_memory), format_bytes(r.baseline.peak_reserved),
                     format_bytes(r.best.peak_reserved));
  if (r.best_throughput.tokens_per_s > 0) {
    out << fmt::format("           tokens/s {:.0f} -> {:.0f}", r.baseline_throughput.tokens_per_s, r.best_throughput.tokens_per_s);
    if (r.best_throughput.mfu_pct > 0) out << fmt::format(", MFU {:.1f}% -> {:.1f}%", r.baseline_throughput.mfu_pct, r.best_throughput.mfu_pct);
    out << "\n";
  }
  if (!r.best_extrapolations.empty()) {
    out << "\nnote: the best configuration's collective costs are extrapolated beyond the profile's measurements (docs/scale.md):\n";
    for (const auto& x : r.best_extrapolations) out << "  " << x << "\n";
  }
}

nlohmann::json tune_to_json(const TuneResult& r) {
  nlohmann::json j{{"schema", "stepsim.tune/1"}, {"framework", r.framework}, {"method", r.method}, {"evaluated", r.evaluated},
                   {"invalid", r.invalid}, {"over_cap", r.over_cap}, {"memory_cap_bytes", r.memory_cap.count},
                   {"baseline", metrics_to_json(r.baseline)}, {"baseline_fits", r.baseline_fits}, {"found", r.found}};
  j["knobs"] = nlohmann::json::array();
  for (const auto& k : r.knobs) j["knobs"].push_back({{"name", k.name}, {"settings", k.settings.size()}});
  j["objective"] = {{"name", to_string(r.objective.objective)}, {"requested", r.objective.requested}, {"reason", r.objective.reason}};
  auto tp = [](const Throughput& t) {
    return nlohmann::json{{"tokens_per_s", t.tokens_per_s}, {"tokens_per_s_per_gpu", t.tokens_per_s_per_gpu}, {"mfu_pct", t.mfu_pct},
                          {"hfu_pct", t.hfu_pct}, {"tokens_per_step", t.tokens_per_step}};
  };
  j["baseline_throughput"] = tp(r.baseline_throughput);
  if (r.found) {
    j["best"] = metrics_to_json(r.best);
    j["best_throughput"] = tp(r.best_throughput);
    if (!r.best_extrapolations.empty()) j["best_collective_extrapolations"] = r.best_extrapolations;
  }
  j["noise"] = {{"pct", r.noise.pct}, {"sources", r.noise.sources}, {"closeness", r.noise.closeness}};
  j["beats_noise"] = r.beats_noise();
  j["diff"] = nlohmann::json::array();
  for (const auto& d : r.diff) j["diff"].push_back({{"path", d.path}, {"old", d.old_value}, {"new", d.new_value}});
  return j;
}

}  // namespace stepsim
