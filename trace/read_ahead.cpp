#include "trace/read_ahead.hpp"

#include <ios>
#include <utility>

namespace stepsim::trace {

ReadAheadBuf::ReadAheadBuf(std::istream& source, std::size_t block_bytes, std::size_t depth)
    : ReadAheadBuf(
          [&source](char* out, std::size_t n) {
            source.read(out, static_cast<std::streamsize>(n));
            if (source.bad()) throw std::ios::failure("read error");
            return static_cast<std::size_t>(source.gcount());  // istream::read stops short only at the end
          },
          block_bytes, depth) {}

ReadAheadBuf::ReadAheadBuf(Fill fill, std::size_t block_bytes, std::size_t depth)
    : fill_(std::move(fill)), block_bytes_(block_bytes > 0 ? block_bytes : 1), depth_(depth > 0 ? depth : 1) {
  thread_ = std::thread([this] { produce(); });
}

ReadAheadBuf::~ReadAheadBuf() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ReadAheadBuf::produce() {
  for (;;) {
    Block block;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || full_.size() < depth_; });
      if (stop_) return;
      if (!spare_.empty()) {
        block = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    if (!block.bytes) block.bytes.reset(new char[block_bytes_]);  // NOLINT: uninitialized on purpose
    std::exception_ptr error;
    block.size = 0;
    try {
      block.size = fill_(block.bytes.get(), block_bytes_);
    } catch (...) {
      error = std::current_exception();
    }
    const bool last = error || block.size < block_bytes_;
    {
      std::lock_guard lock(mutex_);
      if (block.size > 0) full_.push_back(std::move(block));
      if (last) {
        done_ = true;
        error_ = error;
      }
    }
    changed_.notify_all();
    if (last) return;
  }
}

ReadAheadBuf::int_type ReadAheadBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  std::unique_lock lock(mutex_);
  if (current_.bytes) spare_.push_back(std::move(current_));
  changed_.wait(lock, [&] { return !full_.empty() || done_; });
  if (full_.empty()) {
    setg(nullptr, nullptr, nullptr);
    if (error_) std::rethrow_exception(error_);  // istream::read sets badbit and rethrows it
    return traits_type::eof();
  }
  current_ = std::move(full_.front());
  full_.pop_front();
  lock.unlock();
  changed_.notify_all();
  char* begin = current_.bytes.get();
  setg(begin, begin, begin + current_.size);
  return traits_type::to_int_type(*gptr());
}

}  // namespace stepsim::trace
