#pragma once
// A JSON Schema checker for the subset `stepsim schema` prints (experiment files and, with
// --profile, hardware profiles), so tests can hold the printed schema and the parser to the
// same documents without a schema library.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim::test {

// A JSON Schema checker for the subset `stepsim schema` prints ($ref to $defs, anyOf, type,
// enum, const, minimum, exclusiveMinimum, maximum, properties, additionalProperties false,
// items). Draft 2020-12 semantics: "integer" is any number with a zero fractional part.
class MiniValidator {
 public:
  explicit MiniValidator(const nlohmann::json& schema) : root_(schema) {}  // `schema` must outlive the validator

  std::vector<std::string> validate(const nlohmann::json& doc) {
    errors_.clear();
    check(root_, doc, "");
    return errors_;
  }

 private:
  static bool has_type(const std::string& t, const nlohmann::json& v) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number() && std::floor(v.get<double>()) == v.get<double>();
    if (t == "string") return v.is_string();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  bool check(const nlohmann::json& s, const nlohmann::json& v, const std::string& path) {
    const std::size_t before = errors_.size();
    auto fail = [&](const std::string& what) { errors_.push_back((path.empty() ? "/" : path) + ": " + what); };
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      REQUIRE(ref.rfind("#/$defs/", 0) == 0);
      check(root_["$defs"].at(ref.substr(8)), v, path);
    }
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& alt : s["anyOf"]) {
        MiniValidator sub(root_);
        if (sub.check(alt, v, path)) any = true;
      }
      if (!any) fail("matches none of anyOf: " + v.dump());
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) ok = has_type(s["type"], v);
      else
        for (const auto& t : s["type"]) ok = ok || has_type(t, v);
      if (!ok) fail("type " + s["type"].dump() + " expected, got " + v.dump());
    }
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) fail("not in enum: " + v.dump());
    if (s.contains("const") && s["const"] != v) fail("not the const " + s["const"].dump());
    if (v.is_number()) {
      const double d = v.get<double>();
      if (s.contains("minimum") && d < s["minimum"].get<double>()) fail("below minimum");
      if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) fail("not above exclusiveMinimum");
      if (s.contains("maximum") && d > s["maximum"].get<double>()) fail("above maximum");
    }
    if (v.is_object() && s.contains("properties")) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (s["properties"].contains(it.key())) check(s["properties"][it.key()], it.value(), path + "/" + it.key());
        else if (s.value("additionalProperties", true) == false) fail("undeclared key \"" + it.key() + "\"");
      }
    }
    if (v.is_array() && s.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i) check(s["items"], v[i], path + "/" + std::to_string(i));
    return errors_.size() == before;
  }

  const nlohmann::json& root_;
  std::vector<std::string> errors_;
};

}  // namespace stepsim::test
