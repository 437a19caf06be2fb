// sim/core: units (conversion at parsing, rounding to the engine's integer nanoseconds), dtype
// names, overflow-checked arithmetic for sizes from user input, and the record of input files
// the CLI protects from being overwritten.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>
#include <random>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "sim/core/checked.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_files.hpp"
#include "sim/core/units.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

// Catches: a conversion factor off by 1000 (us vs ms), truncation instead of rounding, and a
// helper that stops treating non-positive sizes as free.
TEST_CASE("Time converts once, rounding to the nearest nanosecond; Bytes and rates keep their units", "[core][units]") {
  CHECK(Time::from_us(2.5).ns == 2'500);
  CHECK(Time::from_ms(1.25).ns == 1'250'000);
  CHECK(Time::from_s(3).ns == 3'000'000'000);
  CHECK(Time::from_us(-1.2).ns == -1'200);
  // 0.0004 us = 0.4 ns rounds down, 0.0006 us = 0.6 ns up (llround, not truncation).
  CHECK(Time::from_us(0.0004).ns == 0);
  CHECK(Time::from_us(0.0006).ns == 1);
  CHECK(Time::from_ns(1'500'000).ms() == 1.5);
  CHECK(Time::from_ns(2'000).us() == 2.0);
  CHECK(Time::from_ms(250).seconds() == 0.25);
  CHECK(Time::from_ms(3) + Time::from_us(500) == Time::from_us(3'500));
  CHECK(3 * Time::from_us(2) == Time::from_us(6));

  // 1 MiB = 2^20 B, 1 GiB = 2^30 B; gb() is decimal (1e9 B), as nccl-tests reports GB/s.
  CHECK(Bytes::from_mib(3).count == 3 * 1'048'576);
  CHECK(Bytes::from_gib(2).count == 2'147'483'648);
  CHECK(Bytes::from_gib(1).mib() == 1024.0);
  CHECK(Bytes{1'500'000'000}.gb() == 1.5);
  CHECK(Bytes::from_mib(1536).gib() == 1.5);
  CHECK(Bytes{10} / 4 == Bytes{2});  // integer division: bytes are whole

  // 1 GB at 1 GB/s is 1 s; 3 B at 2 GB/s is 1.5 ns -> 2 ns; nothing to move takes no time.
  CHECK(transfer_time(Bytes{1'000'000'000}, Bandwidth::from_gbps(1)) == Time::from_s(1));
  CHECK(transfer_time(Bytes{3}, Bandwidth::from_gbps(2)).ns == 2);
  CHECK(transfer_time(Bytes{0}, Bandwidth::from_gbps(1)) == Time::zero());
  CHECK(transfer_time(Bytes{-5}, Bandwidth::from_gbps(1)) == Time::zero());
  // 2e12 FLOPs at 1000 TFLOP/s = 2 ms.
  CHECK(compute_time(Flops{2e12}, FlopRate::from_tflops(1000)) == Time::from_ms(2));
  CHECK(compute_time(Flops{0}, FlopRate::from_tflops(1)) == Time::zero());
  // 6 MB in 3 ms = 2 GB/s; in no time: 0, never a division by zero.
  CHECK(achieved_bandwidth(Bytes{6'000'000}, Time::from_ms(3)).gbps() == Approx(2.0));
  CHECK(achieved_bandwidth(Bytes{6'000'000}, Time::zero()).gbps() == 0.0);
  CHECK(FlopRate::from_tflops(989).tflops() == Approx(989));
}

// Catches: a duration that wraps to a negative time instead of failing, and NaN slipping
// through as 0 ns.
TEST_CASE("A duration beyond 2^62 ns or not a number is an input error, not a wrapped time", "[core][units]") {
  // 2^62 ns = 4.6e18 ns, about 146 years: exactly the limit passes, twice it fails.
  CHECK(round_ns(4611686018427387904.0) == 4611686018427387904LL);
  CHECK_THROWS_AS(round_ns(2 * 4611686018427387904.0), InputError);
  CHECK_THROWS_AS(round_ns(-2 * 4611686018427387904.0), InputError);
  CHECK_THROWS_AS(round_ns(std::numeric_limits<double>::quiet_NaN()), InputError);
  CHECK_THROWS_AS(round_ns(std::numeric_limits<double>::infinity()), InputError);
  CHECK_THROWS_WITH(Time::from_s(1e12), Catch::Contains("146 years"));
  // 1e15 B at 1e-3 GB/s = 1e9 s = 1e18 ns: still representable.
  CHECK(transfer_time(Bytes{1'000'000'000'000'000}, Bandwidth::from_gbps(1e-3)).ns == 1'000'000'000'000'000'000LL);
  CHECK_THROWS_AS(transfer_time(Bytes{1'000'000'000'000'000}, Bandwidth::from_gbps(1e-6)), InputError);
}

// round_ns rounds inline: it must round every duration as std::llround did (halves away from
// zero), or every predicted time could move by a nanosecond.
TEST_CASE("round_ns rounds as std::llround, halves away from zero", "[core][units]") {
  std::vector<double> xs{0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                         0.5000000000000001, 4503599627370495.5, -4503599627370495.5, 4503599627370496.0,
                         9007199254740993.0, 1e15 + 0.5, 4611686018427387904.0, -4611686018427387904.0};
  std::mt19937_64 rng(49);
  std::uniform_real_distribution<double> exponent(-3, 18.6);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 200000; ++i) xs.push_back((sign(rng) ? -1 : 1) * std::pow(10.0, exponent(rng)));
  for (int i = 0; i < 20000; ++i) xs.push_back(static_cast<double>(static_cast<std::int64_t>(rng() >> 20)) + 0.5);
  std::size_t wrong = 0;
  for (double x : xs) wrong += round_ns(x) != std::llround(x);
  CHECK(wrong == 0);
}

// Catches: a dtype name that stops parsing, a to_string that no longer round-trips, a wrong
// element size (which would scale every byte count).
TEST_CASE("Dtypes parse by their PyTorch names and aliases, print back, and know their size", "[core][units]") {
  for (Dtype d : {Dtype::FP32, Dtype::TF32, Dtype::BF16, Dtype::FP16, Dtype::FP8}) CHECK(parse_dtype(to_string(d)) == d);
  CHECK(parse_dtype("float32") == Dtype::FP32);
  CHECK(parse_dtype("bfloat16") == Dtype::BF16);
  CHECK(parse_dtype("float16") == Dtype::FP16);
  CHECK(parse_dtype("fp8_e4m3") == Dtype::FP8);
  CHECK(to_string(Dtype::BF16) == "bf16");
  CHECK(dtype_bytes(Dtype::FP32) == 4);
  CHECK(dtype_bytes(Dtype::TF32) == 4);  // tf32 is stored as fp32
  CHECK(dtype_bytes(Dtype::BF16) == 2);
  CHECK(dtype_bytes(Dtype::FP16) == 2);
  CHECK(dtype_bytes(Dtype::FP8) == 1);
  // Unknown names (and case variants) are refused with the list of valid ones.
  CHECK_THROWS_WITH(parse_dtype("fp64"), "one of fp32, tf32, bf16, fp16, fp8");
  CHECK_THROWS_AS(parse_dtype("BF16"), std::invalid_argument);
  CHECK_THROWS_AS(parse_dtype(""), std::invalid_argument);
}

// Catches: a checked operation that wraps (or traps) instead of returning nullopt, a chain
// that forgets an earlier overflow, and a double->int64 conversion with undefined behaviour.
TEST_CASE("Checked arithmetic returns nullopt on int64 overflow and propagates it through chains", "[core][checked]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  CHECK(checked_mul(std::int64_t{3}, std::int64_t{4}) == 12);
  CHECK(checked_mul(kMax, std::int64_t{1}) == kMax);
  CHECK_FALSE(checked_mul(kMax, std::int64_t{2}).has_value());
  CHECK_FALSE(checked_mul(kMin, std::int64_t{-1}).has_value());  // -2^63 * -1 = 2^63
  CHECK(checked_add(kMax - 1, std::int64_t{1}) == kMax);
  CHECK_FALSE(checked_add(kMax, std::int64_t{1}).has_value());
  CHECK_FALSE(checked_add(kMin, std::int64_t{-1}).has_value());
  // 2^31 * 2^31 = 2^62 fits; one more factor of 2 is 2^63, which does not.
  CHECK(checked_product({1LL << 31, 1LL << 31}) == (1LL << 62));
  CHECK_FALSE(checked_product({1LL << 31, 1LL << 31, 2}).has_value());
  CHECK(checked_product({}) == 1);
  // An overflow early in a chain survives later operations that would fit on their own.
  const std::optional<std::int64_t> overflowed = checked_mul(kMax, std::int64_t{2});
  CHECK_FALSE(checked_add(overflowed, std::optional<std::int64_t>(0)).has_value());
  CHECK_FALSE(checked_mul(std::optional<std::int64_t>(0), overflowed).has_value());
  CHECK(checked_add(std::optional<std::int64_t>(2), std::optional<std::int64_t>(3)) == 5);
  static_assert(checked_mul(std::int64_t{6}, std::int64_t{7}) == 42);  // usable at compile time

  // Doubles: truncated toward zero inside [-2^63, 2^63); NaN, infinities and 2^63 refused.
  CHECK(checked_to_int64(1.9) == 1);
  CHECK(checked_to_int64(-1.9) == -1);
  CHECK(checked_to_int64(-9223372036854775808.0) == kMin);
  CHECK_FALSE(checked_to_int64(9223372036854775808.0).has_value());
  CHECK_FALSE(checked_to_int64(std::numeric_limits<double>::quiet_NaN()).has_value());
  CHECK_FALSE(checked_to_int64(-std::numeric_limits<double>::infinity()).has_value());
}

// Catches: an input spelled differently (relative path with "./", a symlink, a hard link)
// slipping past the check that keeps an output from overwriting an input, and the opposite
// error of refusing a new file or an unrelated existing one.
TEST_CASE("An output path is matched against the recorded inputs by file identity, not by spelling", "[core][input_files]") {
  const test::TempDir dir;
  const fs::path input = dir / "input.json", other = dir / "other.json";
  std::ofstream(input) << "{}";
  std::ofstream(other) << "{}";
  note_input_file(input);
  note_input_file(input);  // recorded once
  int recorded = 0;
  for (const auto& f : input_files()) recorded += f == input;
  CHECK(recorded == 1);

  CHECK(input_file_equivalent_to(input) == input);
  CHECK(input_file_equivalent_to(dir.path() / "." / "input.json") == input);
  fs::create_symlink(input, dir / "link.json");
  CHECK(input_file_equivalent_to(dir / "link.json") == input);
  fs::create_hard_link(input, dir / "hard.json");
  CHECK(input_file_equivalent_to(dir / "hard.json") == input);
  // A file that does not exist yet cannot be an input; another existing file is not one.
  CHECK_FALSE(input_file_equivalent_to(dir / "new.json").has_value());
  CHECK_FALSE(input_file_equivalent_to(other).has_value());
}
