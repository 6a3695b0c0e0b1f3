// A running session summed up: what `broker status` shows of it, and its last record.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "session/audit_record.hpp"

namespace broker::live {

class live_session;

// What `broker status` shows of a running session: identity, counters and every budget.
nlohmann::ordered_json session_status(const live_session& ctx, const std::string& mode, int pid);

// The session's last record: its counts and usage, and the command's exit status (wrap).
session::session_end session_end_of(const live_session& ctx, std::optional<int> exit);

}  // namespace broker::live
