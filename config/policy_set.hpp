// The layered policy of a session: a destination passes only if every layer with egress rules
// allows it (docs/policy.md), so adding a layer can only narrow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/address.hpp"
#include "config/policy.hpp"
#include "config/program_identity.hpp"

namespace broker::config {

struct destination {
  std::string host;              // normalized host name, or the IP literal's canonical text
  std::optional<ip_address> ip;  // set when the request named an IP literal
  std::uint16_t port = 0;
};

// Who opened the connection, for allow rules with "programs" (docs/policy.md): the processes
// attribution found holding its socket, null when unknown (then such rules match nothing: fail
// closed); `any` for a question no process is known for yet (a DNS name), where they match
// whoever asks.
struct client_program {
  const client_identity* client = nullptr;
  bool any = false;
};

struct verdict {
  bool allowed = false;
  // Which rule decided: "allow[0]" / "deny[1]", prefixed with "<layer source>#" when the set has
  // more than one layer; "default_deny" when no allow rule matched (also prefixed: it names the
  // layer that refused). A refusal reports an explicit deny rule before a layer's default_deny;
  // an allowed verdict reports the first layer's allow rule, or the first approved rule
  // (docs/policy.md) when one decided in some layer.
  std::string rule;
  // True only if every layer's deciding allow rule says "tunnel": true (tunnelling skips
  // inspection, so it is a loosening every layer must agree to). Also false when a deny rule
  // with methods/paths matches the host/port (it could not be enforced in a tunnel) or when a
  // credential in any layer is bound to the host (it could not be swapped). A connection-level
  // property: check_request reports the same value check_connect would.
  bool tunnel = false;
  // A tunnel an ssh rule decided in some layer (docs/policy.md, "SSH"): the connection's record
  // reads the server's key exchange to name the key that signed.
  bool ssh = false;
  // An allowed verdict: the client may speak HTTP/2 on an intercepted connection to the host;
  // false when an allow rule matching the host and port in any layer says "http2": false.
  bool http2 = true;
  // check_request only: set when the destination has path rules (a rule with "paths", allow or
  // deny, in any layer, matching its host and port) and servers may disagree about what the
  // request's path names (ambiguous_path in path_pattern.hpp says which constructs): why, as a
  // sentence. Such a request is refused (allowed is false) and `rule` names the first such path
  // rule; it is a malformed request (400 bad_request, docs/cli.md), not a policy refusal. When the
  // host and port alone are refused, that refusal is reported instead and this stays empty.
  std::optional<std::string> ambiguous_path;
  // An allowed verdict that an audit-only layer ("enforcement": "audit") would have refused:
  // that layer's rule, named as `rule` is (its explicit deny rule before its default_deny).
  // Audit layers never refuse, never allow and never keep a connection out of a tunnel.
  std::string would_deny;
  // A refusal a person may approve (docs/policy.md): every enforcing layer that refused is one that
  // asks ("on_deny": "ask") and refused for want of an allow rule, not by a deny rule; the
  // destination is a host name no layer lists under "approvals": {"never": [...]}; the path is
  // not ambiguous. Approving it adds an allow rule to those layers (with_approval).
  bool askable = false;
  // An askable CONNECT (check_connect) whose every allowing layer tunnels it, with no credential
  // bound to the host: an approval of it is a tunnel rule, asked about before the tunnel opens.
  bool askable_tunnel = false;
  // An allowed check_request: the "mcp" of each enforcing layer's deciding allow rule that has
  // one, each with that rule's name (as `rule` names rules). A call must pass every one
  // (mcp/call_rules.hpp). The rules stay valid as long as the set.
  // `asks`: the layer's refusals may be asked about (as `askable` above): a call its rules
  // refuse for want of an allow glob or by an argument check is held for a person.
  // `approvable`: the host is in no layer's "approvals": {"never": [...]} (nothing about it is
  // asked, "on_change": "ask" included).
  struct mcp_scope {
    const mcp_rules* rules;
    std::string rule;
    bool asks = false;
    bool approvable = true;
  };
  std::vector<mcp_scope> mcp;
};

// Within a layer: a matching deny rule refuses; otherwise, if the layer has allow rules, one must
// match; a layer with only deny rules can only refuse. Egress needs at least one allow rule in
// some layer: a set with no allow rules anywhere refuses everything ("default_deny").
class policy_set {
 public:
  explicit policy_set(std::vector<policy> layers);

  // Connection-level decision (CONNECT, or before a plain request's method/path are known):
  // host/port rules only. An allow rule with methods/paths still admits the connection; a deny
  // rule with methods/paths does not refuse it. Host names match host rules, IP literals match
  // cidr rules only.
  verdict check_connect(const destination& dest, client_program who = {}) const;

  // Full decision for one HTTP request; `path` is the raw request target's path (normalized here,
  // normalize_path in path_pattern.hpp; the query is not looked at). Methods compare
  // case-sensitively against the rules' upper-case tokens, paths case-sensitively too. A path is
  // matched as it reads with its segments' ";parameters" and, when it has any, without them (as
  // Tomcat and Jetty serve it): a deny rule refuses when either reading matches, an allow rule
  // admits only when both do. A path that does not normalize (not origin-form, bad %-escape)
  // matches no allow rule with "paths" and every deny rule with "paths". On a destination with
  // path rules an ambiguous path is refused (verdict::ambiguous_path).
  verdict check_request(const destination& dest, std::string_view method, std::string_view path,
                        client_program who = {}) const;

  // For an address a host name resolved to: refused if any layer has a matching cidr deny rule
  // (without methods/paths). `private_ok` reports whether every layer with allow rules (and at
  // least one) has a cidr allow rule covering (address, port) - the only way to reach private
  // ranges; deny-only layers do not need one, they only refuse. Deny rules also match the IPv4
  // address inside a v4-mapped IPv6 one; allow rules never do.
  struct address_verdict {
    bool denied = false;
    std::string rule;  // the deny rule when denied
    bool private_ok = false;
  };
  address_verdict check_address(const ip_address& address, std::uint16_t port) const;

  // For a host name the child asks DNS about (docs/architecture.md): allowed when check_connect
  // allows it on at least one port, i.e. on one of the ports of the allow rules whose host pattern
  // matches it (in any layer). Refused otherwise, with check_connect's rule for the first such port
  // (443 when no allow rule names the host). Not for IP literals.
  verdict check_name(const std::string& host) const;

  // This set with `approved` (an allow rule for a host name, marked approved) added to every
  // enforcing layer that asks and has allow rules: the layers whose refusals can be asked about.
  policy_set with_approval(rule approved) const;

  // The ssh rules' hosts and ports (in any layer) that check_connect allows as an ssh tunnel for
  // any program: where a wrap session's agent may use its keys (docs/policy.md, "SSH"). Each
  // (host, port) once, in the order the layers name them.
  std::vector<destination> ssh_destinations() const;

  const std::vector<policy>& layers() const { return layers_; }

 private:
  std::vector<policy> layers_;
};

// `wrap --ask`: every layer that does not say "on_deny" asks.
void ask_on_every_layer(std::vector<policy>& layers);

// Whether a session with these layers asks a person anything: a layer asks ("on_deny": "ask"),
// or an enforcing layer's MCP rule asks about changed tools ("on_change": "ask").
bool session_asks(const std::vector<policy>& layers);

// The rules of approved.json (`approvals`: a layer of allow rules) added to every enforcing
// layer that asks and has allow rules, each marked approved and named "approved.json:allow[N]".
void add_approved_rules(std::vector<policy>& layers, const policy& approvals);

}  // namespace broker::config
