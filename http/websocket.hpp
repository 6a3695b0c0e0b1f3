// RFC 6455 WebSocket framing, for inspecting an upgraded connection (docs/security-model.md): an
// incremental reader that turns one direction's bytes into messages (fragments joined, payloads
// unmasked, control frames on their own), and the encoder that writes frames back. Bytes may arrive
// split anywhere; every size is bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace broker::http::websocket {

enum class opcode : std::uint8_t {
  continuation = 0x0,
  text = 0x1,
  binary = 0x2,
  close = 0x8,
  ping = 0x9,
  pong = 0xA,
};

// Close codes (RFC 6455 §7.4.1) the broker sends.
inline constexpr std::uint16_t close_protocol_error = 1002;
inline constexpr std::uint16_t close_policy_violation = 1008;
inline constexpr std::uint16_t close_too_big = 1009;

struct limits {
  std::size_t max_message = 16 * 1024 * 1024;  // a whole message, fragments joined
};

// One complete message: a data message (text or binary, every fragment joined) or a control
// frame (close, ping, pong; never fragmented, at most 125 bytes).
struct message {
  opcode type = opcode::binary;
  std::string payload;  // unmasked
};

class reader {
 public:
  // `from_client`: the client's frames must be masked and the server's must not (§5.1).
  // `compressed`: permessage-deflate was agreed, so RSV1 may mark a message's first frame (the
  // payload is passed on as it is; the caller inflates it).
  reader(bool from_client, limits l = {}, bool compressed = false);

  // Appends bytes read from the connection.
  void feed(std::string_view bytes);
  // The next complete message, or nullopt when more bytes are needed or after an error (see
  // failed()). Control frames may come between the fragments of a data message (§5.4): each is
  // returned as soon as it is whole.
  std::optional<message> next();
  // Whether the first frame of the message next() just returned had RSV1 set (compressed).
  bool last_compressed() const { return last_compressed_; }

  // A violation of the protocol or of the limits: the connection is to be closed with code().
  bool failed() const { return code_ != 0; }
  std::uint16_t code() const { return code_; }
  const std::string& error() const { return error_; }
  // Bytes fed and not yet part of a returned message (buffered frames and fragments).
  std::size_t pending() const { return buffer_.size() - offset_ + partial_.size(); }

 private:
  std::optional<message> fail(std::uint16_t code, std::string why);
  // A frame's first bytes (RFC 6455 §5.2): its flags, opcode and payload length, and how many
  // bytes they take. False when more bytes are needed, or when the frame is refused (failed()).
  struct frame_header {
    bool fin = false, rsv1 = false, masked = false;
    std::uint8_t op = 0;
    std::size_t size = 2;
    std::uint64_t length = 0;
  };
  bool read_header(std::string_view in, frame_header& h);

  bool from_client_;
  limits limits_;
  bool compressed_;
  std::string buffer_;  // bytes not yet parsed start at offset_
  std::size_t offset_ = 0;
  std::string partial_;  // a fragmented data message's payload so far
  std::optional<opcode> partial_type_;
  bool partial_compressed_ = false;
  bool last_compressed_ = false;
  std::uint16_t code_ = 0;
  std::string error_;
};

// One whole frame (FIN set) carrying `payload`; masked with `mask_key` when given (a client's
// frame), with RSV1 set when `compressed`.
std::string encode_frame(opcode type, std::string_view payload,
                         std::optional<std::uint32_t> mask_key = std::nullopt,
                         bool compressed = false);
// A close frame's payload: the code, then a reason (cut to fit the 125-byte limit).
std::string close_payload(std::uint16_t code, std::string_view reason);

}  // namespace broker::http::websocket
