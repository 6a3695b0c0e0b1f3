// Shared by the SigV4 tests (sigv4_test.cpp) and the aws-chunked re-signer's tests
// (sigv4_chunked_test.cpp): the S3 documentation's example key, scope and chunked-upload request
// head, and the seed signature computed from them.
#pragma once

#include <string>
#include <vector>

#include "brokers/sigv4.hpp"
#include "http/message.hpp"

namespace broker::brokers::sigv4_test {

using http::header_field;

inline const std::string empty_hash(sigv4::empty_sha256);

// ---- AWS S3 documentation examples (AKIAIOSFODNN7EXAMPLE, 2013-05-24) ----------------------

inline const std::string docs_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
inline const sigv4::credential_scope docs_scope{"20130524", "us-east-1", "s3"};
inline const std::string docs_date = "20130524T000000Z";
// A different secret: the "real" key the broker re-signs with in these tests.
inline const std::string other_secret = "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY";
inline const std::string docs_chunked_seed =
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
inline const std::string docs_trailer_seed =
    "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";

// The request head of the chunked-upload example (PUT examplebucket/chunkObject.txt).
inline std::vector<header_field> docs_chunked_headers(bool trailer) {
  std::vector<header_field> h{
      {"Host", "s3.amazonaws.com"},
      {"x-amz-date", "20130524T000000Z"},
      {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
      {"x-amz-content-sha256",
       std::string(trailer ? sigv4::streaming_signed_trailer : sigv4::streaming_signed)},
      {"Content-Encoding", "aws-chunked"},
      {"x-amz-decoded-content-length", "66560"},
      {"Content-Length", "66824"}};
  if (trailer) h.push_back({"x-amz-trailer", "x-amz-checksum-crc32c"});
  return h;
}

inline const std::vector<std::string> docs_chunked_signed{
    "content-encoding",     "content-length", "host",
    "x-amz-content-sha256", "x-amz-date",     "x-amz-decoded-content-length",
    "x-amz-storage-class"};
inline const std::vector<std::string> docs_trailer_signed{"content-encoding",
                                                          "host",
                                                          "x-amz-content-sha256",
                                                          "x-amz-date",
                                                          "x-amz-decoded-content-length",
                                                          "x-amz-storage-class",
                                                          "x-amz-trailer"};

inline std::string seed_signature(const sigv4::signing_key& key, bool trailer) {
  std::string creq = sigv4::canonical_request(
      "PUT", "/examplebucket/chunkObject.txt", docs_chunked_headers(trailer),
      trailer ? docs_trailer_signed : docs_chunked_signed,
      trailer ? sigv4::streaming_signed_trailer : sigv4::streaming_signed, "s3", false);
  return key.sign(sigv4::string_to_sign(docs_date, docs_scope, creq));
}

}  // namespace broker::brokers::sigv4_test
