#pragma once
// The one check of a Program's well-formedness, run by every executor (the live lowering in
// live/lowering before it lowers, the simulator in sim/exec/engine instruction by instruction as
// its host reaches them): a malformed Program is a strategy bug, so it throws std::logic_error
// naming the instruction.

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

#include "sim/program/program.hpp"

namespace stepsim {

// validate()'s checks, one instruction at a time in program order. The simulator checks each
// instruction just before it issues it, so that a kernel's GEMM list (a heap array per launch,
// cold in a program of 10^5 launches) is read once, not in a pass of its own; it throws the
// same error validate() would, for the first malformed instruction the host reaches.
class ProgramChecker {
 public:
  explicit ProgramChecker(const Program& p) : p_(p), live_(p.buffer_count, 0) {}
  // Instruction i; call for 0, 1, 2, ... in turn. Inline, with the throwing paths out of line:
  // the simulator calls it for every instruction.
  void check(std::size_t i) {
    i_ = i;
    std::visit([&](const auto& instr) { check(instr); }, p_.instructions[i]);
  }

 private:
  void stream(StreamId s) const {
    if (s.index() >= p_.streams.size()) [[unlikely]] undeclared("stream", s.index());
  }
  void event(EventId e) const {
    if (e.index() >= p_.event_count) [[unlikely]] undeclared("event", e.index());
  }
  void comm(CommId c) const {
    if (c.index() >= p_.comms.size()) [[unlikely]] undeclared("communicator", c.index());
  }
  std::size_t buffer(BufferId b) const {
    if (b.index() >= p_.buffer_count) [[unlikely]] undeclared("buffer", b.index());
    return b.index();
  }
  [[noreturn]] void undeclared(const char* what, std::size_t index) const;
  [[noreturn]] void uncounted(CommId c) const;
  [[noreturn]] void empty_gemm(const Launch& l, const GemmShape& g) const;
  std::string buffer_name(BufferId b) const;
  void check(const Launch& l) {
    stream(l.stream);
    for (const GemmShape& g : l.kernel.work->gemms)
      if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) [[unlikely]] empty_gemm(l, g);
  }
  void check(const Collective& c) {
    stream(c.stream);
    comm(c.comm);
    if (p_.comms[c.comm.index()].collectives == 0) [[unlikely]] uncounted(c.comm);
  }
  void check(const Record& r) {
    stream(r.stream);
    event(r.event);
  }
  void check(const Wait& w) {
    stream(w.stream);
    event(w.event);
  }
  void check(const HostSync& h);
  void check(const Alloc& a);
  void check(const Free& f);
  void check(const HostWork&) {}
  void check(const Mark&) {}

  const Program& p_;
  std::vector<char> live_;  // per buffer: allocated and not yet freed, in program order
  std::size_t i_ = 0;
};

// Checks, in program order:
//  - every stream, event, communicator and buffer an instruction names is declared;
//  - every GEMM of a kernel has positive m, n, k and batch;
//  - a buffer is allocated only when it is not live, and freed only when it is (a Free, plain
//    or record_stream'ed, ends its life at issue).
// What the executors still check as they run depends on time, not on the Program alone (the
// simulator's deadlock report, a host sync on an event not yet recorded).
void validate(const Program& p);

}  // namespace stepsim
