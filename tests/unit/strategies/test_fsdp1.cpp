// FSDP1 strategy: units and padding, config errors, schedule, traffic (C6.5) and memory (M5.1,
// M5.2) -- framework-semantics.md section 1 and script S8.1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/core/error.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/fsdp1_units.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using nlohmann::json;

namespace {

Experiment load(const json& doc) { return test::experiment_from_doc(doc); }

// A toy model on the textbook machine (free host, free memory-bound kernels, 1 GB/s links).
json toy_doc(const json& strategy, int nodes = 1, int gpus = 8, const json& training = json::object(),
             std::int64_t params = 1'000'003) {
  json t = {{"optimizer", "adamw"}};
  t.update(training);
  return {{"workload", {{"toy", {{"layers", 4}, {"forward_ms", 1}, {"backward_ms", 2}, {"params_per_layer", params},
                                 {"activation_bytes_per_layer", 1'000'000}}},
                        {"dtype", "bf16"}}},
          {"cluster", {{"profile", "configs/hardware/toy-ideal.json"}, {"nodes", nodes}, {"gpus_per_node", gpus}}},
          {"strategy", strategy},
          {"training", t}};
}

// A small Llama whose root unit holds the embedding, final norm and head; FSDP's own schedule,
// without the torchtitan loop's clip_grad_norm_ (its all-reduce is not FSDP's).
json small_llama_doc(const json& strategy, int nodes = 1, int gpus = 8, const json& training = json::object()) {
  json t = {{"optimizer", "adamw"}, {"clip_grad_norm", nullptr}};
  t.update(training);
  return {{"workload", {{"model", {{"family", "llama"}, {"hidden", 256}, {"layers", 3}, {"heads", 4}, {"ffn", 688},
                                   {"vocab", 1003}}},
                        {"seq_len", 128}, {"micro_batch", 1}, {"dtype", "bf16"}}},
          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", nodes}, {"gpus_per_node", gpus}}},
          {"strategy", strategy},
          {"training", t}};
}

json fsdp1(json extra = json::object()) {
  json s = {{"framework", "fsdp1"}, {"wrap", "block"}, {"mixed_precision", {{"param", "bf16"}}}};
  s.update(extra);
  return s;
}

std::vector<const TimelineOp*> collectives(const Timeline& t) {
  std::vector<const TimelineOp*> out;
  for (const auto& op : t.ops)
    if (op.kind == TimelineOp::Kind::Collective) out.push_back(&op);
  return out;
}

// Bytes per (unit, collective kind, communicator size) over the step.
std::map<std::string, std::int64_t> traffic(const Timeline& t) {
  std::map<std::string, std::int64_t> out;
  for (const auto* op : collectives(t))
    out[op->unit + " " + short_name(op->collective) + " " + std::to_string(t.comms[op->comm.value().index()].ranks)] += op->bytes.count;
  return out;
}

Bytes live_at(const Timeline& t, Time when, MemCategory c) {
  Bytes b{};
  for (const auto& s : t.memory)
    if (s.time <= when) b = s.by_category[static_cast<int>(c)];
  return b;
}

Time mark_time(const Timeline& t, const std::string& name) {
  for (const auto& m : t.marks)
    if (m.name == name) return m.time;
  FAIL("no mark " << name);
  return Time{};
}

}  // namespace

TEST_CASE("F1.2: without use_orig_params a unit's flat parameter is its numel, sharded into ceil(N/W) pieces",
          "[fsdp1]") {
  // 1,000,003 params over 8 ranks: shard ceil(1,000,003 / 8) = 125,001, padded 1,000,008.
  Workload w = build_toy(std::vector<ToyLayerSpec>(2, ToyLayerSpec{Time{}, Time{}, 1'000'003, Bytes{}}), Dtype::BF16);
  Fsdp1Config c;
  auto units = make_fsdp1_units(w, c, 8, Dtype::FP32);
  REQUIRE(units.size() == 3);
  CHECK_FALSE(units[0].has_handle());  // the toy root holds no parameters
  CHECK(units[1].name == "layer.0");
  CHECK(units[1].flat_numel == 1'000'003);
  CHECK(units[1].shard_numel == 125'001);
  CHECK(units[1].padded_numel == 1'000'008);
}

TEST_CASE("F1.2: with use_orig_params each parameter starts on 16 bytes and the total is a multiple of W", "[fsdp1]") {
  // fp32 flat parameter: alignment 16 / 4 = 4 elements. Params 3 and 5: 3, pad 1 -> 4, +5 = 9,
  // padded to a multiple of 8 -> 16.
  CHECK(fsdp1_flat_numel({3, 5}, true, 8, Dtype::FP32) == 16);
  CHECK(fsdp1_flat_numel({3, 5}, false, 8, Dtype::FP32) == 8);
}

TEST_CASE("F1.21: the gradient pre-divide factor is the largest power of two f with W/f > f, post = W/f", "[fsdp1]") {
  CHECK(fsdp1_predivide_factor(8) == 4);    // semantics example: pre 4, post 2
  CHECK(fsdp1_predivide_factor(16) == 4);   // 16/4 = 4 is not > 4
  CHECK(fsdp1_predivide_factor(32) == 8);
  CHECK(fsdp1_predivide_factor(1) == 1);
}

TEST_CASE("wrap block makes one unit per block and leaves embedding, norm and head to the root", "[fsdp1]") {
  Experiment e = load(small_llama_doc(fsdp1()));
  const Workload& w = *e.workload;
  auto units = make_fsdp1_units(w, Fsdp1Config{}, 8, Dtype::FP32);
  REQUIRE(units.size() == 4);
  CHECK(std::vector<std::size_t>(units[0].layers.begin(), units[0].layers.end()) == std::vector<std::size_t>{0, 4, 5});  // embed, norm, head
  CHECK(units[2].name == "block.1");
  Fsdp1Config size;
  size.wrap = Fsdp1Wrap::Size;
  size.min_num_params = w.layers[1].numel();  // blocks qualify; the embedding (1003 x 256) does not
  CHECK(make_fsdp1_units(w, size, 8, Dtype::FP32).size() == 4);
  Fsdp1Config none;
  none.wrap = Fsdp1Wrap::None;
  CHECK(make_fsdp1_units(w, none, 8, Dtype::FP32).size() == 1);
}

TEST_CASE("fsdp1 config errors name the JSON path of the bad key", "[fsdp1][config]") {
  auto message = [](const json& s) {
    try {
      load(toy_doc(s));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message({{"framework", "fsdp1"}, {"sharding", "zero3"}}).find("/strategy/sharding") != std::string::npos);
  CHECK(message({{"framework", "fsdp1"}, {"backward_prefetch", "early"}}).find("/strategy/backward_prefetch") !=
        std::string::npos);
  CHECK(message({{"framework", "fsdp1"}, {"wrap", "block"}, {"min_num_params", 10}}).find("/strategy/min_num_params") !=
        std::string::npos);
  CHECK(message({{"framework", "fsdp1"}, {"mixed_precision", {{"parm", "bf16"}}}}).find("/strategy/mixed_precision") !=
        std::string::npos);
  CHECK(message({{"framework", "fsdp1"}, {"limit_all_gathers", "yes"}}).find("/strategy/limit_all_gathers") !=
        std::string::npos);
  CHECK(message({{"framework", "fsdp1"}, {"bucket_cap_mb", 25}}).find("bucket_cap_mb") != std::string::npos);
}

TEST_CASE("defaults are PyTorch's; world size 1 becomes NO_SHARD; reduce dtype follows param dtype", "[fsdp1][config]") {
  Experiment e = load(toy_doc({{"framework", "fsdp1"}}));
  json c = e.strategy->effective_config();
  CHECK(c["sharding"] == "full_shard");
  CHECK(c["backward_prefetch"] == "backward_pre");
  CHECK(c["forward_prefetch"] == false);
  CHECK(c["limit_all_gathers"] == true);
  CHECK(c["use_orig_params"] == false);
  CHECK(c["param_dtype"] == "fp32");  // no MixedPrecision: everything in fp32
  CHECK(load(toy_doc(fsdp1())).strategy->effective_config()["reduce_dtype"] == "bf16");
  // Without MixedPrecision the flat parameter keeps the master dtype: bf16 master weights
  // gather and reduce in bf16, and the report says so.
  json pure_bf16 = load(toy_doc({{"framework", "fsdp1"}}, 1, 8, {{"master_dtype", "bf16"}})).strategy->effective_config();
  CHECK(pure_bf16["param_dtype"] == "bf16");
  CHECK(pure_bf16["reduce_dtype"] == "bf16");
  Experiment one = load(toy_doc({{"framework", "fsdp1"}, {"sharding", "full_shard"}}, 1, 1));
  CHECK(one.strategy->effective_config()["sharding"] == "no_shard");
  SimulationResult r = run_experiment(one);
  for (const auto* op : collectives(r.timeline)) CHECK(op->collective == CollectiveKind::AllReduce);
}

TEST_CASE("C6.5: collective bytes per unit per step match the table for every sharding strategy", "[fsdp1][traffic]") {
  // bf16 params (p = 2), fp32 reduce (r = 4) so the two are told apart. Unit sizes include F1.2
  // padding; the root (embed + norm + head) is gathered once (never freed after forward).
  const json mp = {{"param", "bf16"}, {"reduce", "fp32"}};
  for (std::string s : {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2"}) {
    DYNAMIC_SECTION(s) {
      Experiment e = load(small_llama_doc(fsdp1({{"sharding", s}, {"mixed_precision", mp}}), 2, 4));
      SimulationResult r = run_experiment(e);
      const bool hybrid = s.rfind("hybrid", 0) == 0;
      const int N = s == "no_shard" ? 1 : hybrid ? 4 : 8;
      auto units = make_fsdp1_units(*e.workload, Fsdp1Config{}, N, Dtype::FP32);
      std::map<std::string, std::int64_t> expected;
      for (const auto& u : units) {
        const std::int64_t P = u.padded_numel;
        if (s == "no_shard") {
          expected[u.name + " AR 8"] = 4 * P;
          continue;
        }
        const bool twice = (s == "full_shard" || s == "hybrid_shard") && !u.root;
        expected[u.name + " AG " + std::to_string(N)] = (twice ? 2 : 1) * 2 * P;
        expected[u.name + " RS " + std::to_string(N)] = 4 * P;
        if (hybrid) expected[u.name + " AR 2"] = 4 * P / N;  // r * Psi_u / shard size, inter-node
      }
      CHECK(traffic(r.timeline) == expected);
    }
  }
}

TEST_CASE("streams: AGs on unshard, RS on post_backward, the HSDP all-reduce on its own stream and communicator",
          "[fsdp1][schedule]") {
  SimulationResult r = run_experiment(load(small_llama_doc(fsdp1({{"sharding", "hybrid_shard"}}), 2, 4)));
  const Timeline& t = r.timeline;
  for (const auto* op : collectives(t)) {
    const std::string& stream = t.streams[op->stream.index()].name;
    if (op->collective == CollectiveKind::AllGather) CHECK(stream == "unshard");
    if (op->collective == CollectiveKind::ReduceScatter) CHECK(stream == "post_backward");
    if (op->collective == CollectiveKind::AllReduce) {
      CHECK(stream == "all_reduce");
      CHECK(t.comms[op->comm.value().index()].nodes == 2);
      CHECK(t.comms[op->comm.value().index()].ranks == 2);
    } else {
      CHECK(t.comms[op->comm.value().index()].nodes == 1);
    }
  }
  // limit_all_gathers and HSDP: the three FSDP streams get priority -1 (F1.5).
  for (const auto& s : t.streams)
    if (s.name == "unshard" || s.name == "post_backward" || s.name == "pre_unshard") CHECK(s.priority == -1);
}

TEST_CASE("the root is gathered once, never freed after forward, and its reduce-scatter is the last collective",
          "[fsdp1][schedule]") {
  SimulationResult r = run_experiment(load(small_llama_doc(fsdp1())));
  auto cs = collectives(r.timeline);
  int root_ag = 0;
  for (const auto* op : cs) root_ag += op->name.rfind("AG root", 0) == 0;
  CHECK(root_ag == 1);
  const TimelineOp* last = *std::max_element(cs.begin(), cs.end(), [](auto* a, auto* b) { return a->start < b->start; });
  CHECK(last->name == "RS root");
  // Exposed: it starts after the embedding backward, the last compute kernel of backward.
  Time last_bwd{};
  for (const auto& op : r.timeline.ops)
    if (op.kind == TimelineOp::Kind::Kernel && op.name == "bwd embed") last_bwd = op.end;
  CHECK(last->start >= last_bwd);
}

TEST_CASE("forward_prefetch issues the next unit's all-gather before the current unit's compute", "[fsdp1][schedule]") {
  auto position = [](const Program& p, const std::string& name) {
    for (std::size_t i = 0; i < p.instructions.size(); ++i) {
      if (auto* c = std::get_if<Collective>(&p.instructions[i]); c && c->name == name) return i;
      if (auto* l = std::get_if<Launch>(&p.instructions[i]); l && l->kernel.name == name) return i;
    }
    FAIL("no instruction " << name);
    return std::size_t{0};
  };
  Program with = run_experiment(load(small_llama_doc(fsdp1({{"forward_prefetch", true}})))).program;
  Program without = run_experiment(load(small_llama_doc(fsdp1()))).program;
  CHECK(position(with, "AG block.0 fwd") < position(with, "fwd embed"));
  CHECK(position(without, "AG block.0 fwd") > position(without, "fwd embed"));
  CHECK(position(with, "AG block.1 fwd") < position(with, "fwd block.0"));
}

TEST_CASE("mixed precision: the fp32 shard is cast on pre_unshard before each AG; none = fp32 collectives",
          "[fsdp1][schedule]") {
  SimulationResult mp = run_experiment(load(toy_doc(fsdp1())));
  int casts = 0;
  for (const auto& op : mp.timeline.ops)
    if (op.name.rfind("cast param", 0) == 0) {
      ++casts;
      CHECK(mp.timeline.streams[op.stream.index()].name == "pre_unshard");
    }
  CHECK(casts == 8);  // 4 units x (forward + backward AG)
  SimulationResult full = run_experiment(load(toy_doc({{"framework", "fsdp1"}})));
  for (const auto* op : collectives(full.timeline)) CHECK(op->bytes.count == 4 * 1'000'008);
  for (const auto& op : full.timeline.ops) CHECK(op.name.rfind("cast", 0) != 0);
}

TEST_CASE("gradient accumulation: no_sync reduces once per step, without it every micro-batch", "[fsdp1][accum]") {
  auto count = [](const json& strategy, bool no_sync, const char* kind) {
    SimulationResult r = run_experiment(load(toy_doc(strategy, 1, 8, {{"grad_accum", 2}, {"no_sync", no_sync}})));
    int n = 0;
    for (const auto* op : collectives(r.timeline)) n += short_name(op->collective) == kind;
    // Whatever the accumulation, the step ends at the persistent level: 16 bytes per shard element.
    CHECK(r.timeline.memory.back().total.count == 16 * 4 * 125'001);
    return n;
  };
  CHECK(count(fsdp1(), true, "RS") == 4);
  CHECK(count(fsdp1(), false, "RS") == 8);
  CHECK(count(fsdp1(), true, "AG") == 16);  // FULL_SHARD re-gathers every micro-batch
  // SHARD_GRAD_OP keeps the parameters unsharded through no_sync: one forward AG per unit.
  CHECK(count(fsdp1({{"sharding", "shard_grad_op"}}), true, "AG") == 4);
  CHECK(count(fsdp1({{"sharding", "shard_grad_op"}}), false, "AG") == 8);
}

TEST_CASE("M5.1: persistent memory is 16 bytes per sharded element for FULL_SHARD, bf16 MP and AdamW", "[fsdp1][memory]") {
  // 4 units of 1,000,003 params on 8 ranks: shard 125,001 (3 elements of padding per unit);
  // fp32 params 4 + fp32 grads 4 + AdamW 8 = 16 bytes per element.
  SimulationResult r = run_experiment(load(toy_doc(fsdp1())));
  const std::int64_t level = 16 * 4 * 125'001;
  CHECK(r.metrics.persistent_memory.count == level);
  // The step starts at the same level (before zero_grad frees last step's gradients): the
  // highest sample before the first activation or unsharded parameter is allocated.
  std::int64_t start_level = 0;
  for (const auto& s : r.timeline.memory) {
    if (s.by_category[static_cast<int>(MemCategory::UnshardedParameters)].count > 0 ||
        s.by_category[static_cast<int>(MemCategory::Activations)].count > 0)
      break;
    start_level = std::max(start_level, s.total.count);
  }
  CHECK(start_level == level);
  CHECK(r.timeline.memory.back().by_category[static_cast<int>(MemCategory::UnshardedParameters)].count == 0);
  CHECK(r.metrics.peak_memory.count > level);
}

TEST_CASE("M5.2: SHARD_GRAD_OP holds every unit unsharded at the forward/backward turnaround", "[fsdp1][memory]") {
  // At the end of forward compute: 4 units x 1,000,008 padded bf16 elements = 8,000,064 bytes
  // for SHARD_GRAD_OP (never freed in forward); FULL_SHARD has freed its forward buffers and
  // holds only the backward all-gathers the host has issued ahead (3 here: the limiter queue
  // holds one free event when the third is issued).
  SimulationResult sgo = run_experiment(load(toy_doc(fsdp1({{"sharding", "shard_grad_op"}}))));
  Time turn = sgo.timeline.start + sgo.metrics.forward;
  CHECK(live_at(sgo.timeline, turn, MemCategory::UnshardedParameters).count == 4 * 2 * 1'000'008);
  SimulationResult fs = run_experiment(load(toy_doc(fsdp1())));
  CHECK(live_at(fs.timeline, fs.timeline.start + fs.metrics.forward, MemCategory::UnshardedParameters).count ==
        3 * 2 * 1'000'008);
  CHECK(sgo.metrics.persistent_memory == fs.metrics.persistent_memory);
}

TEST_CASE("activation checkpointing re-runs the forward in backward and lowers the activation peak", "[fsdp1][memory]") {
  json plain = small_llama_doc(fsdp1());
  json full = plain;
  full["workload"]["activation_checkpointing"] = "full";
  SimulationResult a = run_experiment(load(plain)), b = run_experiment(load(full));
  CHECK(b.metrics.backward > a.metrics.backward);
  CHECK(b.metrics.peak_breakdown["activations"] < a.metrics.peak_breakdown["activations"]);
  CHECK(traffic(a.timeline) == traffic(b.timeline));  // no extra communication (section 10)
}

TEST_CASE("FSDP1's program does not depend on the steps built before it on the thread", "[fsdp1]") {
  // The rate limiter's steady state is found from the fixed point the last step built on the
  // thread came to (Fsdp1::build): the toy's and the small Llama's differ (the Llama's root unit
  // reshards after the last pop). Each program, built after the other, is the one a thread that
  // built nothing before writes.
  const auto text_of = [](const Experiment& e) {
    const Program p = build_step_program(e);
    std::string out;
    for (std::size_t i = 0; i < p.instructions.size(); ++i) out += describe(p, i) + "\n";
    return out;
  };
  const Experiment toy = load(toy_doc(fsdp1()));
  const Experiment llama = load(small_llama_doc(fsdp1()));
  std::string toy_fresh, llama_fresh;
  std::thread([&] { toy_fresh = text_of(toy); }).join();
  std::thread([&] { llama_fresh = text_of(llama); }).join();
  CHECK(toy_fresh.find("rate_limiter") != std::string::npos);
  CHECK(llama_fresh.find("rate_limiter") != std::string::npos);
  // Each after the other (written twice) and after itself (written once).
  std::thread([&] {
    for (int i = 0; i < 2; ++i) {
      CHECK(text_of(llama) == llama_fresh);
      CHECK(text_of(llama) == llama_fresh);
      CHECK(text_of(toy) == toy_fresh);
      CHECK(text_of(toy) == toy_fresh);
    }
  }).join();
}
