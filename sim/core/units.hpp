#pragma once
// Units carried in types. Time is integer nanoseconds (the engine's clock); bytes are integer;
// rates are doubles converted exactly once, at parsing. A bare `double bw` is a bug waiting.

#include <algorithm>
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>

#include "sim/core/error.hpp"

namespace stepsim {

// Nanoseconds from a double, rounded to nearest. A duration beyond 2^62 ns (146 years), or
// not a number, comes only from an input that cannot describe a real training step (sizes or
// profile numbers far outside any machine): an input error, never a wrapped negative time.
inline std::int64_t round_ns(double ns) {
  constexpr double kMax = 4611686018427387904.0;  // 2^62
  if (!(ns >= -kMax && ns <= kMax))
    throw InputError("a duration of " + std::to_string(ns) +
                     " ns was computed: expected at most 2^62 ns (146 years); the sizes or hardware numbers given "
                     "cannot describe a real training step");
  // std::llround, inline (a libm call on the baseline x86-64 target, once or twice per kernel
  // priced): the truncation is exact below 2^62 and so is the fraction x - trunc(x), so halves
  // round away from zero exactly as llround's do (tests/unit/core/test_units.cpp).
  const auto whole = static_cast<std::int64_t>(ns);
  const double fraction = ns - static_cast<double>(whole);
  return fraction >= 0.5 ? whole + 1 : fraction <= -0.5 ? whole - 1 : whole;
}

struct Time {
  std::int64_t ns = 0;

  static constexpr Time from_ns(std::int64_t v) { return Time{v}; }
  static Time from_us(double v) { return Time{round_ns(v * 1e3)}; }
  static Time from_ms(double v) { return Time{round_ns(v * 1e6)}; }
  static Time from_s(double v) { return Time{round_ns(v * 1e9)}; }
  static constexpr Time zero() { return Time{0}; }
  static constexpr Time infinite() { return Time{std::numeric_limits<std::int64_t>::max()}; }

  double us() const { return static_cast<double>(ns) / 1e3; }
  double ms() const { return static_cast<double>(ns) / 1e6; }
  double seconds() const { return static_cast<double>(ns) / 1e9; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time& operator+=(Time o) { ns += o.ns; return *this; }
  constexpr Time& operator-=(Time o) { ns -= o.ns; return *this; }
  friend constexpr Time operator+(Time a, Time b) { return Time{a.ns + b.ns}; }
  friend constexpr Time operator-(Time a, Time b) { return Time{a.ns - b.ns}; }
  friend constexpr Time operator*(Time a, std::int64_t k) { return Time{a.ns * k}; }
  friend constexpr Time operator*(std::int64_t k, Time a) { return Time{a.ns * k}; }
};

struct Bytes {
  std::int64_t count = 0;

  static constexpr Bytes from_mib(std::int64_t v) { return Bytes{v * 1024 * 1024}; }
  static constexpr Bytes from_gib(std::int64_t v) { return Bytes{v * 1024 * 1024 * 1024}; }
  double mib() const { return static_cast<double>(count) / (1024.0 * 1024.0); }
  double gib() const { return static_cast<double>(count) / (1024.0 * 1024.0 * 1024.0); }
  double gb() const { return static_cast<double>(count) / 1e9; }

  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes& operator+=(Bytes o) { count += o.count; return *this; }
  constexpr Bytes& operator-=(Bytes o) { count -= o.count; return *this; }
  friend constexpr Bytes operator+(Bytes a, Bytes b) { return Bytes{a.count + b.count}; }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.count - b.count}; }
  friend constexpr Bytes operator*(Bytes a, std::int64_t k) { return Bytes{a.count * k}; }
  friend constexpr Bytes operator*(std::int64_t k, Bytes a) { return Bytes{a.count * k}; }
  friend constexpr Bytes operator/(Bytes a, std::int64_t k) { return Bytes{a.count / k}; }
};

// Floating-point operations (a count, not a rate).
struct Flops {
  double count = 0;
  friend Flops operator+(Flops a, Flops b) { return Flops{a.count + b.count}; }
  Flops& operator+=(Flops o) { count += o.count; return *this; }
  constexpr bool operator==(const Flops&) const = default;
};

// Bytes per second. GB/s here means 1e9 B/s (nccl-tests convention).
struct Bandwidth {
  double bytes_per_s = 0;
  static Bandwidth from_gbps(double gb_per_s) { return Bandwidth{gb_per_s * 1e9}; }
  double gbps() const { return bytes_per_s / 1e9; }
  constexpr auto operator<=>(const Bandwidth&) const = default;
};

// Floating-point operations per second.
struct FlopRate {
  double flops_per_s = 0;
  static FlopRate from_tflops(double tflops) { return FlopRate{tflops * 1e12}; }
  double tflops() const { return flops_per_s / 1e12; }
  constexpr auto operator<=>(const FlopRate&) const = default;
};

// Time to move `bytes` at `bw`, rounded to the nearest nanosecond.
inline Time transfer_time(Bytes bytes, Bandwidth bw) {
  if (bytes.count <= 0) return Time::zero();
  return Time{round_ns(static_cast<double>(bytes.count) / bw.bytes_per_s * 1e9)};
}

inline Time compute_time(Flops work, FlopRate rate) {
  if (work.count <= 0) return Time::zero();
  return Time{round_ns(work.count / rate.flops_per_s * 1e9)};
}

inline Bandwidth achieved_bandwidth(Bytes bytes, Time t) {
  return Bandwidth{t.ns > 0 ? static_cast<double>(bytes.count) / t.seconds() : 0.0};
}

// Element types as the frameworks name them.
enum class Dtype : std::uint8_t { FP32, TF32, BF16, FP16, FP8 };
inline constexpr std::size_t kDtypeCount = static_cast<std::size_t>(Dtype::FP8) + 1;  // the Dtype values

constexpr std::int64_t dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::FP32: case Dtype::TF32: return 4;
    case Dtype::BF16: case Dtype::FP16: return 2;
    case Dtype::FP8: return 1;
  }
  return 4;
}

std::string to_string(Dtype d);
// Throws std::invalid_argument listing the valid names.
Dtype parse_dtype(const std::string& name);

}  // namespace stepsim
