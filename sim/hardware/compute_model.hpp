#pragma once
// Kernel cost: GEMMs from a measured efficiency table (nearest shapes, interpolated; scaled by
// the in-training factor and, for a power-limited variant, the peak ratio) with a roofline
// fallback; memory-bound bytes at the achieved bandwidth of their kernel class; fused attention
// FLOPs at their kernel's measured rate for the direction and sequence length; GEMMs and
// attention at the power-limited clock their tensor-core activity sustains (ClockProfile);
// fixed times as given. Host cost of a launch by how the framework dispatches it.

#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/hardware/profile.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// The measured GEMM table as a lookup reads it: each entry's log2 coordinates (of m x batch, n
// and k), dtype, layout and rate, worked out once per profile. A lookup is a scan of the whole
// table (~760 entries on H100), and working out three log2 per entry per lookup was most of it.
class GemmTable {
 public:
  explicit GemmTable(const ComputeProfile& c);
  // The efficiency (fraction of `peak`) the table gives shape g, or < 0 when it has no entry of
  // g's dtype; an fp16 GEMM reads bf16 entries (and the reverse) where the part's peaks agree.
  double efficiency(const ComputeProfile& c, const GemmShape& g, double peak) const;

 private:
  struct Entry {
    double lm, ln, lk;
    double flops_per_s;
    Dtype dtype;
    GemmLayout layout;
  };
  double nearest(const GemmShape& g, double peak) const;
  std::vector<Entry> entries_;  // grouped by dtype
  // Each dtype's entries, [first, last) of entries_ (by Dtype's value; empty: none).
  std::array<std::pair<std::uint32_t, std::uint32_t>, kDtypeCount> by_dtype_{};
};

Time gemm_time(const ComputeProfile& c, const GemmShape& g);
// The same with c's table already worked out (`table` is GemmTable(c)).
Time gemm_time(const ComputeProfile& c, const GemmShape& g, const GemmTable& table);
// The dense peak of `d` on the part gemm_table was measured on: peak_tflops, scaled back by
// gemm_table_peak_bf16_tflops / peak_tflops.bf16 when the table is another part's.
double gemm_table_part_peak_tflops(const ComputeProfile& c, Dtype d);
// Memory-bound bytes at the class's achieved bandwidth (hbm * memory_efficiency if the profile
// has none for the class).
Time memory_time(const ComputeProfile& c, Bytes bytes, KernelClass cls = KernelClass::Elementwise);
// The fraction of bf16 peak a fused attention kernel reaches: its compute.attention rate at the
// sequence length (sdpa_flash without one: flash's; sdpa_cudnn without one: sdpa_flash's, else
// flash's), else attention_efficiency
// (efficient_attention_efficiency for sdpa_efficient).
double attention_efficiency(const ComputeProfile& c, const AttentionWork& a);
// A launch of `k`: its work priced by k.cls, each of its k.kernels CUDA kernels at least
// min_kernel_time.
Time kernel_time(const ComputeProfile& c, const Kernel& k);
inline Time kernel_time(const ComputeProfile& c, const KernelSpec& k) { return kernel_time(c, unnamed_kernel(k)); }
// CPU time the host spends issuing `k` (HostProfile, by k.dispatch and k.kernels).
Time launch_host_time(const HostProfile& h, const Kernel& k);
inline Time launch_host_time(const HostProfile& h, const KernelSpec& k) { return launch_host_time(h, unnamed_kernel(k)); }

// GEMM times of one profile kept across simulations (SharedProfile::gemm_time_memo), for the
// sweep points and the calls of a loop that price the same shapes on the same profile.
// Thread-safe: a sweep's threads share it. At most kCapacity shapes: when full it starts again.
// Hashed: a sweep over sequence lengths fills it (a few dozen shapes a workload), and a scan of
// the full memo on each new shape was 3 % of a 10,000-point sweep's time.
class GemmTimeMemo {
 public:
  explicit GemmTimeMemo(const ComputeProfile& c) : compute_(&c), table_(c) {}
  std::optional<Time> find(const GemmShape& g) const;
  void add(const GemmShape& g, Time t);
  // The profile's table, for the simulations of the profile the memo was made for (`c`).
  const GemmTable* table_for(const ComputeProfile& c) const { return &c == compute_ ? &table_ : nullptr; }

 private:
  struct Hash {
    std::size_t operator()(const GemmShape& g) const;
  };
  static constexpr std::size_t kCapacity = 4096;
  const ComputeProfile* compute_;
  GemmTable table_;
  mutable std::mutex mutex_;
  std::unordered_map<GemmShape, Time, Hash> shapes_;
};

// Each kernel class's achieved bandwidth (memory_time's), looked up once per simulation rather
// than in the profile's map per kernel.
struct ClassBandwidths {
  explicit ClassBandwidths(const ComputeProfile& c);
  std::array<Bandwidth, kKernelClassCount> by_class{};
};

// kernel_time with GEMM times memoized per shape. The measured-table lookup scans every table
// entry (a fitted H100 profile holds ~1,100), while a step repeats a few dozen shapes
// thousands of times; one cache per simulation keeps the engine at microseconds per kernel.
class KernelTimeCache {
 public:
  explicit KernelTimeCache(const ComputeProfile& c, GemmTimeMemo* shared = nullptr)
      : c_(c), bandwidths_(c), shared_(shared), slots_(64) {}
  Time kernel_time(const Kernel& k);
  Time kernel_time(const KernelSpec& k) { return kernel_time(unnamed_kernel(k)); }

 private:
  Time work_time(const KernelWork& w, KernelClass cls, int kernels);
  Time gemm(const GemmShape& g);
  const ComputeProfile& c_;
  ClassBandwidths bandwidths_;
  GemmTimeMemo* shared_;  // the profile's memo across simulations, if it has one
  const GemmTable* table_ = nullptr;  // the memo's, or own_ once a GEMM was priced
  std::optional<GemmTable> own_;
  // Open addressing with linear probing, at most half full: a lookup is a hash and one or two
  // compares, where std::unordered_map chased a node per lookup (10^5 per deep step).
  struct Slot {
    GemmShape shape;
    Time time;
    bool used = false;
  };
  Slot& slot(const GemmShape& g);
  std::vector<Slot> slots_;  // a power of two
  std::size_t used_ = 0;
  std::vector<Time> by_work_;  // by Kernel::work_id: its time, or -1 until priced
};

}  // namespace stepsim
