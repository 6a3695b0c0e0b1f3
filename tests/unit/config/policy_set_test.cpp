#include <catch2/catch.hpp>

#include "config/approved_file.hpp"
#include "config/policy_set.hpp"
#include "tests/unit/config/policy_test_support.hpp"
#include "tests/unit/config/program_files.hpp"

using broker::config::destination;
using broker::config::ip_address;
using broker::config::parse_policy;
using broker::config::policy;
using broker::config::policy_set;

namespace {

destination host(const char* name, std::uint16_t port = 443) {
  return destination{name, std::nullopt, port};
}

destination ip(const char* text, std::uint16_t port = 443) {
  auto a = *ip_address::parse(text);
  return destination{a.to_string(), a, port};
}

policy layer(const char* text, const char* source = "p.json") {
  return parse_policy(text, source);
}

policy_set single(const char* text) {
  std::vector<policy> layers;
  layers.push_back(layer(text));
  return policy_set(std::move(layers));
}

}  // namespace

TEST_CASE("one layer: host, port and default deny", "[config][policy_set]") {
  auto set = single(
      R"({"allow": [{"host": "api.github.com"}, {"host": "*.example.com", "ports": [8443]}]})");
  auto v = set.check_connect(host("api.github.com"));
  CHECK(v.allowed);
  CHECK(v.rule == "allow[0]");
  CHECK_FALSE(v.tunnel);
  CHECK(set.check_connect(host("api.github.com", 80)).allowed);  // default ports 80, 443
  CHECK_FALSE(set.check_connect(host("api.github.com", 22)).allowed);

  auto sub = set.check_connect(host("a.b.example.com", 8443));
  CHECK(sub.allowed);
  CHECK(sub.rule == "allow[1]");
  CHECK_FALSE(set.check_connect(host("example.com", 8443)).allowed);

  auto other = set.check_connect(host("evil.example"));
  CHECK_FALSE(other.allowed);
  CHECK(other.rule == "default_deny");
}

TEST_CASE("host names are normalized before matching", "[config][policy_set]") {
  auto set = single(R"({"allow": [{"host": "bücher.example"}, {"host": "api.github.com"}]})");
  CHECK(set.check_connect(host("API.GITHUB.COM.")).allowed);
  CHECK(set.check_connect(host("xn--bcher-kva.example")).allowed);
  CHECK(set.check_connect(host("BÜCHER.example")).allowed);
  CHECK_FALSE(set.check_connect(host("bad host")).allowed);
}

TEST_CASE("deny wins over allow within a layer", "[config][policy_set]") {
  auto set = single(R"({
    "allow": [{"host": "*.github.com"}, {"host": "github.com"}],
    "deny": [{"host": "gist.github.com"}]
  })");
  CHECK(set.check_connect(host("api.github.com")).allowed);
  auto v = set.check_connect(host("gist.github.com"));
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "deny[0]");
}

TEST_CASE("a second layer can only narrow", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(
      layer(R"({"allow": [{"host": "*.github.com"}, {"host": "api.openai.com"}]})", "team.json"));
  layers.push_back(
      layer(R"({"allow": [{"host": "api.github.com"}, {"host": "pypi.org"}]})", "mine.json"));
  policy_set set(std::move(layers));

  auto both = set.check_connect(host("api.github.com"));
  CHECK(both.allowed);
  CHECK(both.rule == "team.json#allow[0]");

  auto only_first = set.check_connect(host("api.openai.com"));
  CHECK_FALSE(only_first.allowed);
  CHECK(only_first.rule == "mine.json#default_deny");

  auto only_second = set.check_connect(host("pypi.org"));
  CHECK_FALSE(only_second.allowed);
  CHECK(only_second.rule == "team.json#default_deny");
}

TEST_CASE("an explicit deny in any layer is reported first", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "api.github.com"}]})", "a.json"));
  layers.push_back(
      layer(R"({"deny": [{"host": "*.example.com"}, {"host": "gist.github.com"}]})", "b.json"));
  policy_set set(std::move(layers));
  auto v = set.check_connect(host("gist.github.com"));
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "b.json#deny[1]");
}

TEST_CASE("a deny-only layer only refuses", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "*.github.com"}]})", "a.json"));
  layers.push_back(layer(R"({"deny": [{"host": "gist.github.com"}]})", "b.json"));
  policy_set set(std::move(layers));
  auto ok = set.check_connect(host("api.github.com"));
  CHECK(ok.allowed);
  CHECK(ok.rule == "a.json#allow[0]");
  CHECK_FALSE(set.check_connect(host("gist.github.com")).allowed);

  // On its own, a deny-only layer grants nothing: egress needs an allow rule somewhere.
  auto alone = single(R"({"deny": [{"host": "gist.github.com"}]})");
  auto v = alone.check_connect(host("api.github.com"));
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "default_deny");
}

TEST_CASE("layers without egress rules are ignored", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "api.github.com"}]})", "a.json"));
  layers.push_back(layer(R"({"budgets": {"requests": 10}})", "b.json"));
  policy_set set(std::move(layers));
  CHECK(set.check_connect(host("api.github.com")).allowed);
  CHECK_FALSE(policy_set({}).check_connect(host("api.github.com")).allowed);
}

TEST_CASE("a tunnel needs every layer to agree", "[config][policy_set]") {
  const char* tunnel = R"({"allow": [{"host": "pinned.example.com", "tunnel": true}]})";
  const char* intercept = R"({"allow": [{"host": "*.example.com"}]})";

  auto alone = single(tunnel);
  auto v = alone.check_connect(host("pinned.example.com"));
  CHECK(v.allowed);
  CHECK(v.tunnel);
  CHECK(v.rule == "allow[0]");

  std::vector<policy> agree;
  agree.push_back(layer(tunnel, "a.json"));
  agree.push_back(layer(tunnel, "b.json"));
  CHECK(policy_set(std::move(agree)).check_connect(host("pinned.example.com")).tunnel);

  std::vector<policy> disagree;
  disagree.push_back(layer(tunnel, "a.json"));
  disagree.push_back(layer(intercept, "b.json"));
  auto mixed = policy_set(std::move(disagree)).check_connect(host("pinned.example.com"));
  CHECK(mixed.allowed);
  CHECK_FALSE(mixed.tunnel);

  // A deny rule with methods cannot be enforced inside a tunnel, so it forces interception.
  std::vector<policy> l7deny;
  l7deny.push_back(layer(tunnel, "a.json"));
  l7deny.push_back(
      layer(R"({"deny": [{"host": "pinned.example.com", "methods": ["DELETE"]}]})", "b.json"));
  auto forced = policy_set(std::move(l7deny)).check_connect(host("pinned.example.com"));
  CHECK(forced.allowed);
  CHECK_FALSE(forced.tunnel);

  // A deny-only layer with host-level rules does not stop a tunnel elsewhere.
  std::vector<policy> hostdeny;
  hostdeny.push_back(layer(tunnel, "a.json"));
  hostdeny.push_back(layer(R"({"deny": [{"host": "gist.github.com"}]})", "b.json"));
  CHECK(policy_set(std::move(hostdeny)).check_connect(host("pinned.example.com")).tunnel);
}

TEST_CASE("a credential in another layer turns a tunnel into interception",
          "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(
      layer(R"({"allow": [{"host": "pinned.example.com", "tunnel": true}]})", "a.json"));
  layers.push_back(layer(
      R"({"credentials": {"c": {"type": "bearer", "env": ["T"], "hosts": ["*.example.com"]}}})",
      "b.json"));
  auto v = policy_set(std::move(layers)).check_connect(host("pinned.example.com"));
  CHECK(v.allowed);
  CHECK_FALSE(v.tunnel);
}

TEST_CASE("IP literals match cidr rules only", "[config][policy_set]") {
  auto set = single(R"({
    "allow": [{"cidr": "10.20.0.0/16", "ports": [8080]}, {"host": "*"}, {"cidr": "fd00::/8"}],
    "deny": [{"cidr": "10.20.9.0/24", "ports": [8080]}]
  })");
  auto v = set.check_connect(ip("10.20.1.2", 8080));
  CHECK(v.allowed);
  CHECK(v.rule == "allow[0]");
  CHECK_FALSE(set.check_connect(ip("10.20.1.2", 443)).allowed);
  CHECK_FALSE(set.check_connect(ip("10.21.1.2", 8080)).allowed);  // "*" never matches an IP
  CHECK(set.check_connect(host("anything.example")).allowed);     // but does match any name
  auto denied = set.check_connect(ip("10.20.9.9", 8080));
  CHECK_FALSE(denied.allowed);
  CHECK(denied.rule == "deny[0]");
  CHECK(set.check_connect(ip("fd00::1")).allowed);
  // An IP literal given as text is recognised as one.
  CHECK(set.check_connect(destination{"10.20.1.2", std::nullopt, 8080}).allowed);
  CHECK_FALSE(set.check_connect(destination{"1.2.3.4", std::nullopt, 443}).allowed);
}

TEST_CASE("deny rules see through v4-mapped IPv6, allow rules do not", "[config][policy_set]") {
  auto set = single(R"({
    "allow": [{"cidr": "::/0"}, {"cidr": "198.51.100.0/24"}],
    "deny": [{"cidr": "203.0.113.0/24"}]
  })");
  CHECK_FALSE(set.check_connect(ip("::ffff:203.0.113.5")).allowed);
  CHECK(set.check_connect(ip("::ffff:198.51.100.5")).allowed);  // via ::/0, not the v4 rule
  auto v4only = single(R"({"allow": [{"cidr": "198.51.100.0/24"}]})");
  CHECK_FALSE(v4only.check_connect(ip("::ffff:198.51.100.5")).allowed);
}

TEST_CASE("check_address: private_ok and denied", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "*.corp"}, {"cidr": "10.0.0.0/8", "ports": [443]}],
                             "deny": [{"cidr": "10.9.0.0/16"}]})",
                         "a.json"));
  layers.push_back(
      layer(R"({"allow": [{"host": "git.corp"}, {"cidr": "10.1.0.0/16"}]})", "b.json"));
  policy_set set(std::move(layers));

  auto ok = set.check_address(*ip_address::parse("10.1.2.3"), 443);
  CHECK_FALSE(ok.denied);
  CHECK(ok.private_ok);

  auto one_layer = set.check_address(*ip_address::parse("10.2.0.1"), 443);  // only a.json covers it
  CHECK_FALSE(one_layer.denied);
  CHECK_FALSE(one_layer.private_ok);

  auto wrong_port = set.check_address(*ip_address::parse("10.1.2.3"), 80);
  CHECK_FALSE(wrong_port.private_ok);

  auto denied = set.check_address(*ip_address::parse("10.9.1.1"), 443);
  CHECK(denied.denied);
  CHECK(denied.rule == "a.json#deny[0]");
  CHECK_FALSE(denied.private_ok);

  auto public_addr = set.check_address(*ip_address::parse("8.8.8.8"), 443);
  CHECK_FALSE(public_addr.denied);
  CHECK_FALSE(public_addr.private_ok);
}

TEST_CASE("check_address: deny-only layers and host-only policies", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"cidr": "192.168.0.0/16"}]})", "a.json"));
  layers.push_back(layer(R"({"deny": [{"host": "x.example"}]})", "b.json"));
  policy_set set(std::move(layers));
  CHECK(set.check_address(*ip_address::parse("192.168.1.1"), 443).private_ok);

  auto hosts_only = single(R"({"allow": [{"host": "*"}]})");
  CHECK_FALSE(hosts_only.check_address(*ip_address::parse("192.168.1.1"), 443).private_ok);
  CHECK_FALSE(hosts_only.check_address(*ip_address::parse("192.168.1.1"), 443).denied);
}

TEST_CASE("methods and paths: check_request vs check_connect", "[config][policy_set]") {
  auto set = single(R"({
    "allow": [{"host": "api.openai.com", "methods": ["POST"], "paths": ["/v1/*"]},
              {"host": "api.github.com"}],
    "deny": [{"host": "api.github.com", "methods": ["DELETE"]},
             {"host": "api.github.com", "paths": ["/admin/*"]}]
  })");
  // Connection level: L7 allow rules admit, L7 deny rules do not refuse.
  auto connect = set.check_connect(host("api.openai.com"));
  CHECK(connect.allowed);
  CHECK(connect.rule == "allow[0]");
  CHECK(set.check_connect(host("api.github.com")).allowed);

  auto post = set.check_request(host("api.openai.com"), "POST", "/v1/chat/completions?x=1");
  CHECK(post.allowed);
  CHECK(post.rule == "allow[0]");
  auto get = set.check_request(host("api.openai.com"), "GET", "/v1/models");
  CHECK_FALSE(get.allowed);
  CHECK(get.rule == "default_deny");
  CHECK_FALSE(
      set.check_request(host("api.openai.com"), "post", "/v1/x").allowed);  // case-sensitive
  CHECK_FALSE(set.check_request(host("api.openai.com"), "POST", "/v2/x").allowed);
  CHECK_FALSE(set.check_request(host("api.openai.com"), "POST", "/v1/../admin").allowed);
  CHECK(set.check_request(host("api.openai.com"), "POST", "/%76%31/x").allowed);

  CHECK(set.check_request(host("api.github.com"), "GET", "/repos").allowed);
  auto del = set.check_request(host("api.github.com"), "DELETE", "/repos/o/r");
  CHECK_FALSE(del.allowed);
  CHECK(del.rule == "deny[0]");
  auto admin = set.check_request(host("api.github.com"), "GET", "/x/../admin/users");
  CHECK_FALSE(admin.allowed);
  CHECK(admin.rule == "deny[1]");
  // A path that cannot be normalized fails closed: denied by path deny rules...
  CHECK_FALSE(set.check_request(host("api.github.com"), "GET", "/a%zz").allowed);
  // ...and matches no allow rule with paths.
  CHECK_FALSE(set.check_request(host("api.openai.com"), "POST", "/v1/%zz").allowed);
}

TEST_CASE("the default policy as a policy set", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(parse_policy(broker::config::default_policy_text(), "<default>"));
  policy_set set(std::move(layers));
  CHECK(set.check_connect(host("api.github.com")).allowed);
  CHECK(set.check_connect(host("objects.githubusercontent.com")).allowed);
  CHECK(set.check_connect(host("s3.us-east-1.amazonaws.com")).allowed);
  CHECK(set.check_connect(host("registry.npmjs.org")).allowed);
  CHECK(set.check_connect(host("generativelanguage.googleapis.com")).allowed);
  CHECK_FALSE(set.check_connect(host("api.github.com", 80)).allowed);
  CHECK_FALSE(set.check_connect(host("example.com")).allowed);
  CHECK_FALSE(set.check_connect(ip("140.82.112.6")).allowed);
  CHECK_FALSE(set.check_address(*ip_address::parse("10.0.0.1"), 443).private_ok);
}

TEST_CASE("a deny rule without ports refuses the host on every port", "[config][policy_set]") {
  auto set = single(
      R"({"allow": [{"host": "*.example.test", "ports": [8080, 443]}],
          "deny": [{"host": "api.example.test"}]})");
  auto v = set.check_connect(host("api.example.test", 8080));
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "deny[0]");
  CHECK_FALSE(set.check_connect(host("api.example.test", 443)).allowed);
  CHECK(set.check_connect(host("www.example.test", 8080)).allowed);
  CHECK(set.layers()[0].deny[0].ports.empty());
  CHECK(set.layers()[0].allow[0].ports == std::vector<std::uint16_t>{8080, 443});
}

TEST_CASE("a deny path rule sees merged slashes and refuses ambiguous paths",
          "[config][policy_set]") {
  auto set = single(R"({"allow": [{"host": "api.example.test"}],
                        "deny": [{"host": "api.example.test", "paths": ["/denied/*"]}]})");
  auto get = [&](const char* path) {
    return set.check_request(host("api.example.test"), "GET", path);
  };
  for (const char* path : {"/denied/x", "//denied/x", "/denied//x", "/x/..//denied/x",
                           "/%64enied/x", "/denied;v=1/x", "/denied;/x"}) {
    auto v = get(path);
    CHECK_FALSE(v.allowed);
    CHECK(v.rule == "deny[0]");
    CHECK_FALSE(v.ambiguous_path);
  }
  auto slash = get("/denied%2fx");
  CHECK_FALSE(slash.allowed);
  CHECK(slash.rule == "deny[0]");
  REQUIRE(slash.ambiguous_path);
  CHECK(*slash.ambiguous_path ==
        "an encoded '/' (%2F) in the path is ambiguous on a host with path rules");
  for (const char* path :
       {"/x/..;/denied/x", "/x/..%5cdenied/x", "/x\\..\\denied/x", "/denied%252fx", "/denied%00x",
        "/x/%252e%252e/denied/x", "/x/.;a/denied/x", "/x//../denied/x", "/a%2525"}) {
    auto v = get(path);
    CHECK_FALSE(v.allowed);
    CHECK(v.ambiguous_path);
  }
  // Legitimate paths still pass; only the path part before '?' counts.
  for (const char* path : {"/ok/a%20b", "/ok/a;b=c", "/ok/%41", "/ok/x?q=%2F%5C..;%00", "/Denied/x",
                           "/denied", "/deniedx/y", "/x/../ok"}) {
    auto v = get(path);
    CHECK(v.allowed);
    CHECK(v.rule == "allow[0]");
    CHECK_FALSE(v.ambiguous_path);
  }
}

TEST_CASE("an allow path rule cannot be escaped", "[config][policy_set]") {
  auto set =
      single(R"({"allow": [{"host": "api.example.test", "paths": ["/ok/*", "/files/*.txt"]}]})");
  auto get = [&](const char* path) {
    return set.check_request(host("api.example.test"), "GET", path);
  };
  for (const char* path : {"/ok/x", "//ok/x", "/ok/a%20b", "/ok/a;b=c", "/ok/%41",
                           "/ok/x?next=%2F..%2Fsecret", "/files/a.txt", "/files/%61.txt"}) {
    auto v = get(path);
    CHECK(v.allowed);
    CHECK(v.rule == "allow[0]");
    CHECK_FALSE(v.ambiguous_path);
  }
  for (const char* path : {"/ok/..;/secret", "/ok/..%3b/secret", "/ok/%2e%2e;/secret",
                           "/ok/..%2fsecret", "/ok/..%5Csecret", "/ok/..\\secret",
                           "/ok/%252e%252e/secret", "/ok//../secret", "/ok/;x/../secret"}) {
    auto v = get(path);
    CHECK_FALSE(v.allowed);
    CHECK(v.rule == "allow[0]");
    CHECK(v.ambiguous_path);
  }
  // Case-sensitive; and with ";parameters" both readings must be allowed: Tomcat serves
  // "/files/secret;.txt" as "/files/secret", nginx "/files/a.txt;v=1" as itself.
  for (const char* path :
       {"/secret", "/ok/../secret", "/OK/x", "/ok", "/files/secret;.txt", "/files/a.txt;v=1"}) {
    auto v = get(path);
    CHECK_FALSE(v.allowed);
    CHECK(v.rule == "default_deny");
    CHECK_FALSE(v.ambiguous_path);
  }
}

TEST_CASE("only hosts with path rules refuse ambiguous paths", "[config][policy_set]") {
  auto set = single(R"({
    "allow": [{"host": "api.example.test", "ports": [443], "paths": ["/ok/*"]},
              {"host": "other.example.test", "methods": ["GET"]},
              {"host": "api.example.test", "ports": [8080]}]
  })");
  auto other = set.check_request(host("other.example.test"), "GET", "/a%2Fb/..;/%5C");
  CHECK(other.allowed);
  CHECK_FALSE(other.ambiguous_path);
  // The path rule is for port 443 only.
  auto port = set.check_request(host("api.example.test", 8080), "GET", "/a%2Fb");
  CHECK(port.allowed);
  CHECK_FALSE(port.ambiguous_path);
  CHECK(set.check_request(host("api.example.test"), "GET", "/ok/a%2Fb").ambiguous_path);
  // A connection decision never looks at a path.
  CHECK_FALSE(set.check_connect(host("api.example.test")).ambiguous_path);
}

TEST_CASE("a path rule in any layer makes the path matter", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "api.example.test"}]})", "a.json"));
  layers.push_back(
      layer(R"({"deny": [{"host": "*.example.test", "paths": ["/admin/*"]}]})", "b.json"));
  policy_set set(std::move(layers));
  auto v = set.check_request(host("api.example.test"), "GET", "/x/..;/admin/users");
  CHECK_FALSE(v.allowed);
  CHECK(v.rule == "b.json#deny[0]");
  CHECK(v.ambiguous_path);
  auto merged = set.check_request(host("api.example.test"), "GET", "//admin/users");
  CHECK_FALSE(merged.allowed);
  CHECK(merged.rule == "b.json#deny[0]");
  CHECK_FALSE(merged.ambiguous_path);
  CHECK(set.check_request(host("api.example.test"), "GET", "/users/a%20b").allowed);
}

TEST_CASE("a host refused whatever the path reports that, not the path", "[config][policy_set]") {
  auto set = single(R"({"allow": [{"host": "*.example.test", "paths": ["/ok/*"]}],
                        "deny": [{"host": "api.example.test"}]})");
  auto denied = set.check_request(host("api.example.test"), "GET", "/ok/%2F");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.rule == "deny[0]");
  CHECK_FALSE(denied.ambiguous_path);
  auto port = set.check_request(host("www.example.test", 22), "GET", "/ok/%2F");
  CHECK_FALSE(port.allowed);
  CHECK(port.rule == "default_deny");
  CHECK_FALSE(port.ambiguous_path);
  auto ambiguous = set.check_request(host("www.example.test"), "GET", "/ok/%2F");
  CHECK(ambiguous.rule == "allow[0]");
  CHECK(ambiguous.ambiguous_path);
}

TEST_CASE("check_name: a DNS name is allowed when some port of it is", "[config][policy_set]") {
  auto set = single(R"({"allow": [{"host": "api.github.com"},
                                  {"host": "*.example.com", "ports": [8443]},
                                  {"host": "git.example.org", "ports": [22], "tunnel": true}],
                        "deny": [{"host": "bad.example.com"}]})");
  CHECK(set.check_name("api.github.com").allowed);
  CHECK(set.check_name("API.GitHub.com.").allowed);
  auto sub = set.check_name("x.example.com");
  CHECK(sub.allowed);
  CHECK(sub.rule == "allow[1]");
  CHECK(set.check_name("git.example.org").allowed);  // only port 22, through a tunnel rule
  auto denied = set.check_name("bad.example.com");
  CHECK_FALSE(denied.allowed);
  CHECK(denied.rule == "deny[0]");
  auto unknown = set.check_name("aGVsbG8gd29ybGQ.exfil.example");
  CHECK_FALSE(unknown.allowed);
  CHECK(unknown.rule == "default_deny");
  CHECK_FALSE(set.check_name("bad name").allowed);
}

TEST_CASE("check_name: every layer must allow the name on a common port", "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "a.example", "ports": [443]},
                                       {"host": "b.example", "ports": [443]}]})",
                         "team.json"));
  layers.push_back(layer(R"({"allow": [{"host": "a.example", "ports": [8080]},
                                       {"host": "b.example", "ports": [443]}]})",
                         "mine.json"));
  policy_set set(std::move(layers));
  CHECK_FALSE(set.check_name("a.example").allowed);
  CHECK(set.check_name("b.example").allowed);
}

TEST_CASE("an audit-only layer records what it would refuse and refuses nothing",
          "[config][policy_set]") {
  std::vector<policy> layers;
  layers.push_back(
      layer(R"({"allow": [{"host": "*.example.com"}, {"host": "api.github.com"}]})", "team.json"));
  layers.push_back(layer(R"({"enforcement": "audit",
                             "allow": [{"host": "api.github.com"}, {"host": "docs.example.com"}],
                             "deny": [{"host": "docs.example.com", "paths": ["/private/*"]}]})",
                         "next.json"));
  const policy_set set(std::move(layers));

  // Both agree: no would-deny.
  auto v = set.check_request(host("api.github.com"), "GET", "/repos");
  CHECK(v.allowed);
  CHECK(v.would_deny.empty());
  // The enforcing layer allows, the audit layer has no allow rule for it.
  v = set.check_request(host("cdn.example.com"), "GET", "/x");
  CHECK(v.allowed);
  CHECK(v.rule == "team.json#allow[0]");
  CHECK(v.would_deny == "next.json#default_deny");
  // An explicit deny rule of the audit layer is named before a default_deny.
  v = set.check_request(host("docs.example.com"), "GET", "/private/a");
  CHECK(v.allowed);
  CHECK(v.would_deny == "next.json#deny[0]");
  // Connection level: the path rule cannot decide yet, and audit layers never keep a tunnel out.
  CHECK(set.check_connect(host("docs.example.com")).would_deny.empty());
  // What the enforcing layers refuse stays refused, whatever the audit layer says.
  v = set.check_request(host("evil.test"), "GET", "/");
  CHECK_FALSE(v.allowed);
  CHECK(v.would_deny.empty());

  // Audit layers' allow rules allow nothing on their own.
  std::vector<policy> only_audit;
  only_audit.push_back(layer(R"({"enforcement": "audit", "allow": [{"host": "a.test"}]})"));
  CHECK_FALSE(policy_set(std::move(only_audit)).check_connect(host("a.test")).allowed);
}

TEST_CASE("ask: a refusal only asking layers made for want of an allow rule can be approved",
          "[config][policy_set][ask]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"on_deny": "ask",
    "allow": [{"host": "api.github.com"}, {"host": "*.example.com"}],
    "deny": [{"host": "evil.example.com"}, {"host": "x.example.com", "paths": ["/admin/*"]}],
    "approvals": {"never": ["*.internal.test"]}})",
                         "user.json"));
  policy_set set(std::move(layers));
  auto v = set.check_connect(host("docs.test"));
  CHECK_FALSE(v.allowed);
  CHECK(v.askable);
  CHECK(v.rule == "default_deny");
  // An explicit deny rule is never asked about, nor what "never" lists, nor an IP literal.
  CHECK_FALSE(set.check_connect(host("evil.example.com")).askable);
  CHECK_FALSE(set.check_request(host("x.example.com"), "GET", "/admin/x").askable);
  CHECK_FALSE(set.check_connect(host("db.internal.test")).askable);
  CHECK_FALSE(set.check_connect(ip("192.0.2.1")).askable);
  // Allowed requests are not asked about; an ambiguous path is a bad request, not an ask.
  CHECK_FALSE(set.check_connect(host("api.github.com")).askable);

  // An approval is an allow rule for that host and port: every method and path, nothing else.
  auto approved =
      set.with_approval(broker::config::make_approval_rule({"docs.test", 443, ""}, "approved[0]"));
  auto now = approved.check_request(host("docs.test"), "POST", "/any/thing");
  CHECK(now.allowed);
  CHECK(now.rule == "approved[0]");
  CHECK_FALSE(approved.check_connect(host("docs.test", 8443)).allowed);
  CHECK_FALSE(approved.check_connect(host("other.test")).allowed);
  CHECK_FALSE(set.check_connect(host("docs.test")).allowed);  // the set itself is unchanged

  // With a path prefix: that path and what is under it, not a longer name beside it.
  auto docs = set.with_approval(
      broker::config::make_approval_rule({"docs.test", 443, "/guide"}, "approved[1]"));
  CHECK(docs.check_request(host("docs.test"), "GET", "/guide").allowed);
  CHECK(docs.check_request(host("docs.test"), "GET", "/guide/a/b?x=1").allowed);
  CHECK_FALSE(docs.check_request(host("docs.test"), "GET", "/guidebook").allowed);
  CHECK(docs.check_request(host("docs.test"), "GET", "/guidebook").askable);
}

TEST_CASE("ask: a layer that does not ask, or only denies, keeps its refusals",
          "[config][policy_set][ask]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"on_deny": "deny", "allow": [{"host": "*.test"}]})", "team.json"));
  layers.push_back(layer(R"({"allow": [{"host": "a.test"}]})", "user.json"));
  layers.push_back(layer(R"({"deny": [{"host": "bad.test"}]})", "deny-only.json"));
  // wrap --ask: the user's layer (no "on_deny") asks, the team's ceiling does not.
  broker::config::ask_on_every_layer(layers);
  CHECK(layers[1].asks());
  CHECK_FALSE(layers[0].asks());
  policy_set set(std::move(layers));
  auto inside = set.check_connect(host("b.test"));
  CHECK_FALSE(inside.allowed);
  CHECK(inside.askable);  // only the asking layer refused
  CHECK(inside.rule == "user.json#default_deny");
  auto outside = set.check_connect(host("b.example"));
  CHECK_FALSE(outside.askable);  // the team's ceiling refused too
  CHECK_FALSE(set.check_connect(host("bad.test")).askable);
  // The approval goes to the asking layer only: the deny-only layer is not narrowed by it.
  auto approved =
      set.with_approval(broker::config::make_approval_rule({"b.test", 443, ""}, "approved[0]"));
  CHECK(approved.check_connect(host("b.test")).allowed);
  CHECK(approved.check_connect(host("a.test")).allowed);
  CHECK(approved.layers()[2].allow.empty());
  CHECK(approved.layers()[0].allow.size() == 1);
}

TEST_CASE("ask: approved.json's rules extend asking layers, never a host a layer keeps out",
          "[config][policy_set][ask]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"on_deny": "ask", "allow": [{"host": "a.test"}],
    "approvals": {"never": ["secret.test"]}})"));
  layers.push_back(
      layer(R"({"allow": [{"host": "*"}], "approvals": {"never": ["*.corp.test"]}})", "team.json"));
  auto approvals =
      layer(R"({"allow": [{"host": "*.test"}, {"host": "docs.test", "ports": [8443]}]})",
            "approved.json");
  broker::config::add_approved_rules(layers, approvals);
  REQUIRE(layers[0].allow.size() == 3);
  CHECK(layers[0].allow[1].approved);
  CHECK(layers[0].allow[1].name == "approved.json:allow[0]");
  CHECK(layers[1].allow.size() == 1);  // the team layer does not ask
  policy_set set(std::move(layers));
  auto v = set.check_connect(host("docs.test"));
  CHECK(v.allowed);
  CHECK(v.rule == "p.json#approved.json:allow[0]");
  // Every layer still decides: the team's layer allows no port 8443.
  CHECK_FALSE(set.check_connect(host("docs.test", 8443)).allowed);
  // "never" in any layer holds against an approved wildcard, and stays unaskable.
  CHECK_FALSE(set.check_connect(host("secret.test")).allowed);
  CHECK_FALSE(set.check_connect(host("secret.test")).askable);
  CHECK_FALSE(set.check_connect(host("git.corp.test")).allowed);
}

TEST_CASE("ask: a CONNECT the other layers tunnel is approved as a tunnel, and named as approved",
          "[config][policy_set][ask]") {
  std::vector<policy> layers;
  layers.push_back(layer(R"({"allow": [{"host": "pinned.test", "tunnel": true},
                                       {"host": "bound.test", "tunnel": true}]})",
                         "team.json"));
  layers.push_back(layer(R"({"on_deny": "ask", "allow": [{"host": "a.test"}],
    "credentials": {"k": {"type": "bearer", "env": ["K"], "hosts": ["bound.test"]}}})",
                         "user.json"));
  policy_set set(std::move(layers));
  auto v = set.check_connect(host("pinned.test"));
  CHECK(v.askable);
  CHECK(v.askable_tunnel);
  // A request inside is asked about as a request; a bound credential keeps it intercepted.
  CHECK_FALSE(set.check_request(host("pinned.test"), "GET", "/").askable_tunnel);
  CHECK(set.check_connect(host("bound.test")).askable);
  CHECK_FALSE(set.check_connect(host("bound.test")).askable_tunnel);
  // Unlisted by the team: an interception, asked per request.
  CHECK_FALSE(set.check_connect(host("other.test")).askable);

  auto rule = broker::config::make_approval_rule({"pinned.test", 443, "", true}, "approved[0]");
  CHECK(rule.tunnel);
  auto approved = set.with_approval(rule);
  auto now = approved.check_connect(host("pinned.test"));
  CHECK(now.allowed);
  CHECK(now.tunnel);
  CHECK(now.rule == "user.json#approved[0]");  // what the person approved let it go
  CHECK_THROWS_AS(
      broker::config::make_approval_rule({"pinned.test", 443, "/x", true}, "approved[1]"),
      std::invalid_argument);
}

TEST_CASE("programs: an allow rule with programs admits only the processes it names",
          "[config][policy_set][programs]") {
  broker::test::program_files files;
  const auto git = files.add("usr/bin/git");
  const auto remote = files.add("usr/lib/git-core/git-remote-http");
  const auto gh = files.add("opt/gh/bin/gh");
  const auto curl = files.add("usr/bin/curl");
  const auto ghx = files.add("usr/bin/ghx");
  const std::string text = R"({"allow": [
    {"host": "github.com", "programs": [")" +
                           git + R"(", ")" + files.path("usr/lib/git-core") +
                           R"(/git-remote-http*"]},
    {"host": "api.github.com", "programs": ["*/gh"]},
    {"host": "pypi.org"}]})";
  auto set = single(text.c_str());
  using broker::test::program_files;
  const auto allowed = [&](const char* name, const std::vector<std::string>& exes) {
    const auto client = program_files::held_by(exes);
    return set.check_request(host(name), "GET", "/", {client.get()}).allowed;
  };
  CHECK(set.check_connect(host("github.com"), {program_files::held_by({git}).get()}).allowed);
  CHECK(allowed("github.com", {remote}));
  CHECK(allowed("github.com", {remote, git}));  // git and its transport share the socket
  auto by_curl = program_files::held_by({curl});
  auto refused = set.check_request(host("github.com"), "GET", "/", {by_curl.get()});
  CHECK_FALSE(refused.allowed);
  CHECK(refused.rule == "default_deny");
  CHECK(allowed("api.github.com", {gh}));
  CHECK_FALSE(allowed("api.github.com", {ghx}));
  // Every holder must be listed: git's socket shared with curl is curl's too.
  CHECK_FALSE(allowed("github.com", {git, curl}));
  CHECK_FALSE(allowed("github.com", {curl, git}));
  // No attribution (serve, or a process broker could not identify): no match, fail closed.
  CHECK_FALSE(set.check_connect(host("github.com")).allowed);
  CHECK_FALSE(allowed("github.com", {""}));
  // Rules without programs: anyone.
  CHECK(set.check_connect(host("pypi.org")).allowed);
  // DNS (capture): the name resolves for whoever asks; the connection decides.
  CHECK(set.check_name("github.com").allowed);
}

TEST_CASE("programs: a glob, a path, never a bare name, and only on allow rules",
          "[config][policy][programs]") {
  auto fails = [](const char* text) { return broker::config::test::error_of(text, "p.json").what; };
  CHECK(fails(R"({"allow": [{"host": "a.test", "programs": ["git"]}]})")
            .find("allow[0].programs[0]: \"git\" is not a path or a glob") != std::string::npos);
  CHECK(fails(R"({"allow": [{"host": "a.test", "programs": []}]})").find("non-empty") !=
        std::string::npos);
  CHECK(fails(R"({"deny": [{"host": "a.test", "programs": ["*/curl"]}]})")
            .find("applies only to allow rules") != std::string::npos);
  auto p = broker::config::parse_policy(
      R"({"allow": [{"host": "a.test", "programs": ["*/git"]}],
          "credentials": {"gh": {"type": "github", "env": ["GH_TOKEN"], "hosts": ["a.test"],
                                 "programs": ["*/git", "*/gh"]}}})",
      "p.json");
  CHECK(p.allow[0].programs == std::vector<std::string>{"*/git"});
  CHECK(p.credentials.at("gh").programs == std::vector<std::string>{"*/git", "*/gh"});
  auto shown = broker::config::to_json(p);
  CHECK(shown["allow"][0]["programs_note"].get<std::string>().find("never in serve") !=
        std::string::npos);
  CHECK(shown["credentials"]["gh"]["programs"][1] == "*/gh");
  CHECK(p.allow[0].program_lines == std::vector<int>{1});
  CHECK(p.credentials.at("gh").program_lines == std::vector<int>{3, 3});
}

TEST_CASE("http2: an allow rule saying false keeps the host on HTTP/1.1, in any layer",
          "[policy_set]") {
  auto layer = [](const char* text) { return broker::config::parse_policy(text, "p.json"); };
  const broker::config::destination api{"api.example.com", std::nullopt, 443};
  const broker::config::destination old{"old.example.com", std::nullopt, 443};
  broker::config::policy_set one({layer(
      R"({"allow": [{"host": "api.example.com"}, {"host": "old.example.com", "http2": false}]})")});
  CHECK(one.check_connect(api).http2);
  CHECK_FALSE(one.check_connect(old).http2);
  CHECK(one.check_connect(old).allowed);
  // Another layer's rule for the host says it too.
  broker::config::policy_set two(
      {layer(R"({"allow": [{"host": "*.example.com"}]})"),
       layer(R"({"allow": [{"host": "api.example.com", "http2": false}]})")});
  CHECK_FALSE(two.check_connect(api).http2);
  // Only allow rules take it; it round-trips through policy check's JSON.
  CHECK_THROWS_AS(layer(R"({"deny": [{"host": "x.test", "http2": false}]})"),
                  broker::config::policy_error);
  CHECK(broker::config::to_json(one.layers()[0])["allow"][1]["http2"] == false);
  CHECK_FALSE(broker::config::to_json(one.layers()[0])["allow"][0].contains("http2"));
}
