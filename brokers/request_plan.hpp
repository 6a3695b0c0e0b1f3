// One request's credential plan (DESIGN §5), made by credential_set::plan() from its head. The
// proxy follows it without knowing which family it serves:
//  1. decision(): refused, or the request goes on, bound dummies already swapped in the head;
//  2. whole_body(): when set, the body is read whole (at most `limit` bytes) before anything
//     of the request goes on;
//  3. complete(): the families' last word on the head, with that body: refused, answered by
//     the broker itself (answer()), or on (re-signed, for AWS);
//  4. rewriter(): what rewrites the body as it streams up (aws-chunked re-signing), or null.
// It lives as long as the exchange: the rewriter points into it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/request_decision.hpp"
#include "http/message.hpp"

namespace broker::brokers {

class credential_set;
class aws_signed_request;

// The most a family reads whole: an AWS payload whose hash the signature covers (SDK uploads
// stream instead, with UNSIGNED-PAYLOAD or aws-chunked), and a token request (a few hundred
// bytes in practice).
inline constexpr std::size_t max_signed_body = 32 * 1024 * 1024;
inline constexpr std::size_t max_token_request = 64 * 1024;

struct whole_body_need {
  std::size_t limit = 0;
  std::string_view why;  // why it is read whole, and how a client avoids it; for refusals
};

// An answer the broker gives itself instead of the upstream (a gcp child's token request).
struct local_answer {
  std::string credential;
  std::string json;
};

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

  // With the whole body when whole_body() asked for it (else empty): checks and rewrites the
  // head in place, or answers the request (answer()). A refusal rewrites nothing.
  request_decision complete(std::string_view method, std::string& target,
                            std::vector<http::header_field>& headers, std::string_view body);
  const std::optional<local_answer>& answer() const { return answer_; }
  body_rewriter* rewriter() const { return rewriter_.get(); }

 private:
  friend class credential_set;

  const credential_set* set_ = nullptr;
  std::string host_;
  request_decision decision_;
  bool holds_real_ = false;
  std::optional<whole_body_need> whole_body_;
  bool token_request_ = false;
  std::unique_ptr<aws_signed_request> aws_;
  std::unique_ptr<body_rewriter> rewriter_;
  std::optional<local_answer> answer_;
};

}  // namespace broker::brokers
