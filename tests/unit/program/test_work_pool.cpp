// A program's kernels hold their work by pointer into the program's works (Program::works):
// each work its workload numbered is stored once, and every launch reads the work it was
// launched with.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/program/builder.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/workload/workload.hpp"
#include "tests/test_support.hpp"

using namespace stepsim;

namespace {

std::vector<const Kernel*> launches(const Program& p) {
  std::vector<const Kernel*> out;
  for (const Instruction& in : p.instructions)
    if (const auto* l = std::get_if<Launch>(&in)) out.push_back(&l->kernel);
  return out;
}

}  // namespace

TEST_CASE("a work pool keeps its works where they were stored as it grows", "[program]") {
  WorkPool pool;
  std::vector<const KernelWork*> stored;
  for (std::int64_t i = 0; i < 1000; ++i) {
    KernelWork w;
    w.memory_bytes = Bytes{i};
    stored.push_back(pool.add(w));
  }
  CHECK(pool.size() == 1000);
  for (std::int64_t i = 0; i < 1000; ++i) CHECK(stored[static_cast<std::size_t>(i)]->memory_bytes == Bytes{i});

  // Numbered works of one workload are stored once; another workload's numbers are its own.
  KernelWork a, b;
  a.fixed = Time::from_us(1);
  b.fixed = Time::from_us(2);
  const int first = 0, second = 0;
  const KernelWork* one = pool.add_numbered(&first, 7, a);
  CHECK(pool.add_numbered(&first, 7, b) == one);  // number 7 is a's
  CHECK(pool.add_numbered(&second, 7, b)->fixed == Time::from_us(2));
  CHECK(pool.add_numbered(&first, 0, b) != pool.add_numbered(&first, 0, b));  // 0: not numbered
}

TEST_CASE("a program's launches read the works of their ops, each numbered work stored once", "[program]") {
  for (const char* framework : {"fsdp1", "fsdp2", "ddp"}) {
    CAPTURE(framework);
    const Experiment e = test::llama2_7b_on_8_h100(framework, "{}");  // full checkpointing: recompute launches too
    const Program numbered = e.strategy->build(e);

    // The same workload without its numbers: every launch stores its own work.
    Workload w = *e.workload;
    for (Layer& l : w.layers) {
      for (Module& m : l.modules) {
        for (Op& op : m.forward) op.work_id = 0;
        for (Op& op : m.backward) op.work_id = 0;
      }
      for (Op& op : l.recompute) op.work_id = 0;
    }
    Experiment plain_e = e;
    plain_e.workload = std::make_shared<const Workload>(std::move(w));
    const Program plain = plain_e.strategy->build(plain_e);

    const auto a = launches(numbered), b = launches(plain);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() > 100);
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(*a[i]->work == *b[i]->work);
      CHECK(a[i]->name == b[i]->name);
      for (std::size_t j = i + 1; j < a.size() && j < i + 40; ++j)
        if (a[i]->work_id != 0 && a[i]->work_id == a[j]->work_id) CHECK(a[i]->work == a[j]->work);
    }
    CHECK(numbered.works->size() < plain.works->size());
    CHECK(plain.works->size() >= a.size());

    // A copy shares the works.
    const Program copy = numbered;
    CHECK(copy.works == numbered.works);
    CHECK(launches(copy)[5]->work == a[5]->work);
  }
}
