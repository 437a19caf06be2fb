#include "trace/gunzip.hpp"

#include <string>
#include <vector>

#include <zlib.h>

namespace stepsim::trace {

namespace {
constexpr std::size_t kInputBytes = std::size_t{1} << 16;  // compressed bytes read at a time
}  // namespace

struct Gunzip::State {
  std::istream& in;
  z_stream z{};
  std::vector<unsigned char> input = std::vector<unsigned char>(kInputBytes);
  bool in_member = false;  // inflate has begun a member and not reached its end
  bool input_ended = false;
  bool done = false;
  std::string error;  // set once inflate failed: every later read throws it again

  explicit State(std::istream& source) : in(source) {
    // 16 + 15: a gzip wrapper (header, CRC-32 and length checked) around a 32 KiB window.
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw GzipError("zlib could not start (out of memory)");
  }
  ~State() { inflateEnd(&z); }

  // More compressed input, if there is any; false at its end.
  bool refill() {
    if (input_ended) return false;
    in.read(reinterpret_cast<char*>(input.data()), static_cast<std::streamsize>(input.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (in.bad()) fail("read error");
    if (got < input.size()) input_ended = true;
    z.next_in = input.data();
    z.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  [[noreturn]] void fail(std::string message) {
    error = std::move(message);
    throw GzipError(error);
  }
};

Gunzip::Gunzip(std::istream& compressed) : state_(std::make_unique<State>(compressed)) {}
Gunzip::~Gunzip() = default;

std::size_t Gunzip::read(char* out, std::size_t n) {
  State& s = *state_;
  if (!s.error.empty()) throw GzipError(s.error);
  std::size_t filled = 0;
  while (filled < n && !s.done) {
    if (s.z.avail_in == 0 && !s.refill()) {
      // The end of the input: fine between members, not inside one.
      if (s.in_member) s.fail("unexpected end of the gzip data");
      s.done = true;
      break;
    }
    if (!s.in_member) {
      // A member after the first: zlib reads its header afresh (and rejects what is not one).
      if (inflateReset(&s.z) != Z_OK) s.fail("zlib could not restart");
      s.in_member = true;
    }
    const std::size_t want = n - filled;
    const auto room = static_cast<uInt>(want < std::size_t{1} << 30 ? want : std::size_t{1} << 30);
    s.z.next_out = reinterpret_cast<Bytef*>(out + filled);
    s.z.avail_out = room;
    const int rc = inflate(&s.z, Z_NO_FLUSH);
    filled += room - s.z.avail_out;
    if (rc == Z_STREAM_END) {
      s.in_member = false;
    } else if (rc == Z_BUF_ERROR) {
      // No progress: inflate needs input (refilled above) or room (the loop ends). Anything else
      // is a stream that cannot go on.
      if (s.z.avail_in != 0 && s.z.avail_out != 0) s.fail("the gzip data cannot be inflated");
    } else if (rc != Z_OK) {
      s.fail(s.z.msg != nullptr ? s.z.msg : "zlib error " + std::to_string(rc));
    }
  }
  return filled;
}

}  // namespace stepsim::trace
