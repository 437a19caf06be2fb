// A transformer built with a recycled workload (build_transformer's `recycled`) is the workload
// built without one, whatever the recycled one was built from; it takes the recycled workload's
// names only where they are its own.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/workload/workload.hpp"

using namespace stepsim;

namespace {

void check_same_ops(const OpList& a, const OpList& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);
}

// Every field of two workloads, the launch names by their text.
void check_same(const Workload& a, const Workload& b) {
  CHECK(a.name == b.name);
  CHECK(a.dtype == b.dtype);
  CHECK(a.micro_batch == b.micro_batch);
  CHECK(a.seq_len == b.seq_len);
  CHECK(a.hidden == b.hidden);
  CHECK(a.toy == b.toy);
  CHECK(a.options == b.options);
  CHECK(a.kept_output == b.kept_output);
  CHECK(a.loss_dtype == b.loss_dtype);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t k = 0; k < a.layers.size(); ++k) {
    const Layer &x = a.layers[k], &y = b.layers[k];
    INFO("layer " << k << " " << y.name);
    CHECK(x.name == y.name);
    CHECK(x.kind == y.kind);
    CHECK(x.saved_activations == y.saved_activations);
    check_same_ops(x.recompute, y.recompute);
    CHECK(x.recompute_activations == y.recompute_activations);
    CHECK(x.backward_transients == y.backward_transients);
    CHECK(x.forward_dispatch == y.forward_dispatch);
    CHECK(x.backward_dispatch == y.backward_dispatch);
    CHECK(x.autograd_nodes == y.autograd_nodes);
    CHECK(x.unit == y.unit);
    REQUIRE(x.text);
    CHECK(x.text == a.layers.front().text);
    REQUIRE(x.launch_names.size() == y.launch_names.size());
    for (std::size_t i = 0; i < x.launch_names.size(); ++i) CHECK(x.launch_names[i] == y.launch_names[i]);
    REQUIRE(x.modules.size() == y.modules.size());
    for (std::size_t j = 0; j < x.modules.size(); ++j) {
      const Module &m = x.modules[j], &n = y.modules[j];
      CHECK(m.name == n.name);
      CHECK(m.params == n.params);
      check_same_ops(m.forward, n.forward);
      check_same_ops(m.backward, n.backward);
      CHECK(m.first_launch == n.first_launch);
    }
  }
}

struct Build {
  std::string preset;
  int layers = 6;
  std::int64_t micro_batch = 1, seq = 512;
  Dtype dtype = Dtype::BF16;
  WorkloadOptions options;
};

Workload build(const Build& b, Workload* recycled = nullptr) {
  ModelDims md = preset_dims(b.preset);
  md.layers = b.layers;
  WorkloadOptions o = preset_options(b.preset);
  o.impl = b.options.impl;
  o.checkpointing = b.options.checkpointing;
  o.checkpoint_every = b.options.checkpoint_every;
  o.compile = b.options.compile;
  o.dropout = b.options.dropout;
  return build_transformer(b.preset, md, b.micro_batch, b.seq, b.dtype, o, recycled);
}

Build with(std::string preset, Implementation impl, Checkpointing ck, bool compile = false) {
  Build b;
  b.preset = std::move(preset);
  b.options.impl = impl;
  b.options.checkpointing = ck;
  b.options.checkpoint_every = 2;
  b.options.compile = compile;
  return b;
}

}  // namespace

TEST_CASE("a transformer built with a recycled one of another sequence length takes its names and is the same", "[workload]") {
  for (const std::string preset : {"llama3-8b", "gpt2", "opt-1.3b", "mpt-1b"})
    for (Implementation impl : {Implementation::Hf, Implementation::Torchtitan, Implementation::LlmFoundry, Implementation::Megatron})
      for (Checkpointing ck : {Checkpointing::None, Checkpointing::Full, Checkpointing::Selective, Checkpointing::OpSac, Checkpointing::EveryK})
        for (bool compile : {false, true}) {
          INFO(preset << " " << to_string(impl) << " " << to_string(ck) << (compile ? " compiled" : ""));
          Build b = with(preset, impl, ck, compile);
          Workload old = build(b);
          b.seq = 1024;
          b.micro_batch = 3;
          b.dtype = Dtype::FP16;
          const Workload fresh = build(b);
          // What the recycled build takes: a block's module name (a heap string: its buffer
          // moves) and the pool of launch names.
          std::size_t longest = 0;
          for (std::size_t k = 0; k < old.layers[2].modules.size(); ++k)
            if (old.layers[2].modules[k].name.size() > old.layers[2].modules[longest].name.size()) longest = k;
          REQUIRE(old.layers[2].modules[longest].name.size() > 15);  // past the inline buffer
          const char* old_buffer = old.layers[2].modules[longest].name.data();
          const auto old_pool = old.layers.front().text;
          const Workload recycled = build(b, &old);
          check_same(recycled, fresh);
          CHECK(recycled.layers[2].modules[longest].name.data() == old_buffer);
          CHECK(recycled.layers.front().text == old_pool);
        }
}

TEST_CASE("a transformer built with a recycled one of another model or options is the one built without", "[workload]") {
  const std::vector<Build> builds = {
      with("llama3-8b", Implementation::Torchtitan, Checkpointing::Full),
      with("llama3-8b", Implementation::Torchtitan, Checkpointing::EveryK),
      with("llama3-8b", Implementation::Torchtitan, Checkpointing::None, true),
      with("llama3-8b", Implementation::Hf, Checkpointing::Full),
      with("gpt2", Implementation::Hf, Checkpointing::Full),
      with("gpt2", Implementation::Megatron, Checkpointing::Selective),
      with("opt-1.3b", Implementation::Hf, Checkpointing::None),
      with("mpt-1b", Implementation::LlmFoundry, Checkpointing::OpSac),
      [] {
        Build b = with("llama3-8b", Implementation::Torchtitan, Checkpointing::Full);
        b.layers = 9;  // more blocks than the others: the last ones have nothing to take
        return b;
      }(),
      [] {
        Build b = with("gpt2", Implementation::Hf, Checkpointing::None);
        b.options.dropout = 0.1;  // dropout ops of their own
        return b;
      }(),
      [] {
        Build b = with("gpt2", Implementation::ModdedNanogpt, Checkpointing::None);
        b.layers = 12;
        return b;
      }(),
  };
  for (std::size_t i = 0; i < builds.size(); ++i)
    for (std::size_t j = 0; j < builds.size(); ++j) {
      INFO("built " << j << " with " << i << " recycled");
      Workload old = build(builds[i]);
      Build b = builds[j];
      b.seq = 256;
      check_same(build(b, &old), build(b));
    }
}

TEST_CASE("a recycled workload whose names differ in one place lends only the names that are the build's", "[workload]") {
  const Build b = with("llama3-8b", Implementation::Torchtitan, Checkpointing::Full);
  const Workload fresh = build(b);
  // Each a copy of the same workload with one name changed: a block's module or parameter
  // (its blocks' names are checked one by one), an op of a block (the launch names it lends), an
  // op of a layer built afresh (the embedding, the head).
  auto changed = [&](auto change, bool renamed = true) {
    Workload old = build(b);
    change(old);
    if (renamed) name_launches(old);  // as if built so: its launch names carry the change
    return old;
  };
  const std::vector<std::pair<std::string, Workload>> olds = {
      {"a module of block 3", changed([](Workload& w) { w.layers[4].modules[1].name += ".x"; })},
      {"a parameter of block 3", changed([](Workload& w) { w.layers[4].modules[1].params.at(0).name += ".x"; })},
      {"block 3's layer", changed([](Workload& w) { w.layers[4].name = "block.33"; })},
      {"an op of block 3's list", changed([](Workload& w) { w.layers[4].modules[1].forward[0].name += ".x"; })},
      {"an op of block 3's recompute", changed([](Workload& w) { w.layers[4].recompute[0].name += ".x"; })},
      {"an op of the head", changed([](Workload& w) { w.layers.back().modules[0].forward[0].name += ".x"; })},
      {"a module of the embedding", changed([](Workload& w) { w.layers.front().modules[0].name += ".x"; })},
      {"a layer fewer", changed([](Workload& w) { w.layers.pop_back(); })},
      {"no launch names", changed([](Workload& w) {
         for (Layer& l : w.layers) l.launch_names.clear();
       }, false)},
  };
  for (auto [what, old] : olds) {
    INFO(what);
    check_same(build(b, &old), fresh);
  }
}
