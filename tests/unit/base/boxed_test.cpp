#include "base/boxed.hpp"

#include <catch2/catch.hpp>

#include <string>

using broker::base::boxed;

TEST_CASE("boxed reads as an optional and costs a pointer", "[boxed]") {
  static_assert(sizeof(boxed<std::string[8]>) == sizeof(void*));
  boxed<std::string> b;
  CHECK_FALSE(b);
  CHECK_FALSE(b.has_value());
  b.emplace("first");
  REQUIRE(b);
  CHECK(*b == "first");
  CHECK(b->size() == 5);
  b = std::optional<std::string>();
  CHECK_FALSE(b);
  b = std::optional<std::string>("from an optional");
  CHECK(*b == "from an optional");
  b.reset();
  CHECK_FALSE(b);
}

TEST_CASE("boxed copies deeply and moves its box", "[boxed]") {
  boxed<std::string> a(std::string("value"));
  boxed<std::string> copy = a;
  REQUIRE(copy);
  CHECK(&*copy != &*a);
  copy->append(" changed");
  CHECK(*a == "value");
  const std::string* held = &*a;
  boxed<std::string> moved = std::move(a);
  CHECK(&*moved == held);
  boxed<std::string> empty;
  moved = empty;
  CHECK_FALSE(moved);
}
