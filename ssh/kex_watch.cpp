#include "ssh/kex_watch.hpp"

#include <algorithm>

#include "ssh/wire.hpp"

namespace broker::ssh {

namespace {

constexpr std::uint8_t msg_newkeys = 21;
// KEXDH_REPLY and KEX_ECDH_REPLY share 31 (RFC 4253 §8, RFC 5656 §7.1); a group exchange's reply
// is 33 (RFC 4419 §3), its 31 being the group, which has two fields, not three.
constexpr std::uint8_t msg_kex_reply = 31;
constexpr std::uint8_t msg_kex_gex_reply = 33;
// RFC 4253 §6.1: implementations must take packets of 35000 bytes.
constexpr std::uint32_t max_packet = 35000;

}  // namespace

bool kex_watch::feed(std::string_view bytes) {
  if (state_ == state::done) return false;
  seen_ += bytes.size();
  buffer_.append(bytes.substr(0, max_bytes - std::min(max_bytes, buffer_.size())));
  if (state_ == state::version) read_version();
  if (state_ == state::packets) read_packets();
  if (state_ != state::done && seen_ >= max_bytes) state_ = state::done;
  return state_ != state::done;
}

// RFC 4253 §4.2: the server may send other lines before its version line.
void kex_watch::read_version() {
  for (;;) {
    const auto end = buffer_.find('\n');
    if (end == std::string::npos) return;
    std::string_view line(buffer_.data(), end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("SSH-")) {
      version_ = std::string(line.substr(0, 255));
      buffer_.erase(0, end + 1);
      if (!version_.starts_with("SSH-2.0-") && !version_.starts_with("SSH-1.99-"))
        state_ = state::done;
      else
        state_ = state::packets;
      return;
    }
    buffer_.erase(0, end + 1);
  }
}

// Before the first NEWKEYS a packet is length, padding length, payload, padding (no MAC).
void kex_watch::read_packets() {
  for (;;) {
    if (buffer_.size() < 5) return;
    wire_reader head(buffer_);
    const std::uint32_t length = *head.u32();
    const std::uint8_t padding = *head.byte();
    if (length > max_packet || length < std::uint32_t(padding) + 1u) {
      state_ = state::done;  // not SSH as RFC 4253 frames it
      return;
    }
    if (buffer_.size() < 4 + std::size_t(length)) return;
    read_payload(std::string_view(buffer_).substr(5, length - padding - 1));
    buffer_.erase(0, 4 + std::size_t(length));
    if (state_ == state::done) return;
  }
}

void kex_watch::read_payload(std::string_view payload) {
  wire_reader r(payload);
  const auto type = r.byte();
  if (!type) return;
  if (*type == msg_newkeys) {
    state_ = state::done;
    return;
  }
  if (*type != msg_kex_reply && *type != msg_kex_gex_reply) return;
  const auto key = r.string();
  const auto exchange = r.string();  // the server's public value, or f as an mpint
  const auto signature = r.string();
  if (!key || !exchange || !signature || !r.at_end() || key_type(*key).empty()) return;
  host_key_ = std::string(*key);
  signature_ = std::string(*signature);
}

}  // namespace broker::ssh
