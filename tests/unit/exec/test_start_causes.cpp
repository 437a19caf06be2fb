// The simulator's record of why each op started (Timeline::op_why, Timeline::host_why) agrees
// with the timeline on every op of every shipped example. The check recomputes each op's
// constraints from the program and the timeline alone (not from the engine's state):
//   issue      the end of the last host interval at or before its instruction (0 if none);
//   stream     when everything before it on its stream completed: Kernel/Collective at its
//              end, a Record at max(its issue, the stream), a Wait at max(its issue, the
//              stream, the completion of the Record it waits for);
//   comm FIFO  the end of the previous collective of its communicator.
// and requires: start == the latest of them (nothing would let it start later or earlier);
// the recorded cause names an op / host interval that ends exactly at the start; and the
// recorded cause is the preferred one among those that tie (event wait, then communicator
// FIFO, then stream order, then host issue).
#include <filesystem>
#include <limits>
#include <map>

#include <catch2/catch.hpp>

#include "sim/analysis/critical_path.hpp"
#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

// The index a record names, whichever kind it is (-1: none), to compare with the expectation.
long on_index(const StartRecord& w) {
  if (auto o = w.op()) return static_cast<long>(o->index());
  if (auto h = w.host()) return static_cast<long>(h->index());
  return -1;
}

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();

std::vector<std::string> shipped_examples() {
  std::vector<std::string> files;
  const std::string root = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples";
  for (const char* dir : {"", "/seed", "/validation"})
    for (const auto& f : std::filesystem::directory_iterator(root + dir))
      if (f.path().extension() == ".json") files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Completion of the stream so far: when, and whether that time was reached on the GPU (an op
// ended, or a Record reached on the GPU was waited for) rather than by a Record/Wait's issue.
struct StreamState {
  std::int64_t ready = kNever;
  bool ready_on_gpu = false;
  std::int64_t event_ready = kNever;  // latest GPU-reached Record a Wait since the last op waited for
  long last_op = -1;                  // Timeline::ops index
};
struct RecordDone {
  std::int64_t time = kNever;
  bool on_gpu = false;
};

void check_example(const std::string& file) {
  INFO(file);
  Experiment e = load_experiment(file);
  SimulationResult r = run_experiment(e);
  const Program& p = r.program;
  const Timeline& t = r.timeline;

  std::vector<long> op_of(p.instructions.size(), -1);
  for (std::size_t k = 0; k < t.ops.size(); ++k) op_of[t.ops[k].instruction] = static_cast<long>(k);
  std::vector<StreamState> streams(p.streams.size());
  std::vector<std::vector<RecordDone>> records(p.event_count);
  std::vector<long> last_on_comm(p.comms.size(), -1);
  std::size_t host_cursor = 0;  // host intervals with instruction <= i are [0, host_cursor)
  std::size_t checked = 0;
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    while (host_cursor < t.host.size() && t.host[host_cursor].instruction <= i) ++host_cursor;
    const std::int64_t issue = host_cursor > 0 ? t.host[host_cursor - 1].end.ns : 0;
    const Instruction& ins = p.instructions[i];
    if (const auto* rec = std::get_if<Record>(&ins)) {
      auto& s = streams[rec->stream.index()];
      std::int64_t done = std::max(issue, s.ready);
      bool on_gpu = s.ready == done && s.ready_on_gpu;
      records[rec->event.index()].push_back(RecordDone{done, on_gpu});
      s.ready = done;
      s.ready_on_gpu = on_gpu;
      continue;
    }
    if (const auto* w = std::get_if<Wait>(&ins)) {
      auto& s = streams[w->stream.index()];
      const auto& recs = records[w->event.index()];
      // Every shipped program records an event before waiting on it (a Wait before any
      // Record waits for a later one, which this one-pass check does not follow).
      REQUIRE_FALSE(recs.empty());
      const RecordDone& rd = recs.back();
      std::int64_t done = std::max({issue, s.ready, rd.time});
      bool on_gpu = (s.ready == done && s.ready_on_gpu) || (rd.time == done && rd.on_gpu);
      if (rd.on_gpu && rd.time == done) s.event_ready = std::max(s.event_ready, done);
      s.ready = done;
      s.ready_on_gpu = on_gpu;
      continue;
    }
    const long k = op_of[i];
    if (k < 0) continue;
    const TimelineOp& op = t.ops[static_cast<std::size_t>(k)];
    INFO("op " << k << " '" << op.name << "' at instruction " << i);
    REQUIRE(t.op_why.size() == t.ops.size());
    const StartRecord& why = t.op_why[static_cast<std::size_t>(k)];
    auto& s = streams[op.stream.index()];
    long comm_prev = op.kind == TimelineOp::Kind::Collective ? last_on_comm[op.comm.value().index()] : -1;
    std::int64_t comm_ready = comm_prev >= 0 ? t.ops[static_cast<std::size_t>(comm_prev)].end.ns : kNever;
    // The start is the latest constraint: no constraint is later, and one attains it.
    CHECK(op.issue.ns == issue);
    CHECK(op.start.ns == std::max({issue, s.ready, comm_ready}));
    // The preferred binding constraint.
    StartCause want = StartCause::None;
    long want_on = -1;
    if (s.event_ready == op.start.ns) {
      want = StartCause::Event;
    } else if (comm_ready == op.start.ns) {
      want = StartCause::CommFifo;
      want_on = comm_prev;
    } else if (s.ready == op.start.ns && s.ready_on_gpu) {
      want = StartCause::Stream;
      want_on = s.last_op;
    } else if (host_cursor > 0) {
      want = StartCause::Issue;
      want_on = static_cast<long>(host_cursor - 1);
    }
    CHECK(to_string(why.cause()) == to_string(want));
    if (want != StartCause::Event) CHECK(on_index(why) == want_on);
    // What it names ends exactly at its start: a host interval for an issue, an earlier op otherwise.
    if (why.cause() == StartCause::Issue) {
      REQUIRE(why.host());
      CHECK(!why.op());
      CHECK(t.host.at(why.host()->index()).end == op.start);
    } else if (why.cause() != StartCause::None) {
      REQUIRE(why.op());
      CHECK(!why.host());
      REQUIRE(why.op()->index() < k);
      CHECK(t.ops.at(why.op()->index()).end == op.start);
    }
    s.ready = op.end.ns;
    s.ready_on_gpu = true;
    s.event_ready = kNever;
    s.last_op = k;
    if (op.kind == TimelineOp::Kind::Collective) last_on_comm[op.comm.value().index()] = k;
    ++checked;
  }
  CHECK(checked == t.ops.size());

  // Host intervals: each starts where the one before it ended; a blocked one ends when the op
  // it names ends.
  for (std::size_t h = 0; h < t.host.size(); ++h) {
    const HostInterval& hi = t.host[h];
    INFO("host interval " << h << " '" << host_label(t, hi) << "'");
    if (hi.kind == HostInterval::Kind::Blocked) {
      REQUIRE(t.host_why.at(h).cause() == StartCause::HostSync);
      REQUIRE(t.host_why.at(h).op());
      CHECK(t.ops.at(t.host_why.at(h).op()->index()).end == hi.end);
    } else if (h == 0) {
      CHECK(t.host_why.at(h).cause() == StartCause::None);
    } else {
      CHECK(hi.start == t.host[h - 1].end);
      CHECK(t.host_why.at(h).cause() == StartCause::HostOrder);
      REQUIRE(t.host_why.at(h).host());
      CHECK(t.host_why.at(h).host()->index() == h - 1);
    }
  }

  // Walked back from the last op, the record reaches time zero with no gap: the durations on
  // the critical path add up to the step time.
  Explanation x = explain_timeline(p, t);
  REQUIRE_FALSE(x.path.empty());
  CHECK(x.path.front().start.ns == 0);
  CHECK(x.longest_chain == x.step_time);
}

}  // namespace

TEST_CASE("On every shipped example the start record agrees with the timeline: each op starts at the latest of its "
          "constraints and the recorded cause is the preferred one of those that end at its start",
          "[engine][explain]") {
  auto files = shipped_examples();
  // configs/examples: 8 model examples, 9 seed cases, 8 validation cases.
  REQUIRE(files.size() >= 25);
  for (const auto& f : files) check_example(f);
}

TEST_CASE("A kernel behind a Wait names the op the matching Record followed, as an event wait", "[engine][explain]") {
  // side: b (1 ms) then Wait(ev); default: a (5 ms), Record(ev). a and b share the GPU from 0:
  // b's 1 ms of work at half rate ends at 2 ms, a then has 4 ms left at full rate and ends at
  // 6 ms. c on side starts at 6 ms when a ends: its cause is the event, naming a (op 0), not
  // b (stream order, ended at 2 ms).
  ProgramBuilder b;
  auto side = b.stream("side");
  KernelWork five, one;
  five.fixed = Time::from_ms(5);
  one.fixed = Time::from_ms(1);
  b.launch(b.default_stream(), KernelSpec{"a", KernelClass::Compute, five, ""});
  auto ev = b.record(b.default_stream());
  b.launch(side, KernelSpec{"b", KernelClass::Compute, one, ""});
  b.wait(side, ev);
  b.launch(side, KernelSpec{"c", KernelClass::Compute, one, ""});
  Program p = b.take();
  Timeline t = simulate_program(p, HardwareProfile{});
  REQUIRE(t.ops.size() == 3);
  CHECK(t.ops[1].end.ns == 2'000'000);
  CHECK(t.ops[2].start.ns == 6'000'000);
  CHECK(t.op_why[2].cause() == StartCause::Event);
  REQUIRE(t.op_why[2].op());
  CHECK(t.op_why[2].op()->index() == 0);
  // b starts at time zero, issued before any host interval (the profile has no host cost):
  // nothing constrains it.
  CHECK(t.op_why[1].cause() == StartCause::None);
}
