// A request body's content codings undone as it streams (docs/security-model.md), so that the
// checks read what the codings hide. The decoded bytes are handed out in pieces as they come, never
// held whole, and bounded: by their size and by how far they outgrow the coded bytes (a
// decompression bomb). Which coded bytes everything decoded so far came from is tracked
// (settled()), so a caller can hold coded bytes back until what they decode to was searched.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/content_coding.hpp"

namespace broker::http {

struct decode_limits {
  std::size_t max_decoded = 0;  // bytes any coding's decoder may produce in all
  std::size_t ratio_free = 0;   // bytes a decoder may produce before the ratio applies
  std::size_t max_ratio = 0;    // then: at most this many per coded byte consumed
};

enum class decode_status { ok, too_large, corrupt };

class coding_stage;

class content_decoder {
 public:
  using sink = std::function<void(std::string_view decoded)>;

  // `applied` as parse_content_codings gives it (at most max_codings, at least one).
  content_decoder(const std::vector<content_coding>& applied, decode_limits limits);
  ~content_decoder();
  content_decoder(const content_decoder&) = delete;
  content_decoder& operator=(const content_decoder&) = delete;

  // Decodes the next coded bytes, handing what they decode to to `out` in pieces. After a
  // failure every call returns it again and decodes nothing.
  decode_status feed(std::string_view coded, const sink& out);
  // The body ended: corrupt when a coding's stream is cut short (no bytes at all is an empty
  // body, not a cut one).
  decode_status finish();

  // A point up to which decoding is complete: the first `coded` bytes fed have produced all
  // they ever will, and that was the first `decoded` bytes handed out. Moves at the end of
  // each unit of a coding's format that came whole (a zstd block; any input for zlib and
  // brotli, which decode as the bytes arrive), never past bytes a library still holds.
  struct checkpoint {
    std::size_t coded = 0;
    std::size_t decoded = 0;
  };
  checkpoint settled() const { return settled_; }
  std::size_t decoded_bytes() const { return decoded_; }
  // Why the last failure happened, for a refusal's message.
  const std::string& error() const { return error_; }

 private:
  struct slot;
  decode_status pump(std::size_t k, std::string_view in, const sink& out);
  bool all_at_boundary() const;
  decode_status fail(decode_status status, std::string why);

  std::vector<slot> slots_;  // in decoding order: the last coding applied first
  decode_limits limits_;
  std::size_t consumed_ = 0;  // coded bytes the first decoder has taken
  std::size_t decoded_ = 0;   // bytes handed out
  checkpoint settled_;
  decode_status status_ = decode_status::ok;
  std::string error_;
};

}  // namespace broker::http
