#pragma once
// Typed ids (issue 18 item 3, groundwork): an index into one table of a Program or a Timeline
// (streams, events, communicators, ops, buffers) that cannot be passed where an index into
// another table, or a plain int, is expected. "No id" is a named state, not a -1 to compare
// against: none(), valid(), and index() asserts it is valid.
//
//   struct StreamTag {};
//   using StreamId = Id<StreamTag>;
//   StreamId s{2};          // explicit from an index
//   streams[s.index()];     // explicit back to one
//   StreamId none;          // == StreamId::none(), !none.valid()

#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

namespace stepsim {

template <class Tag>
class Id {
 public:
  constexpr Id() = default;  // none
  constexpr explicit Id(std::size_t index) : value_(static_cast<std::int32_t>(index)) {
    assert(index <= static_cast<std::size_t>(INT32_MAX) && "Id: index beyond int32");
  }
  static constexpr Id none() { return Id(); }

  constexpr bool valid() const { return value_ >= 0; }
  constexpr std::size_t index() const {
    assert(valid() && "Id::index() of none()");
    return static_cast<std::size_t>(value_);
  }

  constexpr auto operator<=>(const Id&) const = default;  // none() orders before every index

 private:
  std::int32_t value_ = -1;
};

// "#3", or "none": for messages and test output.
template <class Tag>
std::ostream& operator<<(std::ostream& out, Id<Tag> id) {
  return id.valid() ? out << '#' << id.index() : out << "none";
}

}  // namespace stepsim

template <class Tag>
struct std::hash<stepsim::Id<Tag>> {
  std::size_t operator()(stepsim::Id<Tag> id) const noexcept {
    return id.valid() ? std::hash<std::size_t>{}(id.index()) : ~std::size_t{0};
  }
};
