// The SSH bytes broker reads (ssh/): a tunnelled server's key exchange (kex_watch) and a client
// inside the session's messages to the agent (agent_messages), on anything either side could
// send. kex_watch reads the same host key and signature however the bytes are cut, stops for
// good once it has stopped, and never holds more than its bound; a client message is on the
// allowlist only with every field parsed, and its fingerprints have SHA-256's shape.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "ssh/agent_messages.hpp"
#include "ssh/kex_watch.hpp"
#include "ssh/wire.hpp"

namespace {

using namespace broker;
using fuzz::check;

struct kex_seen {
  std::string version, key, signature;
  std::size_t fed = 0;  // bytes fed until it wanted no more
};

template <class Pieces>
kex_seen watch(const Pieces& pieces) {
  ssh::kex_watch w;
  kex_seen out;
  bool more = true;
  for (std::string_view piece : pieces) {
    if (!more) {
      check(!w.feed(piece), "kex_watch wanted more after it stopped");
      continue;
    }
    out.fed += piece.size();
    more = w.feed(piece);
  }
  out.version = w.server_version();
  out.key = w.host_key();
  out.signature = w.signature();
  check(out.version.size() <= 255, "a version line past 255 bytes");
  check(out.key.size() <= ssh::kex_watch::max_bytes, "a host key past the bound");
  return out;
}

void check_fingerprint(const std::string& fp) {
  // "SHA256:" and 43 characters of unpadded base64.
  check(fp.size() == 7 + 43 && fp.starts_with("SHA256:"), "a fingerprint's shape");
}

void check_message(std::string_view payload) {
  const auto m = ssh::read_client_message(payload);
  using kind = ssh::client_message::kind;
  check(m.what == kind::refused || !payload.empty(), "an empty message allowed");
  switch (m.what) {
    case kind::list:
      check(payload == "\x0b", "a list with more than its type");
      break;
    case kind::sign:
      check(payload[0] == 13, "a sign request of another type");
      check_fingerprint(m.key_fingerprint);
      break;
    case kind::bind:
      check(payload[0] == 27, "a bind of another type");
      check_fingerprint(m.host_key_fingerprint);
      check(m.signature.size() < payload.size(), "a bind's signature larger than the message");
      break;
    case kind::refused:
      check(!m.name.empty(), "a refusal without a name");
      break;
  }
  (void)ssh::identities_count(payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = fuzz::as_text(data, size);
  const std::string_view whole[] = {bytes};
  const auto once = watch(whole);
  const auto cut = watch(fuzz::pieces_of(bytes, fuzz::hash_of(bytes)));
  check(once.key == cut.key && once.signature == cut.signature && once.version == cut.version,
        "the key exchange read differently when cut");
  if (!once.key.empty()) check(!once.signature.empty(), "a host key without its signature");
  check_message(bytes);
  return 0;
}
