#include "session/redact.hpp"

namespace broker::session {

std::string redact_target(std::string_view target) {
  if (const auto hash = target.find('#'); hash != std::string_view::npos)
    target = target.substr(0, hash);
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view query = target.substr(q + 1);
  bool first = true;
  while (true) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    if (!first) out.push_back('&');
    first = false;
    if (const auto eq = item.find('='); eq != std::string_view::npos)
      out.append(item.substr(0, eq)).append("=<redacted>");
    else if (!item.empty())
      out.append("<redacted>");
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace broker::session
