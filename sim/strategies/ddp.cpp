// PyTorch DistributedDataParallel, steady state (iteration >= 2, rebuilt buckets), following
// framework-semantics.md section 3 (D3.x) and script S8.3.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

namespace {

// The instructions DDP writes of its own per layer and micro-batch, beside its ops'
// (instruction_estimate, common.hpp): collectives, events, allocations.
constexpr std::size_t kDdpOwnPerLayer = 30;

// Its instructions, and Muon's per matrix of the blocks (launch_muon_step), Adafactor's or
// AdamW8bit's per parameter (launch_adafactor_step, launch_adamw8bit_step) when they step them.
std::size_t ddp_instruction_estimate(const Experiment& e) {
  std::size_t n = instruction_estimate(e, kDdpOwnPerLayer);
  if (e.training.optimizer == Optimizer::Muon) {
    const bool torch = e.training.muon_impl == MuonImpl::Torch;
    for (const Layer& l : e.workload->layers)
      for (const Param* p : l.params()) n += muon_matrix(l, *p) ? (torch ? kMuonInstructionsPerMatrix : kModdedMuonInstructionsPerMatrix) : 0;
    if (!torch) n += kModdedMuonInstructions;
  }
  if (e.training.optimizer == Optimizer::Adafactor)
    n += static_cast<std::size_t>(e.workload->param_count()) * kAdafactorInstructionsPerTensor;
  if (e.training.optimizer == Optimizer::AdamW8bit)  // and two more state allocations each, and the two maps
    n += static_cast<std::size_t>(e.workload->param_count()) * (kAdamw8bitInstructionsPerTensor + 2) + 2;
  if (e.training.optimizer == Optimizer::NorMuon)  // at most four groups, every parameter in one of them
    n += static_cast<std::size_t>(e.workload->param_count()) * (kDistAdamInstructionsPerParam + kNorMuonInstructionsPerParam + 2) +
         4 * kNorMuonInstructionsPerGroup;
  return n;
}

// modded-nanogpt 2025's parameters as its optimizers take them (its script: hidden_matrix_params
// and gate_params to NorMuon, scalar, head and embed params to DistAdam), by the names
// transformer.cpp (namespace nanogpt2025) gives them.
struct RecordParams {
  NorMuonStep step;
  std::vector<std::string> adam_names;
};

RecordParams record_params(const Workload& w, int world) {
  RecordParams r;
  std::int64_t smear = 0, gates = 0, attn = 0, mlp = 0, heads = 0, gate_inputs = 0;
  for (const Layer& l : w.layers)
    for (const Param* p : l.params()) {
      if (p->name.ends_with("smear_gate.weight")) {
        ++smear;
      } else if (p->name.ends_with("attn_gate.weight")) {
        ++gates;
        heads = p->dim0;
        gate_inputs = p->numel / p->dim0;
      } else if (p->name.ends_with("attn.qkvo_w")) {
        ++attn;
      } else if (p->name.ends_with("mlp.c_fc") || p->name.ends_with("mlp.c_proj")) {
        ++mlp;
      } else {
        r.step.adam_params.push_back(p->numel);
        r.step.adam_dtypes.push_back(p->name == "scalars" ? Dtype::FP32 : Dtype::BF16);
        r.adam_names.push_back(p->name);
      }
    }
  r.step.groups = normuon_groups(smear, gates, gate_inputs, heads, attn, mlp, w.hidden, world);
  r.step.world = world;
  return r;
}

struct DdpConfig {
  Bytes bucket_cap{25 * 1024 * 1024};   // D3.2: bucket_cap_mb=None -> 25 MiB
  Bytes first_bucket{1024 * 1024};      // D3.2: kDefaultFirstBucketBytes = 1 MiB
  bool gradient_as_bucket_view = false; // D3.6
  Dtype param_dtype = Dtype::FP32;      // model weights (autocast computes in the workload dtype)
  // No reducer: the optimizers reduce the gradients themselves (training.optimizer normuon).
  bool optimizer_syncs = false;
};

struct Bucket {
  std::size_t params = 0;  // gradients it holds
  Bytes bytes;
};

// The buckets and which one each parameter's gradient goes to: one array of (parameter, bucket)
// sorted by address, not a tree node per parameter or a vector per bucket (Llama-3-8B's
// tensors are mostly larger than the 25 MiB cap, so nearly every one is a bucket of its own:
// 580 of the DDP example's 4,200 allocations a call).
struct Buckets {
  std::vector<Bucket> buckets;
  std::vector<std::pair<const Param*, std::size_t>> bucket_of;

  std::size_t of(const Param* p) const {
    auto it = std::lower_bound(bucket_of.begin(), bucket_of.end(), p, [](const auto& e, const Param* q) { return e.first < q; });
    if (it == bucket_of.end() || it->first != p) throw std::logic_error("ddp: a gradient outside every bucket");
    return it->second;
  }
};

// Writes one step the way reducer.cpp runs it: one method per Reducer function, under its
// name, in the order autograd calls them.
class ReducerWriter {
 public:
  ReducerWriter(const DdpConfig& c, const Experiment& e, Buckets buckets)
      : c_(c), e_(e), w_(*e.workload), param_bytes_(dtype_bytes(c.param_dtype)), assignment_(std::move(buckets)),
        buckets_(assignment_.buckets), pending_(buckets_.size()) {
    if (normuon()) record_ = record_params(w_, e_.cluster.world_size());
  }

  Program write() {
    b_.reserve(ddp_instruction_estimate(e_));
    dflt_ = b_.default_stream();
    // c10d runs async collectives on its internal NCCL stream, which first waits on the
    // caller's current stream (G0.3, D3.7).
    nccl_ = b_.stream("nccl");
    process_group_ = b_.comm("ddp", e_.cluster.world_size(), e_.cluster.nodes);
    setup();
    const int A = e_.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) {
      const bool sync = micro == A - 1 || !e_.training.no_sync;
      b_.mark(fmt::format("forward {}", micro), Phase::Forward);
      std::vector<SavedActivations> acts = replicated_forward(b_, w_, dflt_, micro, &kept_output_);
      seed_loss_gradient(b_, dflt_, w_.loss_dtype);
      enter_backward(b_, e_, micro);
      backward(micro, sync, acts);
    }
    optimizer_step();
    return b_.take();
  }

 private:
  // Persistent state (M5.1): weights, bucket storage (D3.12), optimizer states.
  void setup() {
    b_.mark("setup", Phase::Setup);
    b_.alloc("parameters", Bytes{w_.numel() * param_bytes_}, MemCategory::Parameters, dflt_);
    if (normuon()) {
      // No reducer: DistAdam's moments (bf16, this rank's slice of each parameter) and NorMuon's
      // momentum (its chunk of each group, fp32) and second momentum (a row or column of it).
      const RecordParams& r = *record_;
      const std::int64_t W = e_.cluster.world_size();
      for (std::size_t i = 0; i < r.adam_names.size(); ++i) {
        const Bytes slice{r.step.adam_params[i] / W * 2};
        b_.alloc_lazy_optimizer_state({"exp_avg ", r.adam_names[i]}, slice, dflt_);
        b_.alloc_lazy_optimizer_state({"exp_avg_sq ", r.adam_names[i]}, slice, dflt_);
      }
      for (const NorMuonGroup& g : r.step.groups) {
        const std::int64_t chunk = (g.params + W - 1) / W;
        const std::int64_t eb = dtype_bytes(g.dtype);
        b_.alloc_lazy_optimizer_state({"momentum_buffer normuon group"}, Bytes{chunk * g.rows * g.cols * eb}, dflt_);
        b_.alloc_lazy_optimizer_state({"second_momentum_buffer normuon group"}, Bytes{chunk * std::max(g.rows, g.cols) * eb}, dflt_);
      }
      kept_output_.setup(b_, w_, dflt_);
      return;
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      b_.alloc(fmt::format("bucket {}", i), buckets_[i].bytes, MemCategory::CommBuffers, dflt_);
    // AdamW8bit: the quantization maps, moved to the GPU at the first 8-bit parameter's init_state.
    if (e_.training.optimizer == Optimizer::AdamW8bit && std::ranges::any_of(w_.layers, [](const Layer& l) {
          return std::ranges::any_of(l.params(), [](const Param* p) { return bnb_8bit(p->numel); });
        }))
      alloc_adamw8bit_maps(b_, dflt_);
    for (const Layer& l : w_.layers)
      for (const Param* p : l.params()) alloc_param_optimizer_state(b_, e_.training.optimizer, l, *p, c_.param_dtype, dflt_);
    kept_output_.setup(b_, w_, dflt_);
  }

  // Layers in reverse; each layer's gradients fire their AccumulateGrad hooks in reverse
  // parameter order. With sync, finalize_backward runs once the last hook has fired.
  void backward(int micro, bool sync, std::vector<SavedActivations>& acts) {
    if (sync) prepare_for_backward();
    for (std::size_t li = w_.layers.size(); li-- > 0;) {
      const Layer& l = w_.layers[li];
      layer_backward(b_, l, micro, dflt_, acts[li]);
      auto ps = l.params();
      if (ps.empty()) continue;
      // AccumulateGrad allocates .grad on the first micro-batch (set_to_none zero_grad);
      // with gradient_as_bucket_view it writes into the bucket view instead.
      if (micro == 0 && !c_.gradient_as_bucket_view)
        grads_.push_back(b_.alloc(".grad " + l.name, Bytes{l.numel() * param_bytes_}, MemCategory::Gradients, dflt_));
      if (!sync || normuon()) continue;  // no_sync: hooks return at once (D3.10); normuon: no DDP
      for (auto p = ps.rbegin(); p != ps.rend(); ++p) autograd_hook(*p);
    }
    if (sync && !normuon()) finalize_backward();
    if (normuon() && micro == 0 && e_.training.normuon_odd_step) accumulate_adam_grads();
  }

  // The record zeroes DistAdam's gradients only after its odd steps (step_optimizers: an even
  // step steps and zeroes NorMuon alone), so in an odd step every one of them is accumulated
  // onto the even step's: AccumulateGrad's add, once the compiled backward has returned them all.
  // An even step's are new (the odd step before it zeroed every gradient).
  // The lm_head's gradient, written by the transposed FP8 GEMM, is added through TensorIterator's
  // strided path (elementwise_kernel<128, 4>, 322 us against 77 us for an embedding's in the
  // trace's ProfilerStep#13).
  void accumulate_adam_grads() {
    for (const Layer& l : w_.layers)
      for (const Param* p : l.params()) {
        const bool head = p->name == "lm_head.weight";
        if (!head && l.kind != LayerKind::Embedding) continue;
        if (p->name.ends_with("smear_gate.weight")) continue;  // NorMuon's: zeroed every step
        const std::int64_t eb = p->name == "scalars" ? 4 : 2;
        KernelSpec k = elementwise("AccumulateGrad add " + p->name, Bytes{3 * p->numel * eb}, l.name,
                                   head ? KernelClass::ElementwiseStrided : KernelClass::Elementwise);
        if (head) k.work.elements = p->numel;
        b_.launch(dflt_, k);
      }
  }

  bool normuon() const { return e_.training.optimizer == Optimizer::NorMuon; }

  // prepare_for_backward -> reset_bucket_counting: every bucket waits for all its gradients.
  void prepare_for_backward() {
    for (std::size_t& p : pending_) p = 0;
    next_bucket_ = 0;
  }

  // autograd_hook -> mark_variable_ready.
  void autograd_hook(const Param* p) {
    const std::size_t bi = assignment_.of(p);
    mark_variable_ready_dense(p, bi);
    if (++pending_[bi] == buckets_[bi].params) mark_bucket_ready();
  }

  // D3.6: bucket_view = grad * (1/W), one kernel on the current stream.
  void mark_variable_ready_dense(const Param* p, std::size_t bi) {
    const Bytes grad{p->numel * param_bytes_};
    KernelWork w;
    w.memory_bytes = grad * 2;
    b_.launch(dflt_, Kernel{.name = b_.text({"grad->bucket ", p->name}), .cls = KernelClass::Elementwise, .work = b_.work(w),
                            .unit = b_.text(fmt::format("bucket {}", bi))});
  }

  // D3.7: buckets launch strictly in order; a ready bucket waits for every earlier one.
  void mark_bucket_ready() {
    while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == buckets_[next_bucket_].params)
      all_reduce_bucket(next_bucket_++);
  }

  void all_reduce_bucket(std::size_t bi) {
    b_.wait_stream(nccl_, dflt_);
    b_.collective(process_group_, nccl_, CollectiveKind::AllReduce, buckets_[bi].bytes, c_.param_dtype,
                  fmt::format("AR bucket {}", bi), fmt::format("bucket {}", bi));
  }

  // D3.8 finalize_backward: the current stream waits for every bucket's all-reduce; without
  // gradient_as_bucket_view each bucket is copied back into .grad (finalize_bucket_dense).
  void finalize_backward() {
    b_.wait_stream(dflt_, nccl_);
    if (!c_.gradient_as_bucket_view)
      for (std::size_t i = 0; i < buckets_.size(); ++i) finalize_bucket_dense(i);
  }

  void finalize_bucket_dense(std::size_t bi) {
    b_.launch(dflt_, elementwise(fmt::format("bucket->grad {}", bi), buckets_[bi].bytes * 2, fmt::format("bucket {}", bi),
                                 KernelClass::Copy));
  }

  // The training loop's clip_grad_norm_ (local: every replica holds the averaged gradients) and
  // optimizer.step() over the parameters (one tensor each). Muon: AdamW's step over what Muon
  // leaves, then Muon's over the blocks' matrices (two optimizers, stepped in that order).
  void optimizer_step() {
    const std::int64_t tensors = w_.param_count();
    if (loop_clips_grad_norm(e_))
      launch_clip_grad_norm(b_, dflt_, {.numel = w_.numel(), .tensors = tensors, .dtype = c_.param_dtype, .per_tensor = false});
    b_.mark("optimizer", Phase::Optimizer);
    if (e_.training.optimizer == Optimizer::Muon) {
      MuonStep muon{.dtype = c_.param_dtype};
      std::int64_t rest = 0, rest_tensors = 0;
      for (const Layer& l : w_.layers)
        for (const Param* p : l.params()) {
          if (muon_matrix(l, *p)) {
            muon.matrices.push_back(MuonMatrix{p->dim0, p->numel / p->dim0});
          } else {
            rest += p->numel;
            ++rest_tensors;
          }
        }
      launch_optimizer_step(b_, dflt_, {.optimizer = Optimizer::AdamW, .impl = loop_optimizer_impl(e_), .numel = rest,
                                        .tensors = rest_tensors, .dtype = c_.param_dtype});
      if (e_.training.muon_impl == MuonImpl::Torch) {
        launch_muon_step(b_, dflt_, muon);
      } else {
        const bool distributed = e_.training.muon_impl == MuonImpl::ModdedNanogptDistributed;
        launch_modded_muon_step(b_, dflt_, {.matrices = std::move(muon.matrices), .dtype = c_.param_dtype,
                                            .world = distributed ? e_.cluster.world_size() : 1, .rank = 0,
                                            .comm = process_group_, .nccl = nccl_});
      }
    } else if (normuon()) {
      NorMuonStep step = record_->step;  // the names stay with the record: the step reads none
      if (!e_.training.normuon_odd_step) {  // an even step: NorMuon alone
        step.adam_params.clear();
        step.adam_dtypes.clear();
      }
      step.comm = process_group_;
      step.nccl = nccl_;
      launch_normuon_step(b_, dflt_, step);
    } else if (e_.training.optimizer == Optimizer::Adafactor) {
      AdafactorStep step{.dtype = c_.param_dtype};
      for (const Layer& l : w_.layers)
        for (const Param* p : l.params()) step.tensors.push_back(adafactor_tensor(*p));
      launch_adafactor_step(b_, dflt_, step);
    } else if (e_.training.optimizer == Optimizer::AdamW8bit) {
      Adamw8bitStep step{.dtype = c_.param_dtype};
      for (const Layer& l : w_.layers)
        for (const Param* p : l.params()) step.tensors.push_back(p->numel);
      launch_adamw8bit_step(b_, dflt_, step);
    } else {
      launch_optimizer_step(b_, dflt_, {.optimizer = e_.training.optimizer, .impl = loop_optimizer_impl(e_), .numel = w_.numel(),
                                        .tensors = tensors, .dtype = c_.param_dtype});
    }
    for (BufferId g : grads_) b_.free(g);  // zero_grad(set_to_none=True)
  }

  const DdpConfig& c_;
  const Experiment& e_;
  const Workload& w_;
  const std::int64_t param_bytes_;  // bytes per element of the parameters (and buckets)
  const Buckets assignment_;
  const std::vector<Bucket>& buckets_;
  ProgramBuilder b_;
  StreamId dflt_{0}, nccl_{0};
  KeptOutput kept_output_;
  CommId process_group_{0};
  std::vector<std::size_t> pending_;  // per bucket: gradients marked ready in this backward
  std::size_t next_bucket_ = 0;       // the next bucket to all-reduce (in order)
  std::vector<BufferId> grads_;       // .grad per layer (AccumulateGrad), unless they alias buckets
  std::optional<RecordParams> record_;  // normuon: the parameters as its optimizers take them
};

class Ddp final : public Strategy {
 public:
  explicit Ddp(DdpConfig c) : c_(c) {}
  std::string framework() const override { return "ddp"; }

  nlohmann::json effective_config() const override {
    // normuon: no reducer, so no bucket setting applies (parse_ddp refuses them).
    if (c_.optimizer_syncs) return {{"framework", "ddp"}, {"param_dtype", to_string(c_.param_dtype)}};
    return {{"framework", "ddp"},
            {"bucket_cap_bytes", c_.bucket_cap.count},
            {"first_bucket_bytes", c_.first_bucket.count},
            {"gradient_as_bucket_view", c_.gradient_as_bucket_view},
            {"param_dtype", to_string(c_.param_dtype)}};
  }

  // D3.3 + D3.5: walk gradients in ready order (reverse layer order, reverse parameter order
  // inside a layer), append to the open bucket, close it once its size reaches the current
  // limit (the crossing tensor stays in); limits are [first_bucket, cap, cap, ...].
  Buckets assign_buckets(const Workload& w) const {
    Buckets out;
    out.bucket_of.reserve(static_cast<std::size_t>(w.param_count()));
    Bucket open;
    Bytes limit = c_.first_bucket;
    for (auto l = w.layers.rbegin(); l != w.layers.rend(); ++l) {
      auto ps = l->params();
      for (auto p = ps.rbegin(); p != ps.rend(); ++p) {
        out.bucket_of.emplace_back(*p, out.buckets.size());
        ++open.params;
        open.bytes += Bytes{(*p)->numel * dtype_bytes(c_.param_dtype)};
        if (open.bytes >= limit) {
          out.buckets.push_back(open);
          open = Bucket{};
          limit = c_.bucket_cap;
        }
      }
    }
    if (open.params > 0) out.buckets.push_back(open);
    std::sort(out.bucket_of.begin(), out.bucket_of.end());
    return out;
  }

  // normuon: no reducer, so no buckets to assign.
  Program build(const Experiment& e) const override {
    return ReducerWriter(c_, e, c_.optimizer_syncs ? Buckets{} : assign_buckets(*e.workload)).write();
  }
  std::size_t instruction_estimate(const Experiment& e) const override { return ddp_instruction_estimate(e); }

 private:
  DdpConfig c_;
};

}  // namespace

std::unique_ptr<Strategy> parse_ddp(ObjectReader& r, const Experiment& e) {
  DdpConfig c;
  // modded-nanogpt 2025 wraps no DDP: its optimizers reduce the gradients (launch_normuon_step).
  if (e.training.optimizer == Optimizer::NorMuon)
    for (const char* key : {"bucket_cap_mb", "bucket_cap_bytes", "first_bucket_bytes", "gradient_as_bucket_view"})
      if (r.has(key)) r.fail(key, "no DDP bucket setting with the optimizer normuon (its record wraps no DDP: NorMuon and DistAdam reduce the gradients)");
  bool explicit_cap = false;
  if (r.has("bucket_cap_mb") && r.has("bucket_cap_bytes")) r.fail("bucket_cap_bytes", "either bucket_cap_mb or bucket_cap_bytes, not both");
  if (r.has("bucket_cap_mb")) {
    c.bucket_cap = Bytes{static_cast<std::int64_t>(r.positive("bucket_cap_mb") * 1024 * 1024)};
    explicit_cap = true;
  }
  if (r.has("bucket_cap_bytes")) {
    c.bucket_cap = Bytes{r.positive_integer("bucket_cap_bytes")};
    explicit_cap = true;
  }
  // Recent distributed.py passes the user's cap as the first-bucket cap too (D3.2).
  c.first_bucket = explicit_cap ? c.bucket_cap : Bytes{1024 * 1024};
  if (r.has("first_bucket_bytes")) c.first_bucket = Bytes{r.positive_integer("first_bucket_bytes")};
  c.gradient_as_bucket_view = r.declared_boolean("gradient_as_bucket_view");
  c.param_dtype = r.dtype("param_dtype", Dtype::FP32);
  c.optimizer_syncs = e.training.optimizer == Optimizer::NorMuon;
  return std::make_unique<Ddp>(c);
}

}  // namespace stepsim
