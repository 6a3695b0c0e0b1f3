// The public alphabets a dummy's drawn characters come from, as the tests of dummy and
// dummy_shape spell them out on their own (not read from the code under test).
#pragma once

#include <string_view>

namespace broker::brokers::test {

constexpr std::string_view base62 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::string_view base64url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
// What a run of any other characters is drawn from: what no URL or form encoder escapes.
constexpr std::string_view plain =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._";

}  // namespace broker::brokers::test
