#include "sim/hardware/profile_disk_cache.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <concepts>
#include <cstring>
#include <fstream>
#include <iterator>
#include <type_traits>

#include <fmt/format.h>

#include "sim/core/input_files.hpp"

namespace stepsim {

namespace fs = std::filesystem;

namespace {

// Bump when the encoding changes. The layout fingerprint below changes by itself when a
// profile struct gains or loses a member on this platform.
constexpr std::uint32_t kFormatVersion = 4;
constexpr char kMagic[8] = {'S', 'T', 'P', 'R', 'O', 'F', 'C', '\n'};

// The sizes of the structs encoded member by member (the others are copied whole, see
// put/get below): a member added to one of them changes the fingerprint, so entries written
// before it are misses even if this file was not updated. (It does not replace updating
// encode/decode: the round-trip test over every shipped profile compares with operator==.)
constexpr std::uint64_t layout_fingerprint() {
  std::uint64_t h = kFormatVersion;
  for (std::uint64_t s : {sizeof(HardwareProfile), sizeof(ComputeProfile), sizeof(AlphaBetaModel), sizeof(TableModel),
                          sizeof(RankVariation), sizeof(NcclTopology), sizeof(AlphaBetaRange), sizeof(GemmMeasurement),
                          sizeof(HostProfile), sizeof(ContentionProfile), sizeof(OutsideAllocatorMemory), sizeof(ClockProfile),
                          sizeof(AttentionRate), sizeof(RingModel), sizeof(TreeConstants), sizeof(MeasuredCollective)})
    h = h * 1000003 + s;
  return h;
}

// The build that reads and writes entries: the size and modification time of the binary this
// code is linked into (the stepsim executable, or the Python extension). The layout fingerprint
// catches a struct that changed, not a parser that reads the same JSON differently (a new
// default, a fixed bug); so an entry is read only by the very build that wrote it, and any
// rebuild starts cold. 0 when the binary cannot be found: then nothing is cached.
std::uint64_t build_identity() {
  static const std::uint64_t id = [] {
    // dladdr names the object this code is in; a static executable has no object list
    // (STEPSIM_STATIC_CLI), and there the code is in the executable itself.
    Dl_info info{};
    std::error_code ec;
    fs::path binary;
    if (dladdr(reinterpret_cast<const void*>(&content_hash), &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0')
      binary = fs::canonical(info.dli_fname, ec);
    if (binary.empty() || ec) binary = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::uint64_t{0};
    const auto size = fs::file_size(binary, ec);
    if (ec) return std::uint64_t{0};
    const auto mtime = fs::last_write_time(binary, ec);
    if (ec) return std::uint64_t{0};
    const std::string key = fmt::format("{}|{}|{}", binary.string(), size, mtime.time_since_epoch().count());
    return content_hash(key) | 1;  // never 0
  }();
  return id;
}

// A mistake in the encoding, or bytes that are not one: a miss, never an error.
struct Corrupt {};

class Writer {
 public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void pod(const T& v) {
    // Padding bytes go along (the entry's hash covers them); only this build reads them back.
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void bytes(std::string_view s) {
    pod(static_cast<std::uint64_t>(s.size()));
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void pod(T& v) {
    if (in_.size() < sizeof(T)) throw Corrupt{};
    std::memcpy(&v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
  }
  std::uint64_t count() {
    std::uint64_t n = 0;
    pod(n);
    if (n > in_.size()) throw Corrupt{};  // every element takes at least a byte
    return n;
  }
  std::string_view bytes() {
    const std::uint64_t n = count();
    std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

// Structs of scalars are copied whole; the static_asserts keep a std::string or a container
// from being added to one unnoticed (it would then be encoded as a pointer).
template <class T>
concept Flat = std::is_trivially_copyable_v<T>;

static_assert(Flat<AlphaBetaRange> && Flat<MeasuredCollective> && Flat<RingModel> && Flat<TreeConstants> && Flat<TreeModel> &&
              Flat<NcclModel> && Flat<NcclTopology> && Flat<GemmMeasurement> && Flat<AttentionRate> && Flat<ClockProfile> &&
              Flat<ContentionProfile> && Flat<HostProfile> && Flat<OutsideAllocatorMemory> && Flat<FlopRate> && Flat<Bandwidth>,
              "a profile struct copied whole is no longer trivially copyable: encode it member by member");

template <Flat T>
void put(Writer& w, const T& v) {
  w.pod(v);
}
template <Flat T>
void get(Reader& r, T& v) {
  r.pod(v);
}

void put(Writer& w, const std::string& s) { w.bytes(s); }
void get(Reader& r, std::string& s) { s = std::string(r.bytes()); }

// nlohmann's CBOR keeps every value and number type (integer, unsigned, float) of the JSON.
void put(Writer& w, const Json& j) {
  const std::vector<std::uint8_t> cbor = Json::to_cbor(j);
  w.bytes(std::string_view(reinterpret_cast<const char*>(cbor.data()), cbor.size()));
}
void get(Reader& r, Json& j) {
  const std::string_view b = r.bytes();
  j = Json::from_cbor(b.begin(), b.end(), /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Corrupt{};
}

template <class T>
void put(Writer& w, const std::vector<T>& v);
template <class T>
void get(Reader& r, std::vector<T>& v);
template <class K, class V>
void put(Writer& w, const std::map<K, V>& m);
template <class K, class V>
void get(Reader& r, std::map<K, V>& m);
template <class T>
  requires(!Flat<std::optional<T>>)
void put(Writer& w, const std::optional<T>& o);
template <class T>
  requires(!Flat<std::optional<T>>)
void get(Reader& r, std::optional<T>& o);

template <class T>
void put(Writer& w, const std::vector<T>& v) {
  w.pod(static_cast<std::uint64_t>(v.size()));
  for (const auto& x : v) put(w, x);
}
template <class T>
void get(Reader& r, std::vector<T>& v) {
  v.resize(r.count());
  for (auto& x : v) get(r, x);
}

template <class K, class V>
void put(Writer& w, const std::map<K, V>& m) {
  w.pod(static_cast<std::uint64_t>(m.size()));
  for (const auto& [k, v] : m) {
    put(w, k);
    put(w, v);
  }
}
template <class K, class V>
void get(Reader& r, std::map<K, V>& m) {
  m.clear();
  for (std::uint64_t n = r.count(); n > 0; --n) {
    K k{};
    get(r, k);
    get(r, m[k]);
  }
}

template <class T>
  requires(!Flat<std::optional<T>>)
void put(Writer& w, const std::optional<T>& o) {
  w.pod(o.has_value());
  if (o) put(w, *o);
}
template <class T>
  requires(!Flat<std::optional<T>>)
void get(Reader& r, std::optional<T>& o) {
  bool has = false;
  r.pod(has);
  if (has) get(r, o.emplace());
  else o.reset();
}

// Each struct's members once, in the entry's order: put and get both walk them, so the writer
// and the reader cannot drift apart. `S` is the struct or the const struct.
template <class S, class T>
concept Is = std::same_as<std::remove_const_t<S>, T>;

template <Is<AlphaBetaModel> S, class F>
void fields(S& m, F&& f) {
  f(m.ranges);
  f(m.default_ranges);
  f(m.ranks);
  f(m.groups);
}
template <Is<ComputeProfile> S, class F>
void fields(S& c, F&& f) {
  f(c.peak);
  f(c.hbm);
  f(c.memory_efficiency);
  f(c.gemm_efficiency);
  f(c.attention_efficiency);
  f(c.efficient_attention_efficiency);
  f(c.attention_rates);
  f(c.gemm_table_peak);
  f(c.gemm_in_training_factor);
  f(c.gemm_table_rates);
  f(c.clock);
  f(c.model_memory_kernels);
  f(c.min_kernel_time);
  f(c.kernel_gap);
  f(c.gemm_table);
  f(c.class_bandwidth);
  f(c.inductor_reduction);
  f(c.strided_element_ns);
  f(c.strided_cast_element_ns);
  f(c.l2_bytes);
  f(c.dram_stream);
  f(c.memcpy);
}
template <Is<RankVariation> S, class F>
void fields(S& v, F&& f) {
  f(v.kernel_cv);
  f(v.persistent_cv);
  f(v.host_cv);
  f(v.source);
}
template <Is<HardwareProfile> S, class F>
void fields(S& p, F&& f) {
  f(p.name);
  f(p.description);
  f(p.memory_capacity);
  f(p.compute);
  f(p.intra_node);
  f(p.inter_node);
  f(p.topology);
  f(p.contention);
  f(p.host);
  f(p.outside_allocator);
  f(p.rank_variation);
  f(p.sources);
  f(p.provenance);
}
template <class T>
concept HasFields = requires(T& t) { fields(t, [](auto&) {}); };

template <HasFields T>
void put(Writer& w, const T& v) {
  fields(v, [&](const auto& m) { put(w, m); });
}
template <HasFields T>
void get(Reader& r, T& v) {
  fields(v, [&](auto& m) { get(r, m); });
}

void put(Writer& w, const TableModel& m) { put(w, m.points); }
void get(Reader& r, TableModel& m) { get(r, m.points); }

void put(Writer& w, const ScopeModel& m) {
  w.pod(static_cast<std::uint32_t>(m.index()));
  std::visit([&](const auto& alt) { put(w, alt); }, m);
}
template <std::size_t I = 0>
void emplace_alternative(Reader& r, ScopeModel& m, std::uint32_t index) {
  if constexpr (I < std::variant_size_v<ScopeModel>) {
    if (index == I) get(r, m.emplace<I>());
    else emplace_alternative<I + 1>(r, m, index);
  } else {
    throw Corrupt{};
  }
}
void get(Reader& r, ScopeModel& m) {
  std::uint32_t index = 0;
  r.pod(index);
  emplace_alternative(r, m, index);
}


}  // namespace

// The whole content of a regular file, or nothing (missing, not a regular file, unreadable, or
// it grew while read).
std::optional<std::string> read_regular_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  // One read of the whole file (an istreambuf_iterator copy cost ~25 instructions a byte).
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  if (size < 0) return std::nullopt;
  std::string text(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(text.data(), size) || in.peek() != std::char_traits<char>::eof()) return std::nullopt;
  return text;
}

namespace {

// One file a profile was read from: for the profile itself, name and from are empty.
struct FileRecord {
  std::string name, from, target;
  std::uint64_t size = 0, hash = 0;
};

// One entry per profile file and build: the CLI and the Python extension (two builds) each keep
// theirs, where one entry per file had each rewrite the other's whenever a user alternated them
// (a profile parsed again, 25 M instructions, each time).
std::string entry_prefix(const fs::path& file) { return fmt::format("profile-{:016x}-", content_hash(file.string())); }

fs::path entry_path(const fs::path& dir, const fs::path& file) {
  return dir / fmt::format("{}{:016x}.bin", entry_prefix(file), build_identity());
}

// Entries of the same profile written by other builds, oldest first beyond the newest
// kEntriesPerProfile - 1, are removed as a new one is written: builds come and go (each rebuild
// is one), and the folder stays bounded. A file another process removes first is no error.
constexpr std::size_t kEntriesPerProfile = 4;

void prune_other_builds(const fs::path& dir, const fs::path& file, const fs::path& keep) {
  const std::string prefix = entry_prefix(file);
  std::vector<std::pair<fs::file_time_type, fs::path>> others;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (p == keep || !name.starts_with(prefix) || !name.ends_with(".bin")) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(p, tec);
    if (!tec) others.emplace_back(t, p);
  }
  if (others.size() < kEntriesPerProfile) return;
  std::sort(others.begin(), others.end(), [](const auto& a, const auto& b) { return a.first > b.first; });  // newest first
  for (std::size_t i = kEntriesPerProfile - 1; i < others.size(); ++i) fs::remove(others[i].second, ec);
}

}  // namespace

std::uint64_t content_hash(std::string_view bytes) {
  // 8 bytes at a time, each word mixed in with a multiply and a rotate (wyhash-like), then a
  // final avalanche (splitmix64's). Change detection of files a user edits, not adversarial.
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = 0x243F6A8885A308D3ull ^ (bytes.size() * kMul);
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * kMul;
    h = (h << 31) | (h >> 33);
  }
  std::uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  h = (h ^ tail) * kMul;
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

std::optional<fs::path> profile_cache_dir() {
  if (const char* d = std::getenv("STEPSIM_CACHE_DIR")) {
    if (!*d) return std::nullopt;
    return fs::path(d);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "stepsim";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "stepsim";
  return std::nullopt;
}

std::string encode_profile(const HardwareProfile& p) {
  Writer w;
  put(w, p);
  return w.take();
}

std::optional<HardwareProfile> decode_profile(std::string_view bytes) {
  try {
    Reader r(bytes);
    HardwareProfile p;
    get(r, p);
    if (!r.done()) return std::nullopt;
    return p;
  } catch (const Corrupt&) {
    return std::nullopt;
  } catch (const std::exception&) {  // bad_alloc of a corrupt count, a CBOR error
    return std::nullopt;
  }
}

// Entry: magic, format version, layout fingerprint, build identity, the files (FileRecord each), the payload
// (its size, then the encoded profile), and last the hash of everything before it: a change
// to any byte is a miss, not a profile read from a damaged entry.
std::optional<HardwareProfile> read_cached_profile(const fs::path& dir, const fs::path& file, std::vector<fs::path>* read_from) {
  const auto entry = read_regular_file(entry_path(dir, file));
  if (!entry || entry->size() < sizeof(std::uint64_t)) return std::nullopt;
  const std::string_view body = std::string_view(*entry).substr(0, entry->size() - sizeof(std::uint64_t));
  std::uint64_t entry_hash = 0;
  std::memcpy(&entry_hash, entry->data() + body.size(), sizeof entry_hash);
  if (content_hash(body) != entry_hash) return std::nullopt;
  try {
    Reader r(body);
    char magic[sizeof kMagic];
    r.pod(magic);
    std::uint32_t version = 0;
    std::uint64_t layout = 0;
    r.pod(version);
    r.pod(layout);
    std::uint64_t build = 0;
    r.pod(build);
    if (std::memcmp(magic, kMagic, sizeof kMagic) != 0 || version != kFormatVersion || layout != layout_fingerprint() ||
        build == 0 || build != build_identity())
      return std::nullopt;
    std::vector<fs::path> read;
    for (std::uint64_t n = r.count(); n > 0; --n) {
      FileRecord f;
      f.name = std::string(r.bytes());
      f.from = std::string(r.bytes());
      f.target = std::string(r.bytes());
      r.pod(f.size);
      r.pod(f.hash);
      // The profile itself is the file asked for; an include must resolve as it did.
      if (read.empty() ? f.target != file.string() : resolve_config_path(f.name, f.from).string() != f.target)
        return std::nullopt;
      const auto text = read_regular_file(f.target);
      if (!text || text->size() != f.size || content_hash(*text) != f.hash) return std::nullopt;
      read.emplace_back(f.target);
    }
    if (read.empty()) return std::nullopt;
    const std::string_view payload = r.bytes();
    if (!r.done()) return std::nullopt;
    auto p = decode_profile(payload);
    if (!p) return std::nullopt;
    for (const auto& f : read) note_input_file(f);  // as read_json_file does when it parses them
    if (read_from) read_from->insert(read_from->end(), read.begin(), read.end());
    return p;
  } catch (const Corrupt&) {
    return std::nullopt;
  }
}

bool write_cached_profile(const fs::path& dir, const fs::path& file, const SourceMap& sources, const HardwareProfile& p,
                          std::uint64_t parsed_hash, std::uint64_t parsed_size) {
  std::vector<FileRecord> files;
  files.push_back({"", "", file.string(), parsed_size, parsed_hash});
  for (const auto& inc : sources.includes) files.push_back({inc.name, inc.from, inc.target, 0, 0});
  for (auto& f : files) {
    const auto text = read_regular_file(f.target);
    if (!text) return false;
    // The profile changed between the read that was hashed and now: do not tie this parse to it.
    if (&f == &files.front() && (text->size() != parsed_size || content_hash(*text) != parsed_hash)) return false;
    f.size = text->size();
    f.hash = content_hash(*text);
  }
  Writer w;
  w.pod(kMagic);
  w.pod(kFormatVersion);
  w.pod(layout_fingerprint());
  if (build_identity() == 0) return false;
  w.pod(build_identity());
  w.pod(static_cast<std::uint64_t>(files.size()));
  for (const auto& f : files) {
    w.bytes(f.name);
    w.bytes(f.from);
    w.bytes(f.target);
    w.pod(f.size);
    w.pod(f.hash);
  }
  w.bytes(encode_profile(p));
  std::string bytes = w.take();
  const std::uint64_t entry_hash = content_hash(bytes);
  bytes.append(reinterpret_cast<const char*>(&entry_hash), sizeof entry_hash);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return false;
  // A name of this process and call: writers never share a temporary file.
  static std::atomic<unsigned> serial{0};
  const fs::path final_path = entry_path(dir, file);
  const fs::path tmp = final_path.string() + fmt::format(".{}.{}.tmp", ::getpid(), serial.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  prune_other_builds(dir, file, final_path);
  return true;
}

}  // namespace stepsim
