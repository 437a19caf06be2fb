// trace/gunzip.hpp: the gzip reader behind the trace reader, against zlib's own compressor.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <zlib.h>

#include "trace/gunzip.hpp"

using stepsim::trace::Gunzip;
using stepsim::trace::GzipError;

namespace {

// One gzip member of `text`, as gzip(1) writes it (zlib's deflate with a gzip wrapper).
std::string gzip(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));  // NOLINT: zlib's API is not const
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Everything `packed` inflates to, read `piece` bytes at a time.
std::string gunzip(const std::string& packed, std::size_t piece) {
  std::istringstream in(packed);
  Gunzip g(in);
  std::string out, buf(piece, '\0');
  for (;;) {
    const std::size_t got = g.read(buf.data(), piece);
    out.append(buf.data(), got);
    if (got < piece) break;
  }
  return out;
}

std::string sample(std::size_t n) {  // ~n bytes that compress, with no period of a buffer
  std::string s;
  for (std::size_t i = 0; s.size() < n; ++i) s += "{\"ts\": " + std::to_string(i * 7919 % 100003) + "},";
  return s;
}

}  // namespace

TEST_CASE("Gunzip gives back what zlib compressed, at any read size and across its input buffer", "[trace]") {
  const std::string text = sample(3 << 20);  // its gzip is larger than one 256 KiB input read
  const std::string packed = gzip(text);
  REQUIRE(packed.size() > (std::size_t{1} << 18));
  for (std::size_t piece : {1, 4093, 65536, 1 << 22}) {
    INFO(piece);
    CHECK(gunzip(packed, piece) == text);
  }
  CHECK(gunzip(gzip(""), 16).empty());
}

TEST_CASE("Gunzip reads members one after another, as gzip -d does", "[trace]") {
  const std::string a = sample(100000), b = sample(7000);
  CHECK(gunzip(gzip(a) + gzip("") + gzip(b), 65536) == a + b);
}

TEST_CASE("Gunzip rejects a corrupt, truncated or trailing stream, and goes on rejecting it", "[trace]") {
  const std::string text = sample(200000);
  const std::string packed = gzip(text);
  const auto fails_with = [](const std::string& bytes, const std::string& words) {
    INFO(words);
    CHECK_THROWS_WITH(gunzip(bytes, 65536), Catch::Contains(words));
  };
  std::string bad_crc = packed;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 1);  // the CRC-32 trailer
  fails_with(bad_crc, "incorrect data check");
  std::string bad_length = packed;
  bad_length[bad_length.size() - 1] = static_cast<char>(bad_length[bad_length.size() - 1] ^ 1);  // ISIZE
  fails_with(bad_length, "incorrect length check");
  fails_with(packed.substr(0, packed.size() / 2), "unexpected end of the gzip data");
  fails_with(packed.substr(0, packed.size() - 1), "unexpected end of the gzip data");
  fails_with(packed + "garbage", "incorrect header check");
  fails_with("\x1f\x8b but no gzip", "unknown compression method");

  std::istringstream in(packed.substr(0, 1000));
  Gunzip g(in);
  std::string buf(1 << 20, '\0');
  CHECK_THROWS_AS(g.read(buf.data(), buf.size()), GzipError);
  CHECK_THROWS_AS(g.read(buf.data(), buf.size()), GzipError);  // not a silent end after the error
}
