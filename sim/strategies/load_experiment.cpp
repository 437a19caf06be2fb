#include "sim/strategies/load_experiment.hpp"

#include "sim/strategies/strategy.hpp"

namespace stepsim {

namespace {

std::shared_ptr<const Strategy> read_registered_strategy(ObjectReader& r, const Experiment& e) { return parse_strategy(r, e); }

}  // namespace

Experiment experiment_from_json(nlohmann::json doc, const SourceMap& sources, ProfileCache* profiles,
                                const std::string& root_path, WorkloadCache* workloads) {
  return read_experiment(std::move(doc), sources, read_registered_strategy, profiles, root_path, workloads);
}

Experiment load_experiment(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  SourceMap sources;
  nlohmann::json doc = load_experiment_document(file, overrides, sources);
  return experiment_from_json(std::move(doc), sources, nullptr, "", &process_workload_cache());
}

Experiment load_experiment_from_json(const nlohmann::json& doc, const std::string& as_file, const std::vector<std::string>& overrides) {
  SourceMap sources;
  nlohmann::json resolved = experiment_document_of(doc, as_file, overrides, sources);
  return experiment_from_json(std::move(resolved), sources, nullptr, "", &process_workload_cache());
}

}  // namespace stepsim
