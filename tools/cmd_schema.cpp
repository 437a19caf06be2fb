// stepsim schema [--profile] [--markdown | --foreign] [--out F]: the keys of an experiment file
// (from sim/config/experiment_keys.cpp, sim/strategies/strategy_keys.cpp) or, with --profile, of
// a hardware profile (sim/hardware/profile_keys.cpp), as a JSON Schema (draft 2020-12) for
// editors, or as the Markdown reference (docs/configuration-keys.md, docs/profile-keys.md);
// --foreign: the keys read from DeepSpeed configs and Hugging Face config.json files
// (sim/config/foreign_keys.cpp, docs/configuration-foreign-keys.md).
#include <iostream>

#include "sim/config/foreign_keys.hpp"
#include "sim/core/config_keys.hpp"
#include "sim/hardware/profile_keys.hpp"
#include "sim/strategies/strategy_keys.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int schema(const Args& args) {
  po::options_description opts("schema options");
  std::string out_file;
  opts.add_options()("profile", "the hardware profile's keys (configs/hardware/*.json) instead of the experiment file's")(
      "markdown", "print the reference in Markdown instead (docs/configuration-keys.md; with --profile docs/profile-keys.md)")(
      "foreign", "print the reference of the DeepSpeed and Hugging Face config keys stepsim reads (docs/configuration-foreign-keys.md)")(
      "out,o", po::value(&out_file), "write to this file instead of stdout");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim schema [--profile] [--markdown | --foreign] [--out F]\n\n"
                  "Prints a JSON Schema (draft 2020-12) of experiment files (with --profile: of hardware profiles).\n"
                  "Editors complete and check a file that names it: \"$schema\": \"./stepsim.schema.json\" (VS Code:\n"
                  "json.schemas in settings).",
                  opts, pos, vm))
    return 0;
  if (vm.count("foreign")) {
    write_output(foreign_markdown_reference(), out_file, "foreign configuration reference", std::cerr);
    return 0;
  }
  const bool profile = vm.count("profile") > 0, markdown = vm.count("markdown") > 0;
  std::string text;
  if (profile)
    text = markdown ? profile_markdown_reference()
                    : json_schema(profile_catalog(), "urn:stepsim:profile:1", "stepsim hardware profile").dump(1) + "\n";
  else
    text = markdown ? markdown_reference(experiment_catalog())
                    : json_schema(experiment_catalog(), "urn:stepsim:experiment:1", "stepsim experiment").dump(1) + "\n";
  write_output(text, out_file, markdown ? (profile ? "profile reference" : "configuration reference") : "JSON Schema", std::cerr);
  return 0;
}

}  // namespace stepsim::cli
