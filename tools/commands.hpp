#pragma once
// One function per `stepsim` subcommand, each in its own tools/cmd_<name>.cpp. `args` excludes
// the program name and the subcommand itself. Each returns the process exit code; library
// errors propagate as exceptions and main() maps them (InputError -> 2, others -> 1).

#include <string>
#include <vector>

namespace stepsim::cli {

using Args = std::vector<std::string>;

int simulate(const Args& args);
int sweep(const Args& args);
int tune(const Args& args);
int scale(const Args& args);
int explain(const Args& args);
int fit(const Args& args);
int analyze(const Args& args);
int calibrate(const Args& args);
int live(const Args& args);
int compare(const Args& args);
int validate(const Args& args);
int init(const Args& args);
int collective(const Args& args);
int schema(const Args& args);

// Runs a subcommand by name with the same error mapping as main(); for tests.
int run(const Args& argv_without_program);

}  // namespace stepsim::cli
