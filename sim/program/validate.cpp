#include "sim/program/validate.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace stepsim {

void ProgramChecker::undeclared(const char* what, std::size_t index) const {
  throw std::logic_error(fmt::format("instruction {}: {} {} was not declared", i_, what, index));
}

void ProgramChecker::uncounted(CommId c) const {
  throw std::logic_error(fmt::format("instruction {}: a collective on communicator {} ('{}'), which counts no collectives "
                                     "(CommDecl::collectives; ProgramBuilder::collective counts them)",
                                     i_, c, p_.comms[c.index()].name));
}

void ProgramChecker::empty_gemm(const Launch& l, const GemmShape& g) const {
  throw std::logic_error(fmt::format("instruction {}: kernel '{}' has an empty GEMM {}x{}x{}", i_, l.kernel.name, g.m, g.n, g.k));
}

std::string ProgramChecker::buffer_name(BufferId b) const {
  return b.index() < p_.buffer_names.size() ? p_.buffer_names[b.index()].str() : fmt::format("{}", b);
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
