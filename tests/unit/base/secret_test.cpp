#include "base/secret.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <concepts>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace base = broker::base;

using broker::base::secret;

// "Logged a token" is a compile error, not a review note: none of the ways a value
// reaches a log line (spdlog formats with fmt), a stream or a string compiles for a secret.
template <class T>
concept streamable = requires(std::ostream& os, const T& t) {
  os << t;
};
template <class T>
concept formattable_by_fmt = fmt::is_formattable<T>::value;
static_assert(!streamable<base::secret>);
static_assert(!formattable_by_fmt<base::secret>);
static_assert(!std::is_convertible_v<secret, std::string>);
static_assert(!std::is_convertible_v<secret, std::string_view>);
static_assert(!std::is_convertible_v<secret, const char*>);
static_assert(!std::is_convertible_v<secret, bool>);
static_assert(!std::is_copy_constructible_v<base::secret>);
// The checks can fail: the same concepts hold for a type that is printable.
static_assert(streamable<std::string> && formattable_by_fmt<std::string>);

namespace {
bool all_zero(const char* p, std::size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == '\0'; });
}
}  // namespace

TEST_CASE("secret takes the value and wipes the source buffer", "[brokers][secret]") {
  // Long enough to live on the heap, and a short one that lives in the string object (SSO).
  for (std::string value :
       {std::string("ghp_abcdefghijklmnopqrstuvwxyz0123456789"), std::string("short-token")}) {
    const std::string expected = value;
    const char* buffer = value.data();
    const std::size_t capacity = value.capacity();
    base::secret s(std::move(value));
    CHECK(s.expose() == expected);
    CHECK(s.size() == expected.size());
    CHECK_FALSE(s.empty());
    CHECK(value.empty());
    CHECK(value.data() == buffer);  // clear() keeps the allocation: it was zeroed, not freed
    CHECK(all_zero(buffer, capacity));
  }
}

TEST_CASE("a moved-from secret is empty", "[brokers][secret]") {
  base::secret a(std::string("sk-proj-0123456789abcdef"));
  base::secret b(std::move(a));
  CHECK(a.empty());
  CHECK(a.expose().empty());
  CHECK(b.expose() == "sk-proj-0123456789abcdef");

  base::secret c(std::string("other-value-xyz"));
  c = std::move(b);
  CHECK(b.empty());
  CHECK(c.expose() == "sk-proj-0123456789abcdef");

  base::secret none;
  CHECK(none.empty());
  CHECK(none.size() == 0);
}

TEST_CASE("wipe zeroes the whole allocation of a string", "[brokers][secret]") {
  std::string s(100, 'x');
  s.resize(10);  // bytes 10..99 still hold 'x' past the end
  const char* buffer = s.data();
  const std::size_t capacity = s.capacity();
  broker::base::wipe(s);
  CHECK(s.empty());
  CHECK(all_zero(buffer, capacity));
}
