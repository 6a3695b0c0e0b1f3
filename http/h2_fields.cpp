#include "http/h2_fields.hpp"

#include <algorithm>
#include <cstdlib>

namespace broker::http {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

nghttp2_nv field(const std::string& name, const std::string& value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

bool connection_specific(const header_field& field) {
  if (iequals(field.name, "te")) return !iequals(field.value, "trailers");
  return iequals(field.name, "transfer-encoding") || is_hop_by_hop_field(field.name);
}

void take_content_length(message_head& head) {
  const auto* length = head.find("content-length");
  if (!length || length->empty()) return;
  char* end = nullptr;
  const auto n = std::strtoull(length->c_str(), &end, 10);
  if (end && *end == '\0') head.content_length = n;
}

header_block::header_block(const std::vector<header_field>& fields,
                           std::vector<std::pair<std::string, std::string>> pseudo_fields,
                           bool (*skip)(const header_field&))
    : pseudo(std::move(pseudo_fields)) {
  nv.reserve(pseudo.size() + fields.size());
  lowered.reserve(fields.size());  // never reallocated: nv points into it
  for (const auto& [name, value] : pseudo) nv.push_back(field(name, value));
  for (const auto& f : fields) {
    if (connection_specific(f) || (skip && skip(f))) continue;
    if (std::none_of(f.name.begin(), f.name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
      nv.push_back(field(f.name, f.value));
      continue;
    }
    lowered.push_back(lower(f.name));
    nv.push_back(field(lowered.back(), f.value));
  }
}

}  // namespace broker::http
