// AWS requests as IAM actions, S3 buckets and keys, for a credential's "s3" and "actions".
#include "brokers/aws_scope.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "config/policy.hpp"

using broker::brokers::aws_call;
using broker::brokers::aws_call_of;
using broker::brokers::judge_aws_scope;
using broker::config::credential_scope;
using broker::http::header_field;

namespace {

aws_call s3(std::string_view host, std::string_view method, std::string_view target,
            std::vector<header_field> headers = {}) {
  return aws_call_of("s3", host, method, target, headers, "");
}

credential_scope scope_of(const std::string& scope) {
  const std::string text =
      R"({"credentials": {"aws": {"type": "aws-sigv4", "hosts": ["*.amazonaws.com"], "scope": )" +
      scope + "}}}";
  return *broker::config::parse_policy(text, "p.json").credentials.at("aws").scope;
}

std::string refused_by(const credential_scope& s, const aws_call& c) {
  return judge_aws_scope(s, c).key;
}

}  // namespace

TEST_CASE("aws scope: S3 requests name their action, bucket and key", "[brokers][aws][scope]") {
  auto c = s3("b.s3.amazonaws.com", "GET", "/dir/some%20key.txt");
  CHECK(c.action == "s3:GetObject");
  CHECK(c.bucket == "b");
  CHECK(c.key == "dir/some key.txt");
  c = s3("s3.us-east-1.amazonaws.com", "PUT", "/b/k?x-id=PutObject");
  CHECK((c.action == "s3:PutObject" && c.bucket == "b" && c.key == "k"));
  c = s3("my.s3.bucket.s3.dualstack.eu-west-1.amazonaws.com", "DELETE", "/k");
  CHECK((c.action == "s3:DeleteObject" && c.bucket == "my.s3.bucket"));
  c = s3("s3-logs.s3-us-west-2.amazonaws.com", "GET", "/?list-type=2&prefix=p%2F");
  CHECK((c.action == "s3:ListBucket" && c.bucket == "s3-logs" && !c.key && c.listing));
  CHECK(c.list_prefix == "p/");
  CHECK(s3("s3.amazonaws.com", "GET", "/").action == "s3:ListAllMyBuckets");
  CHECK(s3("b.s3.amazonaws.com", "DELETE", "/").action == "s3:DeleteBucket");
  CHECK(s3("b.s3.amazonaws.com", "PUT", "/").action == "s3:CreateBucket");
  CHECK(s3("b.s3.amazonaws.com", "GET", "/?location").action == "s3:GetBucketLocation");
  CHECK(s3("b.s3.amazonaws.com", "PUT", "/?policy").action == "s3:PutBucketPolicy");
  CHECK(s3("b.s3.amazonaws.com", "POST", "/?delete").keys_in_body);
  CHECK(s3("b.s3.amazonaws.com", "POST", "/k?uploads").action == "s3:PutObject");
  CHECK(s3("b.s3.amazonaws.com", "PUT", "/k?partNumber=1&uploadId=u").action == "s3:PutObject");
  CHECK(s3("b.s3.amazonaws.com", "DELETE", "/k?uploadId=u").action == "s3:AbortMultipartUpload");
  CHECK(s3("b.s3.amazonaws.com", "GET", "/k?versionId=v").action == "s3:GetObjectVersion");
  CHECK(s3("b.s3.amazonaws.com", "PUT", "/k?tagging").action == "s3:PutObjectTagging");
  // Presigned: the X-Amz-* parameters change nothing.
  CHECK(s3("b.s3.amazonaws.com", "GET",
           "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=x&X-Amz-Signature=s")
            .action == "s3:GetObject");
  // What the broker does not know has no action.
  CHECK(s3("b.s3.amazonaws.com", "GET", "/k?unknown-sub").action.empty());
  CHECK(s3("b.s3.amazonaws.com", "GET", "/k?acl&tagging").action.empty());
  CHECK(s3("123.s3-control.us-east-1.amazonaws.com", "GET", "/v20180820/jobs").action.empty());
  // A copy reads its source.
  c = s3("b.s3.amazonaws.com", "PUT", "/dest", {{"x-amz-copy-source", "/src/a%2Fb?versionId=1"}});
  REQUIRE(c.copy_source);
  CHECK(c.copy_source->first == "src");
  CHECK(c.copy_source->second == "a/b");
}

TEST_CASE("aws scope: JSON and query protocol actions", "[brokers][aws][scope]") {
  std::vector<header_field> json{{"X-Amz-Target", "DynamoDB_20120810.DeleteTable"}};
  CHECK(
      aws_call_of("dynamodb", "dynamodb.us-east-1.amazonaws.com", "POST", "/", json, "{}").action ==
      "dynamodb:DeleteTable");
  CHECK(aws_call_of("sts", "sts.amazonaws.com", "POST", "/", {},
                    "Action=GetCallerIdentity&Version=2011-06-15")
            .action == "sts:GetCallerIdentity");
  CHECK(aws_call_of("monitoring", "monitoring.amazonaws.com", "GET",
                    "/?Action=PutMetricData&Version=2010-08-01", {}, "")
            .action == "cloudwatch:PutMetricData");
  // A REST API other than S3's: no action the broker can name.
  CHECK(aws_call_of("lambda", "lambda.us-east-1.amazonaws.com", "POST",
                    "/2015-03-31/functions/f/invocations", {}, "{}")
            .action.empty());
}

TEST_CASE("aws scope: s3 grants buckets and prefixes, actions names calls",
          "[brokers][aws][scope]") {
  const auto s = scope_of(R"({"s3": [{"bucket": "bkt", "prefix": "p/"}, {"bucket": "whole"}],
                              "actions": ["s3:GetObject", "s3:PutObject", "s3:List*"]})");
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/p/x")).empty());
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/q/x")) == "s3");
  CHECK(refused_by(s, s3("ckt.s3.amazonaws.com", "GET", "/p/x")) == "s3");
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/?list-type=2&prefix=p/a")).empty());
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/?list-type=2")) == "s3");
  CHECK(refused_by(s, s3("whole.s3.amazonaws.com", "GET", "/?list-type=2")).empty());
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/?location")) == "actions");
  CHECK(refused_by(s, s3("whole.s3.amazonaws.com", "DELETE", "/")) == "actions");
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "DELETE", "/p/x")) == "actions");
  CHECK(refused_by(s, s3("s3.amazonaws.com", "GET", "/")) == "s3");
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "GET", "/p/x?unknown")) == "s3");
  CHECK(refused_by(s, s3("bkt.s3.amazonaws.com", "PUT", "/p/copy",
                         {{"x-amz-copy-source", "bkt/other/secret"}})) == "s3");
  CHECK(refused_by(
            s, s3("bkt.s3.amazonaws.com", "PUT", "/p/copy", {{"x-amz-copy-source", "whole/any"}}))
            .empty());
  const auto whole_bucket_ops = scope_of(R"({"s3": [{"bucket": "bkt", "prefix": "p/"}]})");
  CHECK(refused_by(whole_bucket_ops, s3("bkt.s3.amazonaws.com", "DELETE", "/")) == "s3");
  CHECK(refused_by(whole_bucket_ops, s3("bkt.s3.amazonaws.com", "POST", "/?delete")) == "s3");
  CHECK(refused_by(whole_bucket_ops, s3("bkt.s3.amazonaws.com", "GET", "/?location")).empty());
  // "s3" is about S3 only; "actions" about every service.
  const auto sts =
      aws_call_of("sts", "sts.amazonaws.com", "POST", "/", {}, "Action=GetCallerIdentity");
  CHECK(refused_by(whole_bucket_ops, sts).empty());
  CHECK(refused_by(s, sts) == "actions");
  CHECK(refused_by(s, aws_call_of("lambda", "lambda.us-east-1.amazonaws.com", "POST",
                                  "/2015-03-31/functions/f/invocations", {}, "")) == "actions");
}
