// The aws-sigv4 family's work on a request an SDK signed with the session's dummy credentials:
// the signature checked with the dummy secret, the session token swapped, the request signed
// again with the real credentials. Two requests as the AWS CLI sends them: an S3 GetObject (the
// payload hash stated in x-amz-content-sha256) and an STS GetCallerIdentity POST (the form body
// hashed, its Action checked). Measured twice: through the default policy's credential set, as
// http_exchange::forward runs it (plan: the head searched, the AWS step claimed; complete:
// verify and re-sign), and the signing step alone (find_aws_request + resign).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "base/digest.hpp"
#include "base/secret.hpp"
#include "bench/micro/fake_session.hpp"
#include "brokers/aws_signing.hpp"
#include "brokers/credential_set.hpp"
#include "brokers/sigv4.hpp"

namespace {

using namespace broker;
namespace sigv4 = brokers::sigv4;

constexpr std::string_view amz_date = "20261201T234012Z";

struct aws_request {
  std::string host;
  std::string method;
  std::string target;
  std::vector<http::header_field> headers;
  std::string body;
};

struct client_credentials {
  std::string key_id, secret_key, token;
};

// What botocore does with the credentials the child holds: the canonical request signed with a
// key derived from them, into an Authorization header.
void sdk_sign(aws_request& r, const client_credentials& c, const sigv4::credential_scope& scope,
              const std::vector<std::string>& signed_headers, std::string_view payload_hash) {
  const sigv4::signing_key key(c.secret_key, scope);
  const std::string canonical = sigv4::canonical_request(
      r.method, r.target, r.headers, signed_headers, payload_hash, scope.service, false);
  sigv4::authorization a{{c.key_id, scope},
                         signed_headers,
                         key.sign(sigv4::string_to_sign(amz_date, scope, canonical))};
  r.headers.push_back({"Authorization", sigv4::format_authorization(a)});
}

aws_request s3_get_object(const client_credentials& c) {
  aws_request r{"example-bucket.s3.us-east-1.amazonaws.com",
                "GET",
                "/reports/2026/q4/summary.csv",
                {{"Host", "example-bucket.s3.us-east-1.amazonaws.com"},
                 {"Accept-Encoding", "identity"},
                 {"User-Agent",
                  "aws-cli/2.15.0 Python/3.11.6 Linux/6.1.0 exe/x86_64.debian.12 prompt/off "
                  "command/s3.cp"},
                 {"X-Amz-Date", std::string(amz_date)},
                 {"X-Amz-Content-SHA256", std::string(sigv4::empty_sha256)},
                 {"X-Amz-Security-Token", c.token},
                 {"amz-sdk-invocation-id", "5a1c7e1e-3b8e-4f63-9b8a-0c5f3e2d1a9b"},
                 {"amz-sdk-request", "attempt=1"}},
                {}};
  sdk_sign(r, c, {"20261201", "us-east-1", "s3"},
           {"amz-sdk-invocation-id", "amz-sdk-request", "host", "x-amz-content-sha256",
            "x-amz-date", "x-amz-security-token"},
           sigv4::empty_sha256);
  return r;
}

aws_request sts_get_caller_identity(const client_credentials& c) {
  const std::string body = "Action=GetCallerIdentity&Version=2011-06-15";
  aws_request r{"sts.us-east-1.amazonaws.com",
                "POST",
                "/",
                {{"Host", "sts.us-east-1.amazonaws.com"},
                 {"Accept-Encoding", "identity"},
                 {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                 {"User-Agent",
                  "aws-cli/2.15.0 Python/3.11.6 Linux/6.1.0 exe/x86_64.debian.12 prompt/off "
                  "command/sts.get-caller-identity"},
                 {"X-Amz-Date", std::string(amz_date)},
                 {"X-Amz-Security-Token", c.token},
                 {"Content-Length", std::to_string(body.size())}},
                body};
  sdk_sign(r, c, {"20261201", "us-east-1", "sts"},
           {"content-type", "host", "x-amz-date", "x-amz-security-token"}, base::sha256_hex(body));
  return r;
}

// ---- Through the credential set, as the proxy runs it --------------------------------------

client_credentials session_dummies(const brokers::credential_set& set) {
  return {bench::dummy_in(set, "AWS_ACCESS_KEY_ID"), bench::dummy_in(set, "AWS_SECRET_ACCESS_KEY"),
          bench::dummy_in(set, "AWS_SESSION_TOKEN")};
}

void run_plan(benchmark::State& state, const aws_request& r) {
  const auto& set = bench::default_credentials();
  const brokers::request_context where{r.host, false, false};
  const bool has_body = !r.body.empty();
  bool resigned = false;
  for (auto _ : state) {
    std::string target = r.target;
    std::vector<http::header_field> headers = r.headers;
    std::string body = r.body;  // read whole when the plan asks (whole_body())
    auto plan = set.plan(where, r.method, target, headers, has_body);
    const auto completed = plan.complete(r.method, target, headers, body);
    benchmark::DoNotOptimize(headers.data());
    resigned = !plan.decision().refused() && !completed.refused() && plan.credential() == "aws" &&
               headers.back().value != r.headers.back().value;
    for (auto& h : headers) base::wipe(h.value);
    base::wipe(target);
    if (!resigned) break;
  }
  if (!resigned) state.SkipWithError("the request was not re-signed");
  state.SetItemsProcessed(state.iterations());
}

void BM_sigv4_plan_s3_get_object(benchmark::State& state) {
  run_plan(state, s3_get_object(session_dummies(bench::default_credentials())));
}
void BM_sigv4_plan_sts_post(benchmark::State& state) {
  run_plan(state, sts_get_caller_identity(session_dummies(bench::default_credentials())));
}

// ---- The signing step alone, over one identity ---------------------------------------------

// Fake credentials of the real shapes; the dummies have their real's length, as a session's do.
const client_credentials step_dummies{
    "ASIAQX3DUMMY4KEY9ZZT", "qR7tDummyS3cretK3yV4lueXq/Pz+Lm0Nn1Oo2Pp",
    "IQoJb3JpZ2luX2VjEDummy0Session0Token0123456789abcdefghijklmnopqrstuvwxyz+/ABCDEFGHIJKLMNOPQ"
    "RSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz=="};

const brokers::aws_credentials& step_reals() {
  static const brokers::aws_credentials c = [] {
    brokers::aws_credentials r;
    r.access_key_id = base::secret(std::string("ASIAIOSFODNN7EXAMPLE"));
    r.secret_access_key = base::secret(std::string("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"));
    r.session_token = base::secret(std::string(
        "IQoJb3JpZ2luX2VjEReal00Session0Token0123456789abcdefghijklmnopqrstuvwxyz+/ABCDEFGHIJKLMNO"
        "PQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz=="));
    return r;
  }();
  return c;
}

void run_resign(benchmark::State& state, const aws_request& r) {
  static const std::vector<std::string> any;  // allowlists: any region, any service
  const brokers::aws_identity id{
      "aws", step_dummies.key_id, step_dummies.secret_key, step_dummies.token, &step_reals(), &any,
      &any};
  const bool has_body = !r.body.empty();
  bool resigned = false;
  for (auto _ : state) {
    std::string target = r.target;
    std::vector<http::header_field> headers = r.headers;
    auto request = brokers::find_aws_request({&id}, target, headers, has_body);
    if (!request) break;
    if (!request->action_refusal(target, r.body).empty()) break;
    request->resign(r.method, target, headers, r.body);
    benchmark::DoNotOptimize(headers.data());
    resigned = headers.back().value != r.headers.back().value;
    for (auto& h : headers) base::wipe(h.value);
    base::wipe(target);
  }
  if (!resigned) state.SkipWithError("the request was not re-signed");
  state.SetItemsProcessed(state.iterations());
}

void BM_sigv4_resign_s3_get_object(benchmark::State& state) {
  run_resign(state, s3_get_object(step_dummies));
}
void BM_sigv4_resign_sts_post(benchmark::State& state) {
  run_resign(state, sts_get_caller_identity(step_dummies));
}

BENCHMARK(BM_sigv4_plan_s3_get_object);
BENCHMARK(BM_sigv4_plan_sts_post);
BENCHMARK(BM_sigv4_resign_s3_get_object);
BENCHMARK(BM_sigv4_resign_sts_post);

}  // namespace
