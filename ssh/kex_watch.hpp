// What the broker reads of an SSH connection it tunnels (docs/security-model.md, "SSH"): the
// server's host key and its signature over the key exchange, both sent in the clear before the
// first SSH_MSG_NEWKEYS (RFC 4253 §4.2, §6, §8). That signature is the one ssh hands its agent in
// session-bind@openssh.com, so it joins the connection's record to the key the agent signed with.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace broker::ssh {

class kex_watch {
 public:
  // The most it reads: the version lines and the packets of a key exchange are a few KiB.
  static constexpr std::size_t max_bytes = 64 * 1024;

  // The next bytes the server sent, in order. Returns true while it wants more; false once it
  // has seen NEWKEYS, or the bytes are not SSH, or max_bytes have passed.
  bool feed(std::string_view bytes);

  // The server's identification line ("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u6"), without CR LF.
  const std::string& server_version() const { return version_; }
  // The reply to the first key exchange (KEXDH / KEX_ECDH / KEX_DH_GEX reply): the host key
  // blob and the signature blob; empty until it has been read.
  const std::string& host_key() const { return host_key_; }
  const std::string& signature() const { return signature_; }

 private:
  void read_version();
  void read_packets();
  void read_payload(std::string_view payload);

  enum class state { version, packets, done } state_ = state::version;
  std::string buffer_;
  std::size_t seen_ = 0;
  std::string version_;
  std::string host_key_;
  std::string signature_;
};

}  // namespace broker::ssh
