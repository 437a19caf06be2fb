#include "sim/program/program.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "sim/program/builder.hpp"

namespace stepsim {

std::string to_string(Phase p) {
  switch (p) {
    case Phase::Setup: return "setup";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "setup";
}

std::string_view name_of(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllToAll: return "all_to_all";
  }
  return "all_reduce";
}

std::string to_string(CollectiveKind k) { return std::string(name_of(k)); }

std::string short_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "AR";
    case CollectiveKind::AllGather: return "AG";
    case CollectiveKind::ReduceScatter: return "RS";
    case CollectiveKind::Broadcast: return "BC";
    case CollectiveKind::Reduce: return "RD";
    case CollectiveKind::AllToAll: return "A2A";
  }
  return "AR";
}

CollectiveKind parse_collective_kind(const std::string& name) {
  if (name == "all_reduce" || name == "allreduce") return CollectiveKind::AllReduce;
  if (name == "all_gather" || name == "allgather") return CollectiveKind::AllGather;
  if (name == "reduce_scatter" || name == "reducescatter") return CollectiveKind::ReduceScatter;
  if (name == "broadcast") return CollectiveKind::Broadcast;
  if (name == "reduce") return CollectiveKind::Reduce;
  if (name == "all_to_all" || name == "alltoall") return CollectiveKind::AllToAll;
  throw std::invalid_argument("one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all");
}

std::string to_string(MemCategory c) {
  switch (c) {
    case MemCategory::Parameters: return "parameters";
    case MemCategory::UnshardedParameters: return "unsharded_parameters";
    case MemCategory::Gradients: return "gradients";
    case MemCategory::OptimizerState: return "optimizer_state";
    case MemCategory::Activations: return "activations";
    case MemCategory::CommBuffers: return "communication_buffers";
    case MemCategory::Other: return "other";
  }
  return "other";
}

std::string_view to_string(GemmLayout l) {
  switch (l) {
    case GemmLayout::NN: return "nn";
    case GemmLayout::NT: return "nt";
    case GemmLayout::TN: return "tn";
    case GemmLayout::Any: break;
  }
  return "";
}

GemmLayout parse_gemm_layout(std::string_view s) {
  for (GemmLayout l : {GemmLayout::NN, GemmLayout::NT, GemmLayout::TN})
    if (s == to_string(l)) return l;
  return GemmLayout::Any;
}

GemmLayout gemm_layout_of_kernel(std::string_view name) {
  for (std::size_t pos = name.size(); pos >= 3;) {
    pos = name.rfind('_', pos - 1);
    if (pos == std::string_view::npos) break;
    if (pos + 3 > name.size()) continue;
    const std::string_view code = name.substr(pos + 1, 2);
    const char after = pos + 3 < name.size() ? name[pos + 3] : '\0';
    if (after != '\0' && after != '_' && after != '>' && after != '(') continue;
    if (const GemmLayout l = parse_gemm_layout(code); l != GemmLayout::Any) return l;
    if (pos == 0) break;
  }
  return GemmLayout::Any;
}

std::string to_string(KernelClass c) {
  switch (c) {
    case KernelClass::Compute: return "compute";
    case KernelClass::Gemm: return "gemm";
    case KernelClass::Attention: return "attention";
    case KernelClass::Elementwise: return "elementwise";
    case KernelClass::ElementwiseStrided: return "elementwise_strided";
    case KernelClass::Reduction: return "reduction";
    case KernelClass::Norm: return "norm";
    case KernelClass::Copy: return "copy";
    case KernelClass::Embedding: return "embedding";
    case KernelClass::Optimizer: return "optimizer";
  }
  return "compute";
}

KernelClass parse_kernel_class(const std::string& name) {
  for (int i = 0; i < kKernelClassCount; ++i) {
    auto c = static_cast<KernelClass>(i);
    if (to_string(c) == name) return c;
  }
  throw std::out_of_range(name);
}

bool is_memory_bound(KernelClass c) {
  switch (c) {
    case KernelClass::Compute:
    case KernelClass::Gemm:
    case KernelClass::Attention: return false;
    default: return true;
  }
}

const KernelWork kNoWork{};

const KernelWork* WorkPool::add(const KernelWork& w) {
  if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<KernelWork[]>(kChunk));
  KernelWork& slot = chunks_.back()[size_ % kChunk];
  slot = w;
  ++size_;
  return &slot;
}

const KernelWork* WorkPool::store_numbered(const void* workload, std::uint16_t id, const KernelWork& w) {
  if (id == 0 || workload == nullptr) return add(w);
  if (numbered_from_ == nullptr) numbered_from_ = workload;
  if (workload != numbered_from_) return add(w);  // a second workload's numbers are its own
  if (id >= numbered_.size()) numbered_.resize(std::max<std::size_t>(id + 1, 2 * numbered_.size()), nullptr);
  if (numbered_[id] == nullptr) numbered_[id] = add(w);
  return numbered_[id];
}

KernelWork& KernelWork::operator+=(const KernelWork& o) {
  generated = empty() ? o.generated : generated && o.generated;  // generated only if every part is
  gemms.append(o.gemms);
  memory_bytes += o.memory_bytes;
  elements += o.elements;
  cast_elements += o.cast_elements;
  tensor = Bytes{std::max(tensor.count, o.tensor.count)};
  if (attention.flops.count == 0) {
    attention = o.attention;
  } else {
    attention.flops += o.attention.flops;
  }
  fixed += o.fixed;
  return *this;
}

Flops fused_attention_flops(std::int64_t batch, std::int64_t seq, std::int64_t hidden, bool backward, bool causal) {
  const double s2h = static_cast<double>(batch) * static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(hidden);
  return Flops{(backward ? 5.0 : 2.0) * s2h * (causal ? 1.0 : 2.0)};
}

// The first flash_attn releases without the 224 and the 160 kernels (program.hpp).
static constexpr Release kFlashAttnWithout224{2, 6, 2};
static constexpr Release kFlashAttnWithout160{2, 8, 0};

std::int64_t attention_kernel_head_dim(AttentionKernel k, std::int64_t head_dim, Release flash_attn) {
  if (head_dim <= 0) return head_dim;
  switch (k) {
    case AttentionKernel::Flash:
    case AttentionKernel::SdpaFlash: {
      if (head_dim > 256) return head_dim;
      const std::int64_t w = (head_dim + 31) / 32 * 32;
      if (k == AttentionKernel::SdpaFlash) return w;
      if (w == 224 && flash_attn >= kFlashAttnWithout224) return 256;
      if (w == 160 && flash_attn >= kFlashAttnWithout160) return 192;
      return w;
    }
    case AttentionKernel::FlashTriton: {
      if (head_dim > 128) return head_dim;  // the kernel asserts d <= 128
      std::int64_t w = 16;
      while (w < head_dim) w *= 2;
      return w;
    }
    case AttentionKernel::Flash3:
    case AttentionKernel::SdpaEfficient:
    case AttentionKernel::SdpaCudnn: return head_dim;
  }
  return head_dim;
}

Flops attention_executed_flops(const AttentionWork& a) {
  if (a.head_dim <= 0) return a.flops;
  return Flops{a.flops.count * static_cast<double>(attention_kernel_head_dim(a.kernel, a.head_dim, a.flash_attn)) /
               static_cast<double>(a.head_dim)};
}

std::string to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::Flash: return "flash";
    case AttentionKernel::SdpaFlash: return "sdpa_flash";
    case AttentionKernel::FlashTriton: return "flash_triton";
    case AttentionKernel::Flash3: return "flash3";
    case AttentionKernel::SdpaEfficient: return "sdpa_efficient";
    case AttentionKernel::SdpaCudnn: return "sdpa_cudnn";
  }
  return "flash";
}

ProgramBuilder::ProgramBuilder() { program_.streams.push_back(StreamDecl{"default", 0}); }

void ProgramBuilder::keep(const std::shared_ptr<const TextPool>& pool) {
  program_.text->keep(pool);
  borrowed_ = pool.get();
}

StreamId ProgramBuilder::stream(const std::string& name, int priority) {
  program_.streams.push_back(StreamDecl{name, priority});
  return StreamId{program_.streams.size() - 1};
}

CommId ProgramBuilder::comm(const std::string& name, int ranks, int nodes) {
  program_.comms.push_back(CommDecl{name, ranks, nodes});
  return CommId{program_.comms.size() - 1};
}

void ProgramBuilder::check_room() const {
  if (program_.instructions.size() >= kMaxProgramInstructions)
    throw ProgramTooLarge(fmt::format("the step's program exceeds {} instructions (about layers x grad_accum x 20): expected "
                                      "fewer layers or a smaller grad_accum (docs/limits.md)",
                                      kMaxProgramInstructions));
}

EventId ProgramBuilder::new_event() { return EventId{static_cast<std::size_t>(program_.event_count++)}; }

void ProgramBuilder::launch(StreamId s, Kernel k) {
  add(Launch{s, std::move(k)});
}

void ProgramBuilder::launch(StreamId s, const KernelSpec& k) {
  add(Launch{s, Kernel{text(k.name), k.cls, k.dispatch, k.work_id, k.kernels, work(k.work), text(k.unit)}});
}

void ProgramBuilder::collective(CommId c, StreamId s, CollectiveKind kind, Bytes bytes, Dtype dtype,
                                std::string_view name, std::string_view unit) {
  collective(c, s, kind, bytes, dtype, {name}, unit);
}

void ProgramBuilder::collective(CommId c, StreamId s, CollectiveKind kind, Bytes bytes, Dtype dtype,
                                std::initializer_list<std::string_view> name, std::string_view unit) {
  if (c.index() < program_.comms.size()) ++program_.comms[c.index()].collectives;  // else the checker refuses it
  add(Collective{c, s, kind, bytes, dtype, text(name), text(unit)});
}

EventId ProgramBuilder::record(StreamId s) {
  EventId e = new_event();
  record(e, s);
  return e;
}

void ProgramBuilder::record(EventId e, StreamId s) { add(Record{e, s}); }
void ProgramBuilder::wait(StreamId s, EventId e) { add(Wait{s, e}); }

void ProgramBuilder::wait_stream(StreamId waiter, StreamId producer) {
  if (waiter == producer) return;
  wait(waiter, record(producer));
}

void ProgramBuilder::host_sync(EventId e, std::string_view reason) { add(HostSync{e, text(reason)}); }

void ProgramBuilder::host_sync_stream(StreamId s, std::string_view reason) { add(HostSync{s, text(reason)}); }

BufferId ProgramBuilder::alloc(std::string_view name, Bytes bytes, MemCategory cat, StreamId s) {
  return alloc_named(text(name), bytes, cat, s);
}

BufferId ProgramBuilder::alloc(std::initializer_list<std::string_view> name, Bytes bytes, MemCategory cat, StreamId s) {
  return alloc_named(text(name), bytes, cat, s);
}

BufferId ProgramBuilder::alloc_named(Text stored, Bytes bytes, MemCategory cat, StreamId s) {
  BufferId b{program_.buffer_count++};
  program_.buffer_names.push_back(stored);
  add(Alloc{b, bytes, cat, s, stored});
  return b;
}

BufferId ProgramBuilder::alloc_lazy_optimizer_state(std::initializer_list<std::string_view> name, Bytes bytes, StreamId s) {
  BufferId b = alloc_named(text(name), bytes, MemCategory::OptimizerState, s);
  std::get<Alloc>(program_.instructions.back()).lazy = true;
  return b;
}

void ProgramBuilder::free(BufferId b) { add(Free{b, {}}); }

void ProgramBuilder::free_after(BufferId b, RecordStreams record_streams) {
  add(Free{b, record_streams});
}

void ProgramBuilder::host_work(Time t, std::string name) {
  add(HostWork{t, std::move(name)});
}

void ProgramBuilder::mark(std::string name, std::optional<Phase> phase) {
  add(Mark{std::move(name), phase});
}

}  // namespace stepsim
