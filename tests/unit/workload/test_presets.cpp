#include <catch2/catch.hpp>

#include "sim/workload/workload.hpp"

using namespace stepsim;

namespace {
std::int64_t mpt_params(const std::string& preset, std::int64_t seq) {
  return build_transformer(preset, preset_dims(preset), 1, seq, Dtype::BF16, Checkpointing::None).numel();
}
}  // namespace

TEST_CASE("MPT presets have exactly the parameter counts llm-foundry published for its benchmark runs", "[workload]") {
  // data/published/llm-foundry-a100/throughput_a100.csv, column NumParams. Per block
  // 12 h^2 (qkv 3h^2, out h^2, MLP 8h^2) + biases 9h + two LayerNorms 4h; embedding 50368 h
  // (tied); learned positions seq h; final LayerNorm 2h. mpt-7b at 2048:
  // 32 (12*4096^2 + 13*4096) + 50368*4096 + 2048*4096 + 2*4096 = 6,658,859,008.
  CHECK(mpt_params("mpt-7b", 2048) == 6658859008);
  CHECK(mpt_params("mpt-70b", 2048) == 64862437376);
  CHECK(mpt_params("mpt-30b", 4096) == 29989894144);
  CHECK(mpt_params("mpt-30b", 8192) == 30019254272);
  // The position table grows with the sequence: 125m at 512 and at 65536.
  CHECK(mpt_params("mpt-125m", 512) == 124131840);
  CHECK(mpt_params("mpt-125m", 65536) == 174070272);
}
