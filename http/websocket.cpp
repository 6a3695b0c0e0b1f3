#include "http/websocket.hpp"

namespace broker::http::websocket {

namespace {

constexpr std::size_t max_control_payload = 125;

bool is_control(std::uint8_t op) {
  return op >= 0x8;
}

bool known(std::uint8_t op) {
  return op <= 0x2 || (op >= 0x8 && op <= 0xA);
}

void apply_mask(char* data, std::size_t size, const unsigned char key[4]) {
  for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>(data[i] ^ key[i % 4]);
}

}  // namespace

reader::reader(bool from_client, limits l, bool compressed)
    : from_client_(from_client), limits_(l), compressed_(compressed) {}

void reader::feed(std::string_view bytes) {
  if (failed()) return;
  // Parsed bytes are dropped before the buffer grows, so it holds at most one frame and a bit.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<message> reader::fail(std::uint16_t code, std::string why) {
  code_ = code;
  error_ = std::move(why);
  buffer_.clear();
  partial_.clear();
  offset_ = 0;
  return std::nullopt;
}

bool reader::read_header(std::string_view in, frame_header& h) {
  const auto b0 = static_cast<std::uint8_t>(in[0]), b1 = static_cast<std::uint8_t>(in[1]);
  h.fin = b0 & 0x80;
  h.rsv1 = b0 & 0x40;
  h.op = b0 & 0x0F;
  h.masked = b1 & 0x80;
  if ((b0 & 0x30) != 0 || (h.rsv1 && (!compressed_ || is_control(h.op) || h.op == 0)))
    return fail(close_protocol_error, "a reserved bit is set"), false;
  if (!known(h.op))
    return fail(close_protocol_error, "unknown opcode " + std::to_string(h.op)), false;
  if (h.masked != from_client_)
    return fail(close_protocol_error, from_client_ ? "an unmasked frame from the client"
                                                   : "a masked frame from the server"),
           false;
  h.size = 2;
  h.length = b1 & 0x7F;
  if (h.length == 126) {
    if (in.size() < 4) return false;
    h.length = (std::uint64_t(std::uint8_t(in[2])) << 8) | std::uint8_t(in[3]);
    h.size = 4;
    if (h.length < 126)
      return fail(close_protocol_error, "a length not in its shortest form"), false;
  } else if (h.length == 127) {
    if (in.size() < 10) return false;
    h.length = 0;
    for (int i = 2; i < 10; ++i) h.length = (h.length << 8) | std::uint8_t(in[i]);
    h.size = 10;
    if (h.length >> 63) return fail(close_protocol_error, "a length over 2^63"), false;
    if (h.length < 65536)
      return fail(close_protocol_error, "a length not in its shortest form"), false;
  }
  return true;
}

std::optional<message> reader::next() {
  while (!failed()) {
    const std::string_view in = std::string_view(buffer_).substr(offset_);
    if (in.size() < 2) return std::nullopt;
    frame_header h;
    if (!read_header(in, h)) return std::nullopt;  // more bytes needed, or failed
    const std::uint8_t op = h.op;
    const std::uint64_t length = h.length;
    if (is_control(op) && (!h.fin || length > max_control_payload))
      return fail(close_protocol_error, "a fragmented or oversized control frame");
    const std::size_t so_far = is_control(op) ? 0 : partial_.size();
    if (length > limits_.max_message || so_far + length > limits_.max_message)
      return fail(close_too_big,
                  "a message over " + std::to_string(limits_.max_message) + " bytes");
    if (!is_control(op) && (op == 0) != partial_type_.has_value())
      return fail(close_protocol_error, op == 0 ? "a continuation frame with no message to continue"
                                                : "a new message before the last one ended");
    const std::size_t total = h.size + (h.masked ? 4 : 0) + static_cast<std::size_t>(length);
    if (in.size() < total) return std::nullopt;

    std::string payload(in.substr(total - length, length));
    if (h.masked) {
      unsigned char key[4];
      for (int i = 0; i < 4; ++i) key[i] = static_cast<unsigned char>(in[h.size + i]);
      apply_mask(payload.data(), payload.size(), key);
    }
    offset_ += total;
    if (is_control(op)) {
      last_compressed_ = false;
      return message{static_cast<opcode>(op), std::move(payload)};
    }
    if (op != 0) {
      partial_type_ = static_cast<opcode>(op);
      partial_compressed_ = h.rsv1;
    }
    partial_ += payload;
    if (!h.fin) continue;
    message done{*partial_type_, std::move(partial_)};
    last_compressed_ = partial_compressed_;
    partial_.clear();
    partial_type_.reset();
    return done;
  }
  return std::nullopt;
}

std::string encode_frame(opcode type, std::string_view payload,
                         std::optional<std::uint32_t> mask_key, bool compressed) {
  std::string out;
  out.reserve(payload.size() + 14);
  out += static_cast<char>(0x80 | (compressed ? 0x40 : 0) | static_cast<std::uint8_t>(type));
  const char mask_bit = mask_key ? '\x80' : '\0';
  const std::uint64_t length = payload.size();
  if (length < 126) {
    out += static_cast<char>(mask_bit | static_cast<char>(length));
  } else if (length < 65536) {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>(length >> 8);
    out += static_cast<char>(length & 0xFF);
  } else {
    out += static_cast<char>(mask_bit | 127);
    for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>((length >> shift) & 0xFF);
  }
  const std::size_t at = out.size() + (mask_key ? 4 : 0);
  if (mask_key) {
    unsigned char key[4];
    for (int i = 0; i < 4; ++i) key[i] = static_cast<unsigned char>(*mask_key >> (24 - 8 * i));
    out.append(reinterpret_cast<const char*>(key), 4);
    out += payload;
    apply_mask(out.data() + at, payload.size(), key);
  } else {
    out += payload;
  }
  return out;
}

std::string close_payload(std::uint16_t code, std::string_view reason) {
  std::string out;
  out += static_cast<char>(code >> 8);
  out += static_cast<char>(code & 0xFF);
  out += reason.substr(0, max_control_payload - 2);
  return out;
}

}  // namespace broker::http::websocket
