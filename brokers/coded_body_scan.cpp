#include "brokers/coded_body_scan.hpp"

#include "base/secret.hpp"

namespace broker::brokers {

coded_body_scan::coded_body_scan(const std::vector<http::content_coding>& applied,
                                 http::decode_limits limits, std::size_t max_withheld,
                                 stream_scrubber& scan)
    : decoder_(applied, limits), scan_(scan), max_withheld_(max_withheld) {}

coded_body_scan::~coded_body_scan() {
  base::wipe(withheld_);
  base::wipe(passed_);
}

coded_body_scan::outcome coded_body_scan::failure(http::decode_status status) const {
  return {status == http::decode_status::too_large ? verdict::too_large : verdict::corrupt, 0,
          decoder_.error()};
}

coded_body_scan::outcome coded_body_scan::feed(std::string_view coded, std::string& release) {
  std::optional<std::size_t> match;
  const auto status = decoder_.feed(coded, [&](std::string_view decoded) {
    if (match) return;
    passed_.clear();
    match = scan_.feed(decoded, passed_);
  });
  withheld_.append(coded);
  if (match) return {verdict::match, *match, {}};
  if (status != http::decode_status::ok) return failure(status);
  const auto settled = decoder_.settled();
  if (pending_.empty() ? settled.coded > released_ : settled.coded > pending_.back().coded)
    pending_.push_back(settled);
  release_searched(release);
  if (withheld_.size() > max_withheld_)
    return {verdict::withholding, 0,
            "more than " + std::to_string(max_withheld_) +
                " coded bytes in a row decode to nothing the broker can search yet"};
  return {};
}

coded_body_scan::outcome coded_body_scan::finish(std::string& release) {
  if (const auto status = decoder_.finish(); status != http::decode_status::ok)
    return failure(status);
  passed_.clear();
  if (auto match = scan_.finish(passed_)) return {verdict::match, *match, {}};
  release.append(withheld_);
  released_ += withheld_.size();
  withheld_.clear();
  pending_.clear();
  return {};
}

// Releases the coded bytes up to the last checkpoint whose decoded bytes the scrubber has all
// passed (it holds back a tail that may start a value).
void coded_body_scan::release_searched(std::string& release) {
  const std::size_t searched = decoder_.decoded_bytes() - scan_.held();
  std::size_t upto = released_;
  while (!pending_.empty() && pending_.front().decoded <= searched) {
    upto = pending_.front().coded;
    pending_.pop_front();
  }
  const std::size_t n = upto - released_;
  if (n == 0) return;
  release.append(withheld_, 0, n);
  withheld_.erase(0, n);
  released_ = upto;
}

}  // namespace broker::brokers
