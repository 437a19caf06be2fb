#include "sim/program/validate.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>


namespace stepsim {

void ProgramChecker::check(std::size_t i) {
  i_ = i;
  std::visit([&](const auto& instr) { check(instr); }, p_.instructions[i]);
}

void ProgramChecker::stream(StreamId s) const {
  if (s.index() >= p_.streams.size())
    throw std::logic_error(fmt::format("instruction {}: stream {} was not declared", i_, s));
}

void ProgramChecker::event(EventId e) const {
  if (e.index() >= p_.event_count) throw std::logic_error(fmt::format("instruction {}: event {} was not declared", i_, e));
}

void ProgramChecker::comm(CommId c) const {
  if (c.index() >= p_.comms.size())
    throw std::logic_error(fmt::format("instruction {}: communicator {} was not declared", i_, c));
}

std::size_t ProgramChecker::buffer(BufferId b) const {
  if (b.index() >= p_.buffer_count) throw std::logic_error(fmt::format("instruction {}: buffer {} was not declared", i_, b));
  return b.index();
}

std::string ProgramChecker::buffer_name(BufferId b) const {
  return b.index() < p_.buffer_names.size() ? p_.buffer_names[b.index()] : fmt::format("{}", b);
}

void ProgramChecker::check(const Launch& l) {
  stream(l.stream);
  for (const GemmShape& g : l.kernel.work.gemms)
    if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0)
      throw std::logic_error(fmt::format("instruction {}: kernel '{}' has an empty GEMM {}x{}x{}", i_, l.kernel.name, g.m, g.n, g.k));
}

void ProgramChecker::check(const Collective& c) {
  stream(c.stream);
  comm(c.comm);
}

void ProgramChecker::check(const Record& r) {
  stream(r.stream);
  event(r.event);
}

void ProgramChecker::check(const Wait& w) {
  stream(w.stream);
  event(w.event);
}

void ProgramChecker::check(const HostSync& h) {
  if (const auto* e = std::get_if<EventId>(&h.target)) event(*e);
  else stream(std::get<StreamId>(h.target));
}

void ProgramChecker::check(const Alloc& a) {
  stream(a.stream);
  char& live = live_[buffer(a.buffer)];
  if (live) throw std::logic_error(fmt::format("instruction {}: buffer {} allocated twice", i_, a.buffer));
  live = 1;
}

void ProgramChecker::check(const Free& f) {
  char& live = live_[buffer(f.buffer)];
  if (!live) throw std::logic_error(fmt::format("instruction {}: free of buffer '{}' that is not live", i_, buffer_name(f.buffer)));
  for (StreamId s : f.record_streams) stream(s);
  live = 0;
}

void validate(const Program& p) {
  ProgramChecker checker(p);
  for (std::size_t i = 0; i < p.instructions.size(); ++i) checker.check(i);
}

}  // namespace stepsim
