// What an AWS request does, as IAM names it, for a credential's "s3" and "actions" scope
// (docs/policy.md, "Least privilege"): read from the request the signature covers (its method,
// host, target, headers and, for the JSON and query protocols, its body).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/scope.hpp"
#include "http/message.hpp"

namespace broker::brokers {

struct aws_call {
  // "service:Action" as IAM spells it ("s3:GetObject", "dynamodb:GetItem"); "" when the broker
  // cannot tell which action the request is (a REST API other than S3's, an S3 operation it
  // does not know).
  std::string action;
  // S3 only (signing service "s3"): the bucket ("" for the account's bucket list) and, for an
  // operation on an object, its key (decoded).
  bool s3 = false;
  std::string bucket;
  std::optional<std::string> key;
  // A listing (ListObjects, ListObjectVersions, ListMultipartUploads): its "prefix" parameter.
  bool listing = false;
  std::string list_prefix;
  // Bucket metadata every client reads (GetBucketLocation, HeadBucket).
  bool bucket_metadata = false;
  // x-amz-copy-source: the object a copy reads (bucket, key).
  std::optional<std::pair<std::string, std::string>> copy_source;
  // A multi-object delete: its keys are in the body.
  bool keys_in_body = false;
};

// `service` is the signing scope's; `body` the whole body when it was read, else empty.
aws_call aws_call_of(std::string_view service, std::string_view host, std::string_view method,
                     std::string_view target, const std::vector<http::header_field>& headers,
                     std::string_view body);

// The call against "s3" and "actions" (other keys are judged on the head: brokers/scope.hpp).
scope_verdict judge_aws_scope(const config::credential_scope& scope, const aws_call& call);

// Whether a request of this signing service must be read whole for the scope to name its
// action: the JSON and query protocols name it in the body.
bool aws_scope_reads_body(const config::credential_scope& scope, std::string_view service);

}  // namespace broker::brokers
