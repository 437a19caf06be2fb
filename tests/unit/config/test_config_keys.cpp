// One declaration per config key (issue 18 item 2): the key tables drive the unknown-key
// errors, the configuration reference, `stepsim schema`, tune's knobs and effective_config.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "json_schema_validator.hpp"
#include "sim/core/config_keys.hpp"
#include "sim/config/experiment_keys.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"

using namespace stepsim;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

std::string load_error(const std::string& file, const std::vector<std::string>& sets) {
  try {
    load_experiment(file, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The experiment files shipped in configs/: JSON objects with a "strategy" or "workload" key
// at the top (models, profiles, sweeps and DeepSpeed configs have neither).
std::vector<fs::path> shipped_experiments() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot + "/configs")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    Json doc = read_json_file(entry.path());
    if (doc.is_object() && (doc.contains("strategy") || doc.contains("workload")) && !doc.contains("sweep") && !doc.contains("base"))
      out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json printed_schema() { return json_schema(experiment_catalog(), "urn:stepsim:experiment:1", "stepsim experiment"); }

}  // namespace

TEST_CASE("An unknown strategy key from --set suggests the closest key and lists every key the framework takes", "[config]") {
  // Before the key tables the message listed only the keys already read (framework,
  // gradient_as_bucket_view, param_dtype), not bucket_cap_mb.
  const std::string msg = load_error(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", {"strategy.bucket_cap=5"});
  CHECK_THAT(msg, Catch::StartsWith("--set strategy.bucket_cap=5: /strategy/bucket_cap: expected a known key"));
  CHECK_THAT(msg, Catch::Contains("did you mean \"bucket_cap_mb\"?"));
  for (const std::string& k : strategy_keys::ddp().input_keys()) CHECK_THAT(msg, Catch::Contains(k));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("An unknown key in a nested object lists every key of that object", "[config]") {
  // A typo in training.allocator names both allocator keys, and suggests the near one.
  const std::string msg =
      load_error(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", {"training.allocator.expandable_segment=true"});
  CHECK_THAT(msg, Catch::Contains("/training/allocator/expandable_segment"));
  CHECK_THAT(msg, Catch::Contains("did you mean \"expandable_segments\"?"));
  CHECK_THAT(msg, Catch::Contains("expandable_segments, max_split_size_mb"));
}

TEST_CASE("A key reported by effective_config but never read is refused as unknown input", "[config]") {
  const std::string msg = load_error(kRoot + "/configs/examples/llama3-8b-fsdp2-8xh100.json", {"strategy.effective_reduce_dtype=\"fp32\""});
  CHECK_THAT(msg, Catch::Contains("/strategy/effective_reduce_dtype") && Catch::Contains("unknown key"));
}

TEST_CASE("Reading a key its table does not declare is a programmer error, not an input error", "[config]") {
  Json obj = {{"nodes", 1}};
  SourceMap src;
  src.root_file = "x.json";
  ObjectReader r(obj, src, "/cluster", &experiment_keys::cluster());
  CHECK_THROWS_AS(r.has("nodez"), std::logic_error);
  CHECK(r.int_in("nodes", 1, 8, 1) == 1);
}

TEST_CASE("Every key a strategy reports in effective_config is declared in its framework's table", "[config]") {
  // The docs list reported keys from the same table, so a new reported key must be declared.
  int checked = 0;
  for (const auto& file : shipped_experiments()) {
    Experiment e = load_experiment(file);
    const ConfigObject* table = strategy_keys::for_framework(e.strategy->framework());
    REQUIRE(table != nullptr);
    Json eff = e.strategy->effective_config();
    for (auto it = eff.begin(); it != eff.end(); ++it) {
      INFO(file.string() << ": " << it.key());
      CHECK(table->find(it.key()) != nullptr);
    }
    ++checked;
  }
  CHECK(checked >= 20);  // configs/examples alone hold more than 20 experiments
}

TEST_CASE("Every shipped experiment validates against the JSON Schema stepsim schema prints, raw and resolved", "[config]") {
  const Json schema = printed_schema();
  CHECK(schema["$schema"] == "https://json-schema.org/draft/2020-12/schema");
  test::MiniValidator v(schema);
  for (const auto& file : shipped_experiments()) {
    INFO(file.string());
    // As written (an editor sees "include" keys) ...
    CHECK(v.validate(read_json_file(file)) == std::vector<std::string>{});
    // ... and after includes are merged (what the parser reads).
    SourceMap src;
    CHECK(v.validate(load_with_includes(file, src)) == std::vector<std::string>{});
  }
}

TEST_CASE("The schema catches what the parser refuses: an unknown key, a wrong type, a value outside the choices", "[config]") {
  // A validator that accepts everything would make the test above vacuous.
  const Json schema = printed_schema();
  test::MiniValidator v(schema);
  SourceMap src;
  Json doc = load_with_includes(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", src);
  Json bad_key = doc, bad_type = doc, bad_choice = doc, bad_range = doc;
  bad_key["strategy"]["bucket_cap"] = 5;
  bad_type["strategy"]["gradient_as_bucket_view"] = "yes";
  bad_choice["workload"]["activation_checkpointing"] = "sometimes";
  bad_range["cluster"]["nodes"] = 0;
  for (const Json* d : {&bad_key, &bad_type, &bad_choice, &bad_range}) CHECK_FALSE(v.validate(*d).empty());
  for (const Json* d : {&bad_key, &bad_type, &bad_choice, &bad_range}) {
    SourceMap s;
    s.root_file = "doc.json";
    CHECK_THROWS_AS(experiment_from_json(*d, s), InputError);
  }
}

TEST_CASE("An experiment may name its JSON Schema with \"$schema\" for editors", "[config]") {
  CHECK_NOTHROW(load_experiment(kRoot + "/configs/examples/seed/c1-ddp-buckets.json", {"$schema=\"./stepsim.schema.json\""}));
}

TEST_CASE("The committed configuration reference equals the one the key tables generate", "[config]") {
  // To update: stepsim schema --markdown > docs/configuration-keys.md
  std::ifstream in(kRoot + "/docs/configuration-keys.md");
  REQUIRE(in);
  std::stringstream committed;
  committed << in.rdbuf();
  CHECK(committed.str() == markdown_reference(experiment_catalog()));
}

TEST_CASE("Every table default that is a plain value has the type and range the table declares", "[config]") {
  // A default outside its own range would be a table typo the schema would print.
  for (const ConfigObject* o : experiment_catalog().objects)
    for (const auto& k : o->keys) {
      if (!k.default_value || k.default_value->is_null()) continue;
      INFO(o->name << "." << k.name);
      const Json& d = *k.default_value;
      if (d.is_number()) {
        CHECK((k.types & (kInteger | kNumber)) != 0);
        if (k.min) CHECK((k.min_exclusive ? d.get<double>() > *k.min : d.get<double>() >= *k.min));
        if (k.max) CHECK(d.get<double>() <= *k.max);
      }
      if (d.is_string()) {
        CHECK((k.types & kString) != 0);
        if (!k.choices.empty()) CHECK(std::find(k.choices.begin(), k.choices.end(), d.get<std::string>()) != k.choices.end());
      }
      if (d.is_boolean()) CHECK((k.types & kBoolean) != 0);
    }
}

TEST_CASE("Each framework's parser applies the defaults its key table declares", "[config]") {
  // The table is what docs and the schema print; a parser default that drifted from it would
  // make them lie. A strategy with no options reports every default in effective_config.
  // (Null defaults are resolved before reporting: reshard_after_forward null -> true.)
  for (Json strategy : {Json{{"framework", "ddp"}}, Json{{"framework", "fsdp1"}}, Json{{"framework", "fsdp2"}},
                        Json{{"framework", "zero"}, {"stage", 1}}, Json{{"framework", "zero"}, {"stage", 3}}}) {
    Json doc = {{"workload", {{"toy", {{"layers", 2}, {"backward_ms", 1}, {"params_per_layer", 1000}}}}},
                {"cluster", {{"profile", kRoot + "/configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                {"strategy", strategy}};
    SourceMap src;
    src.root_file = "defaults.json";
    Experiment e = experiment_from_json(doc, src);
    const ConfigObject* table = strategy_keys::for_framework(strategy["framework"]);
    Json eff = e.strategy->effective_config();
    int compared = 0;
    for (const auto& k : table->keys) {
      if (!k.default_value || k.default_value->is_null() || !eff.contains(k.name)) continue;
      INFO(strategy.dump() << ": " << k.name);
      const Json& d = *k.default_value;
      if (d.is_number()) CHECK(eff[k.name].get<double>() == d.get<double>());
      else CHECK(eff[k.name] == d);
      ++compared;
    }
    CHECK(compared >= 2);
  }
}
