// The experiment file as a user writes it, through load_experiment (the entry point simulate,
// explain and sweep use): what an omitted key means, and the one-line error for a value of the
// wrong type and for a key the schema does not know. Behaviour only: how the keys are declared
// inside sim/config is free to change.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/core/error.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kProfile = std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json";

// The smallest complete experiment: a preset, a profile, a framework.
json minimal() {
  return {{"workload", {{"preset", "opt-125m"}}}, {"cluster", {{"profile", kProfile}}}, {"strategy", {{"framework", "ddp"}}}};
}

std::string write(const test::TempDir& dir, const std::string& name, const json& doc) {
  std::ofstream(dir / name) << doc.dump(1);
  return dir.file(name);
}

// The InputError message load_experiment gives for `doc` written to `file` ("" if none).
std::string error_of(const std::string& file, const std::vector<std::string>& overrides = {}) {
  try {
    load_experiment(file, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

json with(json doc, const json::json_pointer& where, json value) {
  doc[where] = std::move(value);
  return doc;
}

}  // namespace

// Catches: a default that drifts (every shipped example that omits the key would silently
// change its prediction), and a preset that stops supplying its implementation's defaults.
TEST_CASE("An experiment file that omits a key gets the documented default", "[config]") {
  const test::TempDir dir;
  const std::string file = write(dir, "minimal.json", minimal());
  const Experiment e = load_experiment(file);
  CHECK(e.file == file);
  CHECK(e.resolved == minimal());  // echoed as written (no includes, no --set)
  // workload: micro_batch 1, seq_len 2048, bf16, no checkpointing; the preset's layers are
  // embedding + 12 blocks + final norm + head.
  CHECK(e.workload->name == "opt-125m");
  CHECK(e.workload->micro_batch == 1);
  CHECK(e.workload->seq_len == 2048);
  CHECK(e.workload->dtype == Dtype::BF16);
  CHECK(e.workload->checkpointing() == Checkpointing::None);
  CHECK(e.workload->layers.size() == 12 + 3);
  CHECK(e.workload->hidden == 768);
  // cluster: 1 node of 8 GPUs; the profile file is the one named.
  CHECK(e.cluster.nodes == 1);
  CHECK(e.cluster.gpus_per_node == 8);
  CHECK(e.cluster.world_size() == 8);
  CHECK(e.cluster.profile_path == kProfile);
  // training: no accumulation, no_sync on, AdamW over fp32 master weights, PyTorch's
  // allocator defaults (caching on, no expandable segments, no max_split_size).
  CHECK(e.training.grad_accum == 1);
  CHECK(e.training.no_sync);
  CHECK(e.training.optimizer == Optimizer::AdamW);
  CHECK(e.training.master_dtype == Dtype::FP32);
  CHECK(e.training.allocator.enabled);
  CHECK_FALSE(e.training.allocator.expandable_segments);
  CHECK_FALSE(e.training.allocator.max_split_size.has_value());
  // The OPT preset runs HF eager attention with dropout 0.1: its blocks save the bool dropout
  // masks, so a block saves more with the preset's defaults than with "dropout": 0 given.
  const Experiment no_dropout = load_experiment(write(dir, "no-dropout.json", with(minimal(), "/workload/dropout"_json_pointer, 0)));
  // Two residual dropout masks per block, 1 B per element of [2048 tokens, 768]: 2 * 2048 * 768.
  CHECK(e.workload->layers[1].saved_activations.count - no_dropout.workload->layers[1].saved_activations.count == 2 * 2048 * 768);
}

// Catches: a value of the wrong type accepted (a string read as 0, a float truncated), a
// message that loses the file, the JSON path or the value, or one that spans several lines.
TEST_CASE("A value of the wrong type is one line naming the file, the JSON path, the value and what was expected", "[config]") {
  const test::TempDir dir;
  struct Case {
    const char* pointer;
    json value;
    const char* shown;     // how the message quotes the value
    const char* expected;  // a part of what it says was expected
  };
  const Case cases[] = {
      {"/workload/seq_len", "long", "\"long\"", "integer"},
      {"/workload/micro_batch", 1.5, "1.5", "integer"},
      {"/workload/dtype", "fp64", "\"fp64\"", "bf16"},
      {"/workload/activation_checkpointing", true, "true", "selective"},
      {"/cluster/nodes", "two", "\"two\"", "integer"},
      {"/cluster/gpus_per_node", -8, "-8", "integer"},
      {"/training/no_sync", "yes", "\"yes\"", "true or false"},
      {"/training/optimizer", "lamb", "\"lamb\"", "adamw"},
      {"/training/grad_accum", json::array({2}), "[2]", "integer"},
      {"/workload", "opt-125m", "\"opt-125m\"", "object"},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string file = write(dir, "case" + std::to_string(i++) + ".json", with(minimal(), json::json_pointer(c.pointer), c.value));
    const std::string msg = error_of(file);
    INFO(c.pointer << " = " << c.value.dump() << " -> " << msg);
    CHECK_THAT(msg, Catch::StartsWith(file + ": " + c.pointer + ": " + c.shown + ": expected"));
    CHECK_THAT(msg, Catch::Contains(c.expected));
    CHECK(std::count(msg.begin(), msg.end(), '\n') == 0);
  }
}

// Catches: a misspelt key ignored (the user's setting silently not applied: the worst kind of
// wrong answer), at any level of the file.
TEST_CASE("A key the experiment schema does not know is an error naming it, at every level", "[config]") {
  const test::TempDir dir;
  // (Which valid keys the message lists is issue 18's key table's business, not tested here.)
  int i = 0;
  for (const char* pointer : {"/workload/seq_length", "/cluster/gpus", "/training/grad_acum", "/trainig"}) {
    const std::string file = write(dir, "typo" + std::to_string(i++) + ".json", with(minimal(), json::json_pointer(pointer), 1));
    const std::string msg = error_of(file);
    INFO(pointer << " -> " << msg);
    CHECK_THAT(msg, Catch::StartsWith(file + ": " + pointer + ": expected"));
    CHECK_THAT(msg, Catch::Contains("unknown key"));
    CHECK(std::count(msg.begin(), msg.end(), '\n') == 0);
  }
}

// Catches: an error inside an included file blamed on the including one, a --set that does not
// override the file, and a bad --set value blamed on the file instead of the command line.
TEST_CASE("Includes and --set: the value the user wrote last wins, and an error names where it was written", "[config]") {
  const test::TempDir dir;
  write(dir, "base.json", with(minimal(), "/workload/seq_len"_json_pointer, 512));
  const std::string top = write(dir, "top.json", {{"include", "base.json"}, {"workload", {{"micro_batch", 4}}}});
  Experiment e = load_experiment(top);
  CHECK(e.workload->seq_len == 512);   // from base.json
  CHECK(e.workload->micro_batch == 4); // top.json over base.json
  e = load_experiment(top, {"workload.seq_len=128", "cluster.nodes=2"});
  CHECK(e.workload->seq_len == 128);
  CHECK(e.cluster.world_size() == 16);

  CHECK_THAT(error_of(top, {"workload.seq_len=-1"}), Catch::StartsWith("--set workload.seq_len=-1: /workload/seq_len: -1: expected"));
  write(dir, "base.json", with(minimal(), "/workload/seq_len"_json_pointer, "long"));
  CHECK_THAT(error_of(top), Catch::StartsWith(dir.file("base.json") + ": /workload/seq_len: \"long\": expected"));
}

// Found by fuzz_config: a profile name the OS rejects (a component over NAME_MAX) made
// std::filesystem throw instead of the one-line "not found" error.
TEST_CASE("A profile path too long for the OS is an InputError naming /cluster/profile", "[config][hardening]") {
  nlohmann::json doc = {{"workload", {{"preset", "opt-1.3b"}, {"micro_batch", 1}, {"seq_len", 512}}},
                        {"cluster", {{"profile", std::string(5000, 'd') + ".json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
                        {"strategy", {{"framework", "ddp"}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc, SourceMap{}), Catch::Contains("/cluster/profile") && Catch::Contains("not found"));
}

// Catches: a process-wide workload cache that hands a call another call's model (a different
// workload object or torch_version), that keeps a model read from a file a user may edit
// between calls, or that stops sharing (each call building its model again, issue 49).
TEST_CASE("load_experiment builds a workload once per distinct object in the process, never one read from a file", "[config]") {
  const test::TempDir dir;
  const std::string file = write(dir, "a.json", minimal());
  const Experiment a = load_experiment(file);
  const Experiment b = load_experiment(file, {"strategy.bucket_cap_mb=50"});
  CHECK(a.workload == b.workload);  // the same object: shared, not rebuilt
  const Experiment other = load_experiment(file, {"workload.seq_len=512"});
  CHECK(other.workload != a.workload);
  CHECK(other.workload->layers.size() == a.workload->layers.size());
  const Experiment older = load_experiment(file, {"training.torch_version=\"2.1\""});
  CHECK(older.workload != a.workload);  // its defaults read the torch_version

  // Nine other workloads later the least recently used are gone, and the one in use is kept.
  std::shared_ptr<const Workload> oldest, newest;
  for (int s = 1; s <= 9; ++s) {
    CHECK(load_experiment(file).workload == a.workload);
    newest = load_experiment(file, {"workload.seq_len=" + std::to_string(128 * s)}).workload;
    if (s == 1) oldest = newest;
  }
  CHECK(load_experiment(file, {"workload.seq_len=1152"}).workload == newest);
  CHECK(load_experiment(file, {"workload.seq_len=128"}).workload != oldest);  // dropped, built again

  // A model read from a config.json: read again at each load, so an edit is seen.
  const fs::path hf = dir / "config.json";
  json llama = {{"model_type", "llama"}, {"hidden_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 8},
                {"num_key_value_heads", 8}, {"intermediate_size", 1024}, {"vocab_size", 1000}};
  std::ofstream(hf) << llama.dump();
  json doc = minimal();
  doc["workload"] = {{"model", {{"hf_config", hf.string()}}}, {"seq_len", 128}};
  const std::string hf_file = write(dir, "hf.json", doc);
  const Experiment first = load_experiment(hf_file);
  llama["num_hidden_layers"] = 3;
  std::ofstream(hf) << llama.dump();
  const Experiment edited = load_experiment(hf_file);
  CHECK(edited.workload != first.workload);
  CHECK(edited.workload->layers.size() == first.workload->layers.size() + 1);
}
