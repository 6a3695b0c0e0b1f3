#include "ssh/agent_messages.hpp"

#include "ssh/wire.hpp"

namespace broker::ssh {

namespace {

constexpr std::uint8_t request_identities = 11;
constexpr std::uint8_t sign_request = 13;
constexpr std::uint8_t extension = 27;
constexpr std::uint8_t userauth_request = 50;  // RFC 4252 §5

const char* message_name(std::uint8_t type) {
  switch (type) {
    case 1:
      return "request_rsa_identities";
    case 9:
      return "remove_all_rsa_identities";
    case 17:
      return "add_identity";
    case 18:
      return "remove_identity";
    case 19:
      return "remove_all_identities";
    case 20:
      return "add_smartcard_key";
    case 21:
      return "remove_smartcard_key";
    case 22:
      return "lock";
    case 23:
      return "unlock";
    case 25:
      return "add_id_constrained";
    case 26:
      return "add_smartcard_key_constrained";
    case extension:
      return "extension";
  }
  return "unknown";
}

client_message refused(std::uint8_t type, std::string name) {
  client_message m;
  m.type = type;
  m.name = std::move(name);
  return m;
}

// A sign request: string key, string data, uint32 flags. When the data is a user
// authentication request, its session and user.
client_message read_sign(wire_reader& r) {
  const auto key = r.string();
  const auto data = r.string();
  const auto flags = r.u32();
  if (!key || !data || !flags || !r.at_end()) return refused(sign_request, "sign_request");
  client_message m;
  m.what = client_message::kind::sign;
  m.type = sign_request;
  m.key_fingerprint = fingerprint(*key);
  wire_reader d(*data);
  const auto session = d.string();
  const auto type = d.byte();
  const auto user = d.string();
  if (session && type == userauth_request && user) {
    m.session_id = std::string(*session);
    m.user = std::string(*user);
  }
  return m;
}

// session-bind@openssh.com: string host key, string session identifier, string signature,
// boolean is_forwarding (OpenSSH's PROTOCOL.agent).
client_message read_extension(wire_reader& r) {
  const auto name = r.string();
  if (!name) return refused(extension, "extension");
  if (*name != "session-bind@openssh.com")
    return refused(extension, "extension " + std::string(name->substr(0, 64)));
  const auto key = r.string();
  const auto session = r.string();
  const auto signature = r.string();
  const auto forwarding = r.byte();
  if (!key || !session || !signature || !forwarding || !r.at_end())
    return refused(extension, "extension session-bind@openssh.com");
  client_message m;
  m.what = client_message::kind::bind;
  m.type = extension;
  m.host_key_fingerprint = fingerprint(*key);
  m.session_id = std::string(*session);
  m.signature = std::string(*signature);
  m.forwarding = *forwarding != 0;
  return m;
}

}  // namespace

client_message read_client_message(std::string_view payload) {
  wire_reader r(payload);
  const auto type = r.byte();
  if (!type) return refused(0, "empty");
  switch (*type) {
    case request_identities: {
      if (!r.at_end()) return refused(*type, "request_identities");
      client_message m;
      m.what = client_message::kind::list;
      m.type = *type;
      return m;
    }
    case sign_request:
      return read_sign(r);
    case extension:
      return read_extension(r);
  }
  return refused(*type, message_name(*type));
}

std::optional<std::uint32_t> identities_count(std::string_view payload) {
  wire_reader r(payload);
  if (r.byte() != agent_identities_answer) return std::nullopt;
  return r.u32();
}

std::string failure_answer() {
  std::string out;
  put_u32(out, 1);
  out.push_back(static_cast<char>(agent_failure));
  return out;
}

}  // namespace broker::ssh
