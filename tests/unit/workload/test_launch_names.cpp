// A workload names its launches once (name_launches): the names are the ones the strategies
// form at each launch (form_launch_name), and a program keeps its workload's names alive.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "sim/strategies/strategy.hpp"
#include "sim/workload/workload.hpp"
#include "tests/test_support.hpp"

using namespace stepsim;
using stepsim::test::experiment_from_doc;
using stepsim::test::llama2_7b_on_8_h100;

namespace {

// The workload as a hand-built one would be: no launch names, so the strategies form them.
Workload without_names(Workload w) {
  for (Layer& l : w.layers) {
    l.text.reset();
    l.unit = Text{};
    l.launch_names.clear();
  }
  return w;
}

struct LaunchNames {
  std::vector<std::string> names, units;
};

LaunchNames launch_names(const Program& p) {
  LaunchNames out;
  for (const Instruction& in : p.instructions)
    if (const auto* l = std::get_if<Launch>(&in)) {
      out.names.push_back(l->kernel.name.str());
      out.units.push_back(l->kernel.unit.str());
    }
  return out;
}

Experiment with_workload(Experiment e, Workload w) {
  e.workload = std::make_shared<const Workload>(std::move(w));
  return e;
}

}  // namespace

TEST_CASE("a workload's launch names are the names formed at each launch", "[workload][names]") {
  const std::vector<nlohmann::json> strategies = {
      {{"framework", "fsdp1"}}, {{"framework", "fsdp2"}},
      {{"framework", "ddp"}},   {{"framework", "zero"}, {"stage", 3}},
      {{"framework", "zero"}, {"stage", 2}}};
  for (const auto* checkpointing : {"full", "selective", "none"})
    for (const auto& strategy : strategies) {
      INFO(strategy.dump() << ", activation checkpointing " << checkpointing);
      nlohmann::json doc = {
          {"workload", {{"preset", "llama2-7b"}, {"seq_len", 1024}, {"micro_batch", 1}, {"activation_checkpointing", checkpointing}}},
          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", strategy},
          {"training", {{"grad_accum", 2}}}};
      const Experiment e = experiment_from_doc(doc);
      const Layer& block = e.workload->layers[1];
      REQUIRE(block.text);
      REQUIRE(block.unit == block.name);
      REQUIRE_FALSE(block.launch_name(block.modules.front(), block.modules.front().forward.front(), LaunchPass::Forward).empty());

      const LaunchNames named = launch_names(e.strategy->build(e));
      const LaunchNames formed = launch_names(e.strategy->build(with_workload(e, without_names(*e.workload))));
      REQUIRE(named.names.size() > 100);
      CHECK(named.names == formed.names);
      CHECK(named.units == formed.units);
      if (std::string(checkpointing) == "full")
        CHECK(std::count_if(named.names.begin(), named.names.end(), [](const std::string& n) { return n.starts_with("recompute block.0 "); }) > 0);
    }
}

TEST_CASE("a toy workload's launches keep their names", "[workload][names]") {
  Workload w = build_toy(std::vector<ToyLayerSpec>(3, ToyLayerSpec{Time{1000}, Time{2000}, 10, Bytes{}}), Dtype::BF16);
  const Layer& l = w.layers[2];
  REQUIRE(l.launch_name(l.modules.front(), l.modules.front().forward.front(), LaunchPass::Forward) == "fwd layer.2");
  REQUIRE(l.launch_name(l.modules.front(), l.modules.front().backward.front(), LaunchPass::Backward) == "bwd layer.2");
  // An op that is not of the list named gets no name (a copy of it, another pass).
  const Op copy = l.modules.front().forward.front();
  CHECK(l.launch_name(l.modules.front(), copy, LaunchPass::Forward).empty());
  CHECK(l.launch_name(l.modules.front(), l.modules.front().forward.front(), LaunchPass::Backward).empty());
  REQUIRE(w.layers[2].unit == "layer.2");
}

TEST_CASE("a program keeps its workload's names alive", "[workload][names]") {
  const Experiment base = llama2_7b_on_8_h100("fsdp2", "{}");
  // A pool of its own, held by nothing but this workload (the process's workload cache holds
  // the experiment's).
  Workload w = *base.workload;
  name_launches(w);
  std::weak_ptr<const TextPool> pool = w.layers[1].text;
  Program p;
  LaunchNames before;
  {
    const Experiment e = with_workload(base, std::move(w));
    p = e.strategy->build(e);
    before = launch_names(p);
  }
  CHECK_FALSE(pool.expired());  // the program holds it
  CHECK(launch_names(p).names == before.names);
  CHECK(std::count(before.names.begin(), before.names.end(), "fwd block.1") == 1);
  p = Program{};
  CHECK(pool.expired());
}

TEST_CASE("a workload numbers its ops' works: equal id, equal (class, kernels, work)", "[workload][names]") {
  for (const auto* checkpointing : {"full", "none"}) {
    INFO("activation checkpointing " << checkpointing);
    const Experiment e = experiment_from_doc(
        {{"workload", {{"preset", "llama2-7b"}, {"seq_len", 1024}, {"micro_batch", 1}, {"activation_checkpointing", checkpointing}}},
         {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
         {"strategy", {{"framework", "fsdp2"}}}});
    std::vector<const Op*> ops;
    for (const Layer& l : e.workload->layers) {
      for (const Module& m : l.modules) {
        for (const Op& op : m.forward) ops.push_back(&op);
        for (const Op& op : m.backward) ops.push_back(&op);
      }
      for (const Op& op : l.recompute) ops.push_back(&op);
    }
    std::size_t shared = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      REQUIRE(ops[i]->work_id > 0);
      for (std::size_t j = i + 1; j < ops.size(); ++j) {
        const bool same = ops[i]->cls == ops[j]->cls && ops[i]->kernels == ops[j]->kernels && ops[i]->work == ops[j]->work;
        if ((ops[i]->work_id == ops[j]->work_id) != same) FAIL("ops " << ops[i]->name << " and " << ops[j]->name);
        shared += same ? 1 : 0;
      }
    }
    CHECK(shared > ops.size());  // the blocks repeat their works
    // The program's kernels carry them.
    const Program p = e.strategy->build(e);
    std::size_t numbered = 0;
    for (const Instruction& in : p.instructions)
      if (const auto* l = std::get_if<Launch>(&in)) numbered += l->kernel.work_id > 0 ? 1 : 0;
    CHECK(numbered > ops.size() / 2);
  }
}

TEST_CASE("numbering a changed copy of a workload leaves the original's numbers alone", "[workload][names]") {
  const Experiment e = experiment_from_doc(
      {{"workload", {{"preset", "llama2-7b"}, {"seq_len", 1024}, {"micro_batch", 1}}},
       {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
       {"strategy", {{"framework", "fsdp2"}}}});
  const Workload& original = *e.workload;
  auto ids_of = [](const Workload& w) {
    std::vector<std::uint16_t> ids;
    for (const Layer& l : w.layers)
      for (const Module& m : l.modules) {
        for (const Op& op : m.forward) ids.push_back(op.work_id);
        for (const Op& op : m.backward) ids.push_back(op.work_id);
      }
    return ids;
  };
  const std::vector<std::uint16_t> before = ids_of(original);
  // The copy shares the original's op lists; without its embedding its works are met in another
  // order, so its numbers differ.
  Workload copy = original;
  copy.layers.erase(copy.layers.begin());
  name_launches(copy);
  CHECK(ids_of(original) == before);
  std::vector<const Op*> ops;
  for (const Layer& l : copy.layers)
    for (const Module& m : l.modules) {
      for (const Op& op : m.forward) ops.push_back(&op);
      for (const Op& op : m.backward) ops.push_back(&op);
    }
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::size_t j = i + 1; j < ops.size(); ++j) {
      const bool same = ops[i]->cls == ops[j]->cls && ops[i]->kernels == ops[j]->kernels && ops[i]->work == ops[j]->work;
      if ((ops[i]->work_id == ops[j]->work_id) != same) FAIL("ops " << ops[i]->name << " and " << ops[j]->name);
    }
  CHECK(ids_of(copy) != std::vector<std::uint16_t>(before.begin() + static_cast<std::ptrdiff_t>(before.size() - ids_of(copy).size()), before.end()));
}
