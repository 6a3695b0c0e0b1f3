// credential_set::plan() and the stages of a request_plan: the swap and canary checks of
// apply(), then whatever the families that claimed the request do with its body and response.
#include "brokers/request_plan.hpp"

#include <algorithm>

#include "brokers/credential_set.hpp"

namespace broker::brokers {
namespace {

// A GraphQL request swapped for a credential scoped to "graphql": "read": its body is read
// whole and judged before anything of the request goes on.
class graphql_scope_step : public request_step {
 public:
  explicit graphql_scope_step(std::string credential) : credential_(std::move(credential)) {}

  bool holds_real() const override { return false; }
  std::optional<whole_body_need> whole_body() const override {
    return whole_body_need{max_graphql_request,
                           "a GraphQL request for a credential scoped to \"graphql\": \"read\" "
                           "is judged whole (at most 1 MiB)",
                           true};
  }
  request_decision complete(std::string_view, std::string&, std::vector<http::header_field>&,
                            std::string& body) override {
    scope_verdict v = judge_graphql_scope(body);
    if (!v.refused()) return {};
    return {request_action::credential_out_of_scope, credential_, std::move(v.why), 0,
            std::move(v.key)};
  }

 private:
  std::string credential_;
};

}  // namespace

request_plan::request_plan() = default;
request_plan::~request_plan() = default;
request_plan::request_plan(request_plan&&) noexcept = default;
request_plan& request_plan::operator=(request_plan&&) noexcept = default;

request_decision request_plan::complete(std::string_view method, std::string& target,
                                        std::vector<http::header_field>& headers,
                                        std::string& body) {
  for (const auto& step : steps_) {
    request_decision d = step->complete(method, target, headers, body);
    if (d.refused()) return d;
    if (!d.credential.empty()) decision_.credential = d.credential;
    if (auto answer = step->answer()) {
      answer_ = std::move(answer);
      return {};
    }
    if (!rewriter_) rewriter_ = step->request_body_rewriter();
  }
  return {};
}

std::vector<scrub_pattern> request_plan::response_patterns() const {
  std::vector<scrub_pattern> patterns =
      set_ ? set_->response_patterns() : std::vector<scrub_pattern>();
  swapped_.patterns(patterns);
  for (const auto& step : steps_) step->response_patterns(patterns);
  return patterns;
}

std::size_t request_plan::response_whole_body(int status) const {
  std::size_t limit = 0;
  for (const auto& step : steps_) limit = std::max(limit, step->response_whole_body(status));
  return limit;
}

void request_plan::rewrite_response(int status, std::string& body) {
  for (const auto& step : steps_)
    if (step->response_whole_body(status) > 0) step->rewrite_response(status, body);
}

request_plan credential_set::plan(const request_context& where, std::string_view method,
                                  std::string& target, std::vector<http::header_field>& headers,
                                  bool has_body) const {
  request_plan p;
  p.set_ = this;
  request_context at = where;
  at.method = method;
  std::vector<std::size_t> carried;
  p.decision_ = check_and_swap(at, target, headers, &p.swapped_, &carried);
  if (p.decision_.refused()) return p;
  p.holds_real_ = p.decision_.swapped > 0;
  // Scopes judge the path, which the swaps left as it was (they rewrite query parameters only).
  for (std::size_t i : carried)
    if (brokers_[i]->scoped() && brokers_[i]->judge_scope(where.host, method, target).graphql_body)
      p.steps_.push_back(std::make_unique<graphql_scope_step>(brokers_[i]->name()));
  for (const auto& step : p.steps_) p.whole_body_ = step->whole_body();

  for (const auto& broker : brokers_) {
    request_decision refused;
    auto step = broker->claim(where, method, target, headers, has_body, refused);
    if (refused.refused()) {
      p.decision_ = std::move(refused);
      p.steps_.clear();
      return p;
    }
    if (!step) continue;
    p.holds_real_ = p.holds_real_ || step->holds_real();
    if (auto need = step->whole_body()) {
      const bool reads = need->reads_content || (p.whole_body_ && p.whole_body_->reads_content);
      if (!p.whole_body_ || need->limit > p.whole_body_->limit) p.whole_body_ = need;
      p.whole_body_->reads_content = reads;
    }
    // The credential the record names: the one signing rather than one swapped.
    if (step->holds_real()) p.decision_.credential = broker->name();
    p.steps_.push_back(std::move(step));
  }
  return p;
}

}  // namespace broker::brokers
