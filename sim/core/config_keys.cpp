#include "sim/core/config_keys.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace stepsim {

using Json = nlohmann::json;

const ConfigKey* ConfigObject::find(const std::string& key) const {
  for (const auto& k : keys)
    if (k.name == key) return &k;
  return nullptr;
}

std::vector<std::string> ConfigObject::input_keys() const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!k.reported_only) out.push_back(k.name);
  return out;
}

const ConfigObject* ConfigCatalog::find(const std::string& name) const {
  for (const ConfigObject* o : objects)
    if (o->name == name) return o;
  return nullptr;
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string number_text(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)) && v < 1e15 && v > -1e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{:g}", v);
}

}  // namespace

std::string closest_key(const ConfigObject& o, const std::string& key) {
  std::string best;
  std::size_t best_d = key.size() / 3 + 1;
  for (const std::string& k : o.input_keys()) {
    std::size_t d = edit_distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  if (!best.empty()) return best;
  // "bucket_cap" for "bucket_cap_mb": the written key is a part of exactly one declared key.
  std::string only;
  for (const std::string& k : o.input_keys())
    if (key.size() >= 4 && (k.find(key) != std::string::npos || key.find(k) != std::string::npos)) {
      if (!only.empty()) return "";
      only = k;
    }
  return only;
}

std::string describe_type(const ConfigKey& k) {
  std::vector<std::string> parts;
  auto range = [&](const char* what) {
    std::string s = what;
    if (k.min && k.max) s += fmt::format(" {}{}..{}", k.min_exclusive ? ">" : "", number_text(*k.min), number_text(*k.max));
    else if (k.min) s += fmt::format(" {} {}", k.min_exclusive ? ">" : ">=", number_text(*k.min));
    else if (k.max) s += fmt::format(" <= {}", number_text(*k.max));
    return s;
  };
  if (k.types & kNull) parts.push_back("null");
  if (k.types & kBoolean) parts.push_back("boolean");
  if (k.types & kNumber) parts.push_back(range("number"));
  else if (k.types & kInteger) parts.push_back(range("integer"));
  if (k.types & kString) {
    if (k.choices.empty()) parts.push_back("string");
    else {
      std::string s = "one of ";
      for (std::size_t i = 0; i < k.choices.size(); ++i) s += (i ? ", " : "") + k.choices[i];
      parts.push_back(s);
    }
  }
  if (k.types & kObject) {
    if (k.objects.empty()) parts.push_back("object");
    else {
      std::string s = "object (";
      for (std::size_t i = 0; i < k.objects.size(); ++i) s += (i ? " or " : "") + k.objects[i];
      parts.push_back(s + ")");
    }
  }
  if (k.types & kArray) parts.push_back(fmt::format("array of {}", k.items.empty() ? "values" : k.items));
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out;
}

bool matches_declaration(const ConfigKey& k, const Json& v) {
  if (v.is_null()) return k.types & kNull;
  if (v.is_boolean()) return k.types & kBoolean;
  if (v.is_number()) {
    const double d = v.get<double>();
    const bool integral = v.is_number_integer() || (std::isfinite(d) && d == std::floor(d));
    if (!std::isfinite(d) || !((k.types & kNumber) || ((k.types & kInteger) && integral))) return false;
    if (k.min && (k.min_exclusive ? !(d > *k.min) : !(d >= *k.min))) return false;
    return !k.max || d <= *k.max;
  }
  if (v.is_string())
    return (k.types & kString) && (k.choices.empty() || std::find(k.choices.begin(), k.choices.end(), v.get<std::string>()) != k.choices.end());
  if (v.is_object()) return k.types & kObject;
  if (v.is_array()) {
    if (!(k.types & kArray)) return false;
    return k.items != "string" || std::all_of(v.begin(), v.end(), [](const Json& x) { return x.is_string(); });
  }
  return false;
}

std::string describe_default(const ConfigKey& k) {
  if (!k.default_text.empty()) return k.default_text;
  if (k.default_value) return k.default_value->dump();
  return "";
}

namespace {

// Integral bounds print as integers (1024, not 1024.0).
Json bound(double v) {
  if (v == static_cast<double>(static_cast<long long>(v)) && v < 9e18 && v > -9e18) return Json(static_cast<long long>(v));
  return Json(v);
}

Json numeric_schema(const ConfigKey& k, const char* type) {
  Json s = {{"type", type}};
  if (k.min) s[k.min_exclusive ? "exclusiveMinimum" : "minimum"] = bound(*k.min);
  if (k.max) s["maximum"] = bound(*k.max);
  return s;
}

Json ref(const std::string& object) { return {{"$ref", "#/$defs/" + object}}; }

Json key_schema(const ConfigKey& k) {
  std::vector<Json> alts;
  if (k.types & kNull) alts.push_back({{"type", "null"}});
  if (k.types & kBoolean) alts.push_back({{"type", "boolean"}});
  if (k.types & kNumber) alts.push_back(numeric_schema(k, "number"));
  else if (k.types & kInteger) alts.push_back(numeric_schema(k, "integer"));
  if (k.types & kString) {
    Json s = {{"type", "string"}};
    if (!k.choices.empty()) s["enum"] = k.choices;
    alts.push_back(s);
  }
  if (k.types & kObject) {
    if (k.objects.empty()) alts.push_back({{"type", "object"}});
    for (const auto& o : k.objects) alts.push_back(ref(o));
  }
  if (k.types & kArray) {
    Json s = {{"type", "array"}};
    if (k.items == "string" || k.items == "integer" || k.items == "number") s["items"] = {{"type", k.items}};
    else if (!k.items.empty()) s["items"] = ref(k.items);
    alts.push_back(s);
  }
  Json out = alts.size() == 1 ? alts.front() : Json{{"anyOf", alts}};
  std::string d = k.doc;
  if (std::string def = describe_default(k); !def.empty()) d += fmt::format(" Default: {}.", def);
  if (!k.since.empty()) d += fmt::format(" Since: {}.", k.since);
  out["description"] = d;
  if (k.default_value) out["default"] = *k.default_value;
  return out;
}

}  // namespace

Json json_schema(const ConfigCatalog& catalog, const std::string& id, const std::string& title) {
  Json defs = Json::object();
  for (const ConfigObject* o : catalog.objects) {
    Json props = Json::object();
    for (const auto& k : o->keys) {
      if (k.reported_only) continue;
      Json s = key_schema(k);
      if (!o->discriminator.empty() && k.name == o->discriminator) s["const"] = o->discriminator_value;
      props[k.name] = s;
    }
    if (!o->find("include"))
      props["include"] = {{"type", "string"},
                          {"description", "A JSON file whose object this one extends: the keys written next to it override it."}};
    defs[o->name] = {{"type", "object"}, {"description", o->doc}, {"properties", props}, {"additionalProperties", false}};
  }
  return {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
          {"$id", id},
          {"title", title},
          {"$ref", "#/$defs/" + catalog.objects.front()->name},
          {"$defs", defs}};
}

std::string markdown_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string markdown_reference(const ConfigCatalog& catalog) {
  return markdown_reference(
      catalog,
      "# Configuration reference\n\n"
      "<!-- Generated from the key tables (sim/config/experiment_keys.cpp, sim/strategies/strategy_keys.cpp)\n"
      "     by `stepsim schema --markdown`; do not edit. A unit test checks this file equals the output:\n"
      "     after changing a table run `stepsim schema --markdown > docs/configuration-keys.md`. -->\n\n"
      "Every key of an experiment file, one table per JSON object, in the order the parser reads them.\n"
      "Any object may also hold `include` (a file it extends; see docs/configuration.md). A key not\n"
      "listed is an error (exit 2) naming the keys the object takes. `stepsim schema` prints the same\n"
      "tables as a JSON Schema for editors. \"Since\" is the framework release that introduced the\n"
      "option (\"stepsim\": a modelling choice of this tool, not a framework option; \"unknown\": not\n"
      "traced yet). Reported keys appear only in the `strategy` line of results (effective_config).\n");
}

std::string markdown_reference(const ConfigCatalog& catalog, const std::string& header) {
  bool since = false;
  for (const ConfigObject* o : catalog.objects)
    for (const auto& k : o->keys) since = since || !k.since.empty();
  std::ostringstream out;
  out << header;
  for (const ConfigObject* o : catalog.objects) {
    out << fmt::format("\n## `{}`\n\nAt `{}`: {}\n\n", o->name, o->path, o->doc);
    out << (since ? "| key | type | default | since | meaning |\n|---|---|---|---|---|\n" : "| key | type | default | meaning |\n|---|---|---|---|\n");
    for (const auto& k : o->keys) {
      std::string name = fmt::format("`{}`", k.name);
      if (k.reported_only) name += " (reported)";
      std::string doc = k.doc;
      if (!k.tune.empty()) {
        doc += " Tune searches:";
        for (std::size_t i = 0; i < k.tune.size(); ++i) doc += (i ? ", " : " ") + k.tune[i].dump();
        doc += ".";
      }
      if (since)
        out << fmt::format("| {} | {} | {} | {} | {} |\n", name, markdown_cell(describe_type(k)), markdown_cell(describe_default(k)), markdown_cell(k.since), markdown_cell(doc));
      else
        out << fmt::format("| {} | {} | {} | {} |\n", name, markdown_cell(describe_type(k)), markdown_cell(describe_default(k)), markdown_cell(doc));
    }
  }
  return out.str();
}

}  // namespace stepsim
