// A coded request body searched through its decoding (docs/security-model.md): what its
// Content-Encoding hides goes through the request's stream scrubber, while what goes on is the
// coded bytes as the client sent them. A coded byte is released only once everything decoded from
// it has been searched and passed, so a value found in the decoded text never has a coded byte of
// it sent before the refusal (a zstd block is searched whole before any byte of it goes).
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "brokers/scrubber.hpp"
#include "http/content_decoder.hpp"

namespace broker::brokers {

class coded_body_scan {
 public:
  enum class verdict {
    pass,        // so far so good
    match,       // `pattern` was found in the decoded body
    too_large,   // past a decode limit (size, ratio)
    corrupt,     // not data of its coding, or cut short
    withholding  // more than max_withheld coded bytes wait on one unit of a coding's format
  };
  struct outcome {
    verdict what = verdict::pass;
    std::size_t pattern = 0;  // verdict::match: the scrubber's pattern index
    std::string why;          // other failures: a sentence for the refusal
  };

  // `scan` searches the decoded bytes; it outlives this.
  coded_body_scan(const std::vector<http::content_coding>& applied, http::decode_limits limits,
                  std::size_t max_withheld, stream_scrubber& scan);
  ~coded_body_scan();  // wipes what is withheld: it may hold a value in a coding's raw form
  coded_body_scan(const coded_body_scan&) = delete;
  coded_body_scan& operator=(const coded_body_scan&) = delete;

  // Takes the next coded bytes; appends to `release` the coded bytes that may go on now.
  outcome feed(std::string_view coded, std::string& release);
  // The body ended: the rest is searched and, if it passes, released.
  outcome finish(std::string& release);

  std::size_t withheld() const { return withheld_.size(); }

 private:
  outcome failure(http::decode_status status) const;
  void release_searched(std::string& release);

  http::content_decoder decoder_;
  stream_scrubber& scan_;
  std::size_t max_withheld_;
  std::string withheld_;      // coded bytes taken and not released yet
  std::size_t released_ = 0;  // coded bytes released so far
  // Decoder checkpoints not yet reached by the search, oldest first.
  std::deque<http::content_decoder::checkpoint> pending_;
  std::string passed_;  // what the scrubber lets through: not sent, only counted
};

}  // namespace broker::brokers
