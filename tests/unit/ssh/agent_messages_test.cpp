// What a client inside the session may ask the broker's agent: list, sign and session-bind
// pass; every other message (removing or adding keys, locking, other extensions) and every
// malformed one is refused by name.
#include <catch2/catch.hpp>

#include <string>

#include "ssh/agent_messages.hpp"
#include "ssh/wire.hpp"

using broker::ssh::client_message;
using broker::ssh::fingerprint;
using broker::ssh::put_string;
using broker::ssh::put_u32;
using broker::ssh::read_client_message;

namespace {

std::string key_blob() {
  std::string blob;
  put_string(blob, "ssh-ed25519");
  put_string(blob, std::string(32, 'k'));
  return blob;
}

std::string userauth(const std::string& session, const std::string& user) {
  std::string data;
  put_string(data, session);
  data.push_back(50);
  put_string(data, user);
  put_string(data, "ssh-connection");
  put_string(data, "publickey");
  return data;
}

}  // namespace

TEST_CASE("agent messages: the allowlist", "[ssh]") {
  CHECK(read_client_message("\x0b").what == client_message::kind::list);

  std::string sign(1, '\x0d');
  put_string(sign, key_blob());
  put_string(sign, userauth("the-session", "git"));
  put_u32(sign, 0);
  const auto s = read_client_message(sign);
  CHECK(s.what == client_message::kind::sign);
  CHECK(s.key_fingerprint == fingerprint(key_blob()));
  CHECK(s.key_fingerprint.starts_with("SHA256:"));
  CHECK(s.user == "git");
  CHECK(s.session_id == "the-session");

  std::string bind(1, '\x1b');
  put_string(bind, "session-bind@openssh.com");
  put_string(bind, key_blob());
  put_string(bind, "the-session");
  put_string(bind, "the-signature");
  bind.push_back(0);
  const auto b = read_client_message(bind);
  CHECK(b.what == client_message::kind::bind);
  CHECK(b.signature == "the-signature");
  CHECK(b.host_key_fingerprint == fingerprint(key_blob()));
  CHECK_FALSE(b.forwarding);
}

TEST_CASE("agent messages: everything else is refused by name", "[ssh]") {
  CHECK(read_client_message("\x13").name == "remove_all_identities");  // ssh-add -D
  CHECK(read_client_message("\x16pw").name == "lock");                 // ssh-add -x
  CHECK(read_client_message("\x15").name == "remove_smartcard_key");   // ssh-add -e
  CHECK(read_client_message("\x11key").name == "add_identity");
  CHECK(read_client_message("\x19key").name == "add_id_constrained");
  CHECK(read_client_message("\xc8").name == "unknown");
  CHECK(read_client_message("").what == client_message::kind::refused);
  std::string query(1, '\x1b');
  put_string(query, "query");
  CHECK(read_client_message(query).name == "extension query");
  // A list with trailing bytes, a sign request cut short, a bind without its flag.
  CHECK(read_client_message("\x0bx").what == client_message::kind::refused);
  std::string short_sign(1, '\x0d');
  put_string(short_sign, key_blob());
  CHECK(read_client_message(short_sign).what == client_message::kind::refused);
  std::string short_bind(1, '\x1b');
  put_string(short_bind, "session-bind@openssh.com");
  put_string(short_bind, key_blob());
  CHECK(read_client_message(short_bind).what == client_message::kind::refused);
}

TEST_CASE("agent messages: an identities answer's count", "[ssh]") {
  std::string answer(1, '\x0c');
  put_u32(answer, 2);
  CHECK(broker::ssh::identities_count(answer) == 2u);
  CHECK_FALSE(broker::ssh::identities_count("\x05").has_value());
  CHECK(broker::ssh::failure_answer() == std::string("\0\0\0\1\5", 5));
}
