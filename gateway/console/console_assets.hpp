// The console's files, embedded in the binary at build time (CMakeLists.txt runs
// gateway/console/embed.cmake over gateway/console/web/ and Debian's Chart.js).
#pragma once

#include <string_view>

namespace broker::gateway {

struct console_asset {
  std::string_view name;  // e.g. "console.js"
  std::string_view content_type;
  std::string_view body;
};

// nullptr for a name that is not embedded.
const console_asset* find_console_asset(std::string_view name);

}  // namespace broker::gateway
