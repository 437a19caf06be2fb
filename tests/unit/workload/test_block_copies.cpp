// A transformer's blocks are its first block renamed (renamed_block, transformer.cpp): every name
// of block i carries "block.i" where the first carries "block.0", nothing else differs, and the
// op lists are the first block's own (shared, not copied).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/workload/workload.hpp"

using namespace stepsim;

namespace {

// Every name a layer's modules hold, in order (its recompute list is its checkpointing policy's,
// which EveryK sets block by block).
std::vector<std::string> names_of(const Layer& l) {
  std::vector<std::string> out{l.name};
  for (const Module& m : l.modules) {
    out.push_back(m.name);
    for (const Param& p : m.params) out.push_back(p.name);
    for (const Op& op : m.forward) out.push_back(op.name);
    for (const Op& op : m.backward) out.push_back(op.name);
  }
  return out;
}

std::string with_prefix(std::string s, const std::string& from, const std::string& to) {
  if (s.starts_with(from) && (s.size() == from.size() || s[from.size()] == '.')) s.replace(0, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("a transformer's blocks differ from the first in their names' prefix only", "[workload]") {
  for (const std::string preset : {"llama3-8b", "gpt2", "opt-1.3b"})
    for (Implementation impl : {Implementation::Hf, Implementation::Torchtitan, Implementation::LlmFoundry, Implementation::Megatron})
      for (Checkpointing ck : {Checkpointing::None, Checkpointing::Full, Checkpointing::Selective, Checkpointing::EveryK}) {
        INFO(preset << " " << to_string(impl) << " " << to_string(ck));
        WorkloadOptions o;
        o.impl = impl;
        o.checkpointing = ck;
        o.checkpoint_every = 2;
        ModelDims md = preset_dims(preset);
        md.layers = 12;
        const Workload w = build_transformer(preset, md, 2, 256, Dtype::BF16, o);
        std::vector<const Layer*> blocks;
        for (const Layer& l : w.layers)
          if (l.kind == LayerKind::Block) blocks.push_back(&l);
        REQUIRE(blocks.size() == 12);
        const std::vector<std::string> first = names_of(*blocks[0]);
        REQUIRE(first.front() == "block.0");
        for (std::size_t i = 1; i < blocks.size(); ++i) {
          const std::string prefix = "block." + std::to_string(i);
          const std::vector<std::string> names = names_of(*blocks[i]);
          REQUIRE(names.size() == first.size());
          for (std::size_t k = 0; k < names.size(); ++k) {
            CHECK(names[k] == with_prefix(first[k], "block.0", prefix));
            CHECK(names[k].find("block.0") == std::string::npos);
          }
          if (ck != Checkpointing::EveryK) CHECK(blocks[i]->saved_activations == blocks[0]->saved_activations);
          // Their op lists are the first block's under the same policy, not copies (OpList): the
          // block k-1 before it when EveryK alternates (k = 2).
          const Layer& like = *blocks[ck == Checkpointing::EveryK ? i % 2 : 0];
          REQUIRE(blocks[i]->modules.size() == like.modules.size());
          for (std::size_t k = 0; k < like.modules.size(); ++k) {
            const Module& m = blocks[i]->modules[k];
            CHECK((m.forward.empty() || m.forward.shares(like.modules[k].forward)));
            CHECK((m.backward.empty() || m.backward.shares(like.modules[k].backward)));
            // Everything but the names, as the first block has it (renamed_block copies the
            // modules field by field).
            CHECK(m.first_launch == like.modules[k].first_launch);
            REQUIRE(m.params.size() == like.modules[k].params.size());
            for (std::size_t j = 0; j < m.params.size(); ++j) {
              CHECK(m.params[j].numel == like.modules[k].params[j].numel);
              CHECK(m.params[j].dim0 == like.modules[k].params[j].dim0);
            }
          }
          CHECK((blocks[i]->recompute.empty() || blocks[i]->recompute.shares(like.recompute)));
          CHECK(blocks[i]->kind == like.kind);
          CHECK(blocks[i]->saved_activations == like.saved_activations);
          CHECK(blocks[i]->recompute_activations == like.recompute_activations);
          CHECK(blocks[i]->backward_transients == like.backward_transients);
          CHECK(blocks[i]->autograd_nodes == like.autograd_nodes);
          CHECK(blocks[i]->forward_dispatch == like.forward_dispatch);
          CHECK(blocks[i]->backward_dispatch == like.backward_dispatch);
          CHECK(blocks[i]->launch_names.size() == like.launch_names.size());
          CHECK(blocks[i]->text == like.text);
        }
      }
}
