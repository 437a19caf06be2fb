#include "trace/json_stream.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "sim/core/error.hpp"

namespace stepsim::trace {

namespace {

// Zero bytes after the data: the sentinel '\0' at end_ stops every scanning loop without a
// bounds check (it is neither whitespace, a digit nor a plain string byte), and multi-byte
// look-aheads (escapes, UTF-8, literals) may read up to 12 bytes past a position.
constexpr std::size_t kPadding = 16;

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

namespace detail {

// The string stops among the 8 bytes at q, as a mask with bit 7 of byte k set where byte k may
// be one (SWAR). The lowest flagged byte is always a stop, and no stop below it is missed:
// - a byte of bit 7 is a stop (UTF-8), flagged by w itself;
// - (v - 1) sets bit 7 of a byte of v that is 0 (the quote or the backslash, v = w ^ that byte
//   in every byte), and of one that is 0x81 or more: the byte then has bit 7 too;
// - (w - 0x20) sets it where the byte is below 0x20 (a control character), and where it is 0xA0
//   or more;
// and a borrow, which can flag a plain byte, only carries upwards out of a byte flagged rightly.
static std::uint64_t string_stops(const char* q) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  std::uint64_t w;
  std::memcpy(&w, q, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);  // byte k at bits 8k..8k+7
  const std::uint64_t quote = (w ^ (kOnes * '"')) - kOnes;
  const std::uint64_t backslash = (w ^ (kOnes * '\\')) - kOnes;
  const std::uint64_t control = w - kOnes * 0x20;
  return (quote | backslash | control | w) & kHigh;
}

const char* next_string_stop(const char* q) {
  for (;; q += 8)
    if (const std::uint64_t m = string_stops(q)) return q + std::countr_zero(m) / 8;
}

}  // namespace detail

const bool JsonStream::kWhitespace[256] = {
    false, false, false, false, false, false, false, false, false, true,  true,  false, false, true,  false, false,
    false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false,
    true,  // ' '; the rest is false
};

double JsonNumber::to_double() const {
  double v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec == std::errc::result_out_of_range) v = std::strtod(std::string(text).c_str(), nullptr);  // +-inf or 0
  return v;
}

JsonStream::JsonStream(std::istream& in, std::string label, std::size_t chunk_bytes)
    : in_(in), label_(std::move(label)), buf_(std::max<std::size_t>(chunk_bytes, 1) + kPadding, '\0') {
  p_ = end_ = mark_ = buf_.data();
  refill();
  // A UTF-8 byte order mark is skipped (as nlohmann does); any other 0xEF start is an error.
  step([&] {
    if (p_ == end_) more();
    if (static_cast<unsigned char>(*p_) != 0xEF) return;
    need(p_, 3);
    if (static_cast<unsigned char>(p_[1]) != 0xBB || static_cast<unsigned char>(p_[2]) != 0xBF)
      fail("invalid byte order mark (must be EF BB BF)");
    p_ += 3;
  });
}

void JsonStream::refill() {
  char* base = buf_.data();
  std::size_t keep = static_cast<std::size_t>(end_ - mark_);
  std::size_t capacity = buf_.size() - kPadding;
  consumed_ += static_cast<std::uint64_t>(mark_ - base);
  if (keep == capacity) {
    // One step larger than the window: grow it (memory follows the largest step, not the file),
    // up to kMaxStepBytes: one event (or whitespace between two) of a gigabyte is a bomb, not a trace.
    if (capacity >= kMaxStepBytes) {
      p_ = mark_;
      fail(fmt_step_limit());
    }
    std::vector<char> bigger(2 * capacity + kPadding, '\0');
    std::memcpy(bigger.data(), mark_, keep);
    buf_.swap(bigger);
    base = buf_.data();
    capacity = buf_.size() - kPadding;
  } else if (keep > 0) {
    std::memmove(base, mark_, keep);
  }
  in_.read(base + keep, static_cast<std::streamsize>(capacity - keep));
  if (in_.bad()) fail("read error");
  auto got = static_cast<std::size_t>(in_.gcount());
  eof_ = keep + got < capacity;  // istream::read stops short only at the end of the input
  end_ = base + keep + got;
  std::memset(base + keep + got, 0, buf_.size() - keep - got);
  p_ = mark_ = base;
}

std::string JsonStream::fmt_step_limit() {
  return "one trace event (with the whitespace before it) longer than " + std::to_string(kMaxStepBytes >> 20) +
         " MiB (docs/limits.md)";
}

std::string& JsonStream::scratch() {
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  std::string& s = scratch_[scratch_used_++];
  s.clear();
  return s;
}

void JsonStream::fail(std::string_view what) const {
  std::uint64_t at = consumed_ + static_cast<std::uint64_t>(p_ - buf_.data());
  throw InputError(label_ + ": byte " + std::to_string(at) + ": " + std::string(what) + ": expected a JSON trace");
}

void JsonStream::unexpected(std::string_view expected) const {
  if (p_ == end_) fail("unexpected end of input; expected " + std::string(expected));
  auto c = static_cast<unsigned char>(*p_);
  std::string seen = c >= 0x20 && c < 0x7F ? "'" + std::string(1, static_cast<char>(c)) + "'"
                                           : "byte " + std::to_string(static_cast<int>(c));
  fail("unexpected " + seen + "; expected " + std::string(expected));
}

bool JsonStream::next_member(bool first, std::string_view& key) {
  char c = peek();
  if (c == '}') {
    ++p_;
    return false;
  }
  if (!first) {
    if (c != ',') unexpected("',' or '}'");
    ++p_;
    c = peek();
  }
  if (c != '"') unexpected("a string key");
  key = scan_string<true>();
  if (peek() != ':') unexpected("':'");
  ++p_;
  return true;
}

bool JsonStream::next_element(bool first) {
  char c = peek();
  if (c == ']') {
    ++p_;
    return false;
  }
  if (!first) {
    if (c != ',') unexpected("',' or ']'");
    ++p_;
  }
  return true;
}

std::string_view JsonStream::string() { return scan_string<true>(); }

const char* JsonStream::utf8_sequence(const char* q) {
  // RFC 3629 well-formed sequences (as nlohmann checks them): no overlong forms, no
  // surrogates, nothing above U+10FFFF.
  need(q, 4);
  auto b = [&](int k) { return static_cast<unsigned char>(q[k]); };
  auto in = [](unsigned char x, unsigned char lo, unsigned char hi) { return x >= lo && x <= hi; };
  unsigned char c = b(0);
  int len = 0;
  bool ok = false;
  if (in(c, 0xC2, 0xDF)) {
    len = 2;
    ok = in(b(1), 0x80, 0xBF);
  } else if (in(c, 0xE0, 0xEF)) {
    len = 3;
    unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    ok = in(b(1), lo, hi) && in(b(2), 0x80, 0xBF);
  } else if (in(c, 0xF0, 0xF4)) {
    len = 4;
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    ok = in(b(1), lo, hi) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF);
  }
  if (!ok) {
    p_ = q;
    fail("invalid UTF-8 in a string");
  }
  return q + len;
}

template <bool Keep>
std::string_view JsonStream::scan_string() {
  // At the opening quote. Plain runs are scanned in place; the first escape switches to a
  // decoded copy in the step's scratch (Keep) or just validates (skipping).
  const char* q = p_ + 1;
  const char* run = q;
  [[maybe_unused]] std::string* out = nullptr;
  for (;;) {
    q = detail::next_string_stop(q);
    auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      p_ = q + 1;
      if constexpr (!Keep) return {};
      if (!out) return {run, static_cast<std::size_t>(q - run)};
      out->append(run, q);
      return *out;
    }
    if (c >= 0x80) {
      q = utf8_sequence(q);
      continue;
    }
    if (c != '\\') control_in_string(q);
    if constexpr (Keep) {
      if (!out) out = &scratch();
      out->append(run, q);
    }
    q = escape_sequence(q, out);
    run = q;
  }
}

void JsonStream::control_in_string(const char* q) {
  p_ = q;
  if (q == end_) {
    more();
    fail("unterminated string");
  }
  fail("unescaped control character in a string");
}

const char* JsonStream::escape_sequence(const char* q, std::string* out) {
  need(q, 2);
  char decoded = 0;
  switch (q[1]) {
    case '"': decoded = '"'; break;
    case '\\': decoded = '\\'; break;
    case '/': decoded = '/'; break;
    case 'b': decoded = '\b'; break;
    case 'f': decoded = '\f'; break;
    case 'n': decoded = '\n'; break;
    case 'r': decoded = '\r'; break;
    case 't': decoded = '\t'; break;
    case 'u': break;
    default:
      p_ = q;
      fail("invalid escape in a string");
  }
  if (decoded != 0) {
    if (out) out->push_back(decoded);
    return q + 2;
  }
  need(q, 6);
  std::uint32_t cp = unicode_escape(q);
  q += 6;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    need(q, 6);
    if (q[0] != '\\' || q[1] != 'u') {
      p_ = q;
      fail("high surrogate not followed by a \\u low surrogate");
    }
    std::uint32_t lo = unicode_escape(q);
    if (lo < 0xDC00 || lo > 0xDFFF) {
      p_ = q;
      fail("high surrogate not followed by a \\u low surrogate");
    }
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    q += 6;
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    p_ = q - 6;
    fail("low surrogate without a high surrogate");
  }
  if (out) append_utf8(*out, cp);
  return q;
}

std::uint32_t JsonStream::unicode_escape(const char* q) {
  int v = 0;
  for (int k = 2; k < 6; ++k) {
    int d = hex_value(q[k]);
    if (d < 0) {
      p_ = q;
      fail("invalid \\u escape in a string (expected 4 hex digits)");
    }
    v = v * 16 + d;
  }
  return static_cast<std::uint32_t>(v);
}

template std::string_view JsonStream::scan_string<true>();
template std::string_view JsonStream::scan_string<false>();

JsonNumber JsonStream::number() {
  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  const char* const start = p_;
  const char* q = p_;
  auto bad = [&](const char* at) {
    p_ = at;
    if (at == end_) more();
    unexpected("a digit");
  };
  bool neg = *q == '-';
  if (neg) ++q;
  const char* digits = q;
  // The integer part is converted as it is validated (it wraps past 19 digits: redone below).
  std::uint64_t u = 0;
  if (*q == '0') ++q;
  else if (is_digit(*q)) do u = u * 10 + static_cast<std::uint64_t>(*q++ - '0'); while (is_digit(*q));
  else bad(q);
  const char* digits_end = q;
  bool is_int = true, exponent = false;
  if (*q == '.') {
    ++q;
    if (!is_digit(*q)) bad(q);
    while (is_digit(*q)) ++q;
    is_int = false;
  }
  if (*q == 'e' || *q == 'E') {
    ++q;
    if (*q == '+' || *q == '-') ++q;
    if (!is_digit(*q)) bad(q);
    while (is_digit(*q)) ++q;
    is_int = false;
    exponent = true;
  }
  if (q == end_) {
    p_ = q;
    more();  // the number may go on in the next chunk
  }
  JsonNumber n;
  n.text = {start, static_cast<std::size_t>(q - start)};
  if (is_int) {
    bool fits = true;
    if (digits_end - digits > 19) {  // 19 digits are < 10^19 < 2^64: no overflow
      u = 0;
      for (const char* d = digits; d < digits_end && fits; ++d)
        fits = !__builtin_mul_overflow(u, 10u, &u) && !__builtin_add_overflow(u, static_cast<unsigned>(*d - '0'), &u);
    }
    constexpr std::uint64_t kMinMagnitude = std::uint64_t{1} << 63;  // |INT64_MIN|
    if (!fits || (neg && u > kMinMagnitude)) {
      n.is_int = false;  // as nlohmann: too large for 64 bits, read as a double
    } else {
      n.i = neg ? (u == kMinMagnitude ? INT64_MIN : -static_cast<std::int64_t>(u)) : static_cast<std::int64_t>(u);
    }
  } else {
    n.is_int = false;
  }
  // nlohmann rejects numbers that overflow a double; only an exponent or 300+ digits can.
  if (!n.is_int && (exponent || n.text.size() > 300) && !std::isfinite(n.to_double())) fail("number overflow");
  p_ = q;
  return n;
}

void JsonStream::literal(std::string_view word) {
  need(p_, word.size());
  if (std::memcmp(p_, word.data(), word.size()) != 0) unexpected("a value");
  p_ += word.size();
}

void JsonStream::skip_value() {
  // Iterative, so that deeply nested input cannot overflow the stack.
  nesting_.clear();
  for (;;) {
    char c = peek();
    switch (c) {
      case '"': scan_string<false>(); break;
      case '{':
        ++p_;
        if (peek() == '}') {
          ++p_;
          break;
        }
        nesting_.push_back('}');
        if (peek() != '"') unexpected("a string key");
        scan_string<false>();
        if (peek() != ':') unexpected("':'");
        ++p_;
        continue;
      case '[':
        ++p_;
        if (peek() == ']') {
          ++p_;
          break;
        }
        nesting_.push_back(']');
        continue;
      case 't': literal("true"); break;
      case 'f': literal("false"); break;
      case 'n': literal("null"); break;
      default:
        if (!starts_number(c)) unexpected("a value");
        number();
    }
    // After a value: close what ends here, then the next element or member, if any.
    for (;;) {
      if (nesting_.empty()) return;
      char d = peek();
      if (d == nesting_.back()) {
        ++p_;
        nesting_.pop_back();
        continue;
      }
      if (d != ',') unexpected(nesting_.back() == '}' ? "',' or '}'" : "',' or ']'");
      ++p_;
      if (nesting_.back() == '}') {
        if (peek() != '"') unexpected("a string key");
        scan_string<false>();
        if (peek() != ':') unexpected("':'");
        ++p_;
      }
      break;
    }
  }
}

}  // namespace stepsim::trace
