// The names of a workload's launches (form_launch_name, name_launches in workload.hpp).
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>

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

namespace {

// What a kernel's price depends on besides the profile (KernelTimeCache::kernel_time).
struct WorkKey {
  const Op* op;
  bool operator==(const WorkKey& o) const {
    return op->cls == o.op->cls && op->kernels == o.op->kernels && op->work == o.op->work;
  }
};

struct WorkKeyHash {
  std::size_t operator()(const WorkKey& k) const {
    const KernelWork& w = k.op->work;
    std::uint64_t h = static_cast<std::uint64_t>(k.op->cls) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(k.op->kernels);
    auto mix = [&](std::uint64_t v) { h = (h ^ v) * 0x9E3779B97F4A7C15ull; };
    for (const GemmShape& g : w.gemms) mix(static_cast<std::uint64_t>(g.m ^ (g.n << 20) ^ (g.k << 40) ^ g.batch));
    mix(static_cast<std::uint64_t>(w.memory_bytes.count));
    mix(static_cast<std::uint64_t>(w.attention.seq ^ w.attention.head_dim));
    mix(static_cast<std::uint64_t>(w.fixed.ns ^ w.elements ^ w.tensor.count));
    return static_cast<std::size_t>(h);
  }
};

// Op::work_id for every op of w: equal (cls, kernels, work), equal id.
void number_works(Workload& w) {
  std::unordered_map<WorkKey, std::uint16_t, WorkKeyHash> ids;
  auto number = [&](Op& op) {
    auto [it, added] = ids.try_emplace(WorkKey{&op}, 0);
    if (added) it->second = ids.size() <= std::numeric_limits<std::uint16_t>::max() ? static_cast<std::uint16_t>(ids.size()) : 0;
    op.work_id = it->second;
  };
  for (Layer& l : w.layers) {
    for (Module& m : l.modules) {
      for (Op& op : m.forward) number(op);
      for (Op& op : m.backward) number(op);
    }
    for (Op& op : l.recompute) number(op);
  }
}

}  // namespace

void name_launches(Workload& w) {
  number_works(w);
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
