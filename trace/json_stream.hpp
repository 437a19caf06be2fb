#pragma once
// A streaming, validating JSON pull scanner for large traces (kineto_reader.cpp).
//
// Why not nlohmann's SAX parser: it lexes one character at a time through an input adapter and
// builds every string and number token, whether or not anyone wants it; on Kineto traces that
// was two thirds of `analyze` (which ran at ~80 MB/s of JSON). This scanner reads a window of
// the stream in place and lets the caller decide value by value: take a string (a view into the
// window, decoded only when it has escapes), a number (integers exactly, others by their text),
// or skip the value (validated, not decoded).
// It accepts exactly the JSON that nlohmann accepts (RFC 8259: strict numbers, escapes,
// surrogate pairs, UTF-8 validation, no trailing content; a leading UTF-8 BOM is skipped);
// tests/data/test_trace_json_stream.cpp checks that against nlohmann on mutated traces.
//
// Streaming protocol. The caller cuts the document into steps (one trace event, one root-level
// member) and runs each with step(): the window keeps everything from the start of the current
// step, so views stay valid until the step returns. When a step runs past the data read so
// far, it is abandoned and re-run from its start after the window has been refilled (and grown
// if the step is larger than the window); a step must therefore keep its effects for its end,
// or make them idempotent. Memory: the window (chunk_bytes, or the largest step if larger).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace stepsim::trace {

namespace detail {
// The first byte at or after q that ends a run of plain string content: the quote, the
// backslash, a control character (invalid unescaped, and the window's '\0' sentinel) or the
// start of a multi-byte UTF-8 character. Reads 8 bytes at a time: there must be such a byte
// within the readable bytes, and 7 readable bytes after it (JsonStream's zero padding).
const char* next_string_stop(const char* q);
}  // namespace detail

// A JSON number token. Integers that fit 64 bits are exact (as nlohmann's number_integer /
// number_unsigned: an unsigned value above INT64_MAX wraps when read as i); anything else
// (a fraction, an exponent, a longer integer) keeps its text.
struct JsonNumber {
  bool is_int = true;
  std::int64_t i = 0;     // is_int only
  std::string_view text;  // the token as written; valid until the step ends
  double to_double() const;
};

class JsonStream {
 public:
  // The largest step (one trace event or root-level member, with the whitespace before it):
  // beyond it the window would follow the input without bound (docs/limits.md).
  static constexpr std::size_t kMaxStepBytes = std::size_t{64} << 20;

  // `label` names the input in error messages (the file).
  JsonStream(std::istream& in, std::string label, std::size_t chunk_bytes);

  // Runs body() from the current position; re-runs it from there when it needs more input.
  template <class Body>
  void step(Body&& body) {
    for (;;) {
      mark_ = p_;
      scratch_used_ = 0;
      try {
        body();
        return;
      } catch (const NeedMore&) {
        refill();
      }
    }
  }

  // The next non-whitespace character, '\0' at the end of the input (whitespace is skipped).
  char peek() {
    while (kWhitespace[static_cast<unsigned char>(*p_)]) ++p_;
    if (p_ == end_) more();
    return *p_;
  }
  void advance() { ++p_; }  // past the character peek() returned
  bool at_end() { return peek() == '\0' && p_ == end_; }
  // A position inside the current step, to read part of it again.
  const char* position() const { return p_; }
  void seek(const char* pos) { p_ = pos; }

  // Objects and arrays, after their '{' / '[' has been advanced past: true and the key (the
  // value follows), or false once the closing bracket has been consumed. `first`: no member
  // read yet (no ',' expected).
  bool next_member(bool first, std::string_view& key);
  bool next_element(bool first);

  // Values, at their first character (as peek() returned it).
  std::string_view string();  // decoded; a view into the window or the step's scratch
  JsonNumber number();
  void skip_value();          // any value, validated, without recursion
  static bool starts_number(char c) { return c == '-' || (c >= '0' && c <= '9'); }

  // Throws InputError: "<label>: byte N: <what>: expected a JSON trace".
  [[noreturn]] void fail(std::string_view what) const;
  // A parse error at the current character: "unexpected 'x'" or "unexpected end of input".
  [[noreturn]] void unexpected(std::string_view expected) const;

 private:
  struct NeedMore {};  // thrown inside step() only; never escapes it
  static const bool kWhitespace[256];

  // At the end of the data read so far: NeedMore, unless the input is exhausted (then the
  // sentinel '\0' at end_ is what the caller sees).
  void more() const {
    if (!eof_) throw NeedMore{};
  }
  // At least n bytes from q, or the input is exhausted (the zero padding is read instead).
  void need(const char* q, std::size_t n) const {
    if (static_cast<std::size_t>(end_ - q) < n) more();
  }
  void refill();
  template <bool Keep>
  std::string_view scan_string();
  // The cold parts of scan_string. At a control byte in a string (q): more input, or the error
  // (unterminated, or an unescaped control character).
  [[noreturn]] void control_in_string(const char* q);
  // At an escape's backslash: validates it (a \u escape with its low surrogate), appends the
  // character to *out unless out is null (skipping), returns the position after it.
  const char* escape_sequence(const char* q, std::string* out);
  // The code unit of the \uXXXX escape at q.
  std::uint32_t unicode_escape(const char* q);
  const char* utf8_sequence(const char* q);  // validates one multi-byte character at q
  void literal(std::string_view word);
  std::string& scratch();

  std::istream& in_;
  std::string label_;
  static std::string fmt_step_limit();
  std::vector<char> buf_;      // window: data in [buf_.data(), end_), then kPadding zero bytes
  const char* p_ = nullptr;    // the scanner
  const char* end_ = nullptr;  // end of the data read so far; *end_ == '\0'
  const char* mark_ = nullptr; // start of the current step
  std::uint64_t consumed_ = 0; // input bytes before buf_.data() (error positions)
  bool eof_ = false;
  std::deque<std::string> scratch_;  // decoded strings with escapes, reused step by step
  std::size_t scratch_used_ = 0;
  std::vector<char> nesting_;        // skip_value's open brackets
};

}  // namespace stepsim::trace
