// What of a request target may enter the audit log.
#pragma once

#include <string>
#include <string_view>

namespace broker::session {

// Keeps the path and the query parameter names; every query value becomes "<redacted>"
// ("/r?per_page=5&q" -> "/r?per_page=<redacted>&<redacted>": a bare item may itself be a token).
// A fragment is dropped.
std::string redact_target(std::string_view target);

}  // namespace broker::session
