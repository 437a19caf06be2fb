#pragma once
// Self-contained HTML reports (`--report F.html` on simulate, explain and sweep): one file,
// inline CSS and SVG, no network, no external scripts (the sweep table's sort is a few lines
// of inline script). Times in the page are milliseconds, memory GiB.

#include <functional>
#include <ostream>
#include <string>

#include "sim/analysis/critical_path.hpp"
#include "sim/analysis/run.hpp"
#include "sim/explore/scale.hpp"
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

// The weak-scaling curve (`stepsim scale --report`): step time and efficiency vs GPUs, the
// parts of the step per point and the collective algorithms.
void write_scale_html(std::ostream& out, const ScaleResult& r);

// Opens `file` for writing or throws InputError naming it.
void write_html_file(const std::string& file, const std::function<void(std::ostream&)>& body);

// The page's head (title, the reports' style) up to <body>.
void html_page_head(std::ostream& out, const std::string& title);

// The SVG pieces (also used by tests).
std::string timeline_svg(const Timeline& t, const Explanation* explanation = nullptr);
std::string memory_svg(const Timeline& t, const Metrics& m);
std::string pareto_svg(const SweepSummary& s);
// One axis: the objective's mean per value, and peak reserved memory (mean, max) per value
// with the summary's memory cap as a dashed line. At most 60 values are drawn.
std::string axis_svg(const SweepSummary& s, const AxisEffect& e);
// Step time and efficiency vs GPU count, side by side.
std::string scale_svg(const ScaleResult& r);

// Chart helpers: a "nice" axis maximum at or above v (1, 1.2, 1.5, 2, ... x a power of ten), a
// tick step for a span (1, 2 or 5 x a power of ten, about `target` ticks), a tick label ("1.2M",
// "450k", "0.25").
double chart_ceil(double v);
double chart_tick_step(double span, int target);
std::string chart_tick(double v);

}  // namespace stepsim
