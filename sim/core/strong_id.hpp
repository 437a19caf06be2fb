#pragma once
// Typed ids (issue 18 item 3): an index into one table of a Program or a Timeline (streams,
// events, communicators, buffers) that cannot be passed where an index into another table, or
// a plain int, is expected. An id is always an index; where "no id" is meant the type says
// so with std::optional<Id> (a host-only GPU call has no stream, a kernel no communicator).
//
//   struct StreamTag {};
//   using StreamId = Id<StreamTag>;
//   StreamId s{2};          // explicit from an index
//   streams[s.index()];     // explicit back to one
//   fmt::format("{}", s);   // "2": ids print (and serialize) as the integers they were
//
// Four bytes, trivially copyable: the engine keeps them in its hot per-op array.

#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

#include <fmt/format.h>

namespace stepsim {

template <class Tag>
class Id {
 public:
  constexpr explicit Id(std::size_t index) : value_(static_cast<std::uint32_t>(index)) {
    assert(index <= static_cast<std::size_t>(INT32_MAX) && "Id: index beyond int32");
  }
  constexpr std::size_t index() const { return value_; }

  constexpr auto operator<=>(const Id&) const = default;

 private:
  std::uint32_t value_;
};

// The index, as the int ids printed before they were typed (messages and test output).
template <class Tag>
std::ostream& operator<<(std::ostream& out, Id<Tag> id) {
  return out << id.index();
}

}  // namespace stepsim

template <class Tag>
struct std::hash<stepsim::Id<Tag>> {
  std::size_t operator()(stepsim::Id<Tag> id) const noexcept { return std::hash<std::size_t>{}(id.index()); }
};

template <class Tag>
struct fmt::formatter<stepsim::Id<Tag>> : fmt::formatter<std::size_t> {
  template <class FormatContext>
  auto format(stepsim::Id<Tag> id, FormatContext& ctx) const {
    return fmt::formatter<std::size_t>::format(id.index(), ctx);
  }
};
