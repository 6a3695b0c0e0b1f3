// What the console's JSON views share: reading a page's query, and the index's state that each
// view reports.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/text.hpp"
#include "gateway/console/console_index.hpp"

namespace broker::gateway::console_query {

inline constexpr std::size_t default_per_page = 50;
inline constexpr std::size_t max_per_page = 500;

inline std::int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A query's number, clamped to [low, high]; `otherwise` when absent or not a number.
inline std::size_t number_in(const std::string& query, std::string_view name, std::size_t otherwise,
                             std::size_t low, std::size_t high) {
  const auto text = base::form_value(query, name);
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return otherwise;
  return std::clamp(value, low, high);
}

struct paging {
  std::size_t page = 0;
  std::size_t per_page = default_per_page;
};
inline paging paging_of(const std::string& query) {
  return {number_in(query, "page", 0, 0, 1'000'000'000),
          number_in(query, "per_page", default_per_page, 1, max_per_page)};
}

inline nlohmann::ordered_json index_view(const console_index::stats& s) {
  return {{"ready", s.scanned},
          {"records", s.records},
          {"files", s.files},
          {"sessions", s.sessions},
          {"scan_ms", s.last_scan_ms}};
}

}  // namespace broker::gateway::console_query
