// PyTorch DistributedDataParallel, steady state (iteration >= 2, rebuilt buckets), following
// framework-semantics.md section 3 (D3.x) and script S8.3.
#include <map>

#include <fmt/format.h>

#include "sim/program/builder.hpp"
#include "sim/strategies/common.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

namespace {

struct DdpConfig {
  Bytes bucket_cap{25 * 1024 * 1024};   // D3.2: bucket_cap_mb=None -> 25 MiB
  Bytes first_bucket{1024 * 1024};      // D3.2: kDefaultFirstBucketBytes = 1 MiB
  bool gradient_as_bucket_view = false; // D3.6
  Dtype param_dtype = Dtype::FP32;      // model weights (autocast computes in the workload dtype)
};

struct Bucket {
  std::vector<const Param*> params;
  Bytes bytes;
};

class Ddp final : public Strategy {
 public:
  explicit Ddp(DdpConfig c) : c_(c) {}
  std::string framework() const override { return "ddp"; }

  nlohmann::json effective_config() const override {
    return {{"framework", "ddp"},
            {"bucket_cap_bytes", c_.bucket_cap.count},
            {"first_bucket_bytes", c_.first_bucket.count},
            {"gradient_as_bucket_view", c_.gradient_as_bucket_view},
            {"param_dtype", to_string(c_.param_dtype)}};
  }

  // D3.3 + D3.5: walk gradients in ready order (reverse layer order, reverse parameter order
  // inside a layer), append to the open bucket, close it once its size reaches the current
  // limit (the crossing tensor stays in); limits are [first_bucket, cap, cap, ...].
  std::vector<Bucket> assign_buckets(const Workload& w) const {
    std::vector<Bucket> buckets;
    Bucket open;
    Bytes limit = c_.first_bucket;
    for (auto l = w.layers.rbegin(); l != w.layers.rend(); ++l) {
      auto ps = l->params();
      for (auto p = ps.rbegin(); p != ps.rend(); ++p) {
        open.params.push_back(*p);
        open.bytes += Bytes{(*p)->numel * dtype_bytes(c_.param_dtype)};
        if (open.bytes >= limit) {
          buckets.push_back(std::move(open));
          open = Bucket{};
          limit = c_.bucket_cap;
        }
      }
    }
    if (!open.params.empty()) buckets.push_back(std::move(open));
    return buckets;
  }

  Program build(const Experiment& e) const override {
    const Workload& w = e.workload;
    const int W = e.cluster.world_size();
    const std::int64_t pdt = dtype_bytes(c_.param_dtype);
    const std::int64_t numel = w.numel();
    ProgramBuilder b;
    const StreamId dflt = b.default_stream();
    // c10d runs async collectives on its internal NCCL stream, which first waits on the
    // caller's current stream (G0.3, D3.7).
    const StreamId nccl = b.stream("nccl");
    const CommId pg = b.comm("ddp", W, e.cluster.nodes);

    std::vector<Bucket> buckets = assign_buckets(w);
    std::map<const Param*, std::size_t> bucket_of;
    std::vector<std::size_t> pending(buckets.size());
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      for (const Param* p : buckets[i].params) bucket_of[p] = i;
    }

    // Persistent state (M5.1): weights, bucket storage (D3.12), optimizer states.
    b.mark("setup", Phase::Setup);
    b.alloc("parameters", Bytes{numel * pdt}, MemCategory::Parameters, dflt);
    for (std::size_t i = 0; i < buckets.size(); ++i)
      b.alloc(fmt::format("bucket {}", i), buckets[i].bytes, MemCategory::CommBuffers, dflt);
    Bytes opt_state = optimizer_state_bytes(e.training.optimizer, numel, c_.param_dtype);
    if (opt_state.count > 0) b.alloc("optimizer state", opt_state, MemCategory::OptimizerState, dflt);

    std::vector<BufferId> grads;  // .grad per layer (AccumulateGrad), unless they alias buckets
    const int A = e.training.grad_accum;
    for (int micro = 0; micro < A; ++micro) {
      const bool sync = micro == A - 1 || !e.training.no_sync;
      b.mark(fmt::format("forward {}", micro), Phase::Forward);
      std::vector<BufferId> acts = replicated_forward(b, w, dflt, micro);
      b.mark(fmt::format("backward {}", micro), Phase::Backward);
      for (std::size_t& p : pending) p = 0;
      std::size_t next_bucket = 0;  // D3.7: buckets launch strictly in order
      for (std::size_t li = w.layers.size(); li-- > 0;) {
        const Layer& l = w.layers[li];
        layer_backward(b, l, micro, dflt, acts[li]);
        auto ps = l.params();
        if (ps.empty()) continue;
        // AccumulateGrad allocates .grad on the first micro-batch (set_to_none zero_grad);
        // with gradient_as_bucket_view it writes into the bucket view instead.
        if (micro == 0 && !c_.gradient_as_bucket_view)
          grads.push_back(b.alloc(".grad " + l.name, Bytes{l.numel() * pdt}, MemCategory::Gradients, dflt));
        if (!sync) continue;  // no_sync: hooks return at once (D3.10)
        for (auto p = ps.rbegin(); p != ps.rend(); ++p) {
          // D3.6: bucket_view = grad * (1/W), one kernel on the current stream.
          Bytes gb{(*p)->numel * pdt};
          std::size_t bi = bucket_of.at(*p);
          b.launch(dflt, elementwise(fmt::format("grad->bucket {}", (*p)->name), gb * 2, fmt::format("bucket {}", bi)));
          if (++pending[bi] < buckets[bi].params.size()) continue;
          while (next_bucket < buckets.size() && pending[next_bucket] == buckets[next_bucket].params.size()) {
            b.wait_stream(nccl, dflt);
            b.collective(pg, nccl, CollectiveKind::AllReduce, buckets[next_bucket].bytes, c_.param_dtype,
                         fmt::format("AR bucket {}", next_bucket), fmt::format("bucket {}", next_bucket));
            ++next_bucket;
          }
        }
      }
      if (sync) {
        // D3.8 finalize_backward: the current stream waits for every bucket's all-reduce;
        // without gradient_as_bucket_view the buckets are copied back into .grad.
        b.wait_stream(dflt, nccl);
        if (!c_.gradient_as_bucket_view)
          for (std::size_t i = 0; i < buckets.size(); ++i)
            b.launch(dflt, elementwise(fmt::format("bucket->grad {}", i), buckets[i].bytes * 2, fmt::format("bucket {}", i),
                                       KernelClass::Copy));
      }
    }
    b.mark("optimizer", Phase::Optimizer);
    if (e.training.optimizer != Optimizer::None) b.launch(dflt, optimizer_kernel(e.training.optimizer, numel, c_.param_dtype));
    for (BufferId g : grads) b.free(g);  // zero_grad(set_to_none=True)
    return b.take();
  }

 private:
  DdpConfig c_;
};

}  // namespace

std::unique_ptr<Strategy> parse_ddp(ObjectReader& r, const Experiment&) {
  DdpConfig c;
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
  return std::make_unique<Ddp>(c);
}

}  // namespace stepsim
