#pragma once
// A gzip stream inflated with zlib straight into the caller's buffer. It replaces Boost's
// gzip_decompressor behind the trace reader: that filter chain copies every byte twice more
// (zlib's output into the filter's buffer, then into the stream's) and zero-fills each new block,
// which made the inflating thread slower than the JSON scanner it feeds on a small trace
// (docs/limits.md). Members are read one after another, as `gzip -d` does; each member's CRC and
// length are checked by zlib.
#include <cstddef>
#include <istream>
#include <memory>
#include <stdexcept>

namespace stepsim::trace {

// The data is not gzip, is corrupt, or ends inside a member. what() is zlib's words (or ours for
// a truncated stream), without the file's name.
class GzipError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Gunzip {
 public:
  // `compressed` must outlive this, and nothing else reads it meanwhile.
  explicit Gunzip(std::istream& compressed);
  ~Gunzip();
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // Fills out[0, n) with the next inflated bytes; returns fewer than n only at the end of the
  // data. Throws GzipError (and, once thrown, again on every later call).
  std::size_t read(char* out, std::size_t n);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace stepsim::trace
