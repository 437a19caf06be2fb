// sim/core/strong_id.hpp: ids of different tables do not mix, and "no id" is explicit.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "sim/core/strong_id.hpp"

using namespace stepsim;

namespace {
struct StreamTag {};
struct EventTag {};
using StreamIdT = Id<StreamTag>;
using EventIdT = Id<EventTag>;
}  // namespace

// Catches (at compile time): an implicit conversion from int or size_t, or between the ids of
// two tables, creeping back in; the point of the type is that these do not compile.
static_assert(!std::is_convertible_v<int, StreamIdT>);
static_assert(!std::is_convertible_v<std::size_t, StreamIdT>);
static_assert(!std::is_convertible_v<StreamIdT, int>);
static_assert(!std::is_convertible_v<EventIdT, StreamIdT>);
static_assert(!std::is_constructible_v<StreamIdT, EventIdT>);
static_assert(std::is_trivially_copyable_v<StreamIdT>);
static_assert(sizeof(StreamIdT) == 4);

// Catches: a default id that is a valid index (the -1 sentinel bug the type replaces), an
// index that does not round-trip, and ordering or hashing that breaks maps and sets of ids.
TEST_CASE("An Id is explicit from and to an index; the default is none, which no index equals", "[core][id]") {
  constexpr StreamIdT none;
  static_assert(!none.valid());
  static_assert(none == StreamIdT::none());
  constexpr StreamIdT two{2};
  static_assert(two.valid() && two.index() == 2);
  CHECK(StreamIdT{0} != none);
  CHECK(none < StreamIdT{0});
  CHECK(StreamIdT{1} < StreamIdT{2});
  std::set<StreamIdT> ordered{StreamIdT{3}, StreamIdT{1}, none};
  CHECK(*ordered.begin() == none);
  std::unordered_set<StreamIdT> hashed{StreamIdT{1}, StreamIdT{1}, none};
  CHECK(hashed.size() == 2);
  std::ostringstream out;
  out << StreamIdT{7} << " " << none;
  CHECK(out.str() == "#7 none");
}
