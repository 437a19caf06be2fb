#include "sim/core/json_reader.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sim/core/data_dir.hpp"
#include "sim/core/input_files.hpp"

namespace stepsim {

namespace fs = std::filesystem;

std::string SourceMap::file_for(const std::string& path) const {
  std::string best = root_file;
  std::size_t best_len = 0;
  for (const auto& [prefix, file] : file_of_prefix) {
    bool matches = path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                                      path[prefix.size()] == '/');
    if (matches && prefix.size() >= best_len) {
      best = file;
      best_len = prefix.size();
    }
  }
  return best;
}

std::string SourceMap::path_in_file(const std::string& path) const {
  for (const auto& [from, to] : path_in_file_of)
    if (path == from || (path.size() > from.size() && path.compare(0, from.size(), from) == 0 && path[from.size()] == '/'))
      return to + path.substr(from.size());
  return path;
}

std::string json_value_for_message(const Json& v) {
  // A message never fails: bytes that are not UTF-8 are shown as U+FFFD (dump() would throw).
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

void throw_input_error(const std::string& file, const std::string& path, const Json& value,
                       const std::string& expected) {
  std::string where = path.empty() ? "/" : path;
  if (value.is_discarded()) throw InputError(fmt::format("{}: {}: expected {}", file, where, expected));
  throw InputError(fmt::format("{}: {}: {}: expected {}", file, where, json_value_for_message(value), expected));
}

ObjectReader::ObjectReader(const Json& obj, const SourceMap& sources, std::string path, const ConfigObject* decl)
    : obj_(&obj), sources_(sources), path_(std::move(path)), decl_(decl) {
  if (!obj.is_object()) throw_input_error(sources_.file_for(path_), sources_.path_in_file(path_), obj, "an object");
}

const ConfigKey* ObjectReader::check_declared(const std::string& key) const {
  if (!decl_) return nullptr;
  const ConfigKey* k = decl_->find(key);
  if (!k)
    throw std::logic_error(fmt::format("{}: key \"{}\" is read but not declared in the table of {} (config_keys.hpp)",
                                       path_.empty() ? "/" : path_, key, decl_->name));
  return k;
}

bool ObjectReader::has(const std::string& key) const {
  if (const ConfigKey* k = check_declared(key)) note(asked_, k->name);
  return obj_->contains(key);
}

const Json& ObjectReader::at(const std::string& key) const {
  const ConfigKey* k = check_declared(key);
  auto it = obj_->find(key);
  if (it == obj_->end()) {
    throw InputError(fmt::format("{}: {}: missing required key \"{}\"", sources_.file_for(path_),
                                 path_.empty() ? "/" : path_, key));
  }
  note(consumed_, it.key());
  if (k) note(asked_, k->name);
  return *it;
}

const Json& ObjectReader::raw(const std::string& key) { return at(key); }

void ObjectReader::fail(const std::string& key, const std::string& expected) const {
  const Json& v = obj_->contains(key) ? obj_->at(key) : Json(Json::value_t::discarded);
  throw_input_error(sources_.file_for(path_of(key)), sources_.path_in_file(path_of(key)), v, expected);
}

void ObjectReader::fail_value(const std::string& key, const Json& value, const std::string& expected) const {
  throw_input_error(sources_.file_for(path_of(key)), sources_.path_in_file(path_of(key)), value, expected);
}

double ObjectReader::number(const std::string& key) {
  const Json& v = at(key);
  if (!v.is_number()) fail(key, "a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "a finite number");
  return d;
}

double ObjectReader::number(const std::string& key, double fallback) { return has(key) ? number(key) : fallback; }

double ObjectReader::positive(const std::string& key) {
  double d = number(key);
  if (!(d > 0)) fail(key, "a positive number");
  return d;
}

double ObjectReader::positive(const std::string& key, double fallback) { return has(key) ? positive(key) : fallback; }

double ObjectReader::non_negative(const std::string& key, double fallback) {
  if (!has(key)) return fallback;
  double d = number(key);
  if (d < 0) fail(key, "a number >= 0");
  return d;
}

double ObjectReader::fraction(const std::string& key, double fallback) {
  if (!has(key)) return fallback;
  double d = number(key);
  if (d < 0 || d > 1) fail(key, "a fraction between 0 and 1");
  return d;
}

double ObjectReader::number_in(const std::string& key, double lo, double hi) {
  double d = number(key);
  if (!(d >= lo && d <= hi)) fail(key, fmt::format("a number from {:g} to {:g}", lo, hi));
  return d;
}

double ObjectReader::number_in(const std::string& key, double lo, double hi, double fallback) {
  return has(key) ? number_in(key, lo, hi) : fallback;
}

std::int64_t ObjectReader::integer(const std::string& key) {
  const Json& v = at(key);
  if (v.is_number_unsigned()) {
    // Above INT64_MAX (2^63 .. 2^64-1) nlohmann keeps it unsigned: not an int64.
    if (v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(v.get<std::uint64_t>());
    fail(key, "an integer below 2^63");
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  // DeepSpeed-style element counts are often written 5e8: accept integral floats.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
  }
  fail(key, "an integer");
}

std::int64_t ObjectReader::integer_in(const std::string& key, std::int64_t lo, std::int64_t hi) {
  const Json& v = at(key);
  std::optional<std::int64_t> out;
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX)) out = static_cast<std::int64_t>(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi))
      out = static_cast<std::int64_t>(d);
  }
  // The message is formatted only when there is one to give: a profile reads thousands of
  // integers, and formatting each one's range was a tenth of a simulate process.
  if (!out || *out < lo || *out > hi) fail(key, fmt::format("an integer from {} to {}", lo, hi));
  return *out;
}

std::int64_t ObjectReader::integer_in(const std::string& key, std::int64_t lo, std::int64_t hi, std::int64_t fallback) {
  return has(key) ? integer_in(key, lo, hi) : fallback;
}

int ObjectReader::int_in(const std::string& key, int lo, int hi) { return static_cast<int>(integer_in(key, lo, hi)); }

int ObjectReader::int_in(const std::string& key, int lo, int hi, int fallback) { return has(key) ? int_in(key, lo, hi) : fallback; }

std::int64_t ObjectReader::integer(const std::string& key, std::int64_t fallback) {
  return has(key) ? integer(key) : fallback;
}

std::int64_t ObjectReader::positive_integer(const std::string& key) {
  std::int64_t v = integer(key);
  if (v <= 0) fail(key, "a positive integer");
  return v;
}

std::int64_t ObjectReader::positive_integer(const std::string& key, std::int64_t fallback) {
  return has(key) ? positive_integer(key) : fallback;
}

std::int64_t ObjectReader::non_negative_integer(const std::string& key, std::int64_t fallback) {
  if (!has(key)) return fallback;
  std::int64_t v = integer(key);
  if (v < 0) fail(key, "an integer >= 0");
  return v;
}

bool ObjectReader::boolean(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  const Json& v = at(key);
  if (!v.is_boolean()) fail(key, "true or false");
  return v.get<bool>();
}

std::string ObjectReader::string(const std::string& key) {
  const Json& v = at(key);
  if (!v.is_string()) fail(key, "a string");
  return v.get<std::string>();
}

std::string ObjectReader::string(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : fallback;
}

static std::string join_choices(std::initializer_list<const char*> choices) {
  std::string out = "one of ";
  bool first = true;
  for (const char* c : choices) {
    if (!first) out += ", ";
    out += c;
    first = false;
  }
  return out;
}

std::string ObjectReader::choice(const std::string& key, std::initializer_list<const char*> choices) {
  const Json& v = at(key);
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (const char* c : choices)
      if (s == c) return s;
  }
  fail(key, join_choices(choices));
}

std::string ObjectReader::choice(const std::string& key, const std::string& fallback,
                                 std::initializer_list<const char*> choices) {
  return has(key) ? choice(key, choices) : fallback;
}

Dtype ObjectReader::dtype(const std::string& key, Dtype fallback) {
  if (!has(key)) return fallback;
  const Json& v = at(key);
  try {
    if (!v.is_string()) throw std::invalid_argument("one of fp32, tf32, bf16, fp16, fp8");
    return parse_dtype(v.get<std::string>());
  } catch (const std::invalid_argument& e) {
    fail(key, e.what());
  }
}

Release ObjectReader::release(const std::string& key, const std::string& expected) {
  static const std::regex pattern(R"(([0-9]{1,5})\.([0-9]{1,5})(?:\.([0-9]{1,5}))?)");
  const Json& v = raw(key);
  std::smatch m;
  if (!v.is_string() || !std::regex_match(v.get_ref<const std::string&>(), m, pattern)) fail_value(key, v, expected);
  return {std::stoi(m[1]), std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0};
}

const ConfigKey& ObjectReader::declared(const std::string& key) const {
  const ConfigKey* k = decl_ ? decl_->find(key) : nullptr;
  if (!k) throw std::logic_error(fmt::format("{}: declared_*(\"{}\") without a declaration of the key", path_.empty() ? "/" : path_, key));
  return *k;
}

std::int64_t ObjectReader::declared_integer(const std::string& key) {
  const ConfigKey& k = declared(key);
  if (!k.min || !k.max || k.min_exclusive) throw std::logic_error("declared_integer(\"" + key + "\") needs an inclusive min and a max");
  const auto lo = static_cast<std::int64_t>(*k.min), hi = static_cast<std::int64_t>(*k.max);
  return k.default_value ? integer_in(key, lo, hi, k.default_value->get<std::int64_t>()) : integer_in(key, lo, hi);
}

int ObjectReader::declared_int(const std::string& key) {
  const ConfigKey& k = declared(key);
  if (!k.max || *k.max > INT_MAX) throw std::logic_error("declared_int(\"" + key + "\") needs a max <= INT_MAX");
  return static_cast<int>(declared_integer(key));
}

double ObjectReader::declared_number(const std::string& key) {
  const ConfigKey& k = declared(key);
  if (!k.min || !k.max || k.min_exclusive) throw std::logic_error("declared_number(\"" + key + "\") needs an inclusive min and a max");
  return k.default_value ? number_in(key, *k.min, *k.max, k.default_value->get<double>()) : number_in(key, *k.min, *k.max);
}

bool ObjectReader::declared_boolean(const std::string& key) {
  const ConfigKey& k = declared(key);
  if (!k.default_value || !k.default_value->is_boolean()) throw std::logic_error("declared_boolean(\"" + key + "\") needs a boolean default");
  return boolean(key, k.default_value->get<bool>());
}

std::string ObjectReader::declared_choice(const std::string& key) {
  const ConfigKey& k = declared(key);
  if (k.choices.empty()) throw std::logic_error("declared_choice(\"" + key + "\") needs choices");
  if (!has(key)) {
    if (!k.default_value) at(key);  // "missing required key"
    return k.default_value->get<std::string>();
  }
  const Json& v = at(key);
  if (v.is_string() && std::find(k.choices.begin(), k.choices.end(), v.get<std::string>()) != k.choices.end()) return v.get<std::string>();
  std::string expected = "one of ";
  for (std::size_t i = 0; i < k.choices.size(); ++i) expected += (i ? ", " : "") + k.choices[i];
  fail(key, expected);
}

ObjectReader ObjectReader::object(const std::string& key) { return ObjectReader(at(key), sources_, path_of(key)); }

ObjectReader ObjectReader::object(const std::string& key, const ConfigObject& decl) {
  return ObjectReader(at(key), sources_, path_of(key), &decl);
}

// The array's path is spelled once, each element's by appending its index (a profile's GEMM
// table has hundreds of rows; a formatted path per row was a percent of a simulate process).
std::vector<ObjectReader> ObjectReader::objects(const std::string& key, const ConfigObject& decl) {
  const Json& v = array(key);
  const std::string base = path_of(key) + "/";
  std::vector<ObjectReader> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out.emplace_back(v[i], sources_, base + std::to_string(i), &decl);
  return out;
}

std::vector<ObjectReader> ObjectReader::objects(const std::string& key) {
  const Json& v = array(key);
  const std::string base = path_of(key) + "/";
  std::vector<ObjectReader> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out.emplace_back(v[i], sources_, base + std::to_string(i));
  return out;
}

const Json& ObjectReader::array(const std::string& key) {
  const Json& v = at(key);
  if (!v.is_array()) fail(key, "an array");
  return v;
}

std::vector<std::pair<std::string, const Json*>> ObjectReader::raw_object_items() const {
  std::vector<std::pair<std::string, const Json*>> out;
  for (auto it = obj_->begin(); it != obj_->end(); ++it) out.emplace_back(it.key(), &it.value());
  return out;
}

namespace {

// Whether an unknown key names a feature of the README's not-modelled table (a "tp" mesh
// dimension, "pipeline_parallel", "cpu_offload", "num_experts", "lora_r"...): its error then
// points to the table, not only to the keys this object takes.
bool names_unmodelled_feature(const std::string& key) {
  std::string k;
  for (char c : key) k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* exact : {"tp", "pp", "cp", "sp", "ep", "tensor", "pipeline", "context", "expert", "experts", "lora"})
    if (k == exact) return true;
  for (const char* part : {"tensor_parallel", "pipeline", "context_parallel", "sequence_parallel", "expert", "moe", "offload",
                           "lora", "peft", "sliding_window", "tp_size", "pp_size", "cp_size"})
    if (k.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

void ObjectReader::finish() const {
  for (auto it = obj_->begin(); it != obj_->end(); ++it) {
    if (contains(consumed_, it.key())) continue;
    if (decl_) {
      const bool declared = decl_->find(it.key()) && !decl_->find(it.key())->reported_only;
      if (declared) {
        // A declared key this configuration never asked about (a toy workload's micro_batch):
        // the keys it does use, in declaration order, not the whole table (F23).
        std::string used;
        for (const auto& k : decl_->input_keys())
          if (contains(asked_, k)) used += (used.empty() ? "" : ", ") + k;
        throw_input_error(sources_.file_for(path_of(it.key())), sources_.path_in_file(path_of(it.key())), it.value(),
                          fmt::format("no \"{}\" here: this configuration does not use it (it reads {})", it.key(),
                                      used.empty() ? "no other key" : used));
      }
      std::string accepted;
      for (const auto& k : decl_->input_keys()) accepted += (accepted.empty() ? "" : ", ") + k;
      const std::string near = closest_key(*decl_, it.key());
      throw_input_error(sources_.file_for(path_of(it.key())), sources_.path_in_file(path_of(it.key())), Json(Json::value_t::discarded),
                        fmt::format("a known key (unknown key; {}this object takes: {}){}",
                                    !near.empty() ? fmt::format("did you mean \"{}\"? ", near) : "", accepted,
                                    names_unmodelled_feature(it.key())
                                        ? "; " + not_modelled("parallelism, offload, experts or adapters of that kind")
                                        : ""));
    }
    std::vector<std::string_view> read(consumed_.begin(), consumed_.end());
    std::sort(read.begin(), read.end());
    std::string accepted;
    for (std::string_view k : read) (accepted += accepted.empty() ? "" : ", ") += k;
    throw_input_error(sources_.file_for(path_of(it.key())), sources_.path_in_file(path_of(it.key())), Json(Json::value_t::discarded),
                      accepted.empty() ? "no such key (unknown key)"
                                       : fmt::format("a known key (unknown key; this object takes: {})", accepted));
  }
}

namespace {

// Rejects a key that appears twice in one object (nlohmann would keep the last silently).
struct DuplicateKeyCheck {
  std::string file;
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::vector<std::string> path;            // JSON path of the open containers
  std::string pending_key;
  static constexpr std::size_t kNotArray = static_cast<std::size_t>(-1);
  std::vector<std::size_t> array_index;     // per open container: the next element's index; kNotArray for objects

  // The path component of the element that starts now: its key in an object, its index in an
  // array (counted here).
  std::string element_key() {
    if (array_index.empty() || array_index.back() == kNotArray) return pending_key;
    return std::to_string(array_index.back()++);
  }

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        // Inside an array, a container's path component is its index.
        const std::string component = element_key();
        // Everything that walks a document (includes, merges, messages that print a value)
        // recurses once per level: the nesting is bounded here, once, for every reader.
        if (path.size() >= kMaxJsonDepth) {
          std::string where;
          for (std::size_t i = 1; i < path.size() && where.size() < 60; ++i) where += "/" + path[i];
          throw InputError(fmt::format("{}: {}: nesting deeper than {}: expected at most {} nested objects or arrays", file,
                                       where.empty() ? "/" : where.substr(0, 60) + (where.size() > 60 ? "..." : ""),
                                       kMaxJsonDepth, kMaxJsonDepth));
        }
        keys.emplace_back();
        path.push_back(component);
        array_index.push_back(event == Json::parse_event_t::array_start ? 0 : kNotArray);
        break;
      }
      case Json::parse_event_t::key: {
        const std::string k = parsed.get<std::string>();
        if (!keys.empty() && !keys.back().insert(k).second) {
          std::string where;
          for (std::size_t i = 1; i < path.size(); ++i) where += "/" + path[i];
          throw InputError(fmt::format("{}: {}/{}: duplicate key: expected each key once per object", file, where, k));
        }
        pending_key = k;
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!keys.empty()) keys.pop_back();
        if (!path.empty()) path.pop_back();
        if (!array_index.empty()) array_index.pop_back();
        pending_key = "";
        break;
      case Json::parse_event_t::value:
        (void)element_key();  // a scalar element of an array takes its index
        break;
    }
    return true;
  }
};

}  // namespace

Json parse_json_text(const std::string& text, const std::string& name) {
  if (text.size() > kMaxJsonFileBytes)
    throw InputError(fmt::format("{}: {} bytes: expected a JSON file of at most {} MiB", name, text.size(),
                                 kMaxJsonFileBytes >> 20));
  try {
    return Json::parse(text, DuplicateKeyCheck{name, {}, {}, {}, {}}, true, /*ignore_comments=*/true);
  } catch (const Json::exception& e) {
    // parse_error (syntax), out_of_range 406 (a number such as 1e999 that no double holds).
    throw InputError(fmt::format("{}: invalid JSON: {}", name, e.what()));
  }
}

std::string read_input_text(const fs::path& name, std::size_t max_bytes, const std::string& what) {
  const fs::path file = resolve_input_path(name);
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw InputError(fmt::format("{}: is a directory: expected {}", file.string(), what));
  // A device (/dev/zero, /dev/urandom) would be read forever: only files and pipes are input.
  if (fs::is_character_file(file, ec) || fs::is_block_file(file, ec) || fs::is_socket(file, ec))
    throw InputError(fmt::format("{}: is a device: expected {}", file.string(), what));
  // O_NONBLOCK: opening a named pipe that no process writes would block forever. Once open,
  // reads block again: a pipe with a writer (<(cat x.json)) is read to its end, one without
  // reads as empty.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(fmt::format("{}: cannot open file ({})", file.string(), std::strerror(errno)));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  note_input_file(file);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(fmt::format("{}: cannot read file ({})", file.string(), std::strerror(err)));
    }
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      throw InputError(fmt::format("{}: more than {} MiB: expected {} of at most {} MiB", file.string(), max_bytes >> 20,
                                   what, max_bytes >> 20));
    }
  }
  ::close(fd);
  return text;
}

Json read_json_file(const fs::path& file) {
  std::string text = read_input_text(file, kMaxJsonFileBytes, "a JSON file");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(fmt::format("{}: empty file: expected a JSON document", file.string()));
  return parse_json_text(text, file.string());
}

fs::path resolve_config_path(const std::string& name, const fs::path& relative_to) {
  fs::path p(name);
  if (p.is_absolute()) return p;
  // The naming file's folder, the working directory, then the data directory (data_dir.hpp).
  const auto shipped = data_dir();
  fs::path candidates[] = {relative_to.parent_path() / p, fs::current_path() / p, shipped ? *shipped / p : fs::path()};
  for (const auto& c : candidates) {
    std::error_code ec;  // a name too long for the OS is "not found", not an exception
    if (!c.empty() && fs::exists(c, ec)) return c.lexically_normal();
  }
  return (relative_to.parent_path() / p).lexically_normal();
}

std::string not_found_where(const std::string& name, const fs::path& relative_to) {
  if (fs::path(name).is_absolute()) return "(not found)";
  std::error_code ec;
  // The naming file's folder when the name came from a file (not from --set).
  std::string where = "(not found in ";
  if (fs::is_regular_file(relative_to, ec)) {
    const fs::path folder = relative_to.parent_path();
    where += (folder.empty() ? std::string(".") : folder.string()) + ", ";
  }
  const fs::path cwd = fs::current_path(ec);
  where += ec ? std::string("the working directory") : "the working directory " + cwd.string();
  if (const auto shipped = data_dir()) return where + fmt::format(" or the data directory {})", shipped->string());
  return where + "; no data directory is set: --data-dir or STEPSIM_DATA_DIR names one)";
}

void merge_over(Json& base, const Json& patch) {
  if (!base.is_object() || !patch.is_object()) {
    base = patch;
    return;
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (base.contains(it.key())) merge_over(base[it.key()], it.value());
    else base[it.key()] = it.value();
  }
}

// Records the paths `patch` writes when merged over `base` (merge_over's recursion) as coming
// from `file`. An object merged into an object claims only the keys it writes: the keys it
// leaves alone keep the included file as their source.
static void claim_patched_paths(const Json& base, const Json& patch, const std::string& path, const std::string& file,
                                SourceMap& sources) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string p = path + "/" + it.key();
    if (base.is_object() && base.contains(it.key()) && base[it.key()].is_object() && it.value().is_object())
      claim_patched_paths(base[it.key()], it.value(), p, file, sources);
    else
      sources.file_of_prefix[p] = file;
  }
}

// Where resolve_includes is in the document: a key or an index under its parent, or a path
// already spelled out. The walk visits every node of every file it reads (a 133 KB profile is
// tens of thousands), and only an include or an error needs the path as a string, so it is
// spelled out then and not at each node.
struct JsonPathLink {
  const JsonPathLink* parent = nullptr;
  const std::string* key = nullptr;      // an object member's key, else
  std::size_t index = 0;                 // an array element's index
  const std::string* spelled = nullptr;  // the whole path (the root of a walk)
};

static std::string spell(const JsonPathLink& at) {
  if (at.spelled) return *at.spelled;
  std::string out = spell(*at.parent) + "/";
  if (at.key) out += *at.key;
  else out += std::to_string(at.index);
  return out;
}

static void resolve_includes(Json& node, const fs::path& file, const JsonPathLink& at, SourceMap& sources, int depth) {
  if (node.is_object()) {
    if (node.contains("include")) {
      const std::string path = spell(at);
      const JsonPathLink here{nullptr, nullptr, 0, &path};
      const Json& inc = node["include"];
      if (!inc.is_string() || inc.get<std::string>().empty())
        throw_input_error(file.string(), path + "/include", inc, "a file name string");
      if (depth >= kMaxIncludeDepth)
        throw_input_error(file.string(), path + "/include", inc,
                          fmt::format("includes nested at most {} deep (this is include {}: a cycle?)", kMaxIncludeDepth,
                                      depth + 1));
      fs::path target = resolve_config_path(inc.get<std::string>(), file);
      std::error_code ec;
      if (!fs::exists(target, ec))
        throw_input_error(file.string(), path + "/include", inc,
                          "an existing file " + not_found_where(inc.get<std::string>(), file));
      if (fs::is_directory(target, ec)) throw_input_error(file.string(), path + "/include", inc, "a JSON file (this is a directory)");
      sources.includes.push_back({inc.get<std::string>(), file.string(), target.string()});
      Json included = read_json_file(target);
      resolve_includes(included, target, here, sources, depth + 1);
      sources.file_of_prefix[path] = target.string();
      Json overrides = node;
      overrides.erase("include");
      // Overrides written next to "include" belong to the including file.
      claim_patched_paths(included, overrides, path, file.string(), sources);
      resolve_includes(overrides, file, here, sources, depth);
      merge_over(included, overrides);
      node = std::move(included);
      return;
    }
    for (auto it = node.begin(); it != node.end(); ++it) resolve_includes(it.value(), file, JsonPathLink{&at, &it.key()}, sources, depth);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) resolve_includes(node[i], file, JsonPathLink{&at, nullptr, i}, sources, depth);
  }
}

Json load_with_includes(const fs::path& file, SourceMap& sources) {
  return resolve_includes_of(read_json_file(file), file, sources);
}

Json resolve_includes_of(Json doc, const fs::path& as_file, SourceMap& sources) {
  sources.root_file = as_file.string();
  const std::string root;
  resolve_includes(doc, as_file, JsonPathLink{nullptr, nullptr, 0, &root}, sources, 0);
  return doc;
}

void apply_override(Json& doc, const std::string& assignment, SourceMap* sources) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(fmt::format("--set {}: expected path=value, e.g. strategy.bucket_cap_mb=50", assignment));
  std::string path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  Json value;
  try {
    value = Json::parse(
        text,
        [&](int depth, Json::parse_event_t, Json&) {
          if (depth >= static_cast<int>(kMaxJsonDepth))
            throw InputError(fmt::format("--set {}: nesting deeper than {}: expected at most {} nested objects or arrays",
                                         assignment.substr(0, eq), kMaxJsonDepth, kMaxJsonDepth));
          return true;
        },
        /*allow_exceptions=*/true);
  } catch (const Json::out_of_range&) {
    // A number no double holds (1e999): refuse rather than keep it as the string "1e999".
    throw InputError(fmt::format("--set {}: {}: expected a number that fits a double", assignment, text));
  } catch (const Json::exception&) {
    value = text;
    // Taken as a string, it must be text: the experiment is echoed into results and messages.
    try {
      (void)value.dump();
    } catch (const Json::exception&) {
      throw InputError(fmt::format("--set {}: expected a JSON value or UTF-8 text (the value has bytes that are not UTF-8)",
                                   assignment.substr(0, eq)));
    }
  }
  Json* node = &doc;
  std::stringstream ss(path);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  for (const auto& p : parts)
    if (p.find('/') != std::string::npos)
      throw InputError(fmt::format("--set {}: \"{}\": expected a dotted path such as strategy.bucket_cap_mb (a key has no '/')",
                                   assignment, path));
  std::string pointer;
  for (const auto& p : parts) pointer += "/" + p;
  // The same path twice: the first would be dropped silently.
  if (sources) {
    auto it = sources->file_of_prefix.find(pointer);
    if (it != sources->file_of_prefix.end() && it->second.rfind("--set ", 0) == 0)
      throw InputError(fmt::format("--set {}: {} is also set by {}: expected each path once", assignment, path, it->second));
  }
  if (sources) sources->file_of_prefix[pointer] = "--set " + assignment;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw InputError(fmt::format("--set {}: empty path component", assignment));
    if (node->is_null()) *node = Json::object();  // an intermediate object the document lacks
    if (!node->is_object()) throw InputError(fmt::format("--set {}: {} is not an object", assignment, parts[i]));
    if (i + 1 == parts.size()) (*node)[parts[i]] = value;
    else node = &(*node)[parts[i]];
  }
}

}  // namespace stepsim
