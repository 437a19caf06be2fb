// Text and TextPool (sim/core/text_pool.hpp): the names a timeline holds outlive the strings
// they were made from, and copies of a timeline keep them alive.
#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

#include "sim/core/text_pool.hpp"
#include "sim/exec/timeline.hpp"

using namespace stepsim;

TEST_CASE("a Text made by a pool stays valid after its source string is gone", "[core]") {
  TextPool pool;
  Text a, b;
  {
    std::string kernel = "fwd block.12 attn qkv";  // longer than the small-string buffer
    a = pool.add(kernel);
    b = pool.add("launch ", kernel);
  }
  CHECK(a == "fwd block.12 attn qkv");
  CHECK(b == "launch fwd block.12 attn qkv");
  // The op's name is the label after "launch ": the same characters, not a copy.
  Text name = b.drop_prefix(7);
  CHECK(name == a);
  CHECK(name.data() == b.data() + 7);
}

TEST_CASE("a pool grows past one block without moving what it already handed out", "[core]") {
  TextPool pool;
  Text first = pool.add("first");
  const char* where = first.data();
  // 64 KiB blocks: 10,000 names of 20 characters fill three of them.
  for (int i = 0; i < 10'000; ++i) pool.add(std::string(20, static_cast<char>('a' + i % 26)));
  std::string big(100'000, 'x');  // larger than a block: a block of its own
  Text large = pool.add(big);
  CHECK(first.data() == where);
  CHECK(first == "first");
  CHECK(large.size() == 100'000);
  CHECK(pool.bytes() >= 10'000 * 20 + 100'000);
}

TEST_CASE("a Text cannot be made from a std::string, only from a pool or a literal", "[core]") {
  // A temporary std::string stored in a timeline would dangle: the type refuses it.
  STATIC_REQUIRE_FALSE(std::is_constructible_v<Text, std::string>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<Text, std::string_view>);
  STATIC_REQUIRE(std::is_constructible_v<Text, const char (&)[4]>);
  Text empty;
  CHECK(empty.empty());
  CHECK(Text("abc").str() == "abc");
}

TEST_CASE("a copy of a timeline keeps its names alive after the original is gone", "[core]") {
  Timeline copy;
  {
    Timeline t;
    TimelineOp op;
    op.name = t.text->add(std::string("bwd block.3 mlp fc2 (a long name)"));
    t.ops.push_back(op);
    copy = t;
  }
  REQUIRE(copy.ops.size() == 1);
  CHECK(copy.ops[0].name == "bwd block.3 mlp fc2 (a long name)");
}
