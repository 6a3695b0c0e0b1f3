// The content codings a request body may carry (RFC 9110 §8.4.1) that the broker can read: what
// a Content-Encoding list names, in the order the codings were applied.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace broker::http {

enum class content_coding {
  gzip,     // RFC 1952, one member or several in a row ("x-gzip" too)
  deflate,  // the zlib format (RFC 1950) around a deflate stream, as RFC 9110 §8.4.1.2 says
  br,       // Brotli, RFC 7932
  zstd,     // Zstandard, RFC 8878: frames in a row (skippable ones too), window up to 8 MiB
};

std::string_view name_of(content_coding c);

// Codings one body may list: each is a decoder (and its buffers) while the body streams.
inline constexpr std::size_t max_codings = 4;

struct content_codings {
  std::vector<content_coding> applied;  // first applied first: decoding goes from the back
  // What the broker cannot read: the first unknown element, or the list when it is longer than
  // max_codings; "" when it can read them all.
  std::string unsupported;
};

// The elements of every Content-Encoding field in order (message_head::list): "identity" is
// no coding at all and is dropped, and so is "aws-chunked" alone (S3's signed chunks, searched
// as they are); names compare case-insensitively.
content_codings parse_content_codings(const std::vector<std::string_view>& elements);

}  // namespace broker::http
