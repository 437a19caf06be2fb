// stepsim: the one binary. Subcommands live in tools/cmd_*.cpp; errors become exit codes in
// stepsim::cli::run (InputError -> 2, anything else -> 1).
#include "sim/core/memory_policy.hpp"
#include "tools/commands.hpp"

int main(int argc, char** argv) {
  stepsim::keep_freed_memory();  // a sweep runs many simulations in one process
  return stepsim::cli::run(stepsim::cli::Args(argv + 1, argv + argc));
}
