#pragma once
// `stepsim compare A.json B.json`: two stepsim.result/1 documents side by side (a prediction
// and a measurement from `live`, or two simulations), metric by metric, phase by phase, per
// collective (matched by name and occurrence), per collective kind and per kernel class.
//
// Roles: the *reference* is the measurement when exactly one file is from `live`; otherwise it
// is the first file (the baseline). The other file is the *subject*. For every row
//   abs_error = subject - reference           (in the row's unit)
//   rel_error = (subject - reference) / |reference|, in percent (absent when reference is 0
//               and subject is not; 0 when both are 0)
// so for predicted vs measured rel_error is the usual signed prediction error, and for two
// simulations it is the change from the first to the second.
//
// Throughput rows (tokens/s, MFU) appear when one side's /summary gives its tokens per step
// (simulate, live); a side without it (analyze --json) is taken to do the same work.
//
// The gate (the CI check): |rel_error| of step time <= tolerance and |rel_error| of peak
// memory <= memory tolerance; compare exits 3 when either fails.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim {

struct CompareOptions {
  double tolerance_pct = 5.0;         // step time
  double memory_tolerance_pct = 5.0;  // peak memory
};

struct CompareRow {
  std::string section;  // "metric", "throughput", "phase", "memory", "collective kind", "collective", "kernel class"
  std::string name;
  std::string unit;     // "ns", "bytes", "%"
  double reference = 0;
  double subject = 0;
  double abs_error = 0;
  std::optional<double> rel_error_pct;
  std::optional<double> tolerance_pct;  // set on the gated rows
  bool pass = true;                     // gated rows only; others always pass
};

// One leaf of the experiment/strategy config that differs ("/strategy/bucket_cap_bytes").
struct ConfigChange {
  std::string path;
  nlohmann::json reference;  // null when absent on that side
  nlohmann::json subject;
};

struct CompareReport {
  std::string reference_label, subject_label;  // file names as given
  std::string reference_mode, subject_mode;    // "simulate" / "live"
  std::string reference_device, subject_device;
  CompareOptions options;
  std::vector<CompareRow> rows;
  std::vector<std::string> only_in_reference, only_in_subject;  // unmatched collectives
  std::vector<ConfigChange> config_changes;
  bool step_time_pass = true;
  bool memory_pass = true;
  // False when the reference is a trace whose analysis found no memory events (recorded without
  // profile_memory): its peak of 0 is no measurement, so there are no memory rows and no memory
  // gate (memory_pass stays true).
  bool memory_measured = true;
  bool pass() const { return step_time_pass && memory_pass; }
};

// Throws InputError naming the label when a document is not a stepsim.result/1 with metrics.
CompareReport compare_results(const nlohmann::json& first, const std::string& first_label, const nlohmann::json& second,
                              const std::string& second_label, const CompareOptions& options);

// "5%", "5" -> 5.0 (percent); "0.5%" -> 0.5. Throws InputError for anything else or < 0.
double parse_tolerance_pct(const std::string& text, const std::string& flag);

// Leaf-by-leaf differences of two JSON values (objects recursed, arrays compared whole).
std::vector<ConfigChange> diff_json(const nlohmann::json& reference, const nlohmann::json& subject,
                                    const std::string& path = "");

nlohmann::json compare_to_json(const CompareReport& r);
void write_compare_table(std::ostream& out, const CompareReport& r);

}  // namespace stepsim
