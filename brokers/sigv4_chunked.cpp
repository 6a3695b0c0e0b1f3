// aws-chunked bodies (SigV4 streaming uploads): each chunk's signature checked against the chain
// from the dummy-signed seed and replaced by the one the real key gives, in stream, holding no
// more than one chunk.
#include <stdexcept>
#include <utility>

#include "base/digest.hpp"
#include "base/text.hpp"
#include "brokers/sigv4.hpp"

namespace broker::brokers::sigv4 {

namespace {

// "<16 hex>;chunk-signature=<64 hex>\r\n" is 99 bytes; anything longer is not a chunk header.
constexpr std::size_t max_chunk_header = 128;
// Trailers carry a checksum or two and the trailer signature; a few KiB is plenty.
constexpr std::size_t max_trailer_bytes = 8 * 1024;
constexpr std::size_t max_size_digits = 16;
constexpr std::string_view chunk_signature_key = ";chunk-signature=";
constexpr std::string_view trailer_signature_key = "x-amz-trailer-signature:";
constexpr std::string_view crlf = "\r\n";

}  // namespace

chunk_resigner::chunk_resigner(keys k, std::size_t max_chunk)
    : keys_(std::move(k)),
      max_chunk_(max_chunk),
      dummy_prev_(keys_.dummy_seed),
      real_prev_(keys_.real_seed) {
  if (keys_.dummy == nullptr || keys_.real == nullptr)
    throw std::invalid_argument("chunk_resigner needs both signing keys");
}

void chunk_resigner::feed(std::string_view in, std::string& out) {
  if (state_ == state::failed) throw sigv4_error("aws-chunked body already failed");
  try {
    while (!in.empty()) {
      switch (state_) {
        case state::header:
          read_header(in, out);
          break;
        case state::data:
          read_data(in);
          break;
        case state::data_crlf:
          read_data_crlf(in, out);
          break;
        case state::trailer:
          read_trailer(in, out);
          break;
        case state::done:
          throw sigv4_error("aws-chunked body continues after its final chunk");
        case state::failed:
          throw sigv4_error("aws-chunked body already failed");
      }
    }
  } catch (...) {
    // Nothing held may go out after an error, and the stream cannot resume mid-element.
    state_ = state::failed;
    pending_.clear();
    throw;
  }
}

void chunk_resigner::finish() const {
  if (state_ != state::done) throw sigv4_error("aws-chunked body ended before its final chunk");
}

bool chunk_resigner::complete() const {
  return state_ == state::done;
}

// Moves bytes up to and including the next '\n' into pending_; true once a whole line is there.
// Lines end in CRLF (a bare LF is a framing error); pending_ may not grow past `limit`.
bool chunk_resigner::take_line(std::string_view& in, std::size_t limit) {
  std::size_t lf = in.find('\n');
  std::size_t n = lf == std::string_view::npos ? in.size() : lf + 1;
  if (pending_.size() + n > limit) throw sigv4_error("aws-chunked line too long");
  pending_.append(in.substr(0, n));
  in.remove_prefix(n);
  if (lf == std::string_view::npos) return false;
  if (pending_.size() - line_start_ < 2 || pending_[pending_.size() - 2] != '\r')
    throw sigv4_error("aws-chunked line does not end in CRLF");
  return true;
}

// "<hex size>;chunk-signature=<64 hex>\r\n"
void chunk_resigner::read_header(std::string_view& in, std::string& out) {
  line_start_ = 0;
  if (!take_line(in, max_chunk_header)) return;
  std::string_view line(pending_.data(), pending_.size() - crlf.size());
  std::size_t semicolon = line.find(';');
  std::string_view size_text = line.substr(0, semicolon);
  if (semicolon == std::string_view::npos || size_text.empty() ||
      size_text.size() > max_size_digits)
    throw sigv4_error("aws-chunked chunk header is malformed");
  std::uint64_t size = 0;
  for (char c : size_text) {
    int v = base::hex_value(c);
    if (v < 0) throw sigv4_error("aws-chunked chunk size is not hex");
    size = size * 16 + static_cast<std::uint64_t>(v);
    if (size > max_chunk_) throw sigv4_error("aws-chunked chunk exceeds the size limit");
  }
  std::string_view extension = line.substr(semicolon);
  if (!extension.starts_with(chunk_signature_key) ||
      !base::is_signature(extension.substr(chunk_signature_key.size())))
    throw sigv4_error("aws-chunked chunk header lacks a well-formed chunk-signature");

  chunk_size_ = static_cast<std::size_t>(size);
  chunk_signature_ = std::string(extension.substr(chunk_signature_key.size()));
  header_len_ = pending_.size();
  if (chunk_size_ > 0) {
    state_ = state::data;
    return;
  }
  // The final chunk has no data and no data CRLF: what follows is the trailer section.
  release_chunk(out);
  state_ = state::trailer;
}

void chunk_resigner::read_data(std::string_view& in) {
  std::size_t have = pending_.size() - header_len_;
  std::size_t n = std::min(chunk_size_ - have, in.size());
  pending_.append(in.substr(0, n));
  in.remove_prefix(n);
  if (have + n == chunk_size_) state_ = state::data_crlf;
}

void chunk_resigner::read_data_crlf(std::string_view& in, std::string& out) {
  while (!in.empty()) {
    std::size_t seen = pending_.size() - header_len_ - chunk_size_;
    if (in.front() != crlf[seen]) throw sigv4_error("aws-chunked chunk data not followed by CRLF");
    pending_.push_back(in.front());
    in.remove_prefix(1);
    if (seen + 1 == crlf.size()) {
      release_chunk(out);
      state_ = state::header;
      return;
    }
  }
}

// Verifies the chunk in pending_ (header, data, and the data CRLF unless it is the final chunk)
// and releases it with the real signature in place of the dummy one.
void chunk_resigner::release_chunk(std::string& out) {
  std::string_view data(pending_.data() + header_len_, chunk_size_);
  std::string hashes = std::string(empty_sha256) + "\n" + base::sha256_hex(data);
  std::string real = advance_chain("AWS4-HMAC-SHA256-PAYLOAD", hashes, chunk_signature_);
  const std::size_t signature_at = header_len_ - crlf.size() - real.size();
  out.append(pending_, 0, signature_at);
  out += real;
  out.append(pending_, signature_at + real.size());
  pending_.clear();
}

// After the final chunk: without signed trailers just the closing CRLF; with them, trailer lines,
// then "x-amz-trailer-signature:<64 hex>", then the closing CRLF. Trailer lines are held until
// the trailer signature over them has verified.
void chunk_resigner::read_trailer(std::string_view& in, std::string& out) {
  while (!in.empty()) {
    if (!take_line(in, max_trailer_bytes)) return;
    std::string_view line(pending_.data() + line_start_,
                          pending_.size() - line_start_ - crlf.size());
    if (!keys_.signed_trailer || trailer_verified_) {
      if (!line.empty()) throw sigv4_error("aws-chunked body has unexpected trailing lines");
      out += crlf;
      pending_.clear();
      state_ = state::done;
      return;
    }
    if (line.empty()) throw sigv4_error("signed trailer lacks x-amz-trailer-signature");
    if (!line.starts_with(trailer_signature_key)) {
      std::size_t colon = line.find(':');
      if (colon == 0 || colon == std::string_view::npos ||
          line.find('\r') != std::string_view::npos)
        throw sigv4_error("aws-chunked trailer line is malformed");
      line_start_ = pending_.size();
      continue;
    }
    std::string_view sent = line.substr(trailer_signature_key.size());
    if (!base::is_signature(sent)) throw sigv4_error("x-amz-trailer-signature is malformed");
    // The trailer string to sign hashes the trailer lines as "name:value\n" each.
    std::string canonical(pending_, 0, line_start_);
    std::erase(canonical, '\r');
    std::string real = advance_chain("AWS4-HMAC-SHA256-TRAILER", base::sha256_hex(canonical), sent);
    out.append(pending_, 0, line_start_);
    out.append(trailer_signature_key).append(real).append(crlf);
    pending_.clear();
    line_start_ = 0;
    trailer_verified_ = true;
  }
}

// Checks `sent` against the dummy chain and returns the real chain's signature for the same
// element; both chains then continue from these. `hashes` is the string to sign after the
// previous signature.
std::string chunk_resigner::advance_chain(std::string_view kind, std::string_view hashes,
                                          std::string_view sent) {
  const std::string scope = keys_.scope.text();
  auto to_sign = [&](const std::string& previous) {
    return std::string(kind) + "\n" + keys_.amz_date + "\n" + scope + "\n" + previous + "\n" +
           std::string(hashes);
  };
  if (!signatures_equal(keys_.dummy->sign(to_sign(dummy_prev_)), sent))
    throw sigv4_error("aws-chunked signature does not verify");
  std::string real = keys_.real->sign(to_sign(real_prev_));
  dummy_prev_ = std::string(sent);
  real_prev_ = real;
  return real;
}

}  // namespace broker::brokers::sigv4
