#include "live/timeouts.hpp"

#include <stdexcept>

#include "config/units.hpp"

namespace broker::live {

void set_timeout(timeouts& t, std::string_view spec) {
  const std::string text(spec);
  const auto eq = spec.find('=');
  const std::string_view name = spec.substr(0, eq);
  const auto value =
      eq == std::string_view::npos ? std::nullopt : config::parse_duration(spec.substr(eq + 1));
  if (!value || value->count() <= 0)
    throw std::invalid_argument("--timeout " + text +
                                ": expected NAME=DURATION with a positive duration, e.g. "
                                "upstream=30s");
  struct entry {
    std::string_view name;
    timeouts::duration timeouts::*field;
  };
  static constexpr entry fields[] = {
      {"head", &timeouts::head},       {"idle", &timeouts::idle},         {"dns", &timeouts::dns},
      {"connect", &timeouts::connect}, {"upstream", &timeouts::upstream}, {"body", &timeouts::body},
      {"tunnel", &timeouts::tunnel},   {"drain", &timeouts::drain},       {"tls", &timeouts::tls},
      {"ask", &timeouts::ask},
  };
  for (const auto& f : fields) {
    if (f.name == name) {
      t.*f.field = *value;
      return;
    }
  }
  throw std::invalid_argument("--timeout " + text +
                              ": unknown name; use head, idle, dns, connect, tls, upstream, "
                              "body, tunnel, drain or ask");
}

}  // namespace broker::live
