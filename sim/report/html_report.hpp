#pragma once
// Self-contained HTML reports (`--report F.html` on simulate, explain and sweep): one file,
// inline CSS and SVG, no network, no external scripts (the sweep table's sort is a few lines
// of inline script). Times in the page are milliseconds, memory GiB.

#include <functional>
#include <ostream>
#include <string>

#include "sim/analysis/critical_path.hpp"
#include "sim/analysis/run.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

std::string html_escape(std::string_view s);

// Timeline per stream (collectives labelled by unit), memory curve with the peak and its
// breakdown, the metric table; with `explanation` also the critical path (outlined in the
// timeline), exposure per collective and the sensitivities.
void write_simulation_html(std::ostream& out, const Experiment& e, const SimulationResult& r,
                           const Explanation* explanation = nullptr);

// The sweep: counts, the objective and why, best configurations, Pareto plot (objective vs
// peak reserved memory), a chart per axis, knob effects, and a sortable table of the points
// the summary kept.
void write_sweep_html(std::ostream& out, const std::string& title, const SweepSummary& s);

// Opens `file` for writing or throws InputError naming it.
void write_html_file(const std::string& file, const std::function<void(std::ostream&)>& body);

// The SVG pieces (also used by tests).
std::string timeline_svg(const Timeline& t, const Explanation* explanation = nullptr);
std::string memory_svg(const Timeline& t, const Metrics& m);
std::string pareto_svg(const SweepSummary& s);
// One axis: the objective's mean per value, and peak reserved memory (mean, max) per value
// with the summary's memory cap as a dashed line. At most 60 values are drawn.
std::string axis_svg(const SweepSummary& s, const AxisEffect& e);

}  // namespace stepsim
