// stepsim-gpu: the GPU half of `stepsim calibrate` and `stepsim live` (tools/cli_common.hpp,
// exec_gpu_binary). The same cmd_calibrate.cpp / cmd_live.cpp compiled with STEPSIM_HAVE_CUDA
// and linked with CUDA, cuBLASLt, NCCL and MPI. Users run `stepsim`, which execs this.
#include <iostream>

#include "tools/cli_common.hpp"
#include "tools/commands.hpp"

int main(int argc, char** argv) {
  using namespace stepsim::cli;
  const Args all(argv + 1, argv + argc);
  Args args;
  // The data directory as stepsim passes it on (exec_gpu_binary), or as stepsim-gpu finds it.
  if (int rc = run_guarded([&] {
        args = take_data_dir_option(all);
        return 0;
      }))
    return rc;
  if (args.empty() || (args[0] != "calibrate" && args[0] != "live")) {
    std::cerr << "usage: stepsim-gpu calibrate|live ... (run through `stepsim calibrate` / `stepsim live`)\n";
    return 2;
  }
  const Args rest(args.begin() + 1, args.end());
  return run_guarded([&] { return args[0] == "calibrate" ? calibrate(rest) : live(rest); });
}
