// Operational log lines: every line says which session it is about, and which
// connection when it is about one: "[s-7f3a c42] tunnel to api.github.com:443 via ...". They go
// to stderr through spdlog; the audit log (audit_log.hpp) is a separate, structured record.
// Client-chosen text in a line passes through the session's scrub first (no real value in logs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

namespace broker::session {

class log_tag {
 public:
  explicit log_tag(std::string_view session) : text_("[" + std::string(session) + "]") {}
  log_tag(std::string_view session, std::uint64_t connection)
      : text_("[" + std::string(session) + " c" + std::to_string(connection) + "]") {}

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// One line at `level`, led by the tag; the message is formatted only when the level is on.
template <class... Args>
void log(spdlog::level::level_enum level, const log_tag& tag, fmt::format_string<Args...> format,
         Args&&... args) {
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "{} {}", tag.text(), fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace broker::session
