#include "sim/analysis/class_breakdown.hpp"

#include <fmt/format.h>

namespace stepsim {

std::int64_t ClassBreakdown::kernels() const {
  std::int64_t n = 0;
  for (const auto& r : rows)
    if (r.cls != "communication" && r.cls != "idle") n += r.kernels;
  return n;
}

ClassBreakdown empty_breakdown() {
  ClassBreakdown b;
  for (int i = 0; i < kKernelClassCount; ++i) b.rows.push_back(ClassRow{to_string(static_cast<KernelClass>(i)), 0, {}});
  b.rows.push_back(ClassRow{"communication", 0, {}});
  b.rows.push_back(ClassRow{"idle", 0, {}});
  return b;
}

ClassBreakdown class_breakdown(const Timeline& t, Time comm_time, Time idle) {
  ClassBreakdown b = empty_breakdown();
  for (const auto& op : t.ops) {
    if (op.kind == TimelineOp::Kind::Kernel) {
      ClassRow& r = b.rows[static_cast<std::size_t>(op.cls)];
      r.kernels += op.kernels;
      r.time += op.duration();
    } else if (op.kind == TimelineOp::Kind::Collective) {
      b.communication().kernels += 1;
    }
  }
  b.communication().time = comm_time;
  b.idle().time = idle;
  return b;
}

nlohmann::json breakdown_to_json(const ClassBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& r : b.rows) j[r.cls] = {{"kernels", r.kernels}, {"time_ns", r.time.ns}};
  return j;
}

std::string breakdown_to_text(const ClassBreakdown& b, Time step) {
  std::string out = fmt::format("  {:<22}{:>12}{:>9}{:>10}\n", "by class", "time ms", "% step", "kernels");
  for (const auto& r : b.rows) {
    if (r.kernels == 0 && r.time.ns == 0) continue;
    double pct = step.ns > 0 ? 100.0 * static_cast<double>(r.time.ns) / static_cast<double>(step.ns) : 0.0;
    out += fmt::format("  {:<22}{:>12.3f}{:>8.1f}%{:>10}\n", r.cls, r.time.ms(), pct,
                       r.cls == "idle" ? std::string{} : std::to_string(r.kernels));
  }
  out += fmt::format("  {:<22}{:>12}{:>9}{:>10}\n", "kernels per step", "", "", b.kernels());
  return out;
}

}  // namespace stepsim
