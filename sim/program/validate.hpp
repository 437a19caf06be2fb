#pragma once
// The one check of a Program's well-formedness, run by every executor (the live lowering in
// live/lowering before it lowers, the simulator in sim/exec/engine instruction by instruction as
// its host reaches them): a malformed Program is a strategy bug, so it throws std::logic_error
// naming the instruction.

#include <cstddef>
#include <string>
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
  // Instruction i; call for 0, 1, 2, ... in turn.
  void check(std::size_t i);

 private:
  void stream(StreamId s) const;
  void event(EventId e) const;
  void comm(CommId c) const;
  std::size_t buffer(BufferId b) const;
  std::string buffer_name(BufferId b) const;
  void check(const Launch& l);
  void check(const Collective& c);
  void check(const Record& r);
  void check(const Wait& w);
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
