// stepsim live EXP.json --out measured.json [--trace F] [--steps N --warmup W] [--set path=value]...
// Runs the experiment's Program on GPUs, one MPI rank per GPU (mpirun -np N / srun); without
// mpirun it is a world of one. --dry-run prints the lowering (which CUDA/NCCL call each
// instruction becomes) and needs no GPU.
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "live/lowering.hpp"
#include "live/measured.hpp"
#include "sim/core/error.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "tools/cli_common.hpp"

#ifdef STEPSIM_HAVE_CUDA
#include "kernels/gpu/cuda_check.hpp"
#include "live/live_executor.hpp"
#include "kernels/gpu/mpi_bootstrap.hpp"
#endif

namespace stepsim::cli {

namespace {

void print_lowering(std::ostream& out, const Program& p, const live::LoweredProgram& l, const live::LoweringOptions& o) {
  out << fmt::format("lowering for MPI world size {} (program built for world size {}); {} timed ops, {} GEMM plans\n",
                     o.live_world, o.experiment_world, l.timed_ops, l.gemm_shapes.size());
  for (const auto& c : l.comms)
    out << fmt::format("communicator '{}': {} program ranks -> {} live ranks (split color {})\n", c.name, c.program_ranks,
                       c.ranks, c.color);
  for (const auto& li : l.instructions)
    for (const auto& c : li.calls) out << fmt::format("[{}] {}\n", li.instruction, live::describe(c, p, l));
}

// Everything `live` reads from its command line.
struct LiveArgs {
  std::string exp_file, out_file, trace_file;
  std::vector<std::string> sets;
  int steps = 10, warmup = 3, dry_world = 1;
  bool dry = false;
};

// The parsed command line; none when --help was given (the usage is printed).
std::optional<LiveArgs> read_live_args(const Args& args) {
  LiveArgs a;
  po::options_description opts("live options");
  opts.add_options()("experiment", po::value(&a.exp_file)->required(), "experiment JSON")(
      "out", po::value(&a.out_file), "write the measured result here (schema stepsim.result/1, mode \"live\")")(
      "trace", po::value(&a.trace_file), "write the median step as a Chrome/Perfetto trace (same layout as simulate)")(
      "steps", po::value(&a.steps), "measured steps (default 10)")("warmup", po::value(&a.warmup), "warm-up steps (default 3)")(
      "set", po::value(&a.sets)->composing(), "override a config value: path=value (repeatable)")(
      "dry-run", "print the lowering (CUDA/NCCL call per instruction) and exit; needs no GPU")(
      "world", po::value(&a.dry_world), "MPI world size assumed by --dry-run (default 1)");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: mpirun -np N stepsim live EXP.json --out measured.json [--trace F] [--steps N --warmup W] "
                  "[--set path=value]...\n       stepsim live EXP.json --dry-run [--world N]",
                  opts, pos, vm))
    return std::nullopt;
  a.dry = vm.count("dry-run") > 0;
  return a;
}

// The arguments that need no file: counts in range, and --out unless --dry-run.
void check_live_args(const LiveArgs& a) {
  if (a.steps < 1) throw InputError(fmt::format("--steps: {}: expected a positive integer", a.steps));
  if (a.warmup < 0) throw InputError(fmt::format("--warmup: {}: expected a non-negative integer", a.warmup));
  if (a.dry_world < 1) throw InputError(fmt::format("--world: {}: expected a positive integer", a.dry_world));
  if (!a.dry && a.out_file.empty()) throw InputError("--out: missing: expected the file to write the measured result to");
}

// --dry-run: the lowering for an assumed MPI world of --world ranks.
int dry_run(const LiveArgs& a, const Experiment& e, const Program& p) {
  live::LoweringOptions o;
  o.experiment_world = e.cluster.world_size();
  o.live_world = a.dry_world;
  live::LoweredProgram l = live::lower_program(p, o);
  print_lowering(std::cout, p, l, o);
  return 0;
}

#ifdef STEPSIM_HAVE_CUDA
// Rank 0: the measured result (and --trace), renamed into place together, and a one-line summary.
void write_live_outputs(const LiveArgs& a, const Experiment& e, const Program& p, const live::LiveRun& run) {
  nlohmann::json j = live::live_result_json(e, p, run);
  OutputFile result = open_output(a.out_file, "result file");
  result << j.dump(1) << "\n";
  OutputFile t;
  if (!a.trace_file.empty()) {
    t = open_output(a.trace_file, "trace file");
    write_chrome_trace(t.stream(), live::live_simulation_result(p, run).timeline, a.exp_file + " (live, " + run.device + ")", &p);
  }
  result.commit();
  if (t.is_open()) t.commit();
  const auto& st = j["live"]["step_time_ns"];
  std::cout << fmt::format(
      "live: {} on {} (MPI world {}): step time median {:.3f} ms (min {:.3f}, max {:.3f}, spread {:.1f}%) over {} steps "
      "after {} warm-up; peak memory {:.1f} MiB (pool high-water mark); wrote {}\n",
      a.exp_file, run.device, run.mpi_world, st["median"].get<double>() / 1e6, st["min"].get<double>() / 1e6,
      st["max"].get<double>() / 1e6, st["spread_pct"].get<double>(), a.steps, a.warmup,
      j["metrics"]["peak_memory_bytes"].get<double>() / (1024.0 * 1024.0), a.out_file);
}

// The Program lowered for this MPI world and run on the GPUs: --warmup steps, then --steps measured.
int run_on_gpus(const LiveArgs& a, const Experiment& e, const Program& p) {
  if (gpu::cuda_device_count_or_zero() == 0) {
    std::cerr << "no CUDA device present: live needs a GPU\n";
    return 2;
  }
  // Destruction order matters: the executor's communicators go before the world's, and both
  // before MPI_Finalize.
  gpu::MpiSession mpi;
  gpu::NcclComm world = gpu::make_world_comm(mpi);
  live::LoweringOptions o;
  o.experiment_world = e.cluster.world_size();
  o.live_world = mpi.size();
  o.live_rank = mpi.rank();
  live::LoweredProgram l = live::lower_program(p, o);
  if (mpi.rank() == 0 && o.experiment_world != o.live_world)
    std::cerr << fmt::format(
        "note: the Program was built for world size {} (the experiment's cluster) and runs on MPI world size {}; "
        "communicators spanning the whole world have {} ranks here, collective byte sizes are the Program's\n",
        o.experiment_world, o.live_world, o.live_world);
  live::LiveRun run;
  {
    gpu::LiveExecutor ex(p, l, mpi, world);
    run = ex.run(gpu::LiveOptions{a.steps, a.warmup});
  }
  run.experiment_world = e.cluster.world_size();
  if (mpi.rank() == 0) write_live_outputs(a, e, p, run);
  return 0;
}
#endif

}  // namespace

int live(const Args& args) {
  const std::optional<LiveArgs> a = read_live_args(args);
  if (!a) return 0;
  check_live_args(*a);

  Experiment e = load_experiment(a->exp_file, a->sets);
  Program p = e.strategy->build(e);
  if (a->dry) return dry_run(*a, e, p);

#ifndef STEPSIM_HAVE_CUDA
  // `stepsim`: arguments and experiment are valid; the GPU run is stepsim-gpu's.
  return exec_gpu_binary("live", args);
#else
  return run_on_gpus(*a, e, p);
#endif
}

}  // namespace stepsim::cli
