#include "http/content_decoder.hpp"

#include <algorithm>

#include "http/coding_stage.hpp"

namespace broker::http {
namespace {

// What one decoder writes at a time, handed to the next decoder or out.
constexpr std::size_t piece_bytes = 32 * 1024;

}  // namespace

struct content_decoder::slot {
  content_coding coding;
  std::unique_ptr<coding_stage> stage;
  std::string buffer;
  std::size_t produced = 0;
};

content_decoder::content_decoder(const std::vector<content_coding>& applied, decode_limits limits)
    : limits_(limits) {
  slots_.reserve(applied.size());
  for (auto c = applied.rbegin(); c != applied.rend(); ++c) {
    // Made in place: GCC 12 misreads a moved 32 KiB buffer as overrunning its slot.
    auto& s = slots_.emplace_back();
    s.coding = *c;
    s.stage = make_stage(*c);
    s.buffer.assign(piece_bytes, '\0');
  }
}

content_decoder::~content_decoder() = default;

decode_status content_decoder::fail(decode_status status, std::string why) {
  status_ = status;
  error_ = std::move(why);
  return status_;
}

bool content_decoder::all_at_boundary() const {
  return std::all_of(slots_.begin(), slots_.end(),
                     [](const slot& s) { return s.stage->at_boundary(); });
}

decode_status content_decoder::feed(std::string_view coded, const sink& out) {
  if (status_ != decode_status::ok || coded.empty() || slots_.empty()) return status_;
  return pump(0, coded, out);
}

// Runs decoder k over `in` until it has taken all of it and written all it can, each piece it
// writes going through the decoders after it (or out) before the next is made.
decode_status content_decoder::pump(std::size_t k, std::string_view in, const sink& out) {
  slot& s = slots_[k];
  for (;;) {
    const auto step = s.stage->run(in, s.buffer.data(), s.buffer.size());
    in.remove_prefix(step.consumed);
    if (k == 0) consumed_ += step.consumed;
    // What a call wrote before it met corrupt data counts first, so that the outcome does not
    // depend on how much input the call had: a body over a limit before its corrupt part is
    // too large however it was split.
    if (step.produced > 0) {
      s.produced += step.produced;
      if (s.produced > limits_.max_decoded)
        return fail(decode_status::too_large, "the body decodes to more than " +
                                                  std::to_string(limits_.max_decoded) + " bytes");
      if (s.produced > limits_.ratio_free && s.produced / limits_.max_ratio > consumed_)
        return fail(decode_status::too_large, "the body decodes to more than " +
                                                  std::to_string(limits_.max_ratio) +
                                                  " times its coded size (a decompression bomb?)");
      const std::string_view piece(s.buffer.data(), step.produced);
      if (k + 1 < slots_.size()) {
        if (pump(k + 1, piece, out) != decode_status::ok) return status_;
      } else {
        decoded_ += piece.size();
        out(piece);
      }
    }
    if (s.stage->failed()) return fail(decode_status::corrupt, s.stage->error());
    // A decoder that filled its buffer may have more to write without more input.
    const bool drained = step.produced < s.buffer.size();
    if (k == 0 && drained && all_at_boundary()) settled_ = {consumed_, decoded_};
    if (in.empty() && drained) return decode_status::ok;
    if (step.consumed == 0 && step.produced == 0)
      return fail(decode_status::corrupt,
                  std::string(name_of(s.coding)) + " data the decoder makes no progress with");
  }
}

decode_status content_decoder::finish() {
  if (status_ != decode_status::ok || consumed_ == 0) return status_;
  for (const slot& s : slots_)
    if (!s.stage->complete())
      return fail(decode_status::corrupt, std::string(name_of(s.coding)) + " data is cut short");
  return status_;
}

}  // namespace broker::http
