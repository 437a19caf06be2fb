// The names of a workload's launches (form_launch_name, name_launches in workload.hpp).
#include <memory>

#include "sim/workload/workload.hpp"

namespace stepsim {

namespace {

bool single_op(const Layer& l) {
  return l.modules.size() == 1 && l.modules.front().forward.size() <= 1 && l.modules.front().backward.size() <= 1;
}

// The first op of a layer's forward (its backward runs the modules in reverse).
bool first_op(const Layer& l, const Op& op, bool forward) {
  if (forward) {
    for (const auto& m : l.modules)
      if (!m.forward.empty()) return &m.forward.front() == &op;
  } else {
    for (auto it = l.modules.rbegin(); it != l.modules.rend(); ++it)
      if (!it->backward.empty()) return &it->backward.front() == &op;
  }
  return false;
}

}  // namespace

Text form_launch_name(TextPool& pool, const Layer& l, const Module& m, const Op& op, LaunchPass pass) {
  auto add = [&](std::initializer_list<std::string_view> parts) {
    return pool.add(std::span<const std::string_view>(parts.begin(), parts.size()));
  };
  if (pass == LaunchPass::Recompute) return add({"recompute ", l.name, " ", op.name});
  const bool forward = pass == LaunchPass::Forward;
  const std::string_view prefix = forward ? "fwd " : "bwd ";
  return single_op(l) || first_op(l, op, forward) ? add({prefix, l.name}) : add({prefix, m.name, " ", op.name});
}

void name_launches(Workload& w) {
  auto pool = std::make_shared<TextPool>();
  for (Layer& l : w.layers) {
    l.unit = pool->add(l.name);
    for (Module& m : l.modules) {
      for (Op& op : m.forward) op.launch_name = form_launch_name(*pool, l, m, op, LaunchPass::Forward);
      for (Op& op : m.backward) op.launch_name = form_launch_name(*pool, l, m, op, LaunchPass::Backward);
    }
    const Module none;
    for (Op& op : l.recompute) op.launch_name = form_launch_name(*pool, l, none, op, LaunchPass::Recompute);
  }
  for (Layer& l : w.layers) l.text = pool;
}

}  // namespace stepsim
