#pragma once
// Strict reading of JSON config objects (STYLE.md item 5). Every field read marks its key as
// consumed; finish() rejects any key that was not read. Every error is one line:
//   FILE: /json/path: VALUE: expected WHAT
// so the user can find and fix it without reading our source.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>

#include "sim/core/config_keys.hpp"
#include "sim/core/error.hpp"
#include "sim/core/release.hpp"
#include "sim/core/units.hpp"

namespace stepsim {

using Json = nlohmann::json;

// Which file each JSON path came from, after includes were merged.
struct SourceMap {
  std::string root_file;
  std::map<std::string, std::string> file_of_prefix;  // "/workload" -> "configs/models/x.json"
  // Where a value translated from a foreign file (a DeepSpeed config) sits in that file:
  // "/strategy/reduce_bucket_size" -> "/zero_optimization/reduce_bucket_size". Messages about the
  // value name the key the user wrote, not the experiment key it became.
  std::map<std::string, std::string> path_in_file_of;
  // Every include followed, in the order the files were read: the name as written, the file
  // that wrote it and the file it resolved to (resolve_config_path(name, from) == target). The
  // profile's disk cache (sim/hardware/profile_disk_cache.hpp) checks that each still resolves
  // to the same file with the same content.
  struct Include {
    std::string name, from, target;
  };
  std::vector<Include> includes;
  std::string file_for(const std::string& path) const;
  // `path` as spelled in file_for(path): translated (path_in_file_of, exact or below an entry),
  // else unchanged.
  std::string path_in_file(const std::string& path) const;
};

[[noreturn]] void throw_input_error(const std::string& file, const std::string& path,
                                    const Json& value, const std::string& expected);
std::string json_value_for_message(const Json& v);  // compact, truncated

class ObjectReader {
 public:
  // Throws if `obj` is not an object. With `decl`, the object's keys are those declared
  // there (config_keys.hpp): finish() lists them all, and reading an undeclared key is a
  // programmer error (std::logic_error).
  ObjectReader(const Json& obj, const SourceMap& sources, std::string path, const ConfigObject* decl = nullptr);
  // Switches to `decl` (the strategy object, once its framework is known).
  void declare(const ConfigObject& decl) { decl_ = &decl; }
  const ConfigObject* declaration() const { return decl_; }

  bool has(const std::string& key) const;
  const Json& raw(const std::string& key);   // marks consumed; throws if missing
  std::string path_of(const std::string& key) const { return path_ + "/" + key; }
  const std::string& path() const { return path_; }
  const SourceMap& sources() const { return sources_; }

  double number(const std::string& key);
  double number(const std::string& key, double fallback);
  double positive(const std::string& key);                      // > 0
  double positive(const std::string& key, double fallback);
  double non_negative(const std::string& key, double fallback);  // >= 0
  double fraction(const std::string& key, double fallback);      // in [0, 1]
  // A finite number in [lo, hi] (a physical range), else "expected a number from LO to HI".
  double number_in(const std::string& key, double lo, double hi);
  double number_in(const std::string& key, double lo, double hi, double fallback);
  std::int64_t integer(const std::string& key);
  std::int64_t integer(const std::string& key, std::int64_t fallback);
  std::int64_t positive_integer(const std::string& key);
  std::int64_t positive_integer(const std::string& key, std::int64_t fallback);
  std::int64_t non_negative_integer(const std::string& key, std::int64_t fallback);
  // The one checked integer conversion for keys with a physical range: an integer (or an
  // integral float such as 5e8) in [lo, hi], else "expected an integer from LO to HI".
  std::int64_t integer_in(const std::string& key, std::int64_t lo, std::int64_t hi);
  std::int64_t integer_in(const std::string& key, std::int64_t lo, std::int64_t hi, std::int64_t fallback);
  // integer_in for values stored as int: `hi` must not exceed INT_MAX.
  int int_in(const std::string& key, int lo, int hi);
  int int_in(const std::string& key, int lo, int hi, int fallback);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key);
  std::string string(const std::string& key, const std::string& fallback);
  // One of `choices`; the error lists them.
  std::string choice(const std::string& key, const std::string& fallback, std::initializer_list<const char*> choices);
  std::string choice(const std::string& key, std::initializer_list<const char*> choices);
  Dtype dtype(const std::string& key, Dtype fallback);
  // A release string "major.minor[.patch]" (the key must be present); else fails with `expected`.
  Release release(const std::string& key, const std::string& expected);
  ObjectReader object(const std::string& key);
  ObjectReader object(const std::string& key, const ConfigObject& decl);
  std::vector<ObjectReader> objects(const std::string& key);   // an array of objects
  std::vector<ObjectReader> objects(const std::string& key, const ConfigObject& decl);
  const Json& array(const std::string& key);
  // All (key, value) pairs of this object, for maps keyed by data (e.g. group sizes); the
  // caller reads each with raw(key).
  std::vector<std::pair<std::string, const Json*>> raw_object_items() const;

  // A key read as its declaration (config_keys.hpp) says: the declared range or choices, and
  // the declared default when absent (a declaration without a default makes the key required).
  // The parser and the generated docs and schema thus share one range and one default.
  std::int64_t declared_integer(const std::string& key);
  int declared_int(const std::string& key);
  double declared_number(const std::string& key);
  bool declared_boolean(const std::string& key);
  std::string declared_choice(const std::string& key);

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;
  [[noreturn]] void fail_value(const std::string& key, const Json& value, const std::string& expected) const;

  // Rejects unread keys ("unknown key"): with a declaration, "did you mean" the closest
  // declared key and the list of every key the object takes; without, the keys read so far.
  void finish() const;

 private:
  using KeyList = boost::container::small_vector<std::string_view, 16>;
  static void note(KeyList& keys, std::string_view key) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  static bool contains(const KeyList& keys, std::string_view key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); }
  const Json& at(const std::string& key) const;
  // The declaration of `key` (nullptr without a declaration); a key read but not declared is a
  // programming error (std::logic_error).
  const ConfigKey* check_declared(const std::string& key) const;
  const ConfigKey& declared(const std::string& key) const;
  const Json* obj_;
  const SourceMap& sources_;
  std::string path_;
  // Keys read: views of the object's own key strings, which live as long as obj_. A handful
  // per object, so a vector searched in place: a set of strings was two heap nodes per key
  // read, a tenth of a simulate call's allocations (issue 49).
  mutable KeyList consumed_;
  // Keys the parser asked about (has) or read, with a declaration only: what this configuration
  // uses, which a message about a declared key it does not use lists (a toy workload reads toy
  // and dtype only). Views of the declaration's names, which live as long as decl_.
  mutable KeyList asked_;
  const ConfigObject* decl_ = nullptr;
};

// Limits of every JSON document read through this file (configs, includes, Hugging Face and
// DeepSpeed configs, profiles, suites, baselines, results; docs/limits.md): deeper nesting or
// a larger file is an input error naming the file, never a stack overflow or a memory bomb.
inline constexpr std::size_t kMaxJsonDepth = 256;
inline constexpr std::size_t kMaxJsonFileBytes = std::size_t{64} << 20;
inline constexpr int kMaxIncludeDepth = 16;  // "include" chains (a cycle ends here)

// The bytes of an input file, at most `max_bytes` (else InputError "expected WHAT of at most N
// MiB"). A directory or a device is refused; a named pipe without a writer reads as empty
// instead of blocking. Records the file as an input (note_input_file).
std::string read_input_text(const std::filesystem::path& file, std::size_t max_bytes, const std::string& what);

// Reads a JSON file; a parse error names the file, line and column. A key that appears twice
// in one object, a number outside the double range (1e999) and a directory are input errors.
Json read_json_file(const std::filesystem::path& file);
// The same for JSON text already in memory; `name` is the file name for messages.
Json parse_json_text(const std::string& text, const std::string& name);

// Resolves "include" keys: an object {"include": "x.json", k: v...} is replaced by the
// contents of x.json with k: v merged over it (recursively). Paths are relative to the file
// that names them, else to the working directory, else to the data directory (data_dir.hpp).
Json load_with_includes(const std::filesystem::path& file, SourceMap& sources);
// The same for a document already in memory (the Python API's dicts): `as_file` names it in
// messages and its includes resolve as a file of that name would (a name without a directory:
// against the working directory, then the data directory).
Json resolve_includes_of(Json doc, const std::filesystem::path& as_file, SourceMap& sources);

// Finds a file named in a config: relative to `relative_to`'s directory, then the working
// directory, then the data directory (so `configs/...` works from anywhere once one is set).
std::filesystem::path resolve_config_path(const std::string& name, const std::filesystem::path& relative_to);
// What an error about a name resolve_config_path did not find adds to "expected an existing
// ... file": "(not found in DIR, the working directory or the data directory D)"; with no data
// directory set, the options that set one. An absolute name: "(not found)".
std::string not_found_where(const std::string& name, const std::filesystem::path& relative_to);

// Applies `--set a.b.c=value`: the value is parsed as JSON when it parses, else taken as a
// string. Creates intermediate objects. Throws InputError on a malformed assignment. With
// `sources`, errors about /a/b/c (and below) name "--set a.b.c=value" instead of a file.
void apply_override(Json& doc, const std::string& assignment, SourceMap* sources = nullptr);

// Merges `patch` over `base` (objects recursively; anything else replaces).
void merge_over(Json& base, const Json& patch);

}  // namespace stepsim
