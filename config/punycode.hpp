// RFC 3492 punycode, encode direction only: enough to compare IDNA host names in ASCII form.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace broker::config {

// Encodes the code points of one label (without the "xn--" prefix). nullopt on overflow.
std::optional<std::string> punycode_encode(std::u32string_view label);

}  // namespace broker::config
