// The declaration of the keys stepsim reads from DeepSpeed configs and Hugging Face config.json
// files (sim/config/foreign_keys.hpp): it drives the readers and the generated reference.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "sim/config/foreign_configs.hpp"
#include "sim/config/foreign_keys.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "sim/strategies/strategy_keys.hpp"
#include "test_support.hpp"

using namespace stepsim;
using Use = ForeignKey::Use;

namespace {

const std::string kSrc = STEPSIM_SOURCE_DIR;


nlohmann::json dschat() {
  return nlohmann::json::parse(std::ifstream(kSrc + "/configs/examples/deepspeed/dschat-step1-opt-1.3b-zero2.ds_config.json"));
}

nlohmann::json ds_experiment(const std::string& ds_file) {
  return {{"workload", {{"preset", "opt-1.3b"}, {"seq_len", 512}}},
          {"cluster", {{"profile", kSrc + "/configs/hardware/a800-sxm-8x.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", {{"deepspeed_config", ds_file}}}};
}

std::string error_of(const nlohmann::json& doc) {
  try {
    test::experiment_from_doc(doc);
  } catch (const InputError& err) {
    return err.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("The committed foreign-key reference equals the one the declaration generates", "[config][foreign]") {
  // To update: stepsim schema --foreign > docs/configuration-foreign-keys.md
  std::ifstream in(kSrc + "/docs/configuration-foreign-keys.md");
  REQUIRE(in);
  std::stringstream committed;
  committed << in.rdbuf();
  CHECK(committed.str() == foreign_markdown_reference());
}

TEST_CASE("Each foreign object declares a key once, and says what stepsim does with it", "[config][foreign]") {
  for (const ForeignObject* o : foreign_keys::objects()) {
    std::set<std::string> seen;
    for (const ForeignKey& k : o->keys) {
      INFO(o->name << "." << k.key.name);
      CHECK(seen.insert(k.key.name).second);
      CHECK_FALSE(k.key.doc.empty());
      CHECK_FALSE(k.key.since.empty());
      if (k.use == Use::Read) CHECK_FALSE(k.becomes.empty());
      if (k.use == Use::Checked) CHECK_FALSE(k.accepts.empty());
    }
  }
}

TEST_CASE("A zero_optimization key DeepSpeed config translates one to one is a key of the zero strategy's table",
          "[config][foreign]") {
  // deepspeed_zero's Read keys become strategy.<same name>: the zero table (strategy_keys.cpp)
  // declares each, with the type and range that check the value.
  const ConfigObject& zero = strategy_keys::zero();
  for (const ForeignKey& k : foreign_keys::deepspeed_zero().keys) {
    if (k.use != Use::Read) continue;
    INFO(k.key.name);
    CHECK(k.becomes == "strategy." + k.key.name);
    CHECK(zero.find(k.key.name) != nullptr);
  }
}

TEST_CASE("DeepSpeed config: every key declared as accepted (no effect, or not modelled) loads and leaves the prediction "
          "unchanged; an undeclared one is exit 2",
          "[config][foreign][deepspeed]") {
  const test::TempDir dir;
  const Experiment plain = test::experiment_from_doc(ds_experiment(dir.write_json("plain.json", dschat())));
  // The reader does not read these keys, but each value has its declared type (issue 50, F15):
  // a value of that type stands for "set", a value of another type is refused naming the key.
  auto typed = [](const ConfigKey& k) -> nlohmann::json {
    if (k.types & kBoolean) return true;
    if (k.types & (kInteger | kNumber)) return k.min ? *k.min + 1 : 1;
    if (k.types & kObject) return nlohmann::json::object();
    if (k.types & kString) return k.choices.empty() ? nlohmann::json("x") : nlohmann::json(k.choices.front());
    return nullptr;
  };
  auto untyped = [](const ConfigKey& k) -> nlohmann::json { return k.types & kArray ? nlohmann::json("x") : nlohmann::json::array(); };
  nlohmann::json ds = dschat();
  int accepted = 0;
  for (const ForeignKey& k : foreign_keys::deepspeed().keys)
    if (k.use == Use::NoEffect || k.use == Use::NotModelled) ds[k.key.name] = typed(k.key), ++accepted;
  for (const ForeignKey& k : foreign_keys::deepspeed_zero().keys)
    if (k.use == Use::NoEffect || k.use == Use::NotModelled) ds["zero_optimization"][k.key.name] = typed(k.key), ++accepted;
  CHECK(accepted >= 29);  // 17 top-level and 12 zero_optimization keys today
  for (const ForeignKey& k : foreign_keys::deepspeed().keys) {
    if (k.use != Use::NoEffect && k.use != Use::NotModelled) continue;
    INFO(k.key.name);
    REQUIRE(k.key.types != 0);  // every accepted key declares its type
    nlohmann::json bad = dschat();
    bad[k.key.name] = untyped(k.key);
    CHECK_THAT(error_of(ds_experiment(dir.write_json("bad.json", bad))),
               Catch::Contains("bad.json: /" + k.key.name + ": ") && Catch::Contains("expected " + describe_type(k.key)));
  }
  const Experiment all = test::experiment_from_doc(ds_experiment(dir.write_json("all.json", ds)));
  CHECK(all.strategy->effective_config() == plain.strategy->effective_config());
  CHECK(all.workload->micro_batch == plain.workload->micro_batch);
  CHECK(all.training.grad_accum == plain.training.grad_accum);

  ds = dschat();
  ds["zero_optimization"]["stage3_prefetch_bucket_sizes"] = 1;  // a typo: not declared
  CHECK_THAT(error_of(ds_experiment(dir.write_json("typo.json", ds))),
             Catch::Contains("typo.json: /zero_optimization/stage3_prefetch_bucket_sizes: 1") && Catch::Contains("unknown key"));
  // A checked object given as something else is not passed unread.
  ds = dschat();
  ds["hybrid_engine"] = true;
  CHECK_THAT(error_of(ds_experiment(dir.write_json("he.json", ds))),
             Catch::Contains("he.json: /hybrid_engine: true") && Catch::Contains("an object with \"enabled\": false"));
  ds = dschat();
  ds["comms_logger"] = {{"enabled", false}};
  CHECK_THAT(error_of(ds_experiment(dir.write_json("top.json", ds))),
             Catch::Contains("top.json: /comms_logger") && Catch::Contains("configuration-foreign-keys.md"));
}

TEST_CASE("DeepSpeed config: a checked zero_optimization key loads at its declared value and is exit 2 at any other",
          "[config][foreign][deepspeed]") {
  const test::TempDir dir;
  int checked = 0;
  for (const ForeignKey& k : foreign_keys::deepspeed_zero().keys) {
    if (k.use != Use::Checked || !k.neutral) continue;
    INFO(k.key.name);
    ++checked;
    nlohmann::json ds = dschat();
    ds["zero_optimization"][k.key.name] = *k.neutral;
    CHECK(error_of(ds_experiment(dir.write_json("neutral.json", ds))) == "no error");
    // Another value of the same type: the other boolean, or the integer next to it.
    ds["zero_optimization"][k.key.name] = k.neutral->is_boolean() ? nlohmann::json(!k.neutral->get<bool>())
                                                                   : nlohmann::json(k.neutral->get<std::int64_t>() + 1);
    CHECK_THAT(error_of(ds_experiment(dir.write_json("other.json", ds))),
               Catch::Contains("other.json: /zero_optimization/" + k.key.name) && Catch::Contains(k.accepts));
  }
  CHECK(checked == 11);  // allgather_partitions, 8 ZeRO++/legacy booleans, hpZ, module granularity
  // mics_shard_size: any integer <= 0 (MiCS off); 4 is MiCS.
  nlohmann::json ds = dschat();
  ds["zero_optimization"]["mics_shard_size"] = 0;
  CHECK(error_of(ds_experiment(dir.write_json("mics0.json", ds))) == "no error");
  ds["zero_optimization"]["mics_shard_size"] = 4;
  CHECK_THAT(error_of(ds_experiment(dir.write_json("mics4.json", ds))), Catch::Contains("/zero_optimization/mics_shard_size: 4"));
}

TEST_CASE("HF config.json: defaults come from the family's declaration, errors name the family's own key", "[config][foreign][hf]") {
  const test::TempDir dir;
  std::string name;
  // GPT-2 small: n_inner null -> 4 x n_embd = 3072; tie_word_embeddings absent -> the declared true.
  nlohmann::json gpt2{{"model_type", "gpt2"}, {"n_embd", 768},       {"n_layer", 12},
                      {"n_head", 12},         {"n_inner", nullptr},  {"vocab_size", 50257}, {"n_positions", 1024}};
  ModelDims d = dims_from_hf_config(dir.write_json("gpt2.json", gpt2), name, 1024);
  CHECK(d.ffn == 4 * 768);
  CHECK(d.tied_embeddings == foreign_keys::hf_family("gpt2")->at("tie_word_embeddings").key.default_value->get<bool>());
  // 768 is not a multiple of 7 heads: the error names GPT-2's key n_head (not num_attention_heads).
  gpt2["n_head"] = 7;
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("gpt2-7.json", gpt2), name, 1024),
                    Catch::Contains("gpt2-7.json: /n_head: 7") && Catch::Contains("a divisor of the hidden size 768"));
  // MPT: expansion_ratio absent -> the declared 4.
  nlohmann::json mpt{{"model_type", "mpt"}, {"d_model", 2048}, {"n_layers", 24}, {"n_heads", 16}, {"vocab_size", 50368}};
  CHECK(dims_from_hf_config(dir.write_json("mpt.json", mpt), name, 2048).ffn == 4 * 2048);
  // A checked key at another value: the declaration's words.
  nlohmann::json llama = nlohmann::json::parse(std::ifstream(kSrc + "/configs/models/hf/meta-llama-3-8b.config.json"));
  llama["attention_bias"] = true;
  CHECK_THROWS_WITH(dims_from_hf_config(dir.write_json("bias.json", llama), name, 8192),
                    Catch::Contains("bias.json: /attention_bias: true") && Catch::Contains("attention biases are not modelled"));
  // A key the declaration does not list is ignored (config.json holds token ids, RoPE settings, ...).
  llama = nlohmann::json::parse(std::ifstream(kSrc + "/configs/models/hf/meta-llama-3-8b.config.json"));
  llama["some_future_key"] = 1;
  CHECK_NOTHROW(dims_from_hf_config(dir.write_json("future.json", llama), name, 8192));
}
