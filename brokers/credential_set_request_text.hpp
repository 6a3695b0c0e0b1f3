// Internal to credential_set: the searchable text of one request head, everywhere a value the
// request must not carry may hide (docs/policy.md). The texts are what the child sent plus what a
// server may make of it:
//   - the target's path and query, raw and percent-decoded;
//   - each header field's name and value, raw and, when it holds a '%', percent-decoded (RFC
//     3986 §2.1; an application may decode any field); a Basic credential's "user:password"
//     (RFC 7617 §2);
//   - the values of fields repeated under one name, joined as a recipient may join them (RFC 9110
//     §5.3: ", " or "," between them; "; " for cookies, RFC 9113 §8.2.3; and directly, as some
//     servers concatenate), raw and percent-decoded: a value split across them is whole there.
// Base64 is not decoded here: value_catalog finds base64 fragments in the raw texts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"

namespace broker::brokers {

class request_text {
 public:
  // How a text was derived from the request (bits), for the refusal's wording.
  static constexpr std::uint8_t percent_decoded = 1;  // a header's name or value, decoded
  static constexpr std::uint8_t joined = 2;           // repeated fields, joined

  // While the texts are collected: the copy a text is still to become (its bytes are the
  // source until then).
  enum class pending : std::uint8_t { none, percent, basic };
  struct text {
    std::string_view bytes;
    std::uint32_t place;  // where(): path, query, or a field's name or value
    std::uint8_t how;     // percent_decoded | joined; 0 as sent (or the target, decoded)
    pending source;       // none once constructed
  };

  // Views into `target` and `headers`, which must outlive this object.
  request_text(std::string_view target, const std::vector<http::header_field>& headers);
  ~request_text();  // wipes the decoded and joined copies: they may hold a real value
  request_text(const request_text&) = delete;
  request_text& operator=(const request_text&) = delete;

  // Every text (in no particular order: a finding is ranked by its place). Fields repeated
  // under one name are placed, joined, at the first of them.
  const std::vector<text>& texts() const { return texts_; }
  // A place as a refusal names it: "path", "query", "header name" (a name holds the value, so
  // it is not repeated), "header NAME" (lower-case). Never the value.
  std::string where(std::uint32_t place) const;

 private:
  std::string_view decode(std::string_view raw);  // percent-decoded into copies_
  // The pending texts (percent-encoded, Basic credentials) decoded into copies_.
  void make_copies();
  void add_joined(const std::vector<std::size_t>& fields, std::string_view separator,
                  std::uint32_t place);

  const std::vector<http::header_field>& headers_;
  // The decoded and joined copies, back to back: reserved once for all of them, so the views
  // into it stay valid and no reallocation leaves a copy behind.
  std::string copies_;
  std::vector<text> texts_;
};

}  // namespace broker::brokers
