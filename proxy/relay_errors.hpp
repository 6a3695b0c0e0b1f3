// Internal to the relay (request_relay, response_relay, whole_body_reader): why an
// exchange stops part-way.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <utility>

#include "live/refusal.hpp"

namespace broker::proxy {

// A client-side protocol error found while reading a request body.
struct body_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The client went away mid-body (its connection closed or reset, or it reset its stream): nothing
// is malformed and no one is left to answer. Once the request has gone up, an exchange the
// policy allowed, cut short: recorded as such ("aborted"), never as a refusal.
struct client_gone : body_error {
  using body_error::body_error;
};
// An upstream that breaks its response after the head went out: the client connection is cut.
struct upstream_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The record of an exchange could not be written (docs/audit-log.md: no unaudited request
// completes): the client connection is cut before the response ends.
struct audit_failed : std::runtime_error {
  audit_failed() : std::runtime_error("audit log write failed") {}
};
// A request body carried a value that must not leave; `pattern` indexes the body patterns.
struct value_in_body : std::runtime_error {
  explicit value_in_body(std::size_t p) : std::runtime_error("refused body"), pattern(p) {}
  std::size_t pattern;
};
// A coded request body that cannot be searched through (docs/security-model.md): past a decode
// limit, corrupt, or holding too much back; `answer` tells the client which.
struct body_unreadable : std::runtime_error {
  explicit body_unreadable(live::refusal r) : std::runtime_error(r.message), answer(std::move(r)) {}
  live::refusal answer;
};

}  // namespace broker::proxy
