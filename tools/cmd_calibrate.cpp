// `stepsim calibrate gemm|nccl|contention|all`: the microbenchmarks (kernels/gpu/bench.hpp) on
// this machine, written as a profile whose "provenance.calibration" keeps every raw point so
// `stepsim fit --calibration` can refit it. NCCL runs under `mpirun -np N`; rank 0 prints the
// nccl-tests tables and writes the file.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "calibrate/calibration_io.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/workload_shapes.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/profile.hpp"
#include "tools/cli_common.hpp"

#ifdef STEPSIM_HAVE_CUDA
#include "kernels/gpu/bench.hpp"
#include "kernels/gpu/membw_kernels.hpp"
#include "kernels/gpu/cuda_check.hpp"
#endif

namespace stepsim::cli {

namespace {

std::vector<CollectiveKind> parse_kinds(const std::string& list) {
  std::vector<CollectiveKind> out;
  std::string item;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || list[i] == ',') {
      try {
        if (!item.empty()) out.push_back(parse_collective_kind(item));
      } catch (const std::exception&) {
        throw InputError(fmt::format("calibrate: --collectives: '{}': expected all_reduce, all_gather, reduce_scatter, "
                                     "broadcast, reduce or all_to_all",
                                     item));
      }
      item.clear();
    } else {
      item += list[i];
    }
  }
  return out;
}

// Everything `calibrate` reads from its command line, checked (dtypes and collectives parsed).
struct CalibrateArgs {
  std::string what = "all", out_file, base_file;
  Dtype gemm_dtype = Dtype::BF16, nccl_dtype = Dtype::FP32;
  std::vector<CollectiveKind> kinds;
  std::vector<std::int64_t> tokens{2048, 4096, 8192, 16384};
  bool grid = true;
  std::size_t min_bytes = 8, max_bytes = std::size_t{4} << 30;
  double factor = 2.0;
  int warmup = 5, iters = 20, repeats = 5;
  double sustain_ms = 0;
  bool wants(const char* bench) const { return what == bench || what == "all"; }
};

// The options, parsed; none when --help was given (the usage is printed).
std::optional<CalibrateArgs> read_calibrate_args(const Args& args) {
  CalibrateArgs a;
  std::string dtype_name = "bf16", coll_list = "all_reduce,all_gather,reduce_scatter", nccl_dtype_name = "fp32";
  po::options_description opts("calibrate options");
  opts.add_options()
      ("what", po::value(&a.what)->default_value("all"), "gemm, nccl, contention, membw or all")
      ("out", po::value(&a.out_file), "output profile JSON (rank 0 writes it)")
      ("base", po::value(&a.base_file), "profile supplying what is not measured (name, peaks, HBM, host costs)")
      ("dtype", po::value(&dtype_name)->default_value("bf16"), "GEMM dtype: bf16, fp16, fp32, tf32, fp8")
      ("tokens", po::value(&a.tokens)->multitoken(), "token counts for the transformer-block GEMM shapes")
      ("no-grid", "only the transformer-block shapes, not the {1k..8k}^3 grid")
      ("collectives", po::value(&coll_list)->default_value(coll_list), "comma-separated collectives for nccl")
      ("nccl-dtype", po::value(&nccl_dtype_name)->default_value("fp32"), "NCCL element type (nccl-tests: float)")
      ("min-bytes,b", po::value(&a.min_bytes)->default_value(8), "smallest S (nccl-tests -b)")
      ("max-bytes,e", po::value(&a.max_bytes)->default_value(a.max_bytes), "largest S (nccl-tests -e)")
      ("factor,f", po::value(&a.factor)->default_value(2.0), "size multiplier (nccl-tests -f)")
      ("warmup,w", po::value(&a.warmup)->default_value(5), "untimed calls per size")
      ("iters,n", po::value(&a.iters)->default_value(20), "back-to-back calls per timed loop")
      ("repeats", po::value(&a.repeats)->default_value(5), "timed loops per size (median and spread)")
      ("sustain-ms", po::value(&a.sustain_ms)->default_value(0), "gemm: before each shape's warm-up, run it back to back for this many ms of GPU time, so the clock settles under the power limit as in a training step (0: off)");
  po::positional_options_description pos;
  pos.add("what", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: stepsim calibrate [gemm|nccl|contention|membw|all] [--out profile.json] [--base PROFILE.json]\n"
      "       mpirun -np N stepsim calibrate nccl -b 8 -e 4G -f 2 --out profile.json\n"
      "Runs the GEMM (cuBLASLt), NCCL and co-run contention microbenchmarks with the nccl-tests protocol\n"
      "and writes a profile with the raw measurements under provenance.calibration. Needs a GPU.";
  if (!parse_args(args, usage, opts, pos, vm)) return std::nullopt;
  a.grid = !vm.count("no-grid");
  if (a.what != "gemm" && a.what != "nccl" && a.what != "contention" && a.what != "membw" && a.what != "all")
    throw InputError(fmt::format("calibrate: '{}': expected gemm, nccl, contention, membw or all", a.what));
  try {
    a.gemm_dtype = parse_dtype(dtype_name);
    a.nccl_dtype = parse_dtype(nccl_dtype_name);
  } catch (const std::exception& e) {
    throw InputError(std::string("calibrate: ") + e.what());
  }
  a.kinds = parse_kinds(coll_list);
  if (a.min_bytes < 1 || a.max_bytes < a.min_bytes || a.factor < 1)
    throw InputError("calibrate: expected 1 <= --min-bytes <= --max-bytes and --factor >= 1");
  if (a.warmup < 0 || a.iters < 1 || a.repeats < 1)
    throw InputError("calibrate: expected --warmup >= 0, --iters >= 1, --repeats >= 1");
  if (!(a.sustain_ms >= 0 && a.sustain_ms <= 600000))
    throw InputError(fmt::format("calibrate: --sustain-ms {}: expected 0 to 600000 ms", a.sustain_ms));
  return a;
}

#ifdef STEPSIM_HAVE_CUDA
// What every benchmark of one run shares: the MPI job, the world communicator, the device, the
// timing protocol and the collected measurements. Only rank 0 prints.
struct BenchRun {
  gpu::MpiSession& mpi;
  gpu::NcclComm& world;
  const gpu::DeviceInfo& dev;
  gpu::TimingOptions timing;
  gpu::CublasLtHandle& handle;
  gpu::Stream& stream;
  calib::CalibrationData& data;
  bool root() const { return mpi.rank() == 0; }
};

void calibrate_gemm(BenchRun& run, const std::vector<std::int64_t>& tokens, Dtype gemm_dtype, bool grid, double sustain_ms) {
  gpu::GemmBenchOptions go;
  go.timing = run.timing;
  go.sustain_ms = sustain_ms;
  run.data.timing["gemm_sustain_ms"] = sustain_ms;
  auto shapes = calib::calibration_gemm_shapes(tokens, gemm_dtype, grid);
  if (run.root()) std::cout << fmt::format("# GEMM {} on {}: {} shapes, {}warm-up {}, {} x {} timed calls\n", to_string(gemm_dtype),
                                         run.dev.name, shapes.size(),
                                         sustain_ms > 0 ? fmt::format("each run {} ms back to back first, ", sustain_ms) : "",
                                         run.timing.warmup, run.timing.repeats, run.timing.iters)
                          << fmt::format("# {:>6} {:>6} {:>6} {:>5} {:>10} {:>9} {:>8}  algo\n", "m", "n", "k", "batch",
                                         "median_us", "TFLOP/s", "spread%");
  for (const auto& s : shapes) {
    auto r = gpu::bench_gemm(run.handle, s, go, run.stream);
    calib::GemmSample g{s, FlopRate::from_tflops(r.tflops), r.timing.spread_pct(), "stepsim calibrate gemm"};
    run.data.gemm.push_back(g);
    if (run.root())
      std::cout << fmt::format("  {:>6} {:>6} {:>6} {:>5} {:>10.2f} {:>9.1f} {:>8.2f}  {}\n", s.m, s.n, s.k, s.batch,
                               r.timing.median_us, r.tflops, r.timing.spread_pct(), r.algo);
  }
}

// Each collective on the world communicator, and on multi-node jobs also intra- and inter-node.
void calibrate_nccl(BenchRun& run, const std::vector<CollectiveKind>& kinds, gpu::NcclBenchOptions no) {
  no.timing = run.timing;
  gpu::MpiSession& mpi = run.mpi;
  gpu::NcclComm intra = gpu::make_intra_node_comm(mpi, run.world);
  gpu::NcclComm inter = gpu::make_inter_node_comm(mpi, run.world);
  struct Shape { const char* label; const gpu::NcclComm* comm; int nodes; };
  std::vector<Shape> shapes{{"world", &run.world, mpi.nodes()}};
  if (mpi.nodes() > 1 && mpi.local_size() > 1) shapes.push_back({"intra-node", &intra, 1});
  if (mpi.nodes() > 1) shapes.push_back({"inter-node", &inter, mpi.nodes()});
  for (const auto& sh : shapes) {
    for (CollectiveKind k : kinds) {
      if (run.root()) {
        std::cout << fmt::format("# {} on communicator '{}' ({} ranks, {} nodes)\n", to_string(k), sh.label,
                                 sh.comm->size(), sh.nodes);
        gpu::print_nccl_tests_header(std::cout, no, sh.comm->size());
      }
      // Only the communicator's rank 0 prints; ranks outside a split comm hold an empty one,
      // but every rank of `world` is in every shape measured here.
      auto rows = gpu::bench_collective(mpi, *sh.comm, k, no, run.stream, run.root() ? &std::cout : nullptr);
      if (sh.comm->size() > 1 || mpi.size() == 1) run.data.collectives.push_back(gpu::to_series(rows, sh.comm->size(), sh.nodes, sh.label));
    }
  }
}

void calibrate_contention(BenchRun& run) {
  gpu::ContentionOptions co;
  co.timing = run.timing;
  auto c = gpu::bench_contention(run.mpi, run.world, run.handle, co);
  run.data.contention = c;
  if (run.root())
    std::cout << fmt::format("# contention: GEMM {:.1f} us alone, {:.1f} us with {}; collective {:.1f} us alone, {:.1f} us "
                             "with GEMM\n",
                             c.gemm_alone.us(), c.gemm_concurrent.us(), to_string(co.kind), c.comm_alone.us(),
                             c.comm_concurrent.us());
}

std::vector<gpu::MembwRow> calibrate_membw(BenchRun& run, std::size_t min_bytes, std::size_t max_bytes, double factor) {
  gpu::MembwOptions mo;
  mo.timing = run.timing;
  mo.min_bytes = std::max<std::size_t>(min_bytes, 4096);
  mo.max_bytes = std::max(mo.min_bytes, std::min<std::size_t>(max_bytes, std::size_t{1} << 30));
  mo.factor = factor;
  std::vector<gpu::MembwRow> membw = gpu::bench_membw(mo, run.stream);
  if (run.root()) {
    std::cout << fmt::format("# memory bandwidth (device-to-device copy: 2 x bytes moved; memset: bytes)\n");
    std::cout << fmt::format("# {:>14} {:>12} {:>12} {:>12} {:>12}\n", "bytes", "copy us", "copy GB/s", "set us", "set GB/s");
    for (const auto& r : membw)
      std::cout << fmt::format("  {:>14} {:>12.2f} {:>12.1f} {:>12.2f} {:>12.1f}\n", r.bytes, r.copy.median_us, r.copy_gbps,
                               r.set.median_us, r.set_gbps);
    std::cout << "# memory-bound class kernels over bf16 tensors of `bytes` (GB/s: bytes read + written / time)\n# "
              << fmt::format("{:>14}", "bytes");
    if (!membw.empty())
      for (const auto& [cls, gbps] : membw.front().class_gbps) std::cout << fmt::format(" {:>20}", cls);
    std::cout << "\n";
    for (const auto& r : membw) {
      std::cout << fmt::format("  {:>14}", r.bytes);
      for (const auto& [cls, gbps] : r.class_gbps) std::cout << fmt::format(" {:>20.1f}", gbps);
      std::cout << "\n";
    }
  }
  return membw;
}

// The profile the measurements are fitted into: --base, or a minimal one from this device.
HardwareProfile base_profile(const std::string& base_file, const gpu::DeviceInfo& dev, const calib::CalibrationData& data,
                             Dtype gemm_dtype) {
  if (!base_file.empty()) return load_profile(base_file);
  HardwareProfile base;
  base.name = fmt::format("calibrated-{}", dev.name);
  base.memory_capacity = Bytes{static_cast<std::int64_t>(dev.memory_bytes)};
  for (const auto& g : data.gemm) {
    FlopRate& peak = base.compute.peak[g.shape.dtype];
    peak.flops_per_s = std::max(peak.flops_per_s, g.rate.flops_per_s);
  }
  if (base.compute.peak.empty()) base.compute.peak[gemm_dtype] = FlopRate::from_tflops(1);
  base.compute.hbm = Bandwidth::from_gbps(1000);
  base.sources = {{"compute.peak_tflops", "no --base: the best measured GEMM rate per dtype, not the datasheet peak"},
                  {"compute.hbm_bandwidth_GBps", "no --base: placeholder 1000 GB/s, not measured"}};
  return base;
}

// The median over the sizes of at least 64 MiB (all sizes if none is that large), where launch
// overhead no longer matters, of one rate per row; 0 when no row has it.
template <class Rate>
double large_size_median(const std::vector<gpu::MembwRow>& membw, Rate rate) {
  std::vector<double> big, all;
  for (const auto& r : membw) {
    const double v = rate(r);
    if (v <= 0) continue;
    all.push_back(v);
    if (r.bytes >= (std::size_t{64} << 20)) big.push_back(v);
  }
  std::vector<double>& use = big.empty() ? all : big;
  if (use.empty()) return 0;
  std::sort(use.begin(), use.end());
  return use[use.size() / 2];
}

// compute.memcpy_GBps (what the benchmark is: a DtoD cudaMemcpyAsync, read + write bytes) and
// compute.memory_bandwidth_GBps of each class kernel measured (membw_kernels.hpp), each the
// large-size median. The copy class (torch.cat and split copies) keeps the base's rate.
void fit_memory_bandwidths(const std::vector<gpu::MembwRow>& membw, HardwareProfile& fitted, calib::FitReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : membw) {
    nlohmann::json row{{"bytes", r.bytes}, {"copy_us", r.copy.median_us}, {"copy_GBps", r.copy_gbps},
                       {"copy_spread_pct", r.copy.spread_pct()}, {"set_us", r.set.median_us}, {"set_GBps", r.set_gbps}};
    for (const auto& [cls, gbps] : r.class_gbps) row["class_GBps"][cls] = gbps;
    rows.push_back(row);
  }
  if (const double gbps = large_size_median(membw, [](const gpu::MembwRow& r) { return r.copy_gbps; }); gbps > 0) {
    fitted.compute.memcpy = Bandwidth::from_gbps(gbps);
    fitted.sources["compute.memcpy_GBps"] =
        "stepsim calibrate membw: median device-to-device cudaMemcpyAsync bandwidth (read + write) over the sizes >= 64 MiB";
  }
  for (gpu::MembwClass c : gpu::kMembwClasses) {
    const std::string name = gpu::membw_class_name(c);
    const double gbps = large_size_median(membw, [&](const gpu::MembwRow& r) {
      for (const auto& [cls, v] : r.class_gbps)
        if (cls == name) return v;
      return 0.0;
    });
    if (gbps <= 0) continue;
    constexpr std::size_t kN = std::size_t{1} << 19;
    const double bytes_per_element = static_cast<double>(gpu::membw_bytes(c, kN)) / static_cast<double>(kN);
    if (c == gpu::MembwClass::StridedCast) {
      // No class of its own: the time per element of the strided path's casting elements.
      fitted.compute.strided_cast_element_ns = bytes_per_element / gbps;  // GB/s = bytes per ns
      fitted.sources["compute.elementwise_strided_cast_ns_per_element"] =
          "stepsim calibrate membw: the time per element of torch.max of a bf16 tensor against a float32 0-dim tensor "
          "on the strided path with dynamic casting (kernels/gpu/membw_kernels.hpp), median over the sizes >= 64 MiB";
      continue;
    }
    fitted.compute.class_bandwidth[parse_kernel_class(name)] = Bandwidth::from_gbps(gbps);
    fitted.sources["compute.memory_bandwidth_GBps." + name] =
        "stepsim calibrate membw: median over the sizes >= 64 MiB of the " + name +
        " class kernel's bytes read + written over its time (kernels/gpu/membw_kernels.hpp)";
    if (c == gpu::MembwClass::Strided) {
      // The permute copy computes one element per bytes_per_element bytes it moves: its time per
      // element, from the same runs (a base profile's would describe another GPU).
      fitted.compute.strided_element_ns = bytes_per_element / gbps;  // GB/s = bytes per ns
      fitted.sources["compute.elementwise_strided_ns_per_element"] =
          "stepsim calibrate membw: the elementwise_strided permute copy's time per element (its bytes per element over "
          "its bandwidth above)";
    }
  }
  report.provenance["membw"] = rows;
  calib::replaced_in_provenance(report.provenance, "membw");
}
// Each benchmark `a.what` asks for, in order: GEMMs, NCCL, contention, memory bandwidth (the
// copy-bandwidth rows, empty unless asked).
std::vector<gpu::MembwRow> run_benchmarks(BenchRun& run, const CalibrateArgs& a) {
  if (a.wants("gemm")) calibrate_gemm(run, a.tokens, a.gemm_dtype, a.grid, a.sustain_ms);
  if (a.wants("nccl")) {
    gpu::NcclBenchOptions no;
    no.min_bytes = a.min_bytes;
    no.max_bytes = a.max_bytes;
    no.factor = a.factor;
    no.dtype = a.nccl_dtype;
    calibrate_nccl(run, a.kinds, no);
  }
  if (a.wants("contention")) calibrate_contention(run);
  std::vector<gpu::MembwRow> membw;
  if (a.wants("membw")) membw = calibrate_membw(run, a.min_bytes, a.max_bytes, a.factor);
  return membw;
}

// The device as the calibration records it.
nlohmann::json device_json(const gpu::DeviceInfo& dev, const gpu::MpiSession& mpi) {
  return {{"name", dev.name}, {"compute_capability", fmt::format("{}.{}", dev.cc_major, dev.cc_minor)},
          {"sm_count", dev.sm_count}, {"memory_bytes", dev.memory_bytes}, {"l2_bytes", dev.l2_bytes},
          {"ranks", mpi.size()}, {"nodes", mpi.nodes()}};
}

// Rank 0: the measurements fitted into the base profile, the raw points kept under
// provenance.calibration, written to --out (or stdout) with "# wrote FILE" as a comment.
void write_calibrated_profile(const CalibrateArgs& a, const Args& args, const gpu::DeviceInfo& dev,
                              const calib::CalibrationData& data, const std::vector<gpu::MembwRow>& membw) {
  HardwareProfile base = base_profile(a.base_file, dev, data, a.gemm_dtype);
  // The GEMMs were measured on this device, the part --base describes: a base whose table was
  // another part's (gemm_table_peak_bf16_tflops, as h100-sxm-96gb.json's) must not scale them again.
  if (!data.gemm.empty()) base.compute.gemm_table_peak = FlopRate{};
  calib::FitInputs in;
  in.collectives = data.collectives;
  in.gemm = data.gemm;
  if (data.contention) in.contention.push_back(*data.contention);
  in.files.push_back("(this calibration run)");
  calib::FitOptions fo;
  fo.command = "stepsim calibrate";
  for (const auto& arg : args) fo.command += " " + arg;
  calib::FitReport report;
  HardwareProfile fitted;
  try {
    fitted = calib::fit_profile(base, in, fo, report);
  } catch (const InputError& e) {
    // The measurements cannot go into this base (GEMM rates above its peaks: a wrong --base).
    // They took a while to take: keep them, in the form `fit --calibration` reads.
    std::ostringstream wrote;
    write_output(calib::calibration_to_json(data).dump(2) + "\n", a.out_file, "calibration", wrote);
    throw InputError(fmt::format("{}; the raw measurements are in {}: stepsim fit --calibration {} --base PROFILE.json", e.what(),
                                 a.out_file.empty() ? "the output above" : a.out_file,
                                 a.out_file.empty() ? "FILE" : a.out_file));
  }
  report.provenance["calibration"] = calib::calibration_to_json(data);
  calib::replaced_in_provenance(report.provenance, "calibration");
  if (!membw.empty()) fit_memory_bandwidths(membw, fitted, report);
  nlohmann::json doc = calib::fitted_profile_to_json(fitted, report);
  std::ostringstream wrote;
  write_output(doc.dump(2) + "\n", a.out_file, "profile", wrote);
  if (!wrote.str().empty()) std::cout << "# " << wrote.str();  // a comment, as calibrate's tables
}

// The benchmarks on this rank's GPU under MPI; rank 0 writes the profile. Exit 2 without a GPU.
int run_calibration(const CalibrateArgs& a, const Args& args) {
  if (gpu::cuda_device_count_or_zero() == 0) {
    std::cerr << "no CUDA device present: calibrate needs a GPU\n";
    return 2;
  }
  gpu::MpiSession mpi;
  gpu::NcclComm world = gpu::make_world_comm(mpi);  // also selects this rank's device
  gpu::DeviceInfo dev = gpu::current_device_info();
  calib::CalibrationData data;
  data.device = device_json(dev, mpi);
  gpu::CublasLtHandle handle;
  gpu::Stream stream;
  BenchRun run{mpi, world, dev, gpu::TimingOptions{a.warmup, a.iters, a.repeats}, handle, stream, data};
  const std::vector<gpu::MembwRow> membw = run_benchmarks(run, a);
  if (run.root()) write_calibrated_profile(a, args, dev, data, membw);
  return 0;
}
#endif

}  // namespace

int calibrate(const Args& args) {
  const std::optional<CalibrateArgs> a = read_calibrate_args(args);
  if (!a) return 0;
#ifndef STEPSIM_HAVE_CUDA
  // `stepsim`: the arguments are valid; the benchmarks are stepsim-gpu's.
  return exec_gpu_binary("calibrate", args);
#else
  return run_calibration(*a, args);
#endif
}

}  // namespace stepsim::cli
