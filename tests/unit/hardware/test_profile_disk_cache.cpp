// The parsed-profile disk cache (sim/hardware/profile_disk_cache.hpp, issue 49 item 3): a hit
// gives the very profile the JSON parses to; any change to the profile or an include, and any
// entry cut short or corrupt, is a miss.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "sim/core/json_reader.hpp"
#include "sim/hardware/profile.hpp"
#include "sim/hardware/profile_disk_cache.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

// The profile as the JSON gives it (never through the cache), and the includes it followed.
HardwareProfile parse_file(const fs::path& file, SourceMap& sources) {
  sources.root_file = file.string();
  Json doc = load_with_includes(file, sources);
  ObjectReader r(doc, sources, "");
  return parse_profile(r);
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every profile the repository ships (configs/hardware).
std::vector<fs::path> shipped_profiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kRoot + "/configs/hardware"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path entry_of(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin") return e.path();
  return {};
}

}  // namespace

TEST_CASE("every shipped profile encodes and decodes to an equal profile") {
  const auto files = shipped_profiles();
  REQUIRE(files.size() >= 8);
  for (const auto& f : files) {
    INFO(f.string());
    SourceMap s;
    const HardwareProfile p = parse_file(f, s);
    const auto back = decode_profile(encode_profile(p));
    REQUIRE(back);
    CHECK(*back == p);
    // and the same profile JSON (the reports echo it), sources and provenance included
    CHECK(profile_to_json(*back).dump() == profile_to_json(p).dump());
    CHECK(back->sources.dump() == p.sources.dump());
    CHECK(back->provenance.dump() == p.provenance.dump());
  }
}

TEST_CASE("a cache entry is a hit for the unchanged files and a miss after any change to the profile or an include") {
  test::TempDir dir("profile-cache");
  const fs::path cache = dir / "cache";
  // The A100 40GB profile includes the 80GB one: copy both, so that the test can edit them.
  fs::copy_file(kRoot + "/configs/hardware/a100-sxm-8x.json", dir / "a100-sxm-8x.json");
  fs::copy_file(kRoot + "/configs/hardware/a100-sxm4-40gb-8x.json", dir / "a100-sxm4-40gb-8x.json");
  const fs::path file = dir / "a100-sxm4-40gb-8x.json";
  auto write_entry = [&] {
    SourceMap s;
    const HardwareProfile p = parse_file(file, s);
    REQUIRE(s.includes.size() == 1);
    const std::string text = slurp(file);
    REQUIRE(write_cached_profile(cache, file, s, p, content_hash(text), text.size()));
    return p;
  };
  const HardwareProfile parsed = write_entry();
  const auto hit = read_cached_profile(cache, file);
  REQUIRE(hit);
  CHECK(*hit == parsed);

  SECTION("an edit of the included profile (one digit of a number) is a miss") {
    std::string inc = slurp(dir / "a100-sxm-8x.json");
    const auto at = inc.find("\"hbm_bandwidth_GBps\": ");
    REQUIRE(at != std::string::npos);
    const auto digit = inc.find_first_of("0123456789", at + 20);
    inc[digit] = inc[digit] == '1' ? '2' : '1';
    test::write_text(dir / "a100-sxm-8x.json", inc);
    CHECK_FALSE(read_cached_profile(cache, file));
  }
  SECTION("an edit of the profile itself that keeps its size is a miss") {
    std::string text = slurp(file);
    const auto at = text.find("\"name\"");
    REQUIRE(at != std::string::npos);
    text[at + 1] = 'N';  // "Name": still the same number of bytes
    test::write_text(file, text);
    CHECK_FALSE(read_cached_profile(cache, file));
  }
  SECTION("an include that now resolves to another file is a miss") {
    // The include is looked up next to the including file, then in the working directory and
    // the data directory: moved away, its name resolves to no file with that content.
    fs::create_directories(dir / "sub");
    fs::rename(dir / "a100-sxm-8x.json", dir / "sub" / "a100-sxm-8x.json");
    CHECK_FALSE(read_cached_profile(cache, file));
  }
  SECTION("a profile named by another path has an entry of its own") {
    CHECK_FALSE(read_cached_profile(cache, dir.path() / "." / "a100-sxm4-40gb-8x.json"));
  }
  SECTION("an entry cut short anywhere, or with any byte changed, is a miss, never an error") {
    const fs::path entry = entry_of(cache);
    REQUIRE(!entry.empty());
    const std::string bytes = slurp(entry);
    for (std::size_t n = 0; n < bytes.size(); n += std::max<std::size_t>(1, bytes.size() / 97)) {
      test::write_text(entry, bytes.substr(0, n));
      CHECK_FALSE(read_cached_profile(cache, file));
    }
    for (std::size_t i = 0; i < bytes.size(); i += std::max<std::size_t>(1, bytes.size() / 101)) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      test::write_text(entry, bad);
      CHECK_FALSE(read_cached_profile(cache, file));
    }
    test::write_text(entry, bytes);
    CHECK(read_cached_profile(cache, file));
  }
}

TEST_CASE("decode_profile refuses bytes that are not a whole encoding") {
  SourceMap s;
  const std::string bytes = encode_profile(parse_file(kRoot + "/configs/hardware/h100-sxm-8x.json", s));
  CHECK(decode_profile(bytes));
  CHECK_FALSE(decode_profile(bytes.substr(0, bytes.size() - 1)));
  CHECK_FALSE(decode_profile(bytes + "x"));
  CHECK_FALSE(decode_profile(""));
}

TEST_CASE("each build keeps its own entry of a profile, and at most four builds' entries stay") {
  test::TempDir dir("profile-cache-builds");
  const fs::path cache = dir / "cache";
  const fs::path file = kRoot + "/configs/hardware/a100-sxm-8x.json";
  const fs::path other = kRoot + "/configs/hardware/h100-sxm-8x.json";
  auto write_entry = [&](const fs::path& f) {
    SourceMap s;
    const HardwareProfile p = parse_file(f, s);
    const std::string text = slurp(f);
    REQUIRE(write_cached_profile(cache, f, s, p, content_hash(text), text.size()));
  };
  write_entry(file);
  const fs::path mine = entry_of(cache);
  REQUIRE(!mine.empty());
  const std::string name = mine.filename().string();  // profile-<file>-<build>.bin
  const std::string prefix = name.substr(0, name.rfind('-') + 1);
  // Entries of the same profile by five other builds, older than this one's, and one of another
  // profile by a build long gone.
  const auto now = fs::last_write_time(mine);
  for (int i = 0; i < 5; ++i) {
    const fs::path p = cache / fmt::format("{}{:016x}.bin", prefix, 0x100 + i);
    test::write_text(p, "another build's entry");
    fs::last_write_time(p, now - std::chrono::hours(1 + i));  // 0x100 newest, 0x104 oldest
  }
  write_entry(other);
  const auto entries = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(cache)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  CHECK(entries().size() == 7);  // a write prunes only the entries of the profile it writes
  write_entry(file);             // this build's entry rewritten: the three newest others stay
  const auto left = entries();
  CHECK(left.size() == 5);
  auto has = [&](const std::string& n) { return std::find(left.begin(), left.end(), n) != left.end(); };
  CHECK(has(name));
  CHECK(has(fmt::format("{}{:016x}.bin", prefix, 0x100)));
  CHECK(has(fmt::format("{}{:016x}.bin", prefix, 0x102)));
  CHECK_FALSE(has(fmt::format("{}{:016x}.bin", prefix, 0x103)));
  CHECK_FALSE(has(fmt::format("{}{:016x}.bin", prefix, 0x104)));
  CHECK(read_cached_profile(cache, file));
  CHECK(read_cached_profile(cache, other));
}

TEST_CASE("the process keeps a profile while its files are unchanged, and reads it again after an edit of it or an include") {
  test::TempDir dir("profile-memo");
  fs::copy_file(kRoot + "/configs/hardware/a100-sxm-8x.json", dir / "a100-sxm-8x.json");
  fs::copy_file(kRoot + "/configs/hardware/a100-sxm4-40gb-8x.json", dir / "a100-sxm4-40gb-8x.json");
  const fs::path file = dir / "a100-sxm4-40gb-8x.json";
  const auto hour_ago = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(file, hour_ago);
  fs::last_write_time(dir / "a100-sxm-8x.json", hour_ago);
  SourceMap s;
  const HardwareProfile parsed = parse_file(file, s);

  const auto first = load_shared_profile(file);
  CHECK(*first == parsed);
  CHECK(load_shared_profile(file).get() == first.get());  // kept: the same object, not read again
  CHECK(load_profile(file) == parsed);

  SECTION("an edit of the included profile that keeps its size is read") {
    std::string inc = slurp(dir / "a100-sxm-8x.json");
    const auto at = inc.find("\"launch_overhead_us\": 10.0");  // not overridden by the 40GB profile
    REQUIRE(at != std::string::npos);
    inc[at + 22] = '2';  // 20.0
    test::write_text(dir / "a100-sxm-8x.json", inc);
    fs::last_write_time(dir / "a100-sxm-8x.json", hour_ago + std::chrono::seconds(1));
    const auto again = load_shared_profile(file);
    CHECK(again.get() != first.get());
    CHECK(again->host.launch_overhead == Time::from_us(20));
  }
  SECTION("a profile written within the last two seconds is read at every call (an edit in the same clock tick would not show)") {
    std::string text = slurp(file);
    const auto at = text.find("\"name\"");
    REQUIRE(at != std::string::npos);
    test::write_text(file, text);  // its modification time: now
    const auto fresh = load_shared_profile(file);
    CHECK(*fresh == parsed);
    CHECK(load_shared_profile(file).get() != fresh.get());
  }
}
