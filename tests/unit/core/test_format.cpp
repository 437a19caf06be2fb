// format_time / format_bytes: the one spelling of times and sizes in every report. Each unit
// switches at its boundary (1000 ns = 1 us, 2^10 B = 1 KiB), so a unit chosen one step too
// early or too late, or a wrong precision, fails here.

#include <catch2/catch.hpp>

#include "sim/core/format.hpp"

using namespace stepsim;

TEST_CASE("times print in the largest unit that is at least 1, with the unit's precision", "[core][format]") {
  CHECK(format_time(Time{0}) == "0 ns");
  CHECK(format_time(Time{999}) == "999 ns");
  CHECK(format_time(Time{1'000}) == "1.0 us");
  CHECK(format_time(Time{180'000}) == "180.0 us");
  CHECK(format_time(Time{999'949}) == "999.9 us");
  CHECK(format_time(Time{1'000'000}) == "1.000 ms");
  CHECK(format_time(Time{56'000'000}) == "56.000 ms");
  CHECK(format_time(Time{1'743'000'000}) == "1.743 s");
}

TEST_CASE("sizes print in binary units: B, KiB, MiB with one decimal, GiB with two", "[core][format]") {
  CHECK(format_bytes(Bytes{0}) == "0 B");
  CHECK(format_bytes(Bytes{1023}) == "1023 B");
  CHECK(format_bytes(Bytes{1024}) == "1.0 KiB");
  CHECK(format_bytes(Bytes{(1LL << 20) - 1}) == "1024.0 KiB");  // 1048575 / 1024 = 1023.999 -> 1024.0
  CHECK(format_bytes(Bytes{25LL << 20}) == "25.0 MiB");
  CHECK(format_bytes(Bytes{1LL << 30}) == "1.00 GiB");
  CHECK(format_bytes(Bytes{(25LL << 30) / 2}) == "12.50 GiB");
}
