// AWS requests as IAM actions, S3 buckets and keys (brokers/aws_scope.hpp).
#include "brokers/aws_scope.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "base/text.hpp"

namespace broker::brokers {
namespace {

using params = std::vector<std::pair<std::string, std::string>>;

params query_params(std::string_view target) {
  params out;
  const auto question = target.find('?');
  if (question == std::string_view::npos) return out;
  std::string_view q = target.substr(question + 1);
  while (!q.empty()) {
    const auto amp = q.find('&');
    const std::string_view item = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    out.emplace_back(base::percent_decode(item.substr(0, eq)),
                     eq == std::string_view::npos ? "" : base::percent_decode(item.substr(eq + 1)));
  }
  return out;
}

const std::string* param(const params& p, std::string_view name) {
  for (const auto& [k, v] : p)
    if (k == name) return &v;
  return nullptr;
}

const http::header_field* header(const std::vector<http::header_field>& headers,
                                 std::string_view name) {
  for (const auto& h : headers)
    if (base::lower(h.name) == name) return &h;
  return nullptr;
}

// IAM's service prefix for a signing name where the two differ.
std::string iam_prefix(std::string_view service) {
  if (service == "monitoring") return "cloudwatch";
  if (service == "email") return "ses";
  return std::string(service);
}

// S3's endpoint label in a host: "s3", "s3-REGION", "s3-fips", "s3-accelerate"...; the
// control and object-lambda APIs are other APIs.
bool is_s3_label(std::string_view label) {
  return label == "s3" || (label.starts_with("s3-") && label != "s3-control" &&
                           label != "s3-object-lambda" && !label.starts_with("s3-outposts"));
}

// The bucket named by a virtual-hosted-style host ("b.s3.us-east-1.amazonaws.com"), or "" for a
// path-style one ("s3.us-east-1.amazonaws.com"); nullopt for a host that is neither.
std::optional<std::string> host_bucket(std::string_view host) {
  for (std::string_view suffix : {".amazonaws.com", ".amazonaws.com.cn"}) {
    if (!host.ends_with(suffix)) continue;
    const std::string_view name = host.substr(0, host.size() - suffix.size());
    std::vector<std::string_view> labels;
    for (std::size_t at = 0; at <= name.size();) {
      const auto dot = name.find('.', at);
      labels.push_back(
          name.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at));
      if (dot == std::string_view::npos) break;
      at = dot + 1;
    }
    // The rightmost S3 label: what is left of it is the bucket (which may hold dots).
    for (std::size_t i = labels.size(); i-- > 0;) {
      if (!is_s3_label(labels[i])) continue;
      std::string bucket;
      for (std::size_t j = 0; j < i; ++j) bucket += (j ? "." : "") + std::string(labels[j]);
      return bucket;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// The query parameters that do not change which S3 operation a request is.
bool is_plain_s3_param(std::string_view name) {
  static constexpr std::array<std::string_view, 20> plain{
      "prefix",      "delimiter",          "max-keys",         "continuation-token",
      "start-after", "encoding-type",      "fetch-owner",      "marker",
      "key-marker",  "version-id-marker",  "upload-id-marker", "max-uploads",
      "max-parts",   "part-number-marker", "list-type",        "x-id",
      "partNumber",  "uploadId",           "versionId",        "optional-object-attributes"};
  if (base::lower(name).starts_with("x-amz-") || name.starts_with("response-")) return true;
  return std::find(plain.begin(), plain.end(), name) != plain.end();
}

// Bucket subresources: method → action.
struct subresource {
  std::string_view name;
  std::string_view get, put, del;
};
constexpr std::array<subresource, 13> bucket_subresources{{
    {"acl", "GetBucketAcl", "PutBucketAcl", ""},
    {"policy", "GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"},
    {"tagging", "GetBucketTagging", "PutBucketTagging", "PutBucketTagging"},
    {"versioning", "GetBucketVersioning", "PutBucketVersioning", ""},
    {"cors", "GetBucketCORS", "PutBucketCORS", "PutBucketCORS"},
    {"lifecycle", "GetLifecycleConfiguration", "PutLifecycleConfiguration",
     "PutLifecycleConfiguration"},
    {"encryption", "GetEncryptionConfiguration", "PutEncryptionConfiguration",
     "PutEncryptionConfiguration"},
    {"website", "GetBucketWebsite", "PutBucketWebsite", "DeleteBucketWebsite"},
    {"notification", "GetBucketNotification", "PutBucketNotification", ""},
    {"logging", "GetBucketLogging", "PutBucketLogging", ""},
    {"publicAccessBlock", "GetBucketPublicAccessBlock", "PutBucketPublicAccessBlock",
     "PutBucketPublicAccessBlock"},
    {"ownershipControls", "GetBucketOwnershipControls", "PutBucketOwnershipControls",
     "PutBucketOwnershipControls"},
    {"replication", "GetReplicationConfiguration", "PutReplicationConfiguration",
     "PutReplicationConfiguration"},
}};
constexpr std::array<subresource, 6> object_subresources{{
    {"acl", "GetObjectAcl", "PutObjectAcl", ""},
    {"tagging", "GetObjectTagging", "PutObjectTagging", "DeleteObjectTagging"},
    {"retention", "GetObjectRetention", "PutObjectRetention", ""},
    {"legal-hold", "GetObjectLegalHold", "PutObjectLegalHold", ""},
    {"attributes", "GetObjectAttributes", "", ""},
    {"torrent", "GetObjectTorrent", "", ""},
}};

// The action of subresource `sub` in `list` for `method`, or "".
template <std::size_t N>
std::string subresource_action(const std::array<subresource, N>& list, std::string_view sub,
                               std::string_view method) {
  for (const subresource& s : list) {
    if (s.name != sub) continue;
    if (method == "GET") return std::string(s.get);
    if (method == "PUT") return std::string(s.put);
    if (method == "DELETE") return std::string(s.del);
  }
  return "";
}

// The S3 operation's action name (without "s3:"), or "" when it is not one the broker knows.
std::string s3_action(const aws_call& c, std::string_view method, const params& p) {
  // The one subresource the request names, if any; an unknown parameter makes it unknown.
  std::string sub;
  for (const auto& [name, value] : p) {
    if (is_plain_s3_param(name)) continue;
    if (!sub.empty()) return "";
    sub = name;
  }
  const bool has_upload = param(p, "uploadId") != nullptr;
  const bool has_version = param(p, "versionId") != nullptr;
  if (c.bucket.empty()) return method == "GET" && sub.empty() ? "ListAllMyBuckets" : "";
  if (!c.key) {  // the bucket
    if (sub.empty()) {
      if (method == "GET" || method == "HEAD") return "ListBucket";  // HEAD: HeadBucket
      if (method == "PUT") return "CreateBucket";
      if (method == "DELETE") return "DeleteBucket";
      return "";
    }
    if (method == "GET" && sub == "versions") return "ListBucketVersions";
    if (method == "GET" && sub == "uploads") return "ListBucketMultipartUploads";
    if (method == "GET" && sub == "location") return "GetBucketLocation";
    if (method == "POST" && sub == "delete") return "DeleteObject";
    return subresource_action(bucket_subresources, sub, method);
  }
  // An object.
  if (sub.empty()) {
    if (method == "GET" || method == "HEAD") {
      if (has_upload) return method == "GET" ? "ListMultipartUploadParts" : "";
      return has_version ? "GetObjectVersion" : "GetObject";
    }
    if (method == "PUT") return "PutObject";  // also UploadPart (partNumber, uploadId)
    if (method == "POST" && has_upload) return "PutObject";  // CompleteMultipartUpload
    if (method == "DELETE") {
      if (has_upload) return "AbortMultipartUpload";
      return has_version ? "DeleteObjectVersion" : "DeleteObject";
    }
    return "";
  }
  if (method == "POST" && sub == "uploads") return "PutObject";  // CreateMultipartUpload
  if (method == "POST" && sub == "restore") return "RestoreObject";
  if (method == "POST" && sub == "select") return "GetObject";
  return subresource_action(object_subresources, sub, method);
}

void read_s3(aws_call& c, std::string_view host, std::string_view method, std::string_view target,
             const std::vector<http::header_field>& headers) {
  c.s3 = true;
  const auto question = target.find('?');
  const std::string path = base::percent_decode(target.substr(0, question));
  const params p = query_params(target);
  std::string_view rest = path;
  if (!rest.starts_with('/')) return;  // not origin form: no action
  rest.remove_prefix(1);
  const std::optional<std::string> virtual_bucket = host_bucket(host);
  if (!virtual_bucket) return;
  if (!virtual_bucket->empty()) {
    c.bucket = *virtual_bucket;
  } else {
    const auto slash = rest.find('/');
    c.bucket = std::string(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  if (!rest.empty()) c.key = std::string(rest);
  std::string action = s3_action(c, method, p);
  if (action.empty()) return;
  c.action = "s3:" + action;
  c.listing = action == "ListBucket" || action == "ListBucketVersions" ||
              action == "ListBucketMultipartUploads";
  if (c.listing)
    if (const std::string* prefix = param(p, "prefix")) c.list_prefix = *prefix;
  c.bucket_metadata = action == "GetBucketLocation" || (action == "ListBucket" && method == "HEAD");
  c.keys_in_body = method == "POST" && !c.key && action == "DeleteObject";
  if (const auto* copy = header(headers, "x-amz-copy-source")) {
    std::string source = base::percent_decode(copy->value.substr(0, copy->value.find('?')));
    if (source.starts_with('/')) source.erase(0, 1);
    const auto slash = source.find('/');
    c.copy_source = {source.substr(0, slash),
                     slash == std::string::npos ? std::string() : source.substr(slash + 1)};
  }
}

bool action_listed(const std::vector<std::string>& actions, std::string_view action) {
  const std::string a = base::lower(action);
  return std::any_of(actions.begin(), actions.end(), [&](const std::string& pattern) {
    if (pattern.ends_with('*'))
      return a.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1));
    return a == pattern;
  });
}

// The grant that lets `key` of `bucket` through, if any.
bool object_granted(const std::vector<config::s3_grant>& grants, std::string_view bucket,
                    std::string_view key) {
  return std::any_of(grants.begin(), grants.end(), [&](const config::s3_grant& g) {
    return g.bucket == bucket && key.starts_with(g.prefix);
  });
}

scope_verdict judge_s3(const std::vector<config::s3_grant>& grants, const aws_call& c) {
  if (c.action.empty())
    return scope_refusal("s3", "the broker cannot tell which S3 operation this is");
  if (c.bucket.empty()) return scope_refusal("s3", c.action + " is about no bucket of the scope");
  const bool bucket_granted = std::any_of(grants.begin(), grants.end(),
                                          [&](const auto& g) { return g.bucket == c.bucket; });
  if (!bucket_granted) return scope_refusal("s3", "bucket " + c.bucket + " is not in the scope");
  if (c.key) {
    if (!object_granted(grants, c.bucket, *c.key))
      return scope_refusal("s3", "the key is outside the scope's prefixes in bucket " + c.bucket);
  } else if (c.listing) {
    if (!object_granted(grants, c.bucket, c.list_prefix))
      return scope_refusal("s3", "a listing of bucket " + c.bucket +
                                     " must name a prefix inside the scope (\"prefix\" parameter)");
  } else if (c.keys_in_body) {
    if (!object_granted(grants, c.bucket, ""))
      return scope_refusal("s3",
                           "a multi-object delete names its keys in the body: the scope grants "
                           "it only on a whole bucket");
  } else if (!c.bucket_metadata && !object_granted(grants, c.bucket, "")) {
    return scope_refusal("s3", c.action + " acts on the whole bucket " + c.bucket +
                                   ", which the scope grants only by prefix");
  }
  if (c.copy_source && !object_granted(grants, c.copy_source->first, c.copy_source->second))
    return scope_refusal("s3", "the copy source is outside the scope");
  return {};
}

}  // namespace

aws_call aws_call_of(std::string_view service, std::string_view host, std::string_view method,
                     std::string_view target, const std::vector<http::header_field>& headers,
                     std::string_view body) {
  aws_call c;
  if (service == "s3") {
    read_s3(c, host, method, target, headers);
    return c;
  }
  // The JSON protocol: X-Amz-Target "Prefix_Version.Operation".
  if (const auto* t = header(headers, "x-amz-target")) {
    const auto dot = t->value.rfind('.');
    if (dot != std::string::npos && dot + 1 < t->value.size())
      c.action = iam_prefix(service) + ":" + t->value.substr(dot + 1);
    return c;
  }
  // The query protocol: Action in the query, or in a form body.
  std::string action;
  if (const auto question = target.find('?'); question != std::string_view::npos)
    action = base::form_value(target.substr(question + 1), "Action");
  if (action.empty()) action = base::form_value(body, "Action");
  if (!action.empty()) c.action = iam_prefix(service) + ":" + action;
  return c;
}

scope_verdict judge_aws_scope(const config::credential_scope& scope, const aws_call& call) {
  if (scope.s3 && call.s3)
    if (scope_verdict v = judge_s3(*scope.s3, call); v.refused()) return v;
  if (scope.actions) {
    if (call.action.empty())
      return scope_refusal("actions",
                           "the broker cannot tell which action this request is, and the "
                           "scope's \"actions\" lets through only what it names");
    if (!action_listed(*scope.actions, call.action))
      return scope_refusal("actions", call.action + " is not among the scope's actions");
  }
  return {};
}

bool aws_scope_reads_body(const config::credential_scope& scope, std::string_view service) {
  return scope.actions && service != "s3";
}

}  // namespace broker::brokers
