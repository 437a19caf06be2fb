#include "sim/hardware/compute_model.hpp"

#include <algorithm>
#include <bit>
#include <array>
#include <cmath>

namespace stepsim {

static FlopRate peak_for(const ComputeProfile& c, Dtype d) {
  auto it = c.peak.find(d);
  if (it != c.peak.end()) return it->second;
  it = c.peak.find(Dtype::BF16);
  return it != c.peak.end() ? it->second : FlopRate::from_tflops(100);
}

// Efficiency (fraction of peak) from the measured table: inverse-distance weighting over the
// four nearest same-dtype shapes in log2(m, n, k) space; an exact match returns its value (the
// mean of those of known layouts when the query's is unknown). An entry of another layout (both
// known) is not exact: at distance kOtherLayout it still outweighs every entry of other
// dimensions when no entry has both.
static constexpr double kOtherLayout = 0.01;
// log2 of a dimension (at least 1): exact and without libm for a power of two, which nearly every
// table entry is (756 of the H100 table's 759); a lookup takes three per entry. The power-of-two
// test is u & (u - 1): std::has_single_bit is a libgcc popcount call on the x86-64 baseline.
static double log2_dim(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(std::max<std::int64_t>(1, v));
  return (u & (u - 1)) == 0 ? static_cast<double>(std::bit_width(u) - 1) : std::log2(static_cast<double>(u));
}
GemmTable::GemmTable(const ComputeProfile& c) {
  entries_.reserve(c.gemm_table.size());
  for (const auto& e : c.gemm_table)
    entries_.push_back(Entry{log2_dim(e.shape.m * e.shape.batch), log2_dim(e.shape.n), log2_dim(e.shape.k), e.rate.flops_per_s,
                             e.shape.dtype, e.shape.layout});
  // Grouped by dtype, each dtype's entries in table order (a lookup walks its dtype's only: the
  // H100 table is half tf32; ties between equally near entries go to the earlier one, as before).
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.dtype < b.dtype; });
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    auto& r = by_dtype_[static_cast<std::size_t>(entries_[i].dtype)];
    if (r.second == 0) r.first = static_cast<std::uint32_t>(i);
    r.second = static_cast<std::uint32_t>(i + 1);
  }
}

double GemmTable::nearest(const GemmShape& g, double peak) const {
  struct Near { double dist; double eff; };
  std::array<Near, 4> best;
  best.fill(Near{1e300, 0});
  const double lm = log2_dim(g.m * g.batch), ln = log2_dim(g.n), lk = log2_dim(g.k);
  const auto [first, last] = by_dtype_[static_cast<std::size_t>(g.dtype)];
  if (first == last) return -1;
  double exact_sum = 0;  // several exact entries (of layouts the query does not pick): their mean
  int exact = 0;
  for (std::uint32_t i = first; i < last; ++i) {
    const Entry& e = entries_[i];
    double dm = e.lm - lm;
    double dn = e.ln - ln;
    double dk = e.lk - lk;
    double d = dm * dm + dn * dn + dk * dk;
    if (g.layout != GemmLayout::Any && e.layout != GemmLayout::Any && e.layout != g.layout) d += kOtherLayout;
    // `best` stays sorted by distance: an entry no nearer than the fourth changes nothing (most
    // entries, in a table of hundreds).
    if (d != 0 && d >= best.back().dist) continue;
    double eff = e.flops_per_s / peak;
    if (d == 0) {
      // Its own layout, or an entry of unknown layout (a microbenchmark): exact, as soon as seen.
      if (e.layout == g.layout || e.layout == GemmLayout::Any) return eff;
      exact_sum += eff;
      ++exact;
      continue;
    }
    for (auto& slot : best) {
      if (d < slot.dist) {
        std::swap(slot.dist, d);
        std::swap(slot.eff, eff);
      }
    }
  }
  if (exact > 0) return exact_sum / exact;
  double wsum = 0, esum = 0;
  for (const auto& n : best) {
    if (n.dist >= 1e300) continue;
    double w = 1.0 / n.dist;
    wsum += w;
    esum += w * n.eff;
  }
  return wsum > 0 ? esum / wsum : -1;
}

double AttentionRate::at(bool backward_pass, std::int64_t seq) const {
  double e = backward_pass ? backward : forward;
  if (half_rate_seq <= 0 || seq <= 0) return e;
  return e * static_cast<double>(seq) / static_cast<double>(seq + half_rate_seq);
}

// A table rate measured on another part of the same chip (a power- or clock-limited variant)
// scales by the ratio of the bf16 peaks.
static double table_scale(const ComputeProfile& c) {
  if (c.gemm_table_peak.flops_per_s <= 0) return 1;
  return peak_for(c, Dtype::BF16).flops_per_s / c.gemm_table_peak.flops_per_s;
}

double gemm_table_part_peak_tflops(const ComputeProfile& c, Dtype d) { return peak_for(c, d).tflops() / table_scale(c); }

// fp16 and bf16 GEMMs run on the same tensor-core path at the same rate wherever a part's
// datasheet gives both the same peak (A100, H100, B200): a table measured in one answers for the
// other when it has no entry of the GEMM's own dtype.
double GemmTable::efficiency(const ComputeProfile& c, const GemmShape& g, double peak) const {
  const double eff = nearest(g, peak);
  if (eff > 0 || (g.dtype != Dtype::BF16 && g.dtype != Dtype::FP16)) return eff;
  GemmShape twin = g;
  twin.dtype = g.dtype == Dtype::BF16 ? Dtype::FP16 : Dtype::BF16;
  auto own = c.peak.find(g.dtype), other = c.peak.find(twin.dtype);
  if (own == c.peak.end() || other == c.peak.end() || own->second.flops_per_s != other->second.flops_per_s) return eff;
  return nearest(twin, peak);
}

double ClockProfile::factor(double u) const {
  if (!active() || u <= 0) return 1;
  return std::min(1.0, full_load_mhz / boost_mhz * std::cbrt(1.0 / std::min(u, 1.0)));
}

// The sustained-clock factor of a GEMM at fraction `eff` of peak (at boost): none when its rate
// was measured inside a step, where the clock was already the sustained one.
static double gemm_clock_factor(const ComputeProfile& c, double eff) {
  return c.gemm_table_rates == GemmRates::InTraining && !c.gemm_table.empty() ? 1.0 : c.clock.factor(eff);
}

// Roofline: a GEMM takes at least the time of its math (at the measured or default efficiency)
// and of moving A, B and C once at the memory-bound rate. Batched small-k GEMMs (eager
// attention's QK^T and PV: [b*H, s, d] x [b*H, d, s]) land on the memory side even where the
// table, measured on large shapes, would put them at its compute rate.
Time gemm_time(const ComputeProfile& c, const GemmShape& g) { return gemm_time(c, g, GemmTable(c)); }

Time gemm_time(const ComputeProfile& c, const GemmShape& g, const GemmTable& table) {
  FlopRate peak = peak_for(c, g.dtype);
  double eff = table.efficiency(c, g, peak.flops_per_s);
  Flops work = g.flops();
  Bytes moved{(g.m * g.k + g.k * g.n + g.m * g.n) * g.batch * dtype_bytes(g.dtype)};
  Time math = eff > 0 ? compute_time(work, FlopRate{peak.flops_per_s * eff * table_scale(c) * c.gemm_in_training_factor *
                                                   gemm_clock_factor(c, eff)})
                      : compute_time(work, FlopRate{peak.flops_per_s * c.gemm_efficiency * c.clock.factor(c.gemm_efficiency)});
  return std::max({math, memory_time(c, moved, KernelClass::Gemm), c.min_kernel_time});
}

// The achieved bandwidth of a memory-bound class (memory_time's).
static Bandwidth class_bandwidth(const ComputeProfile& c, KernelClass cls) {
  auto it = c.class_bandwidth.find(cls);
  return it != c.class_bandwidth.end() ? it->second : Bandwidth{c.hbm.bytes_per_s * c.memory_efficiency};
}

ClassBandwidths::ClassBandwidths(const ComputeProfile& c) {
  for (int k = 0; k < kKernelClassCount; ++k) by_class[static_cast<std::size_t>(k)] = class_bandwidth(c, static_cast<KernelClass>(k));
}

Time memory_time(const ComputeProfile& c, Bytes bytes, KernelClass cls) {
  if (!c.model_memory_kernels || bytes.count <= 0) return Time::zero();
  return transfer_time(bytes, class_bandwidth(c, cls));
}

// A non-vectorized kernel's elements at the profile's time per element; those it computes
// through a dtype cast at the casting time when the profile has one.
static Time strided_element_time(const ComputeProfile& c, const KernelWork& w) {
  const double cast_ns = c.strided_cast_element_ns > 0 ? c.strided_cast_element_ns : c.strided_element_ns;
  const std::int64_t cast = std::clamp<std::int64_t>(w.cast_elements, 0, w.elements);
  return Time{std::llround(static_cast<double>(w.elements - cast) * c.strided_element_ns +
                           static_cast<double>(cast) * cast_ns)};
}

// Whether a kernel's largest tensor is larger than the L2, so it streams from DRAM
// (ComputeProfile::dram_stream).
static bool streams_past_l2(const ComputeProfile& c, const KernelWork& w, int kernels) {
  if (c.l2_bytes <= 0 || c.dram_stream.bytes_per_s <= 0) return false;
  const double tensor = w.tensor.count > 0 ? static_cast<double>(w.tensor.count)
                                           : static_cast<double>(w.memory_bytes.count) / (2.0 * std::max(1, kernels));
  return tensor > c.l2_bytes;
}

// The non-GEMM part of a kernel's time. Attention kernels' bytes are part of their FLOP-priced
// time; only GEMM-free memory-bound work is priced by bytes.
static Time other_time(const ComputeProfile& c, const KernelWork& w, KernelClass cls, int kernels,
                       const ClassBandwidths* bandwidths = nullptr) {
  Time t = w.fixed;
  if (w.memory_bytes.count > 0 && c.model_memory_kernels && cls != KernelClass::Attention) {
    Time floor{c.min_kernel_time.ns * std::max(1, kernels)};
    // A DtoD memcpy (a Copy of 0 CUDA kernels) at the profile's memcpy rate when it has one.
    const bool memcpy = is_memcpy(cls, kernels) && c.memcpy.bytes_per_s > 0;
    const bool inductor_reduction =
        w.generated && (cls == KernelClass::Reduction || cls == KernelClass::Norm) && c.inductor_reduction.bytes_per_s > 0;
    Time moved = memcpy               ? transfer_time(w.memory_bytes, c.memcpy)
                 : inductor_reduction ? transfer_time(w.memory_bytes, c.inductor_reduction)
                 : bandwidths         ? transfer_time(w.memory_bytes, bandwidths->by_class[static_cast<std::size_t>(cls)])
                                      : memory_time(c, w.memory_bytes, cls);
    if (!memcpy && streams_past_l2(c, w, kernels)) moved = std::max(moved, transfer_time(w.memory_bytes, c.dram_stream));
    if (cls == KernelClass::ElementwiseStrided && w.elements > 0) moved = std::max(moved, strided_element_time(c, w));
    t += std::max(moved, floor);
  }
  if (w.attention.flops.count > 0) {
    const double eff = attention_efficiency(c, w.attention);
    t += compute_time(attention_executed_flops(w.attention),
                      FlopRate{peak_for(c, Dtype::BF16).flops_per_s * eff * c.clock.factor(eff)});
  }
  return t;
}

double attention_efficiency(const ComputeProfile& c, const AttentionWork& a) {
  const auto& rate = c.attention_rates[static_cast<std::size_t>(a.kernel)];
  if (rate) return rate->at(a.backward, a.seq);
  // PyTorch's flash backend is FlashAttention-2 too: without a rate of its own, flash_attn's.
  const auto& flash = c.attention_rates[static_cast<std::size_t>(AttentionKernel::Flash)];
  if (a.kernel == AttentionKernel::SdpaFlash && flash) return flash->at(a.backward, a.seq);
  // sdpa's cuDNN backend on a part without a rate of its own: on Ampere it runs at about the flash
  // backend's rate (pytorch/pytorch#192799, A100: forward 135.4 against 136.4 TFLOPS, forward +
  // backward 68.8 against 78.6), so sdpa_flash's (else flash's).
  if (a.kernel == AttentionKernel::SdpaCudnn) {
    const auto& sdpa = c.attention_rates[static_cast<std::size_t>(AttentionKernel::SdpaFlash)];
    if (sdpa) return sdpa->at(a.backward, a.seq);
    if (flash) return flash->at(a.backward, a.seq);
  }
  if (a.kernel == AttentionKernel::SdpaEfficient && c.efficient_attention_efficiency > 0) return c.efficient_attention_efficiency;
  return c.attention_efficiency;
}

// The class whose achieved bandwidth prices a kernel's bytes (a whole-layer "compute" kernel's
// memory-bound part runs at the elementwise rate).
static KernelClass bytes_class(KernelClass cls) { return cls == KernelClass::Compute ? KernelClass::Elementwise : cls; }

Time kernel_time(const ComputeProfile& c, const Kernel& k) {
  Time t = other_time(c, *k.work, bytes_class(k.cls), k.kernels);
  if (!k.work->gemms.empty()) {
    const GemmTable table(c);
    for (const auto& g : k.work->gemms) t += gemm_time(c, g, table);
  }
  return t + Time{c.kernel_gap.ns * std::max(k.kernels, 1)};  // a memcpy (0 kernels) is a queued op too
}

Time launch_host_time(const HostProfile& h, const Kernel& k) {
  Time base = h.launch_overhead;
  if (k.dispatch == HostDispatch::Eager && h.eager_op_overhead.ns > 0) base = h.eager_op_overhead;
  if (k.dispatch == HostDispatch::Autograd && h.autograd_op_overhead.ns > 0) base = h.autograd_op_overhead;
  if (k.dispatch == HostDispatch::Continue && h.kernel_launch_overhead.ns > 0) base = h.kernel_launch_overhead;
  Time extra = h.kernel_launch_overhead.ns > 0 ? h.kernel_launch_overhead : Time::zero();
  return base + Time{extra.ns * std::max(0, k.kernels - 1)};
}

Time KernelTimeCache::work_time(const KernelWork& w, KernelClass cls, int kernels) {
  Time t = other_time(c_, w, cls, kernels, &bandwidths_);
  for (const auto& g : w.gemms) t += gemm(g);
  return t;
}

// The slot holding g, or the empty one where it belongs.
// Fibonacci hashing of the fields: GEMM sizes are multiples of 64, so their low bits are zero
// (the high half of the result is the one to use).
static std::uint64_t hash_of(const GemmShape& g) {
  std::uint64_t h = static_cast<std::uint64_t>(g.m);
  for (std::int64_t v : {g.n, g.k, g.batch, static_cast<std::int64_t>(g.dtype), static_cast<std::int64_t>(g.layout)})
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x9E3779B97F4A7C15ull;
  return h;
}

KernelTimeCache::Slot& KernelTimeCache::slot(const GemmShape& g) {
  const std::uint64_t h = hash_of(g);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(h >> 32) & mask;; i = (i + 1) & mask)
    if (!slots_[i].used || slots_[i].shape == g) return slots_[i];
}

Time KernelTimeCache::gemm(const GemmShape& g) {
  Slot* s = &slot(g);
  if (s->used) return s->time;
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& o : old)
      if (o.used) slot(o.shape) = o;
    s = &slot(g);
  }
  std::optional<Time> kept = shared_ ? shared_->find(g) : std::nullopt;
  if (!kept) {
    if (!table_) {
      table_ = shared_ ? shared_->table_for(c_) : nullptr;
      if (!table_) table_ = &own_.emplace(c_);
    }
    kept = gemm_time(c_, g, *table_);
    if (shared_) shared_->add(g, *kept);
  }
  *s = Slot{g, *kept, true};
  ++used_;
  return s->time;
}

std::size_t GemmTimeMemo::Hash::operator()(const GemmShape& g) const { return static_cast<std::size_t>(hash_of(g) >> 32); }

std::optional<Time> GemmTimeMemo::find(const GemmShape& g) const {
  std::lock_guard lock(mutex_);
  const auto it = shapes_.find(g);
  if (it == shapes_.end()) return std::nullopt;
  return it->second;
}

void GemmTimeMemo::add(const GemmShape& g, Time t) {
  std::lock_guard lock(mutex_);
  // Full: start again. A sweep over sequence lengths meets its shapes a workload at a time (15 a
  // Llama workload), so the shapes worth keeping are the last ones; a memo that stopped adding
  // when full priced every later workload's shapes at each of its points.
  if (shapes_.size() >= kCapacity) shapes_.clear();
  shapes_.emplace(g, t);  // another thread may have priced it meanwhile (the same time): kept
}

// One memo per living profile object: keyed by its address, an entry whose profile has died is
// dropped before its address can name another (the weak reference says so).
std::shared_ptr<GemmTimeMemo> gemm_time_memo_of(const std::shared_ptr<const HardwareProfile>& p) {
  if (!p) return nullptr;
  struct Entry {
    std::weak_ptr<const HardwareProfile> profile;
    std::shared_ptr<GemmTimeMemo> memo;
  };
  static std::mutex mutex;
  static std::vector<Entry> entries;
  std::lock_guard lock(mutex);
  std::erase_if(entries, [](const Entry& e) { return e.profile.expired(); });
  for (const auto& e : entries)
    if (e.profile.lock() == p) return e.memo;
  entries.push_back(Entry{p, std::make_shared<GemmTimeMemo>(p->compute)});
  return entries.back().memo;
}

Time KernelTimeCache::kernel_time(const Kernel& k) {
  if (k.work_id > 0 && k.work_id < by_work_.size() && by_work_[k.work_id].ns >= 0) return by_work_[k.work_id];
  const Time t = work_time(*k.work, bytes_class(k.cls), k.kernels) + Time{c_.kernel_gap.ns * std::max(k.kernels, 1)};
  if (k.work_id > 0) {
    if (k.work_id >= by_work_.size()) by_work_.resize(std::max<std::size_t>(k.work_id + 1, 2 * by_work_.size()), Time{-1});
    by_work_[k.work_id] = t;
  }
  return t;
}

}  // namespace stepsim
