#include "sim/analysis/step_parts.hpp"

#include <algorithm>
#include <set>
#include <vector>

namespace stepsim {

Time StepParts::total() const {
  Time sum = compute + optimizer + rank_wait + idle;
  for (const auto& [label, t] : exposed) sum += t;
  return sum;
}

std::string collective_label(const Timeline& t, const TimelineOp& op) {
  return to_string(op.collective) + " on " + t.comms.at(op.comm.value().index()).name;
}

namespace {

// A boundary of one activity: at `at`, `delta` (+1 start, -1 end) of `what` for op `op`.
enum class Activity : std::uint8_t { Compute, Optimizer, Wait, Transfer };
struct Boundary {
  Time at;
  int delta;
  Activity what;
  std::size_t op;
};

}  // namespace

StepParts step_parts(const Timeline& t) {
  std::vector<Boundary> b;
  b.reserve(4 * t.ops.size());
  // Clipped to the step window, as overlap_metrics clips; empty intervals add nothing.
  auto add = [&](Time s, Time e, Activity what, std::size_t i) {
    s = std::max(s, t.start);
    e = std::min(e, t.end);
    if (e <= s) return;
    b.push_back({s, +1, what, i});
    b.push_back({e, -1, what, i});
  };
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimelineOp& op = t.ops[i];
    if (op.kind == TimelineOp::Kind::Marker || op.memcpy()) continue;
    if (op.kind == TimelineOp::Kind::Kernel) {
      add(op.start, op.end, op.phase == Phase::Optimizer ? Activity::Optimizer : Activity::Compute, i);
      continue;
    }
    const Time wait = i < t.rank_wait.size() ? t.rank_wait[i] : Time::zero();
    const Time ready = std::min(op.start + wait, op.end);
    add(op.start, ready, Activity::Wait, i);
    add(ready, op.end, Activity::Transfer, i);
  }
  std::sort(b.begin(), b.end(), [](const Boundary& x, const Boundary& y) { return x.at < y.at; });

  // One label per collective op, counted in `exposed_by_op` and named at the end.
  std::vector<Time> exposed_by_op(t.ops.size());
  StepParts p;
  int compute = 0, optimizer = 0, waiting = 0;
  std::set<std::size_t> transferring;  // op indices: issue order
  Time now = t.start;
  auto charge = [&](Time until) {
    const Time d = until - now;
    if (d.ns <= 0) return;
    if (compute > 0) p.compute += d;
    else if (optimizer > 0) p.optimizer += d;
    else if (!transferring.empty()) exposed_by_op[*transferring.begin()] += d;
    else if (waiting > 0) p.rank_wait += d;
    else p.idle += d;
  };
  for (const Boundary& x : b) {
    charge(x.at);
    now = std::max(now, x.at);
    switch (x.what) {
      case Activity::Compute: compute += x.delta; break;
      case Activity::Optimizer: optimizer += x.delta; break;
      case Activity::Wait: waiting += x.delta; break;
      case Activity::Transfer:
        if (x.delta > 0) transferring.insert(x.op);
        else transferring.erase(x.op);
        break;
    }
  }
  charge(t.end);
  for (std::size_t i = 0; i < t.ops.size(); ++i)
    if (exposed_by_op[i].ns > 0) p.exposed[collective_label(t, t.ops[i])] += exposed_by_op[i];
  return p;
}

}  // namespace stepsim
