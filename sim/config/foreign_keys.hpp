#pragma once
// The keys stepsim reads from config files users already have (foreign_configs.hpp), declared
// once like the experiment's own keys (sim/core/config_keys.hpp): a Hugging Face config.json
// (one object per model family) and a DeepSpeed config JSON (the top level and
// zero_optimization). Each key has its name, JSON types, range, default, one doc line, the
// transformers / DeepSpeed release that introduced it, and what stepsim does with it (Use).
// The declaration drives foreign_configs.cpp (which keys it reads, checks, accepts or rejects:
// reading an undeclared key is a programmer error) and the reference
// docs/configuration-foreign-keys.md (`stepsim schema --foreign`, checked by a unit test).
//
// Keys a declaration does not list: a DeepSpeed object rejects them (exit 2 naming the file and
// the key), because any DeepSpeed option may change the schedule or memory. A config.json
// ignores them: it holds many keys that do not change a step's cost (token ids, RoPE and
// initialisation settings, torch_dtype, ...); the ones that do are listed, as read, checked or
// not modelled.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/config_keys.hpp"

namespace stepsim {

struct ForeignKey {
  enum class Use {
    Read,         // translated into `becomes` (an experiment key or a model dimension)
    Checked,      // accepted only at the values stepsim models (`accepts`); any other is exit 2
    NoEffect,     // accepted and not read: does not change one step's schedule or GPU memory
    NotModelled,  // accepted and not read although it can change the step (the doc says how)
  };
  ConfigKey key;                   // name, types, range, default, doc line, since
  Use use = Use::Read;
  std::string becomes;             // Read: "workload.dtype", "hidden", ...
  std::optional<nlohmann::json> neutral;  // Checked: the one value accepted, when there is one
  std::string accepts;             // Checked: the accepted values in words
};

struct ForeignObject {
  enum class Unlisted { Rejected, Ignored };
  std::string name;  // "deepspeed", "deepspeed.zero_optimization", "hf.llama"
  std::string file;  // "DeepSpeed config", "Hugging Face config.json"
  std::string path;  // "/", "/zero_optimization"
  std::string doc;   // one line
  Unlisted unlisted = Unlisted::Rejected;
  std::vector<ForeignKey> keys;

  const ForeignKey* find(const std::string& key) const;  // nullptr if not declared
  // The declared key; a programmer error (std::logic_error) if it is not declared.
  const ForeignKey& at(const std::string& key) const;
  // The key whose Read translation is `becomes` (the model dimension "hidden" -> "n_embd").
  const ForeignKey& reading(const std::string& becomes) const;
};

namespace foreign_keys {
const ForeignObject& deepspeed();            // the DeepSpeed config's top level
const ForeignObject& deepspeed_zero();       // its "zero_optimization" object
// The config.json object of a model_type (llama, mistral and qwen2 share one); nullptr if
// stepsim does not model the family.
const ForeignObject* hf_family(const std::string& model_type);
// The model_type values stepsim reads, in documentation order.
const std::vector<std::string>& hf_model_types();
// Every object above, in documentation order (DeepSpeed first).
std::vector<const ForeignObject*> objects();
}  // namespace foreign_keys

// The reference in Markdown (docs/configuration-foreign-keys.md).
std::string foreign_markdown_reference();

}  // namespace stepsim
