#pragma once
// Names stored once, in a few large blocks, instead of one heap string each. A timeline of a
// 4,096-layer step names about 460,000 ops and host intervals; one std::string each was a
// third of the engine's time and most of its page faults (issue 16 item 5). A `Text` is a view
// into a TextPool (or of a string literal) and can be made from nothing else, so a temporary
// std::string cannot be stored by accident: whoever stores one keeps its pool alive (the
// Timeline holds its pool by shared_ptr, and copies of the timeline share it).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

namespace stepsim {

class TextPool;

class Text {
 public:
  constexpr Text() = default;
  template <std::size_t N>
  constexpr Text(const char (&literal)[N]) : view_(literal, N - 1) {}  // NOLINT: literals are static

  std::string_view view() const { return view_; }
  operator std::string_view() const { return view_; }  // NOLINT: reads like a string_view
  std::string str() const { return std::string(view_); }
  bool empty() const { return view_.empty(); }
  std::size_t size() const { return view_.size(); }
  const char* data() const { return view_.data(); }
  std::size_t find(std::string_view s, std::size_t pos = 0) const { return view_.find(s, pos); }
  std::size_t rfind(std::string_view s, std::size_t pos = std::string_view::npos) const { return view_.rfind(s, pos); }
  bool starts_with(std::string_view s) const { return view_.starts_with(s); }
  bool ends_with(std::string_view s) const { return view_.ends_with(s); }
  bool contains(std::string_view s) const { return view_.find(s) != std::string_view::npos; }
  std::string_view substr(std::size_t pos, std::size_t n = std::string_view::npos) const { return view_.substr(pos, n); }
  // The text after its first n characters: a view into the same storage ("launch fwd block.3"
  // holds the kernel's name "fwd block.3").
  Text drop_prefix(std::size_t n) const { return Text{view_.substr(std::min(n, view_.size()))}; }

  friend bool operator==(Text a, Text b) { return a.view_ == b.view_; }
  friend bool operator==(Text a, std::string_view b) { return a.view_ == b; }
  friend bool operator==(Text a, const std::string& b) { return a.view_ == b; }
  friend bool operator==(Text a, const char* b) { return a.view_ == b; }
  friend auto operator<=>(Text a, Text b) { return a.view_ <=> b.view_; }
  friend std::string operator+(const std::string& a, Text b) { return a + std::string(b.view_); }
  friend std::string operator+(Text a, const std::string& b) { return std::string(a.view_) + b; }
  friend std::string operator+(const char* a, Text b) { return a + std::string(b.view_); }
  friend std::string operator+(Text a, const char* b) { return std::string(a.view_) + b; }
  friend std::ostream& operator<<(std::ostream& os, Text t) { return os << t.view_; }

 private:
  friend class TextPool;
  explicit Text(std::string_view v) : view_(v) {}
  std::string_view view_;
};

void to_json(nlohmann::json& j, Text t);

// Append-only; a Text it returned stays valid as long as the pool. Not thread-safe (one pool per
// timeline, filled by the one thread that builds it).
class TextPool {
 public:
  Text add(std::string_view s) { return add(s, {}); }
  // The concatenation a + b, without a temporary string ("launch " + kernel name).
  Text add(std::string_view a, std::string_view b) {
    const std::size_t n = a.size() + b.size();
    if (n == 0) return Text{};
    char* at = take(n);
    if (!a.empty()) std::memcpy(at, a.data(), a.size());
    if (!b.empty()) std::memcpy(at + a.size(), b.data(), b.size());
    return Text{std::string_view(at, n)};
  }
  Text add(std::initializer_list<std::string_view> parts) { return add(std::span<const std::string_view>(parts.begin(), parts.size())); }
  // The concatenation of `parts`, copied straight into the pool.
  Text add(std::span<const std::string_view> parts) {
    std::size_t n = 0;
    for (std::string_view p : parts) n += p.size();
    if (n == 0) return Text{};
    char* at = take(n);
    for (char* to = at; std::string_view p : parts) {
      if (!p.empty()) std::memcpy(to, p.data(), p.size());
      to += p.size();
    }
    return Text{std::string_view(at, n)};
  }
  std::size_t bytes() const { return used_; }
  // Keeps `other` alive as long as this pool: its Texts may then be stored where this pool's are
  // (a program's kernels named by their workload's pool, Layer::text).
  void keep(std::shared_ptr<const TextPool> other) {
    if (other && other.get() != this && std::find(kept_.begin(), kept_.end(), other) == kept_.end()) kept_.push_back(std::move(other));
  }

 private:
  // n > 0 bytes of fresh storage.
  char* take(std::size_t n) {
    if (n > left_) grow(n);
    char* at = next_;
    next_ += n;
    left_ -= n;
    return at;
  }
  void grow(std::size_t at_least) {
    const std::size_t size = std::max<std::size_t>(at_least, kBlock);
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    used_ += size;
    next_ = blocks_.back().get();
    left_ = size;
  }
  static constexpr std::size_t kBlock = 64 * 1024;
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<std::shared_ptr<const TextPool>> kept_;
  char* next_ = nullptr;
  std::size_t left_ = 0;
  std::size_t used_ = 0;
};

}  // namespace stepsim

template <>
struct fmt::formatter<stepsim::Text> : fmt::formatter<std::string_view> {
  auto format(stepsim::Text t, format_context& ctx) const { return fmt::formatter<std::string_view>::format(t.view(), ctx); }
};
