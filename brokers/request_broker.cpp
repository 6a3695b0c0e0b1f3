// What every family shares: its binding, and the stages a family without a part in them skips.
#include "brokers/request_broker.hpp"

namespace broker::brokers {

request_broker::request_broker(config::credential_spec spec, layer_hosts other_layer_hosts)
    : spec_(std::move(spec)), other_layer_hosts_(std::move(other_layer_hosts)) {}

request_broker::~request_broker() = default;

bool request_broker::bound(std::string_view host) const {
  auto any_matches = [host](const std::vector<config::host_pattern>& hosts) {
    for (const config::host_pattern& p : hosts)
      if (p.matches(host)) return true;
    return false;
  };
  if (!any_matches(spec_.hosts)) return false;
  for (const auto& hosts : other_layer_hosts_)
    if (!any_matches(hosts)) return false;
  return true;
}

bool request_broker::usable(const request_context& where) const {
  if (!bound(where.host)) return false;
  if (!spec_.programs.empty() && !config::program_matches(spec_.programs, where.client))
    return false;
  return !where.plaintext || where.loopback || spec_.allow_plaintext;
}

void request_broker::rotated_values(std::chrono::system_clock::time_point,
                                    std::vector<scrub_pattern>&) const {}
void request_broker::rotated_dummies(std::vector<std::string_view>&) const {}
void request_broker::dummy_files(std::vector<dummy_file>&) const {}
void request_broker::displaced_variables(std::vector<std::string>&) const {}
int request_broker::swap_header(std::string_view, std::string&) const {
  return 0;
}
int request_broker::swap_query(std::string&) const {
  return 0;
}
std::unique_ptr<request_step> request_broker::claim(const request_context&, std::string_view,
                                                    std::string_view,
                                                    const std::vector<http::header_field>&, bool,
                                                    request_decision&) const {
  return nullptr;
}

}  // namespace broker::brokers
