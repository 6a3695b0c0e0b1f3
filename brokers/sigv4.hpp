// AWS Signature Version 4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html):
// the pieces the aws-sigv4 family needs to check a request signed with a session's dummy secret
// and sign it again with the real one. Pure functions over request text; no I/O. Secret bytes
// only pass through (signing_key wipes the intermediates of its derivation, and itself).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace broker::brokers::sigv4 {

inline constexpr std::string_view algorithm = "AWS4-HMAC-SHA256";
// x-amz-content-sha256 values that are not a hex digest of the body.
inline constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view streaming_signed = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view streaming_signed_trailer =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view streaming_unsigned_trailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

// A request that does not follow SigV4 (malformed Authorization, bad chunk framing) or whose
// signature does not verify. The message names what is wrong, never a key or a signature.
class sigv4_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// YYYYMMDDTHHMMSSZ, the form of X-Amz-Date.
bool is_amz_date(std::string_view s);

// The credential scope: "20150830/us-east-1/iam/aws4_request".
struct credential_scope {
  std::string date;  // YYYYMMDD
  std::string region;
  std::string service;
  std::string text() const;  // date/region/service/aws4_request
};

// "Credential=AKID/20150830/us-east-1/iam/aws4_request" split; nullopt unless it has exactly
// five '/'-separated parts ending in aws4_request, an 8-digit date and non-empty other parts.
struct credential_field {
  std::string access_key_id;
  credential_scope scope;
};
std::optional<credential_field> parse_credential(std::string_view text);

// The header form: "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=a;b;c, Signature=<64 hex>".
// Components may come in any order, separated by ',' with optional spaces. nullopt when the
// value is not AWS4-HMAC-SHA256 or any component is missing or malformed (SignedHeaders must be
// lower-case and sorted; Signature 64 lower-case hex digits).
struct authorization {
  credential_field credential;
  std::vector<std::string> signed_headers;
  std::string signature;
};
std::optional<authorization> parse_authorization(std::string_view value);
// The value in the canonical order: "AWS4-HMAC-SHA256 Credential=K/S, SignedHeaders=a;b,
// Signature=hex" (what botocore and the AWS CLI send).
std::string format_authorization(const authorization& a);

// The presigned-query form: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-SignedHeaders,
// X-Amz-Signature (and X-Amz-Expires, X-Amz-Security-Token, which are ordinary signed query
// parameters). nullopt when X-Amz-Algorithm is absent; throws sigv4_error when it is present but
// another of the required ones is missing or malformed. Values are percent-decoded.
struct presigned_query {
  credential_field credential;
  std::string amz_date;  // YYYYMMDDTHHMMSSZ
  std::vector<std::string> signed_headers;
  std::string signature;
};
std::optional<presigned_query> parse_presigned(std::string_view target);

// The canonical request (Task 1 of the signing process):
//   METHOD \n canonical URI \n canonical query \n canonical headers \n signed headers \n payload
// - canonical URI: for service "s3" the path exactly as sent (already URI-encoded once); for every
//   other service the path with "." and ".." segments removed and runs of '/' collapsed to one (as
//   botocore and the AWS test suite's get-slashes case do), then URI-encoded a second time ('/'
//   kept), as AWS expects. Empty path = "/". An absolute-form target ("https://host/p?q") is
//   reduced to its path and query first.
// - canonical query: parameters percent-decoded, then each name and value encoded (RFC 3986
//   unreserved kept), sorted by name then value; a parameter without '=' has an empty value. With
//   `presigned`, X-Amz-Signature is left out.
// - canonical headers: each signed header (lower-case name) with its values trimmed, inner runs
//   of spaces collapsed to one, several fields of one name joined with ','. A signed header that
//   is absent throws sigv4_error.
std::string canonical_request(std::string_view method, std::string_view target,
                              const std::vector<http::header_field>& headers,
                              const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, std::string_view service,
                              bool presigned);

// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256 of canonical request>"
std::string string_to_sign(std::string_view amz_date, const credential_scope& scope,
                           std::string_view canonical);

// kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
// Zeroed when destroyed.
class signing_key {
 public:
  signing_key(std::string_view secret_access_key, const credential_scope& scope);
  ~signing_key();
  signing_key(const signing_key&) = delete;
  signing_key& operator=(const signing_key&) = delete;
  // Lower-case hex HMAC-SHA256 of `text` under this key.
  std::string sign(std::string_view text) const;

 private:
  std::array<unsigned char, 32> key_{};
};

inline constexpr std::string_view empty_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class sha256_stream {  // incremental sha256_hex
 public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;
  void update(std::string_view data);
  std::string hex_digest();  // ends the stream

 private:
  void* ctx_;  // EVP_MD_CTX
};

// Constant-time comparison of two signatures (hex text).
bool signatures_equal(std::string_view a, std::string_view b);

// aws-chunked (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html), fed the
// request body after its HTTP framing is removed:
//   hex-size;chunk-signature=<64 hex>\r\n <data> \r\n ... 0;chunk-signature=<64 hex>\r\n
//   [trailer lines "name:value\r\n" ... "x-amz-trailer-signature:<64 hex>\r\n"] \r\n
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER bodies carry no signatures and need no rewriting.)
// Each chunk signature is checked against the chain that starts at the dummy-signed seed
// signature and replaced with the one the real key gives, chained from the real seed; trailer
// signatures likewise (signed-trailer mode). Signatures keep their length, so the body's length
// and framing do not change. A chunk's data is held until it is complete (it is hashed before its
// signature can be checked), so a chunk longer than `max_chunk` throws sigv4_error, as does any
// framing error or a signature that does not verify; nothing of a chunk is released before it
// has verified.
class chunk_resigner {
 public:
  struct keys {
    const signing_key* dummy;  // checks what the client sent
    const signing_key* real;   // signs what goes upstream
    std::string amz_date;
    credential_scope scope;
    std::string dummy_seed;  // the request's signature as the client sent it
    std::string real_seed;   // the re-signed request's signature
    bool signed_trailer = false;
  };
  explicit chunk_resigner(keys k, std::size_t max_chunk = 16 * 1024 * 1024);

  // Consumes `in`; appends what may go upstream to `out`. Throws sigv4_error.
  void feed(std::string_view in, std::string& out);
  // At the end of the body: throws sigv4_error unless the final chunk (and trailer) was complete.
  void finish() const;
  bool complete() const;

 private:
  // One step of the framing each; they consume from `in` and release verified bytes to `out`.
  void read_header(std::string_view& in, std::string& out);
  void read_data(std::string_view& in);
  void read_data_crlf(std::string_view& in, std::string& out);
  void read_trailer(std::string_view& in, std::string& out);
  bool take_line(std::string_view& in, std::size_t limit);
  void release_chunk(std::string& out);
  std::string advance_chain(std::string_view kind, std::string_view hashes, std::string_view sent);

  keys keys_;
  std::size_t max_chunk_;
  std::string dummy_prev_, real_prev_;
  std::string pending_;  // bytes of the current element not yet verified
  enum class state { header, data, data_crlf, trailer, done, failed } state_ = state::header;
  std::size_t chunk_size_ = 0;
  std::string chunk_signature_;
  std::size_t header_len_ = 0;     // length of the chunk header line at the front of pending_
  std::size_t line_start_ = 0;     // where the trailer line being read starts in pending_
  bool trailer_verified_ = false;  // the x-amz-trailer-signature line has been checked
};

}  // namespace broker::brokers::sigv4
