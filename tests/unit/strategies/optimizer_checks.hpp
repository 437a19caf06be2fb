#pragma once
// What a DDP optimizer step that keeps less state than AdamW and makes the host wait for the GPU
// (Adafactor's .item() calls, bitsandbytes' synchronize per parameter) shows beside AdamW's on the
// same experiment.
#include <cstdint>

#include <catch2/catch.hpp>

#include "sim/analysis/run.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim::test {

// The persistent memory lower by AdamW's two fp32 moments (8 B a parameter) less `state`, its own
// state's bytes (the live bytes: the caching allocator's rounding is not in them); the GPU idle
// longer (the host's waits); and the program within the instructions its strategy reserves.
inline void check_beside_adamw(const Experiment& adamw, const Experiment& other, std::int64_t state) {
  const SimulationResult ra = run_experiment(adamw), ro = run_experiment(other);
  CHECK(ra.metrics.persistent_memory - ro.metrics.persistent_memory == Bytes{8 * adamw.workload->numel() - state});
  CHECK(ro.metrics.overlap.idle > ra.metrics.overlap.idle);
  const Program p = other.strategy->build(other);
  CHECK(p.instructions.size() <= other.strategy->instruction_estimate(other));
}

}  // namespace stepsim::test
