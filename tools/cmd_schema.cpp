// stepsim schema [--markdown | --foreign] [--out F]: the experiment file's keys, from the key
// tables (sim/config/experiment_keys.cpp, sim/strategies/strategy_keys.cpp), as a JSON Schema
// (draft 2020-12) for editors, or as the Markdown configuration reference
// (docs/configuration-keys.md); --foreign: the keys read from DeepSpeed configs and Hugging Face
// config.json files (sim/config/foreign_keys.cpp, docs/configuration-foreign-keys.md).
#include <iostream>

#include "sim/config/foreign_keys.hpp"
#include "sim/core/config_keys.hpp"
#include "sim/strategies/strategy_keys.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int schema(const Args& args) {
  po::options_description opts("schema options");
  std::string out_file;
  opts.add_options()("markdown", "print the configuration reference in Markdown instead (docs/configuration-keys.md)")(
      "foreign", "print the reference of the DeepSpeed and Hugging Face config keys stepsim reads (docs/configuration-foreign-keys.md)")(
      "out,o", po::value(&out_file), "write to this file instead of stdout");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim schema [--markdown | --foreign] [--out F]\n\n"
                  "Prints a JSON Schema (draft 2020-12) of experiment files. Editors complete and check a file\n"
                  "that names it: \"$schema\": \"./stepsim.schema.json\" (VS Code: json.schemas in settings).",
                  opts, pos, vm))
    return 0;
  if (vm.count("foreign")) {
    write_output(foreign_markdown_reference(), out_file, "foreign configuration reference", std::cerr);
    return 0;
  }
  const std::string text = vm.count("markdown")
                               ? markdown_reference(experiment_catalog())
                               : json_schema(experiment_catalog(), "urn:stepsim:experiment:1", "stepsim experiment")
                                         .dump(1) +
                                     "\n";
  write_output(text, out_file, vm.count("markdown") ? "configuration reference" : "JSON Schema", std::cerr);
  return 0;
}

}  // namespace stepsim::cli
