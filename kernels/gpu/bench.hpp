#pragma once
// The calibration microbenchmarks, one measurement protocol for all (STYLE.md 10, nccl-tests
// doc/PERFORMANCE.md): warm-up per size, then `repeats` timed loops of `iters` back-to-back
// launches between two CUDA events; each loop gives a mean time per call, and the result is the
// median over loops with the spread (p90 - p10) / median. Inputs are random, non-zero, and
// GEMM operands rotate through more memory than L2 holds so no iteration hits warm cache.

#include <cstddef>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/measurements.hpp"
#include "kernels/gpu/gemm.hpp"
#include "kernels/gpu/mpi_bootstrap.hpp"
#include "kernels/gpu/raii.hpp"

namespace stepsim::gpu {

struct TimingOptions {
  int warmup = 5;   // untimed calls per size (nccl-tests -w 5)
  int iters = 20;   // back-to-back calls per timed loop (nccl-tests -n 20)
  int repeats = 5;  // timed loops; median and spread over these
};

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
  double spread_pct() const { return median_us > 0 ? 100.0 * (p90_us - p10_us) / median_us : 0; }
};
Timing summarize(std::vector<double> per_loop_us);

struct GemmBenchOptions {
  TimingOptions timing;
  // Bytes of A+B operand sets to rotate through; 0 = max(4 x L2, 64 MiB) (H100 L2 is 50 MB).
  std::size_t rotate_bytes = 0;
  std::size_t workspace_bytes = GemmRunner::kDefaultWorkspaceBytes;
  // Before its warm-up, each shape runs back to back until this much GPU time has passed, so
  // the clock has settled under the power limit as in a training step's GEMMs (a few warm-up
  // calls time a GPU at its boost clock). 0: no sustained run.
  double sustain_ms = 0;
};

struct GemmBenchResult {
  GemmShape shape;
  Timing timing;
  double tflops = 0;  // at the median time
  std::string algo;
  double sustained_ms = 0;  // GPU time of the sustained run before the timed calls
};

GemmBenchResult bench_gemm(const CublasLtHandle& handle, const GemmShape& shape, const GemmBenchOptions& options,
                           const Stream& stream);

struct NcclBenchOptions {
  TimingOptions timing;
  std::size_t min_bytes = 8, max_bytes = std::size_t{1} << 30;  // nccl-tests -b / -e
  double factor = 2.0;                                        // nccl-tests -f
  Dtype dtype = Dtype::FP32;                                  // nccl-tests default: float
};

struct NcclBenchRow {
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::size_t bytes = 0, count = 0;
  Timing out_of_place, in_place;  // in_place.median_us == 0 when not applicable (all_to_all)
};

// Runs every size of one collective on `comm` (collective over its ranks: every member must
// call it with the same options). Times are the maximum over the communicator's ranks, taken
// through MPI (`mpi`): a collective is done when its slowest rank is. If `print` is non-null
// the nccl-tests table (same columns) is written to it as rows complete.
std::vector<NcclBenchRow> bench_collective(const MpiSession& mpi, const NcclComm& comm, CollectiveKind kind,
                                           const NcclBenchOptions& options, const Stream& stream, std::ostream* print);
void print_nccl_tests_header(std::ostream& out, const NcclBenchOptions& options, int nranks);

struct MembwOptions {
  TimingOptions timing;
  std::size_t min_bytes = std::size_t{1} << 20, max_bytes = std::size_t{1} << 30;  // buffer size sweep
  double factor = 2.0;
};

// Achieved memory bandwidth over a size sweep: a device-to-device cudaMemcpyAsync (the copy
// class: reads and writes `bytes`, 2 x bytes moved), a cudaMemsetAsync (write-only), and one
// kernel of each memory-bound class of the compute model over bf16 tensors of `bytes`
// (membw_kernels.hpp: elementwise, elementwise_strided, reduction, norm, embedding; GB/s = the
// bytes the kernel reads plus writes / median time). Buffers rotate through more than 4 x L2 so
// no call runs from a warm cache; sizes stop at a quarter of device memory.
struct MembwRow {
  std::size_t bytes = 0;
  Timing copy, set;
  double copy_gbps = 0, set_gbps = 0;
  std::vector<std::pair<std::string, double>> class_gbps;  // profile class name -> GB/s
};
std::vector<MembwRow> bench_membw(const MembwOptions& options, const Stream& stream);

struct ContentionOptions {
  TimingOptions timing;
  GemmShape gemm{8192, 8192, 8192, 1, Dtype::BF16};
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::size_t bytes = std::size_t{256} << 20;
};

// GEMM alone, collective alone, then both concurrently on two streams (the GEMM loop and the
// collective loop launched together); the times feed ContentionProfile.
calib::ContentionSample bench_contention(const MpiSession& mpi, const NcclComm& comm, const CublasLtHandle& handle,
                                         const ContentionOptions& options);

// Converts benchmark rows to the importer's series (out-of-place and in-place samples).
calib::CollectiveSeries to_series(const std::vector<NcclBenchRow>& rows, int ranks, int nodes, const std::string& label);

}  // namespace stepsim::gpu
