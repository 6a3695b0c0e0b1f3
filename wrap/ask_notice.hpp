// How a wrap session tells its user about a held request (docs/policy.md): one line on its stderr
// (the agent's terminal gets that one line, nothing more) and, with --ask-notify CMD, the command
// run by /bin/sh with the ask in its environment (BROKER_ASK_ID, BROKER_ASK_SESSION,
// BROKER_ASK_METHOD, BROKER_ASK_URL, BROKER_ASK_TEXT: the line), e.g. `notify-send broker
// "$BROKER_ASK_TEXT"`.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace broker::wrap {

// The line for an ask as `broker pending --json` lists it, with how to answer it; an MCP call's
// line is followed by its arguments, indented, one line each.
std::string ask_line(const nlohmann::ordered_json& ask);

// The same for a terminal `columns` wide: one row and no more (the URL shortened with "..."
// when it must be), without its newline, so that an agent's full-screen UI loses one row to it.
std::string terminal_ask_line(const nlohmann::ordered_json& ask, std::size_t columns);

// Writes the line to stderr at once (one write; on a terminal, the one-row form from the start
// of its row), and starts the notify command when there is one; its end is waited for on a
// thread of its own, so nothing here waits for it.
void announce_ask(const nlohmann::ordered_json& ask, const std::string& notify_command);

}  // namespace broker::wrap
