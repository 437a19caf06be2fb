#pragma once
// An input stream read ahead on a thread of its own. A compressed trace's inflate and CRC were a
// third of `analyze`'s time, run before each window of the JSON scanner; read ahead, they run
// beside it on a second core (docs/analyze.md). The bytes come out in the source's order; an
// exception the source throws (a gzip error) comes out of the read that reaches the point where
// it was thrown, as it would without the thread.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <istream>
#include <memory>
#include <mutex>
#include <streambuf>
#include <thread>
#include <vector>

namespace stepsim::trace {

class ReadAheadBuf : public std::streambuf {
 public:
  // Fills out[0, n) and returns how many bytes it wrote: fewer than n only at the end of the data.
  // It may throw; it runs on the reading thread.
  using Fill = std::function<std::size_t(char* out, std::size_t n)>;

  // Reads `source` (which must outlive this, and which nothing else reads meanwhile) in blocks of
  // `block_bytes`, at most `depth` blocks ahead of the reader. Four blocks ahead was as fast as
  // sixteen on a 53 MB trace, and 0.6-1.0 ms faster on a 1.7 MB one (docs/limits.md): the
  // thread allocated and touched a new block for each of the sixteen, where it reuses four.
  explicit ReadAheadBuf(std::istream& source, std::size_t block_bytes = std::size_t{1} << 16, std::size_t depth = 4);
  // The same, with blocks that `fill` writes in place (Gunzip::read: no copy between the two).
  explicit ReadAheadBuf(Fill fill, std::size_t block_bytes = std::size_t{1} << 16, std::size_t depth = 4);
  // Stops the thread after the block it is reading, whether or not everything was read.
  ~ReadAheadBuf() override;
  ReadAheadBuf(const ReadAheadBuf&) = delete;
  ReadAheadBuf& operator=(const ReadAheadBuf&) = delete;

 protected:
  int_type underflow() override;

 private:
  // A block's bytes, not zero-filled when allocated (the fill overwrites them).
  struct Block {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0;
  };

  void produce();

  Fill fill_;
  const std::size_t block_bytes_, depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Block> full_;    // read, in order, not yet handed out
  std::vector<Block> spare_;  // handed out and given back, for reuse
  Block current_;             // the block the get area points into
  bool done_ = false;                     // the source is exhausted (or failed: error_)
  bool stop_ = false;                     // the reader is gone
  std::exception_ptr error_;
  std::thread thread_;  // declared last: started once the members above exist
};

}  // namespace stepsim::trace
