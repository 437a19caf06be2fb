#pragma once
// Overflow-checked integer arithmetic for sizes derived from user input (element counts,
// bytes). An overflow is an input error (the input cannot describe a real training step),
// never a wrapped result: callers turn std::nullopt into a one-line InputError.

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace stepsim {

// ceil(a / b) for a >= 0, b > 0 (no overflow check: a + b - 1 must fit).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// a rounded up to a multiple of b (a >= 0, b > 0).
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// a * b, or nullopt when the product does not fit in int64.
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nullopt when the sum does not fit in int64.
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of all factors, or nullopt on overflow (of any partial product).
constexpr std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (std::int64_t f : factors) {
    auto p = checked_mul(out, f);
    if (!p) return std::nullopt;
    out = *p;
  }
  return out;
}

// Chains: nullopt propagates.
constexpr std::optional<std::int64_t> checked_mul(std::optional<std::int64_t> a, std::optional<std::int64_t> b) {
  if (!a || !b) return std::nullopt;
  return checked_mul(*a, *b);
}
constexpr std::optional<std::int64_t> checked_add(std::optional<std::int64_t> a, std::optional<std::int64_t> b) {
  if (!a || !b) return std::nullopt;
  return checked_add(*a, *b);
}

// A finite double inside the int64 range, truncated to int64 without UB; nullopt otherwise.
inline std::optional<std::int64_t> checked_to_int64(double d) {
  // 2^63 is exactly representable; every double below it converts without overflow.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
  return static_cast<std::int64_t>(d);
}

}  // namespace stepsim
