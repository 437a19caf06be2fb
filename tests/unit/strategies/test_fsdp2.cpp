// FSDP2 strategy: schedule, traffic, memory and knobs (framework-semantics.md section 2,
// M5.1/M5.3, C6.5, S8.2, section 10).
#include <catch2/catch.hpp>

#include <algorithm>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "test_support.hpp"

using namespace stepsim;
using nlohmann::json;

namespace {

Experiment load(const json& doc) { return test::experiment_from_doc(doc); }

// Toy model on the textbook machine: memory-bound kernels and host costs are free and every
// collective takes S / (1 GB/s), so P fp32 params make a 4P-byte AG or RS last 4P ns.
json toy_doc(const json& strategy, int layers = 4, std::int64_t params = 2500000, const json& training = json::object()) {
  json t = {{"optimizer", "none"}};
  t.update(training);
  return {{"workload",
           {{"toy", {{"layers", layers}, {"forward_ms", 1}, {"backward_ms", 2}, {"params_per_layer", params}}},
            {"dtype", "fp32"}}},
          {"cluster", {{"profile", "configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", strategy},
          {"training", t}};
}

// FSDP2's own schedule, without the torchtitan loop's clip_grad_norm_ (its all-reduce is not FSDP's).
json llama_doc(const std::string& preset, const json& strategy, int nodes, int gpus_per_node) {
  return {{"workload", {{"preset", preset}, {"seq_len", 2048}, {"micro_batch", 1}, {"dtype", "bf16"}}},
          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", nodes}, {"gpus_per_node", gpus_per_node}}},
          {"strategy", strategy},
          {"training", {{"optimizer", "adamw"}, {"clip_grad_norm", nullptr}}}};
}

const TimelineOp& op(const Timeline& t, const std::string& name) {
  for (const auto& o : t.ops)
    if (o.name == name) return o;
  FAIL("no op named " << name);
  return t.ops.front();
}

// Live bytes per category at the first Mark named `mark`, replaying the program in issue order.
// Valid for FSDP2 because every free is plain (stream-ordered, effective at issue).
std::map<MemCategory, std::int64_t> live_at_mark(const Program& p, const std::string& mark) {
  std::map<BufferId, std::pair<MemCategory, std::int64_t>> live;
  for (const auto& ins : p.instructions) {
    if (auto* a = std::get_if<Alloc>(&ins)) live[a->buffer] = {a->category, a->bytes.count};
    if (auto* f = std::get_if<Free>(&ins)) {
      REQUIRE(f->record_streams.empty());  // FSDP2 never uses record_stream
      live.erase(f->buffer);
    }
    if (auto* m = std::get_if<Mark>(&ins); m && m->name == mark) break;
  }
  std::map<MemCategory, std::int64_t> out;
  for (const auto& [id, v] : live) out[v.first] += v.second;
  return out;
}

std::vector<const Collective*> collectives(const Program& p) {
  std::vector<const Collective*> out;
  for (const auto& ins : p.instructions)
    if (auto* c = std::get_if<Collective>(&ins)) out.push_back(c);
  return out;
}

std::size_t index_of(const Program& p, const std::string& name) {
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    if (auto* l = std::get_if<Launch>(&p.instructions[i]); l && l->kernel.name == name) return i;
    if (auto* c = std::get_if<Collective>(&p.instructions[i]); c && c->name == name) return i;
  }
  FAIL("no instruction named " << name);
  return 0;
}

}  // namespace

TEST_CASE("FSDP2 persistent memory of llama2-7b at N = 8 is 16 Psi / N (table M5.1)", "[fsdp2][memory]") {
  Experiment e = load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", "bf16"}}}}, 1, 8));
  SimulationResult r = run_experiment(e);
  // Psi(llama2-7b) = embed 32000*4096 + head 32000*4096 + final norm 4096
  //   + 32 blocks * (2 norms 2*4096 + q,k,v,o 4*4096^2 + gate,up,down 3*4096*11008)
  //   = 131,072,000 * 2 + 4,096 + 32 * 202,383,360 = 6,738,415,616.
  // Dim-0 padding at N = 8: every dim 0 (32000, 4096, 11008) is a multiple of 8, so none.
  // M5.1 FSDP2, param_dtype=bf16, fp32 orig: 4 Psi/N shards + 4 Psi/N .grad + 8 Psi/N AdamW
  // = 16 * 6,738,415,616 / 8 = 13,476,831,232 B, live when the optimizer step starts.
  const std::int64_t psi = 6738415616;
  CHECK(e.workload->numel() == psi);
  auto live = live_at_mark(r.program, "optimizer");
  CHECK(live[MemCategory::Parameters] == 4 * psi / 8);
  CHECK(live[MemCategory::Gradients] == 4 * psi / 8);
  CHECK(live[MemCategory::OptimizerState] == 8 * psi / 8);
  CHECK(live[MemCategory::Parameters] + live[MemCategory::Gradients] + live[MemCategory::OptimizerState] == 13476831232);
  // After zero_grad(set_to_none=True) the step ends holding shards + Adam states: 12 Psi / N,
  // plus PyTorch's two cuBLAS workspaces (the forward's and the backward's handle), taken from
  // the caching allocator at their first GEMM and kept (docs/memory.md).
  CHECK(r.metrics.persistent_memory.count == 12 * psi / 8 + 2 * e.cluster.profile->outside_allocator.cublas_workspace.count);
  CHECK(r.metrics.peak_memory.count > 13476831232);
}

TEST_CASE("FSDP2 pads every parameter's dim 0 to a multiple of the shard size (llama2-7b at N = 6)", "[fsdp2][memory]") {
  Experiment e = load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", "bf16"}}}}, 1, 6));
  SimulationResult r = run_experiment(e);
  // ceil(dim0/6)*6: 4096 -> 4098 (+2 rows), 11008 -> 11010 (+2), 32000 -> 32004 (+4).
  // Per block: 2 norms +2 each, q,k,v,o +2*4096 each (32,768), gate, up +2*4096 each (16,384),
  // down (dim 0 = 4096 rows of 11008) +2*11008 = 22,016 -> 71,172; 32 blocks: 2,277,504.
  // Root: embed +4*4096, head +4*4096, norm +2 -> 32,770. Padded Psi = 6,738,415,616 +
  // 2,310,274 = 6,740,725,890; shard = /6 = 1,123,454,315 elements; 16 B each = 17,975,269,040.
  auto live = live_at_mark(r.program, "optimizer");
  CHECK(live[MemCategory::Parameters] == 4 * 1123454315LL);
  CHECK(live[MemCategory::Parameters] + live[MemCategory::Gradients] + live[MemCategory::OptimizerState] ==
        17975269040LL);
  // The AG of one block gathers its padded unsharded size in bf16: 2 * (202,383,360 + 71,172).
  for (const Collective* c : collectives(r.program))
    if (c->name == "AG block.0 fwd") CHECK(c->bytes.count == 2 * (202383360LL + 71172));
}

TEST_CASE("FSDP2 traffic per unit: reshard=True gathers in forward and backward, reduce-scatters once (C6.5)", "[fsdp2][traffic]") {
  Experiment e = load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", "bf16"}}}}, 1, 8));
  Program p = e.strategy->build(e);
  std::map<std::string, std::int64_t> bytes;
  std::map<std::string, int> count;
  for (const Collective* c : collectives(p)) {
    bytes[c->name.str()] = c->bytes.count;
    ++count[c->name.str()];
    CHECK(c->unit == (c->name.find("root") != std::string::npos ? std::string_view("root") : c->name.substr(3, c->name.view().find(' ', 3) - 3)));
  }
  const std::int64_t block = 202383360;  // params of one llama2-7b block (no padding at N = 8)
  for (int k = 0; k < 32; ++k) {
    std::string b = "block." + std::to_string(k);
    CHECK(bytes["AG " + b + " fwd"] == 2 * block);  // p * Psi_u, bf16
    CHECK(bytes["AG " + b + " bwd"] == 2 * block);
    CHECK(bytes["RS " + b] == 2 * block);  // unset reduce_dtype: grad (bf16) dtype in <= 2.9
  }
  // Root: one AG (kept unsharded after forward), one RS; 32 * 3 + 2 collectives in all.
  CHECK(count["AG root fwd"] == 1);
  CHECK(count["AG root bwd"] == 0);
  CHECK(count["RS root"] == 1);
  CHECK(collectives(p).size() == 32 * 3 + 2);
}

TEST_CASE("FSDP2 reshard_after_forward=false issues no backward all-gather", "[fsdp2][traffic]") {
  Experiment e = load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"reshard_after_forward", false}}, 1, 8));
  int ag_bwd = 0, ag_fwd = 0, rs = 0;
  Program p = e.strategy->build(e);
  for (const Collective* c : collectives(p)) {
    ag_bwd += c->name.find(" bwd") != std::string::npos;
    ag_fwd += c->name.find(" fwd") != std::string::npos;
    rs += c->kind == CollectiveKind::ReduceScatter;
  }
  CHECK(ag_bwd == 0);
  CHECK(ag_fwd == 33);
  CHECK(rs == 33);
}

TEST_CASE("torchtitan's FSDP2 wrapping: the last block and (before the None default) the root stay unsharded after forward",
          "[fsdp2][traffic]") {
  // torchtitan parallelize_llama.py (83c879f1): fully_shard(block, reshard_after_forward =
  // layer_id < len(model.layers) - 1), then fully_shard(model) with no argument, whose root
  // FSDPState._lazy_init of the time set post_forward_mesh_info = None unconditionally.
  auto backward_gathers = [](json s) {
    Experiment e = load(llama_doc("llama2-7b", std::move(s), 1, 8));
    std::vector<std::string> names;
    const Program p = e.strategy->build(e);  // collectives() points into it
    for (const Collective* c : collectives(p))
      if (c->name.ends_with(" bwd")) names.push_back(c->name.str());
    return names;
  };
  // An explicit reshard_after_forward true reshards the root too (PyTorch 2.9): 32 blocks + root.
  auto all = backward_gathers({{"framework", "fsdp2"}, {"reshard_after_forward", true}});
  CHECK(all.size() == 33);
  auto titan = backward_gathers({{"framework", "fsdp2"}, {"reshard_after_forward", true},
                                 {"reshard_last_block_after_forward", false}, {"root_reshard_after_forward", false}});
  CHECK(titan.size() == 31);
  CHECK(std::find(titan.begin(), titan.end(), "AG block.31 bwd") == titan.end());
  CHECK(std::find(titan.begin(), titan.end(), "AG root bwd") == titan.end());
  CHECK(std::find(titan.begin(), titan.end(), "AG block.30 bwd") != titan.end());
  // Keeping the last block while no block reshards is a contradiction, refused with its path.
  CHECK_THROWS_WITH(load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"reshard_after_forward", false},
                                                 {"reshard_last_block_after_forward", true}}, 1, 8)),
                    Catch::Contains("/strategy/reshard_last_block_after_forward"));
}

TEST_CASE("FSDP2 HSDP all-reduces each shard on the replicate communicator, apart from AG/RS", "[fsdp2][traffic][hsdp]") {
  json s = {{"framework", "fsdp2"}, {"mesh", {{"replicate", 2}, {"shard", 8}}}, {"mixed_precision", {{"param_dtype", "bf16"}}}};
  Experiment e = load(llama_doc("llama2-7b", s, 2, 8));
  Program p = e.strategy->build(e);
  const Collective* rs = nullptr;
  const Collective* ar = nullptr;
  for (const Collective* c : collectives(p)) {
    if (c->name == "RS block.5") rs = c;
    if (c->name == "AR block.5") ar = c;
  }
  REQUIRE(rs);
  REQUIRE(ar);
  CHECK(ar->comm != rs->comm);
  CHECK(p.comms[rs->comm.index()].ranks == 8);
  CHECK(p.comms[rs->comm.index()].nodes == 1);  // shard group = one node
  CHECK(p.comms[ar->comm.index()].ranks == 2);
  CHECK(p.comms[ar->comm.index()].nodes == 2);  // replicate group spans nodes
  // C6.5: AR S = r * Psi_u / shard_size = 2 * 202,383,360 / 8.
  CHECK(ar->bytes.count == 2 * 202383360LL / 8);
  CHECK(ar->stream != rs->stream);
  // Persistent state is sharded over the shard group only: 16 Psi / 8.
  SimulationResult r = run_experiment(e);
  auto live = live_at_mark(r.program, "optimizer");
  CHECK(live[MemCategory::OptimizerState] == 8 * 6738415616LL / 8);
}

TEST_CASE("FSDP2 reshard_after_forward=k keeps a 1/k slice and gathers over k ranks in backward", "[fsdp2][traffic]") {
  json s = {{"framework", "fsdp2"}, {"reshard_after_forward", 8}, {"mixed_precision", {{"param_dtype", "bf16"}}}};
  Experiment e = load(llama_doc("llama2-7b", s, 2, 8));
  Program p = e.strategy->build(e);
  for (const Collective* c : collectives(p)) {
    const CommDecl& comm = p.comms[c->comm.index()];
    if (c->name == "AG block.3 fwd" || c->name == "RS block.3") CHECK(comm.ranks == 16);
    if (c->name == "AG block.3 bwd") {
      CHECK(comm.ranks == 8);
      CHECK(comm.nodes == 1);
      CHECK(c->bytes.count == 2 * 202383360LL);  // still the whole unsharded group
    }
  }
  // Between forward and backward every block holds p * Psi_block / k in post-forward slices.
  auto live = live_at_mark(p, "backward 0");
  // An explicit reshard_after_forward (here k = 8) reshards the root too (only None exempts it:
  // _fully_shard.py auto_reshard_after_forward, FSDPState._lazy_init): the root keeps its 1/8
  // slice, 2 * (2 * 131,072,000 + 4096) / 8; blocks: 32 * 2 * 202,383,360 / 8.
  CHECK(live[MemCategory::UnshardedParameters] == 2 * (2 * 131072000LL + 4096) / 8 + 32 * 2 * 202383360LL / 8);
  CHECK_THROWS_AS(load(llama_doc("llama2-7b", {{"framework", "fsdp2"}, {"reshard_after_forward", 3}}, 1, 8)), InputError);
}

TEST_CASE("FSDP2 keeps at most two all-gather outputs alive in forward", "[fsdp2][memory]") {
  for (int prefetch : {0, 2}) {
    Experiment e = load(toy_doc({{"framework", "fsdp2"}, {"forward_prefetch", prefetch}}, 6));
    Program p = e.strategy->build(e);
    std::map<BufferId, bool> ag_out;
    int live = 0, most = 0;
    for (const auto& ins : p.instructions) {
      if (auto* m = std::get_if<Mark>(&ins); m && m->name == "backward 0") break;
      if (auto* a = std::get_if<Alloc>(&ins); a && a->name.rfind("AG output", 0) == 0) ag_out[a->buffer] = true, ++live;
      if (auto* f = std::get_if<Free>(&ins); f && ag_out.count(f->buffer)) --live;
      most = std::max(most, live);
    }
    // Implicit: the kept previous output + the current one (F2.9/F2.10). Explicit prefetch of
    // n groups: the kept output + n pending ones (the wait frees the kept one first).
    CHECK(most == (prefetch == 0 ? 2 : 1 + prefetch));
    CHECK(live == 0);  // the root's post-forward frees the last kept output
  }
}

TEST_CASE("FSDP2 explicit prefetch issues all-gathers earlier than the implicit schedule", "[fsdp2][prefetch]") {
  Experiment implicit = load(toy_doc({{"framework", "fsdp2"}}, 6));
  Program pi = implicit.strategy->build(implicit);
  // Implicit forward: AG(k+1) is issued after compute(k); backward: one group ahead.
  CHECK(index_of(pi, "AG layer.1 fwd") > index_of(pi, "fwd layer.0"));
  CHECK(index_of(pi, "AG layer.2 bwd") < index_of(pi, "bwd layer.3"));
  CHECK(index_of(pi, "AG layer.1 bwd") > index_of(pi, "bwd layer.3"));
  Experiment expl = load(toy_doc({{"framework", "fsdp2"}, {"forward_prefetch", 2}, {"backward_prefetch", 2}}, 6));
  Program pe = expl.strategy->build(expl);
  CHECK(index_of(pe, "AG layer.2 fwd") < index_of(pe, "fwd layer.0"));
  CHECK(index_of(pe, "AG layer.1 bwd") < index_of(pe, "bwd layer.3"));
}

TEST_CASE("FSDP2 exposed reduce-scatter delays the next block's backward compute", "[fsdp2][schedule]") {
  // 4 layers, fwd 1 ms, bwd 2 ms, 2.5e6 fp32 params: every AG and RS takes 1e7 B / 1 GB/s = 10 ms.
  // reshard_after_forward=false removes backward all-gathers, so only the RS throttle (F2.14-4)
  // can hold backward compute. Forward: AG k at [10k, 10k+10], fwd k at [10k+10, 10k+11]: the
  // last forward ends at 41 ms. Backward: bwd 3 [41,43], RS 3 [43,53]; bwd 2 [43,45] (no RS in
  // flight yet); post-backward 2 waits RS 3 -> RS 2 [53,63], bwd 1 [53,55]; RS 1 [63,73],
  // bwd 0 [63,65]; RS 0 [73,83]. Step = 83 ms.
  Experiment e = load(toy_doc({{"framework", "fsdp2"}, {"reshard_after_forward", false}}));
  SimulationResult r = run_experiment(e);
  const Timeline& t = r.timeline;
  for (int k = 1; k <= 2; ++k)  // bwd of block k-1 starts after the RS of block k+1 ended
    CHECK(op(t, "bwd layer." + std::to_string(k - 1)).start >= op(t, "RS layer." + std::to_string(k + 1)).end);
  CHECK(op(t, "RS layer.3").start == Time::from_ms(43));
  CHECK(op(t, "bwd layer.1").start == Time::from_ms(53));
  CHECK(op(t, "bwd layer.0").start == Time::from_ms(63));
  CHECK(r.metrics.overlap.step_time == Time::from_ms(83));

  SECTION("the newest-main knob with 4 RS buffers in flight lets backward run ahead") {
    // bwd 3..0 back to back: [41,43], [43,45], [45,47], [47,49]; RSs unchanged, step 83 ms.
    Experiment e4 = load(toy_doc({{"framework", "fsdp2"}, {"reshard_after_forward", false}, {"reduce_scatter_max_input_buffers", 4}}));
    SimulationResult r4 = run_experiment(e4);
    CHECK(op(r4.timeline, "bwd layer.0").start == Time::from_ms(47));
    CHECK(r4.metrics.overlap.step_time == Time::from_ms(83));
    // More RS inputs alive at once: more peak memory.
    CHECK(r4.metrics.peak_memory > r.metrics.peak_memory);
  }
  SECTION("with reshard_after_forward=true the same ordering holds in the derived timeline") {
    SimulationResult rt = run_experiment(load(toy_doc({{"framework", "fsdp2"}})));
    for (int k = 1; k <= 2; ++k)
      CHECK(op(rt.timeline, "bwd layer." + std::to_string(k - 1)).start >=
            op(rt.timeline, "RS layer." + std::to_string(k + 1)).end);
  }
}

TEST_CASE("FSDP2 version knob: unset reduce_dtype reduces in bf16 (<= 2.9) or fp32 (newest main)", "[fsdp2][version]") {
  // bf16 params over fp32 orig, reshard_after_forward=false, 2.5e6 params per layer: AG
  // 5e6 B = 5 ms; RS t = 5 ms (bf16) or 10 ms (fp32). Forward ends at 21 ms, bwd 3 [21,23],
  // then the throttled RS chain ends at 23 + 4t: 43 ms (bf16) vs 63 ms (fp32).
  auto run = [](const char* knob) {
    json doc = toy_doc({{"framework", "fsdp2"}, {"reshard_after_forward", false},
                        {"mixed_precision", {{"param_dtype", "bf16"}}}, {"unset_reduce_dtype", knob}});
    doc["workload"]["dtype"] = "bf16";
    return run_experiment(load(doc));
  };
  SimulationResult old = run("param_dtype");
  SimulationResult neu = run("orig_dtype");
  CHECK(op(old.timeline, "RS layer.0").bytes.count == 2 * 2500000);
  CHECK(op(neu.timeline, "RS layer.0").bytes.count == 4 * 2500000);
  CHECK(old.metrics.overlap.step_time == Time::from_ms(43));
  CHECK(neu.metrics.overlap.step_time == Time::from_ms(63));
  // An explicit reduce_dtype wins over the knob.
  json doc = toy_doc({{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", "bf16"}, {"reduce_dtype", "bf16"}}},
                      {"unset_reduce_dtype", "orig_dtype"}});
  Experiment e = load(doc);
  CHECK(e.strategy->effective_config()["effective_reduce_dtype"] == "bf16");
}

TEST_CASE("FSDP2 divides gradients only for fp16 reductions (AVG inside NCCL otherwise)", "[fsdp2][precision]") {
  auto divides = [](const char* dt) {
    Experiment e = load(toy_doc({{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", dt}}}}));
    int n = 0;
    for (const auto& ins : e.strategy->build(e).instructions)
      if (auto* l = std::get_if<Launch>(&ins); l && l->kernel.name.find("divide") != std::string::npos) ++n;
    return n;
  };
  CHECK(divides("bf16") == 0);
  CHECK(divides("fp32") == 0);
  CHECK(divides("fp16") == 2 * 4);  // pre- and post-divide per block
}

TEST_CASE("FSDP2 peak memory does not depend on GPU timing", "[fsdp2][memory]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp2-8xh100.json");
  SimulationResult base = run_experiment(e);
  // Twice the compute: peak FLOP rates, GEMM table rates and HBM bandwidth all doubled.
  Experiment fast = e;
  for (auto& [dt, rate] : fast.cluster.profile.edit().compute.peak) rate.flops_per_s *= 2;
  for (auto& g : fast.cluster.profile.edit().compute.gemm_table) g.rate.flops_per_s *= 2;
  fast.cluster.profile.edit().compute.hbm.bytes_per_s *= 2;
  SimulationResult quick = run_experiment(fast);
  CHECK(quick.metrics.overlap.compute_time < base.metrics.overlap.compute_time);
  CHECK(quick.metrics.overlap.step_time < base.metrics.overlap.step_time);
  CHECK(quick.metrics.peak_memory == base.metrics.peak_memory);
}

TEST_CASE("FSDP2 no_sync accumulation keeps every group's unsharded grad in the reduce dtype", "[fsdp2][memory]") {
  json doc = toy_doc({{"framework", "fsdp2"}, {"mixed_precision", {{"param_dtype", "bf16"}, {"reduce_dtype", "fp32"}}}}, 4,
                     2500000, {{"grad_accum", 2}});
  Experiment e = load(doc);
  Program p = e.strategy->build(e);
  // Between the micro-batches: 4 groups * 2.5e6 unsharded grads in fp32 (r = 4 B).
  CHECK(live_at_mark(p, "forward 1")[MemCategory::Gradients] == 4 * 2500000LL * 4);
  int rs = 0;
  for (const Collective* c : collectives(p)) rs += c->kind == CollectiveKind::ReduceScatter;
  CHECK(rs == 4);  // reduce only in the last micro-batch
  doc["training"]["no_sync"] = false;
  Experiment synced = load(doc);
  rs = 0;
  Program ps = synced.strategy->build(synced);
  for (const Collective* c : collectives(ps)) rs += c->kind == CollectiveKind::ReduceScatter;
  CHECK(rs == 8);
}

TEST_CASE("FSDP2 rejects bad strategy input with the JSON path", "[fsdp2][input]") {
  auto message = [](const json& s) -> std::string {
    try {
      load(llama_doc("llama2-7b", s, 1, 8));
    } catch (const InputError& err) {
      return err.what();
    }
    return "";
  };
  CHECK_THAT(message({{"framework", "fsdp2"}, {"mesh", {{"replicate", 3}, {"shard", 2}}}}),
             Catch::Contains("/strategy/mesh"));
  CHECK_THAT(message({{"framework", "fsdp2"}, {"reshard_after_forward", "yes"}}),
             Catch::Contains("/strategy/reshard_after_forward"));
  CHECK_THAT(message({{"framework", "fsdp2"}, {"wrap", "layer"}}), Catch::Contains("/strategy/wrap"));
  CHECK_THAT(message({{"framework", "fsdp2"}, {"backward_prefetch", 0}}), Catch::Contains("/strategy/backward_prefetch"));
  CHECK_THAT(message({{"framework", "fsdp2"}, {"mixed_precision", {{"param", "bf16"}}}}),
             Catch::Contains("/strategy/mixed_precision"));
  CHECK_THAT(message({{"framework", "fsdp2"}, {"sharding", 1}}), Catch::Contains("sharding"));
}

TEST_CASE("FSDP2 wrap none makes one root group: one AG and one RS for the whole model", "[fsdp2][traffic]") {
  Experiment e = load(toy_doc({{"framework", "fsdp2"}, {"wrap", "none"}}));
  Program p = e.strategy->build(e);
  auto cs = collectives(p);
  REQUIRE(cs.size() == 2);
  CHECK(cs[0]->name == "AG root fwd");
  CHECK(cs[0]->bytes.count == 4 * 4 * 2500000LL);
  CHECK(cs[1]->name == "RS root");
}

TEST_CASE("stepsim simulate runs the shipped llama3-8b FSDP2 example", "[fsdp2][cli]") {
  int rc = std::system((std::string(STEPSIM_BINARY) + " simulate " + STEPSIM_SOURCE_DIR + "/configs/examples/llama3-8b-fsdp2-8xh100.json > /dev/null 2>&1").c_str());
  CHECK(rc == 0);
}
