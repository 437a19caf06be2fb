// The names and work numbers of a workload's launches (form_launch_name, name_launches in
// workload.hpp).
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/workload/workload.hpp"

namespace stepsim {

namespace {

// Which of a layer's launches carry the layer's name alone: the first op of its forward and of
// its backward (which runs the modules in reverse), or every op of a one-op layer.
struct LayerFirsts {
  bool single = false;
  const Op* forward = nullptr;
  const Op* backward = nullptr;
};

LayerFirsts layer_firsts(const Layer& l) {
  LayerFirsts f;
  f.single = l.modules.size() == 1 && l.modules.front().forward.size() <= 1 && l.modules.front().backward.size() <= 1;
  for (const auto& m : l.modules)
    if (!m.forward.empty()) {
      f.forward = &m.forward.front();
      break;
    }
  for (auto it = l.modules.rbegin(); it != l.modules.rend(); ++it)
    if (!it->backward.empty()) {
      f.backward = &it->backward.front();
      break;
    }
  return f;
}

Text launch_name(TextPool& pool, const Layer& l, const LayerFirsts& firsts, const Module& m, const Op& op, LaunchPass pass) {
  if (pass == LaunchPass::Recompute) return pool.add({"recompute ", l.name, " ", op.name});
  const bool forward = pass == LaunchPass::Forward;
  const std::string_view prefix = forward ? "fwd " : "bwd ";
  const bool first = &op == (forward ? firsts.forward : firsts.backward);
  return firsts.single || first ? pool.add({prefix, l.name}) : pool.add({prefix, m.name, " ", op.name});
}

// What a kernel's price depends on besides the profile (KernelTimeCache::kernel_time).
bool same_work(const Op& a, const Op& b) { return a.cls == b.cls && a.kernels == b.kernels && a.work == b.work; }

struct WorkKey {
  const Op* op;
  bool operator==(const WorkKey& o) const { return same_work(*op, *o.op); }
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

// The ops of a layer in numbering order (its modules' forward and backward ops, then its recompute).
template <class F>
void for_each_op(Layer& l, F&& f) {
  for (Module& m : l.modules) {
    for (Op& op : m.forward) f(op);
    for (Op& op : m.backward) f(op);
  }
  for (Op& op : l.recompute) f(op);
}

std::size_t op_count(const Layer& l) {
  std::size_t n = l.recompute.size();
  for (const Module& m : l.modules) n += m.forward.size() + m.backward.size();
  return n;
}

// Op::work_id for every op of w: equal (cls, kernels, work), equal id. A model's blocks repeat
// one another, so an op is first compared with the op at its place in the layer before (when
// that layer has as many ops); only a new work goes through the table.
void number_works(Workload& w) {
  std::unordered_map<WorkKey, std::uint16_t, WorkKeyHash> ids;
  auto number = [&](Op& op) {
    auto [it, added] = ids.try_emplace(WorkKey{&op}, 0);
    if (added) it->second = ids.size() <= std::numeric_limits<std::uint16_t>::max() ? static_cast<std::uint16_t>(ids.size()) : 0;
    op.work_id = it->second;
  };
  std::vector<const Op*> previous, current;
  for (Layer& l : w.layers) {
    const bool aligned = previous.size() == op_count(l);
    current.clear();
    for_each_op(l, [&](Op& op) {
      const std::size_t k = current.size();
      if (aligned && previous[k]->work_id > 0 && same_work(*previous[k], op)) op.work_id = previous[k]->work_id;
      else number(op);
      current.push_back(&op);
    });
    std::swap(previous, current);
  }
}

}  // namespace

Text form_launch_name(TextPool& pool, const Layer& l, const Module& m, const Op& op, LaunchPass pass) {
  return launch_name(pool, l, layer_firsts(l), m, op, pass);
}

void name_launches(Workload& w) {
  number_works(w);
  auto pool = std::make_shared<TextPool>();
  for (Layer& l : w.layers) {
    const LayerFirsts firsts = layer_firsts(l);
    l.unit = pool->add(l.name);
    for (Module& m : l.modules) {
      for (Op& op : m.forward) op.launch_name = launch_name(*pool, l, firsts, m, op, LaunchPass::Forward);
      for (Op& op : m.backward) op.launch_name = launch_name(*pool, l, firsts, m, op, LaunchPass::Backward);
    }
    const Module none;
    for (Op& op : l.recompute) op.launch_name = launch_name(*pool, l, firsts, none, op, LaunchPass::Recompute);
  }
  for (Layer& l : w.layers) l.text = pool;
}

}  // namespace stepsim
