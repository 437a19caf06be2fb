#pragma once
// The one check of a Program's well-formedness, run by every executor before it starts (the
// simulator in sim/exec/engine, the live lowering in live/lowering): a malformed Program is a
// strategy bug, so it throws std::logic_error naming the instruction.

#include "sim/program/program.hpp"

namespace stepsim {

// Checks, in program order:
//  - every stream, event, communicator and buffer an instruction names is declared;
//  - every GEMM of a kernel has positive m, n, k and batch;
//  - a buffer is allocated only when it is not live, and freed only when it is (a Free, plain
//    or record_stream'ed, ends its life at issue).
// What the executors still check as they run depends on time, not on the Program alone (the
// simulator's deadlock report, a host sync on an event not yet recorded).
void validate(const Program& p);

}  // namespace stepsim
