// Percent-encoding and form parameters, for queries, form bodies and SigV4's canonical forms.
#include "brokers/text.hpp"

namespace broker::brokers {

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    int hi = -1, lo = -1;
    if (text[i] == '%' && i + 2 < text.size() && (hi = hex_value(text[i + 1])) >= 0 &&
        (lo = hex_value(text[i + 2])) >= 0) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      auto b = static_cast<unsigned char>(c);
      out += {'%', hex[b >> 4], hex[b & 15]};
    }
  }
  return out;
}

std::string form_value(std::string_view params, std::string_view name) {
  while (!params.empty()) {
    const std::size_t end = std::min(params.find('&'), params.size());
    const std::string_view param = params.substr(0, end);
    const std::size_t eq = param.find('=');
    if (percent_decode(param.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(param.substr(eq + 1));
    params.remove_prefix(std::min(end + 1, params.size()));
  }
  return {};
}

}  // namespace broker::brokers
