// sim/core/strong_id.hpp: ids of different tables do not mix, and "no id" is explicit.
#include <catch2/catch.hpp>

#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include <fmt/format.h>

#include "sim/core/strong_id.hpp"

using namespace stepsim;

namespace {
struct StreamTag {};
struct EventTag {};
using StreamIdT = Id<StreamTag>;
using EventIdT = Id<EventTag>;
}  // namespace

// Catches (at compile time): an implicit conversion from int or size_t, or between the ids of
// two tables, creeping back in; a default-constructed id (the -1 sentinel the type replaces:
// "none" is std::optional<Id>); the point of the type is that these do not compile.
static_assert(!std::is_convertible_v<int, StreamIdT>);
static_assert(!std::is_convertible_v<std::size_t, StreamIdT>);
static_assert(!std::is_convertible_v<StreamIdT, int>);
static_assert(!std::is_convertible_v<EventIdT, StreamIdT>);
static_assert(!std::is_constructible_v<StreamIdT, EventIdT>);
static_assert(!std::is_default_constructible_v<StreamIdT>);
static_assert(std::is_trivially_copyable_v<StreamIdT>);
static_assert(sizeof(StreamIdT) == 4);

// Catches: an index that does not round-trip, ordering or hashing that breaks maps and sets of
// ids, and a printed form other than the plain integer (messages, JSON and traces print ids
// exactly as they printed the int ids before).
TEST_CASE("An Id is explicit from and to an index, orders, hashes and prints as its index", "[core][id]") {
  constexpr StreamIdT two{2};
  static_assert(two.index() == 2);
  CHECK(StreamIdT{0} != StreamIdT{1});
  CHECK(StreamIdT{1} < StreamIdT{2});
  std::set<StreamIdT> ordered{StreamIdT{3}, StreamIdT{1}};
  CHECK(*ordered.begin() == StreamIdT{1});
  std::unordered_set<StreamIdT> hashed{StreamIdT{1}, StreamIdT{1}, StreamIdT{4}};
  CHECK(hashed.size() == 2);
  std::ostringstream out;
  out << StreamIdT{7};
  CHECK(out.str() == "7");
  CHECK(fmt::format("stream {} event {:>3}", StreamIdT{7}, EventIdT{12}) == "stream 7 event  12");
  std::optional<StreamIdT> none;
  CHECK_FALSE(none.has_value());
}
