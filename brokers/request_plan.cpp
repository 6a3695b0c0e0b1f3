// credential_set::plan() and the steps of a request_plan: the swap and canary checks of apply(),
// the AWS verify-and-re-sign step (aws_signing.hpp) and the gcp token answer, behind one shape.
#include "brokers/request_plan.hpp"

#include "brokers/aws_signing.hpp"
#include "brokers/credential_set.hpp"

namespace broker::brokers {
namespace {

constexpr std::string_view signed_body_why =
    "the AWS signature covers the body's hash; an upload can stream instead with "
    "x-amz-content-sha256: UNSIGNED-PAYLOAD or aws-chunked";
constexpr std::string_view token_request_why =
    "a token request is read to see whether it redeems the session's dummy";

std::string signature_refusal(std::string_view why) {
  return "the request's AWS signature was refused: " + std::string(why) +
         ". Requests must be signed with the session's AWS credentials, unaltered";
}

// An aws-chunked body: every chunk's signature checked with the dummy key, then signed with the
// real one; nothing of a chunk that does not verify is released.
class aws_chunk_rewriter final : public body_rewriter {
 public:
  aws_chunk_rewriter(std::unique_ptr<sigv4::chunk_resigner> resigner, std::string credential)
      : resigner_(std::move(resigner)), credential_(std::move(credential)) {}

  void feed(std::string_view in, std::string& out) override {
    try {
      resigner_->feed(in, out);
    } catch (const sigv4::sigv4_error& e) {
      throw refused(e);
    }
  }
  void finish() override {
    try {
      resigner_->finish();
    } catch (const sigv4::sigv4_error& e) {
      throw refused(e);
    }
  }

 private:
  body_refused_error refused(const sigv4::sigv4_error& e) const {
    return body_refused_error(
        {request_action::signature_invalid, credential_, signature_refusal(e.what()), 0});
  }

  std::unique_ptr<sigv4::chunk_resigner> resigner_;
  std::string credential_;
};

}  // namespace

request_plan::request_plan() = default;
request_plan::~request_plan() = default;
request_plan::request_plan(request_plan&&) noexcept = default;
request_plan& request_plan::operator=(request_plan&&) noexcept = default;

request_decision request_plan::complete(std::string_view method, std::string& target,
                                        std::vector<http::header_field>& headers,
                                        std::string_view body) {
  if (token_request_) {
    if (auto answer = set_->gcp_token_answer(host_, method, body)) {
      decision_.credential = answer->credential;
      answer_ = local_answer{std::move(answer->credential), std::move(answer->json)};
    }
    return {};
  }
  if (!aws_) return {};
  const std::string credential(aws_->credential());
  if (std::string why = aws_->action_refusal(target, body); !why.empty())
    return {request_action::action_denied, credential, std::move(why), 0};
  try {
    aws_->resign(method, target, headers, body);
  } catch (const sigv4::sigv4_error& e) {
    return {request_action::signature_invalid, credential, signature_refusal(e.what()), 0};
  }
  if (auto resigner = aws_->body_resigner())
    rewriter_ = std::make_unique<aws_chunk_rewriter>(std::move(resigner), credential);
  return {};
}

request_plan credential_set::plan(const request_context& where, std::string_view method,
                                  std::string& target, std::vector<http::header_field>& headers,
                                  bool has_body) const {
  request_plan p;
  p.set_ = this;
  p.host_ = std::string(where.host);
  p.decision_ = apply(where, target, headers);
  if (p.decision_.refused()) return p;
  p.holds_real_ = p.decision_.swapped > 0;

  request_decision aws;
  p.aws_ = find_aws_request(where, target, headers, has_body, aws);
  if (aws.refused()) {
    if (aws.action == request_action::credential_not_bound)
      aws.action = request_action::scope_not_allowed;  // bound, but outside its allowlists
    else
      aws.where = signature_refusal(aws.where);
    p.decision_ = std::move(aws);
    return p;
  }
  if (p.aws_) {
    p.holds_real_ = true;
    p.decision_.credential = std::string(p.aws_->credential());
    if (p.aws_->needs_body()) p.whole_body_ = whole_body_need{max_signed_body, signed_body_why};
  } else if (p.decision_.swapped == 0) {
    p.decision_.credential.clear();
  }
  if (!p.aws_ && has_body && may_be_gcp_token_request(where.host, method)) {
    p.token_request_ = true;
    p.whole_body_ = whole_body_need{max_token_request, token_request_why};
  }
  return p;
}

}  // namespace broker::brokers
