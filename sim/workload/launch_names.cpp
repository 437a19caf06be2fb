// The names and work numbers of a workload's launches (form_launch_name, name_launches in
// workload.hpp).
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
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

// Op::work_id for every op of w: equal (cls, kernels, work), equal id, numbered in the order the
// works first appear (layers in order; a layer's modules' forward and backward ops, then its
// recompute). A list the blocks share is numbered once: its ops' numbers are those of their
// works, the same in every block that holds it. A list numbered before (by another workload
// that shares it: a copy of this one) keeps its numbers when they are this workload's too, and
// is otherwise made this holder's own before it is numbered, so no other workload's numbers
// change under it.
void number_works(Workload& w) {
  std::unordered_map<WorkKey, std::uint16_t, WorkKeyHash> ids;
  std::unordered_set<const Op*> numbered;  // the first op of every list numbered so far
  auto id_of = [&](const Op& op) {
    auto [it, added] = ids.try_emplace(WorkKey{&op}, 0);
    if (added) it->second = ids.size() <= std::numeric_limits<std::uint16_t>::max() ? static_cast<std::uint16_t>(ids.size()) : 0;
    return it->second;
  };
  auto number_list = [&](OpList& list) {
    if (list.empty() || numbered.contains(list.data())) return;
    const OpList& read = list;
    bool fresh = true, same = true;
    for (const Op& op : read) {
      fresh = fresh && op.work_id == 0;
      same = same && op.work_id == id_of(op);
    }
    if (same) {
      numbered.insert(list.data());
      return;
    }
    // Never numbered: every holder is a copy made before (this workload's blocks), so all take
    // the numbers; numbered otherwise: this holder's own list.
    std::vector<Op>& ops = fresh ? list.every_holders() : list.mut();
    for (Op& op : ops) op.work_id = id_of(op);
    numbered.insert(list.data());
  };
  for (Layer& l : w.layers) {
    for (Module& m : l.modules) {
      number_list(m.forward);
      number_list(m.backward);
    }
    number_list(l.recompute);
  }
}

}  // namespace

Text form_launch_name(TextPool& pool, const Layer& l, const Module& m, const Op& op, LaunchPass pass) {
  return launch_name(pool, l, layer_firsts(l), m, op, pass);
}

namespace {

// The launches of `l`: its modules' forward and backward ops and its recompute.
std::size_t launch_count(const Layer& l) {
  std::size_t n = l.recompute.size();
  for (const Module& m : l.modules) n += m.forward.size() + m.backward.size();
  return n;
}

}  // namespace

bool adopt_launch_names(Workload& w, Workload& old) {
  if (old.layers.size() != w.layers.size()) return false;
  for (std::size_t k = 0; k < w.layers.size(); ++k) {
    const Layer& o = old.layers[k];
    if (o.launch_names.size() != launch_count(w.layers[k]) || !o.text || o.text != old.layers.front().text) return false;
  }
  number_works(w);
  for (std::size_t k = 0; k < w.layers.size(); ++k) {
    Layer &l = w.layers[k], &o = old.layers[k];
    std::uint32_t at = 0;
    for (Module& m : l.modules) {
      m.first_launch = at;
      at += static_cast<std::uint32_t>(m.forward.size() + m.backward.size());
    }
    l.launch_names = std::move(o.launch_names);
    l.unit = o.unit;
    l.text = o.text;
  }
  return true;
}

void name_launches(Workload& w) {
  number_works(w);
  auto pool = std::make_shared<TextPool>();
  for (Layer& l : w.layers) {
    const LayerFirsts firsts = layer_firsts(l);
    l.unit = pool->add(l.name);
    l.launch_names.clear();
    l.launch_names.reserve(launch_count(l));
    for (Module& m : l.modules) {
      m.first_launch = static_cast<std::uint32_t>(l.launch_names.size());
      for (const Op& op : std::as_const(m.forward)) l.launch_names.push_back(launch_name(*pool, l, firsts, m, op, LaunchPass::Forward));
      for (const Op& op : std::as_const(m.backward)) l.launch_names.push_back(launch_name(*pool, l, firsts, m, op, LaunchPass::Backward));
    }
    const Module none;
    for (const Op& op : std::as_const(l.recompute)) l.launch_names.push_back(launch_name(*pool, l, firsts, none, op, LaunchPass::Recompute));
  }
  for (Layer& l : w.layers) l.text = pool;
}

}  // namespace stepsim
