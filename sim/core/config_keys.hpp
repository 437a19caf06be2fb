#pragma once
// One declaration per config key (issue 18 item 2). Every JSON object an experiment file holds
// is described once, by a ConfigObject: its keys with their JSON types, static range, default,
// one doc line and the framework version that introduced them. That table drives
//   - parsing: an ObjectReader that declares its object rejects an unknown key with a "did you
//     mean" naming every valid key, and refuses (a programmer error) to read an undeclared one;
//   - the configuration reference docs/configuration-keys.md (generated, checked by a test);
//   - `stepsim schema` (a JSON Schema, draft 2020-12, for editors);
//   - tune's knob list (the keys with `tune` candidates);
//   - effective_config: every key a strategy reports is declared (reported-only keys say so).
// Ranges that depend on other keys (a mesh dimension up to the world size) are checked by the
// owner's parser and described in the doc line; the table holds the static bounds.
//
// The tables live with their owners: workload, cluster and training in
// sim/config/experiment_keys.cpp, each framework's options in sim/strategies/strategy_keys.cpp.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim {

// The JSON types a key accepts (a set: reshard_after_forward takes null, a boolean or an integer).
enum JsonTypes : unsigned {
  kNull = 1u << 0,
  kBoolean = 1u << 1,
  kInteger = 1u << 2,  // an integer, or an integral float such as 5e8
  kNumber = 1u << 3,   // any finite number (includes integers)
  kString = 1u << 4,
  kObject = 1u << 5,
  kArray = 1u << 6,
};

struct ConfigKey {
  std::string name;
  unsigned types = 0;                      // JsonTypes
  std::vector<std::string> choices;        // a string value must be one of these (empty: any)
  std::optional<double> min, max;          // static numeric bounds, inclusive unless min_exclusive
  bool min_exclusive = false;              // "> min" (a positive size)
  std::vector<std::string> objects;        // an object value is one of these ConfigObjects (by name)
  std::string items;                       // array items: "string" or a ConfigObject name
  std::optional<nlohmann::json> default_value;  // the static default, if there is one
  std::string default_text;                // the default in words when it depends on other keys
  std::string doc;                         // one line
  std::string since;                       // "PyTorch 1.12", "DeepSpeed 0.3.13", "stepsim", "unknown"
  std::vector<nlohmann::json> tune;        // the settings `stepsim tune` searches; empty: not a knob
  // The same setting as another key of this object in another unit (bucket_cap_mb is
  // bucket_cap_bytes / 2^20): tune searches the knob under the key the document writes.
  std::string same_as;
  double same_as_scale = 1;                // this key's value = same_as's value / scale
  bool reported_only = false;              // in effective_config only, never read from input
  bool pre_parse = false;                  // consumed before parsing (include expansion, foreign files)
};

struct ConfigObject {
  std::string name;     // unique: "strategy.fsdp1", "workload.model"
  std::string path;     // where it appears: "/strategy", "/workload/toy/layer_list/N"
  std::string doc;      // one line
  std::vector<ConfigKey> keys;
  // For an object chosen by a discriminator (the strategy by "framework"): the key and value.
  std::string discriminator;
  std::string discriminator_value;

  const ConfigKey* find(const std::string& key) const;
  // The keys a user may write (reported-only keys excluded), in declaration order.
  std::vector<std::string> input_keys() const;
};

// All objects of one document kind (the experiment file), the root first.
struct ConfigCatalog {
  std::vector<const ConfigObject*> objects;
  const ConfigObject* find(const std::string& name) const;  // nullptr if absent
};

// The closest declared input key to `key` ("bucket_cap" -> "bucket_cap_mb"), or "" when none
// is close: an edit distance of at most a third of the length, or a prefix/substring match.
std::string closest_key(const ConfigObject& o, const std::string& key);

// Words for a key's type, range and choices: "integer 1..65536", "one of block, none".
std::string describe_type(const ConfigKey& k);
// The default in words ("25", "\"block\"", "true at stage 3, else false", "none").
std::string describe_default(const ConfigKey& k);

// Whether `v` is of one of the key's types and inside its static range and choices (what
// describe_type says): an integral float (5e8) is an integer, a number must be finite, array
// items are checked when `items` is "string". Ranges that depend on other keys are the owner's.
bool matches_declaration(const ConfigKey& k, const nlohmann::json& v);

// A JSON Schema (draft 2020-12) of the documents `catalog` describes: one $defs entry per
// object, additionalProperties false, "include" allowed in every object (resolved before
// parsing, so a fragment may omit keys: no key is marked required).
nlohmann::json json_schema(const ConfigCatalog& catalog, const std::string& id, const std::string& title);

// The configuration reference in Markdown (docs/configuration-keys.md).
std::string markdown_reference(const ConfigCatalog& catalog);

// The same under another document's title and introduction (the hardware profile reference,
// docs/profile-keys.md). `header` is Markdown ending in a newline; the "since" column is left
// out when no key of the catalog names a release.
std::string markdown_reference(const ConfigCatalog& catalog, const std::string& header);

// Text fit for one cell of a Markdown table: '|' escaped, newlines as spaces.
std::string markdown_cell(std::string_view s);

}  // namespace stepsim
