#pragma once
// A builder that reads like the framework code it mirrors:
//
//   ProgramBuilder b;
//   auto unshard = b.stream("unshard");
//   auto pg = b.comm("fsdp", world, nodes);
//   b.wait_stream(unshard, b.default_stream());          // unshard_stream.wait_stream(current)
//   auto full = b.alloc("full_param block.3", bytes, MemCategory::UnshardedParameters, unshard);
//   b.collective(pg, unshard, CollectiveKind::AllGather, bytes, Dtype::BF16, "AG block.3 fwd");
//
// Host CPU costs of launches, hooks and events are charged by the executor from the hardware
// profile, not here; HostWork is for extra CPU time a strategy knows about.

#include <algorithm>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "sim/core/error.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// The largest Program a step may have (docs/limits.md). Measured on Llama-3-8B FSDP2 with
// grad_accum 1000 (~400,000 instructions): 14 s and 1.1 GB resident, mostly the engine's
// timeline; real steps are far smaller (that example: ~400 instructions per micro-batch).
// Above the limit the builder throws ProgramTooLarge (an input error) instead of growing
// until bad_alloc.
inline constexpr std::size_t kMaxProgramInstructions = 1'000'000;

class ProgramTooLarge : public InputError {
 public:
  using InputError::InputError;
};

class ProgramBuilder {
 public:
  ProgramBuilder();

  StreamId default_stream() const { return StreamId{0}; }
  StreamId stream(const std::string& name, int priority = 0);
  CommId comm(const std::string& name, int ranks, int nodes);
  EventId new_event();

  // Text stored in the program's pool, for a Kernel's names: text({"fwd ", layer, " ", op}).
  Text text(std::string_view s) { return program_.text->add(s); }
  Text text(std::initializer_list<std::string_view> parts) { return program_.text->add(parts); }
  // A unit's name, stored once for each run of kernels of the same unit (a layer's ops are
  // launched one after another): each kernel stored its layer's name again.
  Text unit_text(std::string_view unit) {
    if (unit != last_unit_) last_unit_ = text(unit);
    return last_unit_;
  }
  // Texts of `pool` (a workload's launch names, Layer::text) may be stored in the program as
  // they are: the program's pool keeps `pool` alive.
  void borrow(const std::shared_ptr<const TextPool>& pool) {
    if (pool.get() != borrowed_) keep(pool);
  }
  TextPool& text_pool() { return *program_.text; }

  void launch(StreamId s, Kernel k);  // its work in the program's works (work()) or outliving the program
  void launch(StreamId s, const KernelSpec& k);  // its names stored in the pool, its work in the works
  // `w` stored in the program's works (Kernel::work).
  const KernelWork* work(const KernelWork& w) { return program_.works->add(w); }
  // Work number `id` of the workload whose launch names are in `names` (Layer::text), stored
  // once per program (WorkPool::add_numbered).
  const KernelWork* work(const TextPool* names, std::uint16_t id, const KernelWork& w) {
    return program_.works->add_numbered(names, id, w);
  }
  void collective(CommId c, StreamId s, CollectiveKind kind, Bytes bytes, Dtype dtype,
                  std::string_view name, std::string_view unit = {});
  // Named by the concatenation of `name` ({"AG ", unit, " ", pass}), written straight into the pool.
  void collective(CommId c, StreamId s, CollectiveKind kind, Bytes bytes, Dtype dtype,
                  std::initializer_list<std::string_view> name, std::string_view unit = {});
  EventId record(StreamId s);                 // new event recorded on s
  void record(EventId e, StreamId s);
  void wait(StreamId s, EventId e);
  void wait_stream(StreamId waiter, StreamId producer);  // torch: waiter.wait_stream(producer)
  // `reason` (the framework call that blocks) is written into the pool, as names are.
  void host_sync(EventId e, std::string_view reason);
  void host_sync_stream(StreamId s, std::string_view reason);
  BufferId alloc(std::string_view name, Bytes bytes, MemCategory cat, StreamId s);
  // Named by the concatenation of `name` ({"activations ", module, " ", op}), written straight
  // into the pool: a step allocates per op, and a heap string per name was one allocation each.
  BufferId alloc(std::initializer_list<std::string_view> name, Bytes bytes, MemCategory cat, StreamId s);
  // Alloc::lazy: optimizer state torch.optim creates at the first optimizer step, named as alloc's
  // ({"exp_avg ", param}: a heap string per parameter's state was 582 of the DDP example's 4,200
  // allocations a call).
  BufferId alloc_lazy_optimizer_state(std::initializer_list<std::string_view> name, Bytes bytes, StreamId s);
  void free(BufferId b);                                 // stream-ordered: effective at issue
  void free_after(BufferId b, RecordStreams record_streams);  // record_stream'ed free
  void host_work(Time t, std::string name);
  void mark(std::string name, std::optional<Phase> phase = std::nullopt);

  // Capacity for about n instructions (at most kMaxProgramInstructions): a sweep point builds a
  // program of 10^3-10^4 instructions, and growing the array moved every instruction once more.
  void reserve(std::size_t n) { program_.instructions.reserve(std::min(n, kMaxProgramInstructions)); }

  const Program& program() const { return program_; }
  Program take() { return std::move(program_); }

 private:
  // Constructs the instruction in place in the program (an instruction is 72 bytes; passing it
  // through a temporary variant moved it twice more).
  template <class T>
  void add(T&& instruction) {
    check_room();
    program_.instructions.emplace_back(std::in_place_type<std::decay_t<T>>, std::forward<T>(instruction));
  }
  void check_room() const;
  BufferId alloc_named(Text stored, Bytes bytes, MemCategory cat, StreamId s);  // `stored` in the pool
  void keep(const std::shared_ptr<const TextPool>& pool);  // borrow()'s first time
  Program program_;
  Text last_unit_;  // unit_text's
  const TextPool* borrowed_ = nullptr;  // the pool borrow() kept last
};

}  // namespace stepsim
