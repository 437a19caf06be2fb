// stepsim._core: the simulator's library calls as the CLI's subcommands make them
// (tools/cmd_*.cpp), for python/stepsim. Documents cross as JSON text and results come back as
// JSON text or strings; python/stepsim turns them into dicts and DataFrames. Every call that
// simulates releases the GIL. InputError becomes stepsim.InputError (python/stepsim/_errors.py);
// any other exception a RuntimeError with its message: nothing here ends the interpreter.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "calibrate/from_trace/init_files.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/analysis/critical_path.hpp"
#include "sim/analysis/run.hpp"
#include "sim/config/foreign_configs.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/explore/scale.hpp"
#include "sim/explore/tune.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/report/compare.hpp"
#include "sim/report/html_report.hpp"
#include "sim/report/result_json.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "trace/compare_files.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"
#include "validate/validate.hpp"

namespace nb = nanobind;
using namespace stepsim;

namespace {

using Json = nlohmann::json;

// One simulation: the experiment as read and what the engine produced (simulate's two calls).
struct Simulation {
  Experiment experiment;
  SimulationResult result;
  // What it was loaded from (explain re-simulates the knobs from the document, as the CLI does).
  std::string source, doc_text;
  std::vector<std::string> overrides;
};

// `doc_text` is the JSON text of a dict ("" for a file); `source` the file, or the name the
// dict goes by in messages.
Experiment load_source(const std::string& source, const std::string& doc_text, const std::vector<std::string>& overrides) {
  if (doc_text.empty()) return load_experiment(source, overrides);
  return load_experiment_from_json(parse_json_text(doc_text, source), source, overrides);
}

Simulation make_simulation(const std::string& source, const std::string& doc_text, const std::vector<std::string>& overrides) {
  Simulation s{load_source(source, doc_text, overrides), {}, source, doc_text, overrides};
  s.result = run_experiment(s.experiment);
  return s;
}

Simulation py_simulate(const std::string& source, const std::string& doc_text, const std::vector<std::string>& overrides) {
  nb::gil_scoped_release release;
  return make_simulation(source, doc_text, overrides);
}

// bench/python_simulate_bench.py's denominator: the C++ call stepsim.simulate makes
// (make_simulation, and the metrics as JSON, which Result.metrics reads), `reps` times in this
// process, so with its heap and malloc settings (an interpreter that imported pandas, or
// stepsim.keep_freed_memory()). With `hold`, each call's simulation is freed only after the next
// call has made its own, as `r = stepsim.simulate(exp)` holds the previous Result; without, at
// once. The CPU time of each call in us (std::clock, the process's, as time.process_time).
std::vector<double> time_simulate_in_cpp(const std::string& source, int reps, bool hold) {
  if (reps < 1) throw std::invalid_argument("time_simulate_in_cpp: reps " + std::to_string(reps) + ": expected at least 1");
  nb::gil_scoped_release release;
  std::vector<double> cpu_us;
  std::size_t sink = 0;
  Simulation held;
  for (int i = 0; i < reps; ++i) {
    const std::clock_t c0 = std::clock();
    {
      Simulation s = make_simulation(source, {}, {});
      sink += metrics_to_json(s.result.metrics).dump().size();
      if (hold) held = std::move(s);
    }  // without hold, freed here: within the call's time, as Python frees a dropped Result
    cpu_us.push_back(1e6 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  if (sink == 0) throw std::logic_error("time_simulate_in_cpp: no metrics");  // (and the JSON is used: not optimized away)
  return cpu_us;
}

// The memory curve as columns: time, total and reserved bytes, and bytes per category.
std::string memory_curve_json(const Timeline& t) {
  Json cols = {{"time_ns", Json::array()}, {"total_bytes", Json::array()}, {"reserved_bytes", Json::array()}};
  std::vector<std::string> names;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    names.push_back(to_string(static_cast<MemCategory>(c)) + "_bytes");
    cols[names.back()] = Json::array();
  }
  for (const MemorySample& m : t.memory) {
    cols["time_ns"].push_back(m.time.ns);
    cols["total_bytes"].push_back(m.total.count);
    cols["reserved_bytes"].push_back(m.reserved.count);
    for (int c = 0; c < kMemCategoryCount; ++c) cols[names[static_cast<std::size_t>(c)]].push_back(m.by_category[static_cast<std::size_t>(c)].count);
  }
  return cols.dump();
}

// A JSON value as the Python objects json.loads makes of its text (dict in the text's key order,
// which is nlohmann's sorted order; a non-finite number is null, as dump() writes it), without
// the text: Result.metrics at every call took a dump and a json.loads (~18 us of a 1 ms call).
nb::object to_python(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return nb::none();
    case Json::value_t::boolean: return nb::bool_(j.get<bool>());
    case Json::value_t::number_integer: return nb::int_(j.get<std::int64_t>());
    case Json::value_t::number_unsigned: return nb::int_(j.get<std::uint64_t>());
    case Json::value_t::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? nb::object(nb::float_(v)) : nb::none();
    }
    case Json::value_t::string: return nb::str(j.get_ref<const std::string&>().c_str(), j.get_ref<const std::string&>().size());
    case Json::value_t::array: {
      nb::list out;
      for (const Json& v : j) out.append(to_python(v));
      return out;
    }
    case Json::value_t::object: {
      nb::dict out;
      for (const auto& [k, v] : j.items()) out[nb::str(k.c_str(), k.size())] = to_python(v);
      return out;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded: break;
  }
  throw std::logic_error("to_python: a JSON value that is not JSON");
}

template <class F>
std::string to_text(F&& write) {
  std::ostringstream out;
  write(out);
  return out.str();
}

// A sweep's CSV exactly as `sweep --out` writes it, and its summary as `--json-out` does.
std::pair<std::string, std::string> py_sweep(const std::string& source, const std::string& doc_text, int jobs,
                                          const std::vector<std::string>& constraints) {
  nb::gil_scoped_release release;
  SweepSpec spec;
  if (doc_text.empty()) {
    spec = load_sweep(resolve_input_path(source));
  } else {
    SourceMap sources;
    Json doc = resolve_includes_of(parse_json_text(doc_text, source), source, sources);
    spec = sweep_from_json(doc, sources);
  }
  for (const auto& c : constraints) spec.constraints.push_back(parse_constraint(c, "constraints"));
  SweepOptions o;
  o.jobs = jobs;
  std::string csv = sweep_csv_header(spec) + "\n";
  std::string first_invalid;
  SweepSummary s = run_sweep(spec, o, [&](const SweepRow& r) {
    if (r.status == "invalid" && first_invalid.empty()) first_invalid = "point " + std::to_string(r.index) + ": " + r.error;
    csv += sweep_csv_row(r);
    csv += "\n";
  });
  check_some_point_valid(spec, s, first_invalid);
  return {std::move(csv), s.to_json().dump()};
}

// stepsim scale --json and its CSV (the same ScaleResult).
std::pair<std::string, std::string> py_scale(const std::string& source, const std::string& doc_text, const std::vector<std::string>& overrides,
                                             const std::string& flag, const std::string& counts) {
  nb::gil_scoped_release release;
  ScaleRequest q;
  q.file = source;
  q.doc_text = doc_text;
  q.overrides = overrides;
  q.flag = flag;
  q.counts = counts;
  const ScaleResult r = run_scale(q);
  return {scale_csv(r), scale_to_json(r).dump()};
}

std::string py_tune(const std::string& source, const std::string& doc_text, const std::vector<std::string>& overrides, const std::string& memory_cap,
                 const std::string& objective, int jobs, std::int64_t max_grid) {
  nb::gil_scoped_release release;
  TuneOptions o;
  o.jobs = jobs;
  if (max_grid > 0) {
    if (max_grid > static_cast<std::int64_t>(kMaxTuneGrid))
      throw InputError("max_grid " + std::to_string(max_grid) + ": expected an integer from 1 to " + std::to_string(kMaxTuneGrid));
    o.max_grid = static_cast<std::size_t>(max_grid);
  }
  if (!memory_cap.empty()) o.memory_cap = parse_memory_size(memory_cap);
  if (!objective.empty()) o.objective = parse_objective(objective);
  SourceMap sources;
  Json doc = doc_text.empty() ? load_experiment_document(source, overrides, sources)
                              : experiment_document_of(parse_json_text(doc_text, source), source, overrides, sources);
  return tune_to_json(stepsim::tune(doc, sources, o)).dump();
}

std::string py_explain(const Simulation& s, bool sensitivities) {
  nb::gil_scoped_release release;
  Explanation x = explain_experiment(s.experiment, s.result, sensitivities);
  if (sensitivities) {
    // The knobs tune searches, one at a time from this configuration (as stepsim explain).
    SourceMap sources;
    Json doc = s.doc_text.empty() ? load_experiment_document(s.source, s.overrides, sources)
                                  : experiment_document_of(parse_json_text(s.doc_text, s.source), s.source, s.overrides, sources);
    for (const auto& m : single_knob_moves(doc, sources, s.result.metrics.overlap.step_time))
      x.knob_moves.push_back({m.what, m.metrics.overlap.step_time, m.speedup});
  }
  Json j = explanation_to_json(x);
  auto outside = collective_extrapolations(s.experiment.cluster.profile, s.result.program.comms);
  if (!outside.empty()) j["collective_extrapolations"] = outside;
  j["memory"] = memory_summary_json(s.result.metrics);
  j["schema"] = "stepsim.explain/1";
  j["experiment"] = s.experiment.file;
  return j.dump();
}

std::string py_analyze(const std::vector<std::string>& files, const std::string& steps) {
  nb::gil_scoped_release release;
  if (files.empty()) throw InputError("analyze: no trace given: expected at least one trace");
  trace::AnalyzeOptions o;
  if (!steps.empty()) trace::parse_step_range(steps, o);
  std::vector<trace::KinetoTrace> traces;
  for (const auto& f : files) traces.push_back(trace::read_kineto_trace(f, trace::ReadOptions{.host_ops = false, .fit_records = false}));
  return trace::job_to_json(trace::analyze_job(traces, o)).dump();
}

std::string py_compare(const std::string& first, const std::string& second, const std::string& tolerance,
                    const std::string& memory_tolerance, const std::string& steps) {
  nb::gil_scoped_release release;
  CompareOptions o;
  o.tolerance_pct = parse_tolerance_pct(tolerance, "tolerance");
  o.memory_tolerance_pct = memory_tolerance.empty() ? o.tolerance_pct : parse_tolerance_pct(memory_tolerance, "memory_tolerance");
  return compare_to_json(trace::compare_files(first, second, steps, o)).dump();
}

std::string py_validate_suite(const std::string& suite_file) {
  nb::gil_scoped_release release;
  validate::Suite suite = validate::load_suite(resolve_input_path(suite_file));
  return validate::report_to_json(validate::run_suite(suite)).dump();
}

std::pair<std::string, std::string> py_init_from_trace(const std::vector<std::string>& traces, const std::string& steps,
                                                    const std::string& profile_ref) {
  nb::gil_scoped_release release;
  if (traces.empty()) throw InputError("init_from_trace: no trace given: expected at least one trace");
  trace::InitOutputs r = trace::init_from_trace_files(traces, steps, profile_ref);
  return {r.experiment.dump(), r.profile.dump(2)};
}

// A Hugging Face config (the dict of a module's `config`) read as `"model": {"hf_config": F}`
// reads a config.json: the model dimensions the workload builds from, as the model keys.
std::string py_hf_model(const std::string& config_text, const std::string& name, std::int64_t seq_len) {
  std::string model_name;
  ModelDims d = dims_from_hf_config_json(parse_json_text(config_text, name), name, model_name, seq_len);
  Json m = {{"family", d.family}, {"hidden", d.hidden}, {"layers", d.layers}, {"heads", d.heads}, {"kv_heads", d.kv_heads},
            {"ffn", d.ffn}, {"vocab", d.vocab}, {"tied_embeddings", d.tied_embeddings}};
  if (d.max_positions > 0) m["max_positions"] = d.max_positions;
  if (!model_name.empty()) m["name"] = model_name;
  return m.dump();
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "stepsim's simulator library (use the stepsim package, not this module)";
#ifdef NDEBUG
  // nanobind checks at interpreter exit that no instance outlives its module. A Result the user
  // still holds in __main__ does when something keeps __main__'s dictionary past the extension's
  // teardown (a lambda of __main__ in gc.callbacks): nothing leaks, the process is exiting, yet
  // it printed "leaked 1 instances", 13 functions and a type, as a bug of the bindings. The
  // release build (the wheel's) does not check; a debug build still does
  // (python/tests/test_api.py, test_no_leak_report_at_exit).
  nb::set_leak_warnings(false);
#endif
  // InputError -> stepsim.InputError (a ValueError that parses the file and JSON path out of the
  // CLI's one-line message); DeadlockError and the rest -> RuntimeError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InputError& e) {
      nb::object cls = nb::module_::import_("stepsim._errors").attr("InputError");
      PyErr_SetObject(cls.ptr(), nb::str(e.what()).ptr());
    } catch (const DeadlockError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("set_default_data_dir", [](const std::string& dir) { set_default_data_dir(dir); });
  m.def("data_dir", []() { auto d = data_dir(); return d ? d->string() : std::string(); });
  m.def("hardware_threads", []() { return std::max(1u, std::thread::hardware_concurrency()); });

  nb::class_<Simulation>(m, "Simulation")
      .def("metrics_json", [](const Simulation& s) { return metrics_to_json(s.result.metrics).dump(); })
      .def("metrics", [](const Simulation& s) { return to_python(metrics_to_json(s.result.metrics)); })
      .def("result_json", [](const Simulation& s) { return result_to_json(s.experiment, s.result).dump(); })
      .def("ops_json", [](const Simulation& s) { return ops_to_json(s.result.timeline).dump(); })
      .def("classes_json",
           [](const Simulation& s) {
             const Metrics& m = s.result.metrics;
             return breakdown_to_json(class_breakdown(s.result.timeline, m.overlap.comm_time, m.overlap.idle)).dump();
           })
      .def("memory_json", [](const Simulation& s) { return memory_curve_json(s.result.timeline); })
      .def("text_report", [](const Simulation& s) { return to_text([&](std::ostream& o) { write_text_report(o, s.experiment, s.result); }); })
      .def("html_report", [](const Simulation& s) { return to_text([&](std::ostream& o) { write_simulation_html(o, s.experiment, s.result); }); })
      .def("chrome_trace",
           [](const Simulation& s, const std::string& title) {
             return to_text([&](std::ostream& o) { write_chrome_trace(o, s.result.timeline, title, &s.result.program); });
           })
      .def("timeline_svg", [](const Simulation& s) { return timeline_svg(s.result.timeline); })
      .def("memory_svg", [](const Simulation& s) { return memory_svg(s.result.timeline, s.result.metrics); })
      .def_prop_ro("file", [](const Simulation& s) { return s.experiment.file; })
      .def_prop_ro("instructions", [](const Simulation& s) { return s.result.program.instructions.size(); });

  m.def("simulate", &py_simulate, nb::arg("source"), nb::arg("doc_text"), nb::arg("overrides"));
  m.def("keep_freed_memory", &keep_freed_memory);
  m.def("time_simulate_in_cpp", &time_simulate_in_cpp, nb::arg("source"), nb::arg("reps"), nb::arg("hold"));
  m.def("sweep", &py_sweep, nb::arg("source"), nb::arg("doc_text"), nb::arg("jobs"), nb::arg("constraints"));
  m.def("tune", &py_tune, nb::arg("source"), nb::arg("doc_text"), nb::arg("overrides"), nb::arg("memory_cap"), nb::arg("objective"), nb::arg("jobs"),
        nb::arg("max_grid"));
  m.def("scale", &py_scale, nb::arg("source"), nb::arg("doc_text"), nb::arg("overrides"), nb::arg("flag"), nb::arg("counts"));
  m.def("explain", &py_explain, nb::arg("simulation"), nb::arg("sensitivities"));
  m.def("analyze", &py_analyze, nb::arg("files"), nb::arg("steps"));
  m.def("compare", &py_compare, nb::arg("first"), nb::arg("second"), nb::arg("tolerance"), nb::arg("memory_tolerance"),
        nb::arg("steps"));
  m.def("validate", &py_validate_suite, nb::arg("suite"));
  m.def("hf_model", &py_hf_model, nb::arg("config_text"), nb::arg("name"), nb::arg("seq_len"));
  m.def("init_from_trace", &py_init_from_trace, nb::arg("traces"), nb::arg("steps"), nb::arg("profile_ref"));
}
