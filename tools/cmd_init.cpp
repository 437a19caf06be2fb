// stepsim init --from-trace TRACE... --out exp.json [--profile-out P.json] [--steps A-B]
// A starting experiment and a fitted profile from a profiler trace of the user's own job
// (calibrate/from_trace/trace_init.hpp says what is inferred and how); every guess is printed and kept
// in the experiment's "notes".
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "calibrate/from_trace/init_files.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

namespace fs = std::filesystem;

int init(const Args& args) {
  po::options_description opts("init options");
  std::vector<std::string> traces;
  std::string out_file, profile_out, steps;
  opts.add_options()("from-trace", po::value(&traces)->multitoken()->required(), "PyTorch profiler traces (.json/.json.gz) of one job")(
      "out", po::value(&out_file)->required(), "the experiment to write")(
      "profile-out", po::value(&profile_out), "the fitted profile to write (default: next to --out, NAME.profile.json)")(
      "steps", po::value(&steps), "the ProfilerStep range to use, e.g. 11-12 (default: all)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim init --from-trace TRACE... --out exp.json [--profile-out P.json] [--steps A-B]\n"
                  "Writes a starting experiment (world size and GPU from the trace, dtype, framework guessed from the\n"
                  "collectives, model dimensions from the GEMM shapes) and a profile fitted from the same trace.\n"
                  "Every guess is printed and kept under \"notes\" in the experiment: check them before a what-if.",
                  opts, pos, vm))
    return 0;
  if (profile_out.empty()) {
    fs::path p(out_file);
    profile_out = (p.parent_path() / (p.stem().string() + ".profile.json")).string();
  }
  fs::path exp_dir = fs::absolute(out_file).parent_path();
  std::string profile_ref = fs::relative(fs::absolute(profile_out), exp_dir).string();
  trace::InitOutputs r = trace::init_from_trace_files(traces, steps, profile_ref);

  // Both outputs are opened (checked against the inputs and each other) before either is
  // written, and renamed into place together: a refused run leaves neither file behind.
  OutputFile profile_file = open_output(profile_out, "profile");
  OutputFile experiment_file = open_output(out_file, "experiment");
  profile_file << r.profile.dump(2) << "\n";
  experiment_file << r.experiment.dump(2) << "\n";
  profile_file.commit();
  experiment_file.commit();
  std::cout << "wrote " << profile_out << "\nwrote " << out_file << "\n";
  for (const auto& line : r.against_base) std::cout << line << "\n";
  std::cout << "guesses (kept under \"notes\" in " << out_file << "):\n";
  for (const auto& n : r.notes) std::cout << "  - " << n << "\n";
  return 0;
}

}  // namespace stepsim::cli
