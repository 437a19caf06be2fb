// trace/json_stream.cpp: the scanner's search for the end of a string's plain run, eight bytes
// at a time, against the byte-by-byte rule it replaces.
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "trace/json_stream.hpp"

using stepsim::trace::detail::next_string_stop;

namespace {

bool is_stop(unsigned char c) { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\'; }

// The first stop at or after `from`, byte by byte (the buffer ends in one).
std::size_t first_stop(const unsigned char* buf, std::size_t from) {
  while (!is_stop(buf[from])) ++from;
  return from;
}

}  // namespace

TEST_CASE("next_string_stop finds the first stop of every pair of bytes at every offset", "[trace][json]") {
  // Two chosen bytes in a run of plain ones: every byte value beside every other, at each place
  // of an 8-byte word and across two words. A borrow out of a flagged byte may flag plain bytes
  // above it (0x21 above a quote, a space above a control byte); those must never be taken for
  // the first stop, and no stop below a wrong flag may be missed.
  std::array<unsigned char, 32> buf{};
  std::size_t checked = 0;
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (std::size_t i : {0u, 3u, 7u}) {
        for (std::size_t gap : {1u, 2u, 6u}) {
          buf.fill('a');
          buf[i] = static_cast<unsigned char>(a);
          buf[i + gap] = static_cast<unsigned char>(b);
          buf[16] = '"';  // a stop in every buffer, with the padding after it
          for (std::size_t k = 17; k < buf.size(); ++k) buf[k] = 0;
          const auto* p = reinterpret_cast<const char*>(buf.data());
          const std::size_t got = static_cast<std::size_t>(next_string_stop(p) - p);
          if (got != first_stop(buf.data(), 0)) FAIL("bytes " << a << ", " << b << " at " << i << " and " << i + gap << ": stop found at " << got);
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 256u * 256u * 9u);
}

TEST_CASE("next_string_stop from every start of random text", "[trace][json]") {
  std::mt19937 rng(7);
  std::array<unsigned char, 256> buf{};
  for (int round = 0; round < 2000; ++round) {
    // Mostly plain ASCII, with a stop now and then (as in a trace's names).
    for (std::size_t k = 0; k < 240; ++k) {
      const unsigned r = rng() % 64;
      buf[k] = r == 0 ? static_cast<unsigned char>(rng() % 256) : static_cast<unsigned char>(0x20 + rng() % 0x5f);
    }
    buf[240] = '"';
    for (std::size_t k = 241; k < buf.size(); ++k) buf[k] = 0;
    const auto* p = reinterpret_cast<const char*>(buf.data());
    for (std::size_t from = 0; from <= 240; ++from) {
      const std::size_t want = first_stop(buf.data(), from);
      REQUIRE(static_cast<std::size_t>(next_string_stop(p + from) - p) == want);
    }
  }
}

TEST_CASE("JsonStream::number reads integers as nlohmann does, at the 19- and 20-digit bounds", "[trace][json]") {
  // The integer part is converted as it is scanned; past 19 digits it is converted again with
  // overflow checks. Integers are exact where nlohmann's are (number_integer or number_unsigned,
  // an unsigned one wrapping as a signed read of it does); the rest keep their text.
  for (const char* text : {"0", "-0", "7", "-7", "1234567890123456789", "9223372036854775807", "-9223372036854775808",
                           "9999999999999999999", "10000000000000000000", "18446744073709551615", "18446744073709551616",
                           "-9223372036854775809", "-18446744073709551615", "123456789012345678901234567890", "1.5",
                           "-0.25", "12e3", "1E-2", "1234567890123456789.5"}) {
    INFO(text);
    std::istringstream in("[" + std::string(text) + "]");
    stepsim::trace::JsonStream s(in, "(test)", 64);
    stepsim::trace::JsonNumber n;
    s.step([&] {
      REQUIRE(s.peek() == '[');
      s.advance();
      REQUIRE(s.next_element(true));
      s.peek();
      n = s.number();
    });
    const auto want = nlohmann::json::parse(text);
    CHECK(n.text == text);
    CHECK(n.is_int == want.is_number_integer());
    if (n.is_int) CHECK(n.i == want.get<std::int64_t>());
  }
}
