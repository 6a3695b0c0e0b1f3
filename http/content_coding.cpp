#include "http/content_coding.hpp"

#include <utility>

#include "http/message.hpp"

namespace broker::http {

std::string_view name_of(content_coding c) {
  switch (c) {
    case content_coding::gzip:
      return "gzip";
    case content_coding::deflate:
      return "deflate";
    case content_coding::br:
      return "br";
    case content_coding::zstd:
      return "zstd";
  }
  return "?";
}

content_codings parse_content_codings(const std::vector<std::string_view>& elements) {
  static constexpr std::pair<std::string_view, content_coding> known[] = {
      {"gzip", content_coding::gzip},
      {"x-gzip", content_coding::gzip},
      {"deflate", content_coding::deflate},
      {"br", content_coding::br},
      {"zstd", content_coding::zstd}};
  content_codings out;
  bool aws_chunked = false;
  for (std::string_view element : elements) {
    if (iequals(element, "identity")) continue;
    // Amazon S3's streaming uploads: the payload framed in signed chunks, searched where it
    // stands (as an uncoded body is) while the AWS family re-signs the chunks. Under another
    // coding it would hide that coding's bytes from both.
    if (iequals(element, "aws-chunked")) {
      aws_chunked = true;
      continue;
    }
    bool found = false;
    for (const auto& [name, coding] : known) {
      if (!iequals(element, name)) continue;
      out.applied.push_back(coding);
      found = true;
      break;
    }
    if (!found) {
      out.unsupported = std::string(element);
      out.applied.clear();
      return out;
    }
  }
  if (aws_chunked && !out.applied.empty()) {
    out.unsupported = "aws-chunked";
    out.applied.clear();
  }
  if (out.applied.size() > max_codings) {
    out.unsupported = std::to_string(out.applied.size()) + " codings in a row";
    out.applied.clear();
  }
  return out;
}

}  // namespace broker::http
