// SSH's wire encoding (RFC 4251 §5) as the session's agent filter and the tunnel's key-exchange
// reader read it, and the fingerprints (SHA256, as ssh-keygen -l prints them) they record.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace broker::ssh {

// Reads uint32, byte, boolean and string fields off the front of `data`; each returns nullopt
// once the data runs short (and every read after that does too).
class wire_reader {
 public:
  explicit wire_reader(std::string_view data) : rest_(data) {}
  std::optional<std::uint32_t> u32();
  std::optional<std::uint8_t> byte();
  std::optional<std::string_view> string();
  bool at_end() const { return ok_ && rest_.empty(); }
  bool ok() const { return ok_; }

 private:
  std::string_view rest_;
  bool ok_ = true;
};

void put_u32(std::string& out, std::uint32_t value);
void put_string(std::string& out, std::string_view value);

// "SHA256:" and the unpadded base64 of the blob's SHA-256, as ssh-keygen -l and ssh-add -l show
// a key.
std::string fingerprint(std::string_view key_blob);

// A key blob's type (its first string): "ssh-ed25519"; empty when it has none.
std::string_view key_type(std::string_view key_blob);

}  // namespace broker::ssh
