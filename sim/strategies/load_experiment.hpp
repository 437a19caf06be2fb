#pragma once
// Loading an experiment: sim/config reads the file (workload, cluster, training, includes,
// overrides, foreign configs) and hands the "strategy" object to the strategy registry
// (registry.cpp), which knows each framework's keys. The entry point of simulate, explain,
// live, validate, sweep and tune.

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/experiment.hpp"

namespace stepsim {

// Loads and validates. Throws InputError with file, JSON path, value and expectation. The
// workload is built once per distinct object within the process (process_workload_cache).
Experiment load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});
// Same, from a document in memory (the Python API's dict), named `as_file` in messages; its
// includes and file names resolve against the working directory, then the data directory.
Experiment load_experiment_from_json(const nlohmann::json& doc, const std::string& as_file,
                                     const std::vector<std::string>& overrides = {});
// Same, from an already-resolved document (sweeps build many from one base). `profiles` and
// `root_path` as for read_experiment (sim/config/experiment.hpp); `doc` is moved in if the caller
// is done with it.
Experiment experiment_from_json(nlohmann::json doc, const SourceMap& sources, ProfileCache* profiles = nullptr,
                                const std::string& root_path = "", WorkloadCache* workloads = nullptr);

}  // namespace stepsim
