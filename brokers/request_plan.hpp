// One request's credential plan (docs/policy.md), made by credential_set::plan() from its head. The
// proxy follows it without knowing which family it serves:
//  1. decision(): refused, or the request goes on, bound dummies already swapped in the head;
//  2. whole_body(): when set, the body is read whole (at most `limit` bytes) before anything
//     of the request goes on;
//  3. complete(): the families' last word on the head, with that body: refused, answered by
//     the broker itself (answer()), or on (re-signed, for AWS);
//  4. rewriter(): what rewrites the body as it streams up (aws-chunked re-signing), or null;
//  5. response_patterns(): what the response is scrubbed with; response_whole_body() and
//     rewrite_response(): a response body a step rewrites whole (a token response).
// The families that took the request on (request_broker::claim) are its steps. It lives as long
// as the exchange: the rewriter and the response patterns point into it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/request_broker.hpp"
#include "brokers/swapped_values.hpp"
#include "http/message.hpp"

namespace broker::brokers {

class credential_set;

class request_plan {
 public:
  request_plan();
  ~request_plan();
  request_plan(request_plan&&) noexcept;
  request_plan& operator=(request_plan&&) noexcept;

  const request_decision& decision() const { return decision_; }
  // The credential the audit record names: the one found (refused), swapped or signing; "" when
  // the request carries none.
  const std::string& credential() const { return decision_.credential; }
  // The head may hold real values (dummies swapped, a request to re-sign): wipe it after use.
  bool holds_real() const { return holds_real_; }
  const std::optional<whole_body_need>& whole_body() const { return whole_body_; }

  // With the whole body when whole_body() asked for it (else empty): each step checks and
  // rewrites the head in place, or answers the request (answer()). A refusal rewrites nothing.
  request_decision complete(std::string_view method, std::string& target,
                            std::vector<http::header_field>& headers, std::string& body);
  const std::optional<local_answer>& answer() const { return answer_; }
  body_rewriter* rewriter() const { return rewriter_.get(); }

  // The response stage: every real value (rotated ones as they are now) → its dummy, and what
  // this request was rewritten with → what the client had sent. Valid as long as the plan.
  std::vector<scrub_pattern> response_patterns() const;
  // A response a step rewrites whole (an OAuth token response): the most to read for `status`,
  // 0 when the body streams as usual; then rewrite_response() with the whole (decoded) body.
  std::size_t response_whole_body(int status) const;
  void rewrite_response(int status, std::string& body);

 private:
  friend class credential_set;

  const credential_set* set_ = nullptr;
  request_decision decision_;
  bool holds_real_ = false;
  swapped_values swapped_;  // the head's swaps
  std::vector<std::unique_ptr<request_step>> steps_;
  std::optional<whole_body_need> whole_body_;
  std::optional<local_answer> answer_;
  std::unique_ptr<body_rewriter> rewriter_;
};

}  // namespace broker::brokers
