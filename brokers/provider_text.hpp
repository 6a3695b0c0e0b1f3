// What the minting families read from providers' answers: a message fit for a refusal, and the
// UTC timestamps expiries are written in.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace broker::brokers {

// Printable ASCII of a provider's message (anything else as '?'), at most 300 bytes and "..."
// after: an error text a refusal may quote.
std::string printable_excerpt(std::string_view text);

// "2026-12-07T04:00:00Z", with or without fractional seconds; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_utc_time(std::string_view text);

}  // namespace broker::brokers
