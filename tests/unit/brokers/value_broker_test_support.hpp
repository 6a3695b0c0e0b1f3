// A static-value family's broker over fake values, for the family tests.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/secret.hpp"
#include "brokers/request_broker.hpp"
#include "brokers/value_broker.hpp"
#include "config/host_pattern.hpp"

namespace broker::brokers::testing {

inline std::unique_ptr<value_broker> make_broker(const config::credential_spec& spec,
                                                 std::string_view dummy, std::string_view real) {
  return make_value_broker({spec, base::secret(std::string(real)), std::string(dummy), {}});
}

// A static-value credential over fake values, bound to `hosts`; its source is never read.
inline value_broker::init value_init(std::string name, std::string type,
                                     const std::vector<std::string>& hosts, const std::string& real,
                                     const std::string& dummy) {
  value_broker::init c;
  c.spec.name = std::move(name);
  c.spec.type = std::move(type);
  for (const auto& h : hosts) c.spec.hosts.push_back(*config::host_pattern::parse(h));
  c.spec.source = "env:UNUSED";
  c.real = base::secret(std::string(real));
  c.dummy = dummy;
  return c;
}

// The brokers of a credential_set over static values.
inline std::vector<std::unique_ptr<request_broker>> brokers_of(
    std::vector<value_broker::init> values) {
  std::vector<std::unique_ptr<request_broker>> out;
  for (auto& v : values) out.push_back(make_value_broker(std::move(v)));
  return out;
}

}  // namespace broker::brokers::testing
