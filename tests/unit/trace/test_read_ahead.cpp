// trace/read_ahead.hpp: the reader thread that inflates a gzip trace beside the JSON scanner.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>

#include "sim/core/error.hpp"
#include "test_support.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/read_ahead.hpp"

using stepsim::trace::ReadAheadBuf;

namespace {

// A source that hands out `good` bytes, then throws from its next read (a gzip error mid-file).
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(std::string good) : good_(std::move(good)) { setg(good_.data(), good_.data(), good_.data() + good_.size()); }

 protected:
  int_type underflow() override { throw std::runtime_error("bad block"); }

 private:
  std::string good_;
};

std::string all_of(std::istream& in) {
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST_CASE("Read ahead, a stream gives the source's bytes in order, across blocks and at any block size", "[trace]") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i * 7919 % 100003) + ",";  // ~120 KB, no period of a block
  for (std::size_t block : {1, 7, 4096, 65536, 1 << 20}) {
    INFO(block);
    std::istringstream source(text);
    ReadAheadBuf ahead(source, block, 3);
    std::istream in(&ahead);
    std::string got;
    char buf[1000];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) got.append(buf, static_cast<std::size_t>(in.gcount()));
    CHECK(got == text);
    CHECK(in.eof());
    CHECK_FALSE(in.bad());
  }
  std::istringstream empty("");
  ReadAheadBuf none(empty);
  std::istream in(&none);
  CHECK(all_of(in).empty());
}

TEST_CASE("Read ahead, the source's exception comes out after the bytes before it, and an early stop does not hang",
          "[trace]") {
  FailingBuf failing(std::string(100000, 'x'));
  std::istream source(&failing);
  source.exceptions(std::ios::badbit);  // as the gzip chain: its error goes through istream::read
  ReadAheadBuf ahead(source, 4096, 2);
  std::istream in(&ahead);
  in.exceptions(std::ios::badbit);
  std::string got;
  char buf[4096];
  try {
    while (in.read(buf, sizeof buf)) got.append(buf, sizeof buf);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "bad block");
  }
  CHECK(got.size() >= 100000 - 4096);  // every whole window before the failure was read

  // A reader that stops after one byte of a long stream: destroying the buffer ends its thread
  // (blocked on a full queue) instead of waiting for the source's end.
  std::istringstream long_source(std::string(10 << 20, 'y'));
  {
    ReadAheadBuf stopped(long_source, 1024, 2);
    std::istream one(&stopped);
    CHECK(one.get() == 'y');
  }
  CHECK(long_source.good());  // not read to its end (which sets eof and fail)
}

TEST_CASE("A corrupt gzip trace is an input error naming the file, read ahead or not", "[trace]") {
  const stepsim::test::TempDir dir;
  const auto gz = dir / "corrupt.json.gz";
  std::string bytes;
  {
    std::ostringstream packed;
    boost::iostreams::filtering_ostream out;
    out.push(boost::iostreams::gzip_compressor());
    out.push(packed);
    std::string trace = R"({"traceEvents": [)";
    for (int i = 0; i < 20000; ++i)
      trace += R"({"ph": "X", "cat": "kernel", "name": "k)" + std::to_string(i) + R"(", "pid": 0, "tid": 7, "ts": 1, "dur": 1},)";
    trace += "{}]}";
    out << trace;
    out.reset();
    bytes = packed.str();
  }
  // The first deflate block (after gzip's 10-byte header) given the reserved block type 3:
  // inflate fails at once, on the reading thread.
  REQUIRE(bytes.size() > 10);
  bytes[10] = static_cast<char>(bytes[10] | 0x06);
  { std::ofstream(gz, std::ios::binary) << bytes; }
  try {
    stepsim::trace::read_kineto_trace(gz);
    FAIL("read a corrupt trace");
  } catch (const stepsim::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains(gz.string()) && Catch::Contains("expected a gzip-compressed JSON trace"));
  }
}
