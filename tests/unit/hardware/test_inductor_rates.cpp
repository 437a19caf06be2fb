// The reductions torch.compile generates (compute.memory_bandwidth_GBps.inductor_reduction,
// issue 47): a Norm or Reduction kernel marked generated runs at the profile's measured Inductor
// rate; aten's kernels, and any kernel on a profile without that rate, at their class's.
#include <catch2/catch.hpp>

#include "sim/hardware/compute_model.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

using namespace stepsim;

namespace {

KernelSpec memory_kernel(KernelClass cls, bool generated) {
  KernelSpec k;
  k.cls = cls;
  k.kernels = 1;
  k.work.memory_bytes = Bytes{1'000'000'000};  // 1 GB: 1 ms at 1,000 GB/s
  k.work.generated = generated;
  return k;
}

}  // namespace

TEST_CASE("A generated reduction or norm runs at inductor_reduction; aten's, and pointwise kernels, at their class's",
          "[hardware][compile]") {
  ComputeProfile c;
  c.min_kernel_time = Time::zero();
  c.hbm = Bandwidth::from_gbps(3350);
  c.class_bandwidth[KernelClass::Norm] = Bandwidth::from_gbps(1000);
  c.class_bandwidth[KernelClass::Reduction] = Bandwidth::from_gbps(1250);
  c.class_bandwidth[KernelClass::Elementwise] = Bandwidth::from_gbps(2500);
  KernelTimeCache without(c);
  CHECK(without.kernel_time(memory_kernel(KernelClass::Norm, true)) == Time::from_ms(1));  // no rate: the class's
  c.inductor_reduction = Bandwidth::from_gbps(2000);
  KernelTimeCache with(c);
  CHECK(with.kernel_time(memory_kernel(KernelClass::Norm, true)) == Time::from_us(500));
  CHECK(with.kernel_time(memory_kernel(KernelClass::Reduction, true)) == Time::from_us(500));
  CHECK(with.kernel_time(memory_kernel(KernelClass::Norm, false)) == Time::from_ms(1));
  CHECK(with.kernel_time(memory_kernel(KernelClass::Reduction, false)) == Time::from_us(800));
  CHECK(with.kernel_time(memory_kernel(KernelClass::Elementwise, true)) == Time::from_us(400));
}

TEST_CASE("Compiled blocks' memory-bound kernels are generated; the eager ones and the eager loss of a block-compiled "
          "model are not",
          "[workload][compile]") {
  const auto count = [](bool compile) {
    nlohmann::json doc = {{"workload", {{"preset", "llama3-8b"}, {"seq_len", 2048}, {"micro_batch", 1}, {"compile", compile}}},
                          {"cluster", {{"profile", "configs/hardware/h100-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                          {"strategy", {{"framework", "fsdp2"}}}};
    const Experiment e = test::experiment_from_doc(doc);
    std::map<std::string, std::pair<int, int>> out;  // layer kind -> generated, memory-bound
    for (const Layer& l : e.workload->layers)
      for (const Module& m : l.modules)
        for (const auto* ops : {&m.forward, &m.backward})
          for (const Op& op : *ops)
            if (op.cls != KernelClass::Gemm && op.cls != KernelClass::Attention) {
              auto& [generated, all] = out[to_string(l.kind)];
              generated += op.work.generated;
              ++all;
            }
    return out;
  };
  for (const auto& [kind, n] : count(false)) CHECK(n.first == 0);
  const auto compiled = count(true);
  CHECK(compiled.at("block").first == compiled.at("block").second);  // torchtitan compiles each block
  CHECK(compiled.at("head").first == 0);                               // and not the loss
  CHECK(compiled.at("norm").first == 0);
}
