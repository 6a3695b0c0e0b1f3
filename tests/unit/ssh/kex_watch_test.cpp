// The tunnel's reading of an SSH server's key exchange: the host key and signature from the
// reply, however the bytes arrive, and nothing read past NEWKEYS or from bytes that are not SSH.
#include <catch2/catch.hpp>

#include <string>

#include "ssh/kex_watch.hpp"
#include "ssh/wire.hpp"

using broker::ssh::kex_watch;
using broker::ssh::put_string;
using broker::ssh::put_u32;

namespace {

// A packet before NEWKEYS: length, padding length, payload, padding (RFC 4253 §6).
std::string packet(const std::string& payload) {
  const std::uint8_t padding = static_cast<std::uint8_t>(8 - (payload.size() + 5) % 8 + 4);
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(payload.size() + padding + 1));
  out.push_back(static_cast<char>(padding));
  out += payload;
  out.append(padding, '\0');
  return out;
}

std::string message(std::uint8_t type, std::initializer_list<std::string> strings) {
  std::string out(1, static_cast<char>(type));
  for (const auto& s : strings) put_string(out, s);
  return out;
}

std::string host_key() {
  std::string blob;
  put_string(blob, "ssh-ed25519");
  put_string(blob, std::string(32, 'k'));
  return blob;
}

std::string server_stream(std::uint8_t reply_type = 31) {
  std::string s = "a banner line first\r\nSSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u6\r\n";
  s += packet(std::string(1, '\x14') + std::string(200, 'i'));  // KEXINIT
  s += packet(message(reply_type, {host_key(), std::string(32, 'q'), "the-signature"}));
  s += packet(std::string(1, '\x15'));  // NEWKEYS
  s += "encrypted bytes that are never read";
  return s;
}

}  // namespace

TEST_CASE("kex_watch: the reply's host key and signature, whole or byte by byte", "[ssh]") {
  for (const std::uint8_t reply : {std::uint8_t{31}, std::uint8_t{33}}) {
    const auto stream = server_stream(reply);
    kex_watch whole;
    CHECK_FALSE(whole.feed(stream));
    CHECK(whole.server_version() == "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u6");
    CHECK(whole.host_key() == host_key());
    CHECK(whole.signature() == "the-signature");

    kex_watch bytewise;
    std::size_t fed = 0;
    while (fed < stream.size() && bytewise.feed(stream.substr(fed, 1))) ++fed;
    CHECK(bytewise.signature() == "the-signature");
    // It stops at NEWKEYS: the encrypted bytes after it are never asked for.
    CHECK(fed < stream.size() - 30);
  }
}

TEST_CASE("kex_watch: a group exchange's group (two fields) is not the reply", "[ssh]") {
  std::string s = "SSH-2.0-x\r\n";
  s += packet(message(31, {"p-as-mpint", "g"}));
  kex_watch w;
  CHECK(w.feed(s));
  CHECK(w.signature().empty());
}

TEST_CASE("kex_watch: what is not SSH ends the reading", "[ssh]") {
  kex_watch http;
  CHECK_FALSE(http.feed("SSH-1.5-old\r\n"));
  kex_watch huge;
  std::string s = "SSH-2.0-x\r\n";
  put_u32(s, 1'000'000);
  s += "\x04xxxx";
  CHECK_FALSE(huge.feed(s));
  CHECK(huge.signature().empty());
  // Lines that never end are read up to the bound, then no more.
  kex_watch endless;
  bool more = true;
  for (int i = 0; i < 100 && more; ++i) more = endless.feed(std::string(4096, 'x'));
  CHECK_FALSE(more);
}
