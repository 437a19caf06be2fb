#include <iostream>
#include <map>

#include <fmt/format.h>

#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"
#include "tools/commands.hpp"

namespace stepsim::cli {

namespace {

struct Command {
  int (*fn)(const Args&);
  const char* summary;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> table = {
      {"simulate", {simulate, "predict one step: EXP.json [--set k=v]... [--json] [--trace F] [--report F.html]"}},
      {"sweep", {sweep, "what-if grid over config paths: SWEEP.json [--jobs N] [--shard i/n] [--out F.csv]"}},
      {"scale", {scale, "weak-scaling curve: step time, tokens/s per GPU, efficiency, where the added time goes: EXP.json --gpus 8,16,32"}},
      {"tune", {tune, "fastest configuration that fits: EXP.json --memory-cap 80GiB"}},
      {"explain", {explain, "critical path, exposed comm per collective, sensitivities: EXP.json"}},
      {"fit", {fit, "build a hardware profile from measurements: --nccl-tests LOG... --out profile.json"}},
      {"analyze", {analyze, "measured overlap from a PyTorch profiler trace: TRACE.json[.gz]"}},
      {"calibrate", {calibrate, "GPU microbenchmarks (gemm|nccl|contention|all) --out profile.json [GPU]"}},
      {"live", {live, "run the experiment's Program on GPUs: EXP.json --out measured.json [GPU, mpirun]"}},
      {"collective", {collective, "one collective per size, nccl-tests columns: --profile P --kind K --ranks N [--compare LOG]"}},
      {"compare", {compare, "predicted vs measured: PREDICTED.json MEASURED.json [--tolerance 5%]"}},
      {"init", {init, "a starting experiment and a fitted profile from a profiler trace: --from-trace TRACE --out exp.json"}},
      {"schema", {schema, "the experiment file's (or with --profile the hardware profile's) keys as a JSON Schema for editors: [--profile] [--markdown] [--out F]"}},
      {"validate", {validate, "predictions vs real traces and published runs: [SUITE.json] [--baseline F] [--report F.html]"}},
  };
  return table;
}

void print_help() {
  std::cout << "stepsim: predict, then measure, one distributed training step\n\n"
               "usage: stepsim <command> [options]   (stepsim <command> --help for details)\n\ncommands:\n";
  for (const auto& [name, c] : commands()) std::cout << fmt::format("  {:<10} {}\n", name, c.summary);
  std::cout << "\nshipped files (profiles, examples, the validation suite and its data): a relative name not found\n"
               "from the working directory is looked up in the data directory: --data-dir DIR (any command),\n"
               "else $STEPSIM_DATA_DIR, else <install prefix>/share/stepsim; now: "
            << (data_dir() ? data_dir()->string() + " (" + data_dir_origin() + ")" : std::string("none")) << "\n";
  std::cout << "\nexit codes: 0 ok, 1 internal failure, 2 bad input, 3 outside tolerance (compare, validate)\n";
}

}  // namespace

int run(const Args& all_args) {
  reset_output_claims();
  remove_temporaries_on_signal();
  return run_guarded([&] {
    const Args argv = take_data_dir_option(all_args);
    if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
      print_help();
      return argv.empty() ? 2 : 0;
    }
    if (argv[0] == "--version") {
      std::cout << "stepsim 0.1.0\n";
      return 0;
    }
    auto it = commands().find(argv[0]);
    if (it == commands().end()) throw InputError(fmt::format("unknown command '{}' (see stepsim --help)", argv[0]));
    return it->second.fn(Args(argv.begin() + 1, argv.end()));
  });
}

}  // namespace stepsim::cli
