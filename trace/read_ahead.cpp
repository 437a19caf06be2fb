#include "trace/read_ahead.hpp"

#include <ios>
#include <utility>

namespace stepsim::trace {

ReadAheadBuf::ReadAheadBuf(std::istream& source, std::size_t block_bytes, std::size_t depth)
    : source_(source), block_bytes_(block_bytes > 0 ? block_bytes : 1), depth_(depth > 0 ? depth : 1) {
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
    std::vector<char> block;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || full_.size() < depth_; });
      if (stop_) return;
      if (!spare_.empty()) {
        block = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    block.resize(block_bytes_);
    std::exception_ptr error;
    std::size_t got = 0;
    try {
      source_.read(block.data(), static_cast<std::streamsize>(block.size()));
      got = static_cast<std::size_t>(source_.gcount());
      if (source_.bad()) error = std::make_exception_ptr(std::ios::failure("read error"));
    } catch (...) {
      error = std::current_exception();
    }
    block.resize(got);
    const bool last = error || got < block_bytes_;  // istream::read stops short only at the end
    {
      std::lock_guard lock(mutex_);
      if (got > 0) full_.push_back(std::move(block));
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
  if (current_.capacity() > 0) spare_.push_back(std::move(current_));
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
  setg(current_.data(), current_.data(), current_.data() + current_.size());
  return traits_type::to_int_type(*gptr());
}

}  // namespace stepsim::trace
