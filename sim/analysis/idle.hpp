#pragma once
// Where a step's GPU idle comes from (issue 13 item 4): each stretch in which no GPU op runs,
// charged to what the host did before the next one, the same way for a prediction (the
// simulated timeline, `stepsim simulate --idle`) and a measurement (a Kineto trace,
// `stepsim analyze --idle`, trace/idle_attribution.hpp), so the two can be held side by side.
//
// Shared rules (docs/analyze.md):
//  - Busy: the union of the step's GPU ops on every stream. Head: the step's start to its first
//    GPU op; tail: its last GPU op's end to the step's end; gaps: the stretches in between.
//    head + gaps + tail is the step's GPU idle.
//  - Gaps under `short_gap` (default 5 us) are launch gaps between back-to-back kernels (the
//    profiles' kernel_gap_us): counted, not attributed.
//  - A longer gap is `sync` when the host was blocked in a synchronising call at the moment the
//    GPU ran dry and returned inside the gap (it then issued the next op to an empty queue),
//    named by that wait; otherwise `host` (the host was still busy issuing), named by what the
//    host was running before the op that ends the gap. Its phase is that op's.
//  - Figures are means per step.
// A prediction names its causes by the program's labels (HostSync reasons, op names with the
// unit number folded to '#'); a trace by PyTorch's CPU operators. The totals per phase and kind
// compare directly; the names say which rule of the program stands for which operator.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "sim/exec/timeline.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

struct IdleCause {
  Phase phase = Phase::Forward;
  bool sync = false;   // the host waited in a synchronising call before this gap
  std::string ops;     // what the host ran: CPU operators ("outermost > innermost"), a wait, or a program op
  std::size_t count = 0;   // gaps over all analysed steps
  Time total;              // per step (mean)
  Time max;                // the longest single gap
};

// What the host ran during the step's head or tail, each charged with the part of it inside the
// stretch: in a trace, the outermost Python frames (or, without Python stacks, CPU operators) of
// the step's thread; in a prediction, the host's intervals (the training loop's own work,
// host.step_start_us / step_end_us, and the issue of ops). What none covers is kNoHostFrame.
struct HostFrame {
  std::string name;
  Time total;  // per step (mean)
};

inline constexpr std::string_view kNoHostFrame = "(no host frame)";

// Adds `t` to the frame named `name` (a new one at the end when there is none).
void add_frame_time(std::vector<HostFrame>& frames, std::string_view name, Time t);
// Largest first, ties by name (a listing that does not depend on the order frames were seen).
void sort_frames(std::vector<HostFrame>& frames);

struct IdleAttribution {
  int device = 0;
  std::size_t steps = 0;
  Time short_gap;                   // the threshold
  Time head, tail, gaps;            // per step (mean); gaps = short + attributed
  Time short_total;                 // per step (mean)
  std::size_t short_count = 0;      // over all steps
  Time sync_total;                  // per step (mean): the attributed gaps that followed a sync
  Time phase_total[4] = {};         // per step (mean), by Phase of the attributed gaps
  std::vector<IdleCause> causes;    // largest total first
  std::vector<HostFrame> head_frames, tail_frames;  // largest first
  Time idle() const { return head + tail + gaps; }
  // The cause named `ops` (the first, if several phases or kinds share the name); nullptr if none.
  const IdleCause* find(std::string_view ops) const {
    for (const IdleCause& c : causes)
      if (c.ops == ops) return &c;
    return nullptr;
  }
};

inline constexpr Time kShortIdleGap = Time::from_ns(5000);

// Accumulates steps' idle (totals over all steps) and turns it into an IdleAttribution (means).
class IdleAccumulator {
 public:
  // What a gap of at least short_gap is charged to.
  struct Cause {
    Phase phase = Phase::Forward;
    bool sync = false;
    std::string what;
  };

  explicit IdleAccumulator(Time short_gap) : short_gap_(short_gap) {}
  // One step [start, end] and its GPU ops (any type with `start` and `end`; sorted by start):
  // head, the gaps between the ops, tail. `cause(op, dry)` names a gap of at least short_gap
  // that `op` ends, the GPU having run dry at `dry`.
  template <class Op, class CauseOf>
  void step(Time start, Time end, const std::vector<const Op*>& ops, CauseOf cause) {
    if (ops.empty()) {
      head_ += end - start;
      return;
    }
    head_ += std::max(Time{}, ops.front()->start - start);
    Time busy_end = ops.front()->end;
    for (std::size_t k = 1; k < ops.size(); ++k) {
      const Op& op = *ops[k];
      if (op.start > busy_end) {
        const Time g = op.start - busy_end;
        if (g < short_gap_) {
          add_short(g);
        } else {
          Cause c = cause(op, busy_end);
          add(g, c.phase, c.sync, c.what);
        }
      }
      busy_end = std::max(busy_end, op.end);
    }
    tail_ += std::max(Time{}, end - busy_end);
  }
  // What the host ran during one step's head (or tail): frames and their time inside it.
  void add_frames(bool tail, const std::vector<HostFrame>& frames);
  IdleAttribution finish(std::size_t steps, int device) const;

 private:
  void add_short(Time g);
  void add(Time g, Phase phase, bool sync, const std::string& what);
  struct Key {
    int phase;
    bool sync;
    std::string what;
    auto operator<=>(const Key&) const = default;
  };
  Time short_gap_, head_, tail_, gaps_, short_total_, sync_total_, phase_total_[4] = {};
  std::size_t short_count_ = 0;
  std::vector<std::pair<Key, IdleCause>> causes_;  // small: a linear scan per gap
  std::vector<HostFrame> frames_[2];                // head, tail: totals over the steps
};

// The simulated timeline's idle, one step (Timeline::start to Timeline::end). A gap is `sync`
// when a blocked host interval (HostSync) spans the moment the GPU ran dry and ended no later
// than the next op's issue, named by its reason; otherwise it is named by the next op, its unit
// number folded to '#' ("fwd block.#.attn.core scores.max_clamp").
IdleAttribution attribute_idle(const Timeline& t, Time short_gap = kShortIdleGap);

nlohmann::json idle_to_json(const IdleAttribution& r);
// `top`: how many causes to list (the rest are summed in one line).
std::string idle_to_text(const IdleAttribution& r, std::size_t top);

}  // namespace stepsim
