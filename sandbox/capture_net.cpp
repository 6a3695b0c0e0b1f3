#include "sandbox/capture_net.hpp"

// <netinet/in.h> (from the header) comes before the kernel's headers, which then leave out
// their own copies of its definitions.
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/if_addr.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace broker::sandbox {

namespace {

// The kernel answers a few small messages at once; a stuck netlink socket must not hang the
// namespace's init for ever.
constexpr int reply_deadline_seconds = 5;
// Room for the whole batch (about 1 KiB) and any one reply: acks carry no copy of the request
// (NETLINK_CAP_ACK).
constexpr std::size_t buffer_size = 16384;

std::string netlink_failed(const std::string& step, int error) {
  return "could not " + step + ": " + std::strerror(error);
}

struct socket_closer {
  void operator()(mnl_socket* s) const { mnl_socket_close(s); }
};
using netlink_socket = std::unique_ptr<mnl_socket, socket_closer>;

// A bound netlink socket of `bus` whose reads time out, or nullptr with errno set.
netlink_socket open_netlink(int bus) {
  netlink_socket s(mnl_socket_open(bus));
  if (!s) return nullptr;
  const timeval deadline{reply_deadline_seconds, 0};
  const int one = 1;
  if (::setsockopt(mnl_socket_get_fd(s.get()), SOL_SOCKET, SO_RCVTIMEO, &deadline,
                   sizeof deadline) < 0 ||
      mnl_socket_setsockopt(s.get(), NETLINK_CAP_ACK, const_cast<int*>(&one), sizeof one) < 0 ||
      mnl_socket_bind(s.get(), 0, MNL_SOCKET_AUTOPID) < 0)
    return nullptr;
  return s;
}

struct ack_outcome {
  int error = 0;          // 0, or the errno of the first failure
  std::uint32_t seq = 0;  // the message it was about; 0 when sending or reading netlink_failed
};

// Sends `length` bytes of requests and reads replies until each of the messages numbered
// [first, last] is acknowledged (all of them carry NLM_F_ACK) or one fails. An error may also
// come for a message outside the range (an nfnetlink batch's begin marker when the batch as a
// whole is refused).
ack_outcome exchange(mnl_socket* s, const void* requests, std::size_t length, std::uint32_t first,
                     std::uint32_t last) {
  if (mnl_socket_sendto(s, requests, length) < 0) return {errno, 0};
  std::vector<bool> acked(last - first + 1, false);
  std::size_t waiting = acked.size();
  alignas(nlmsghdr) char reply[buffer_size];
  while (waiting > 0) {
    const ssize_t n = mnl_socket_recvfrom(s, reply, sizeof reply);
    if (n < 0) return {errno == EAGAIN ? ETIMEDOUT : errno, 0};
    int left = static_cast<int>(n);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(reply); mnl_nlmsg_ok(h, left);
         h = mnl_nlmsg_next(h, &left)) {
      if (h->nlmsg_type != NLMSG_ERROR) continue;
      const auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(h));
      if (e->error != 0) return {-e->error, h->nlmsg_seq};
      if (h->nlmsg_seq >= first && h->nlmsg_seq <= last && !acked[h->nlmsg_seq - first]) {
        acked[h->nlmsg_seq - first] = true;
        --waiting;
      }
    }
  }
  return {};
}

// --- rtnetlink: addresses and routes on lo ---

// One rtnetlink request under construction, in its own buffer.
struct rt_request {
  alignas(nlmsghdr) char buffer[512] = {};
  nlmsghdr* header;

  rt_request(std::uint16_t type, std::uint32_t seq) : header(mnl_nlmsg_put_header(buffer)) {
    header->nlmsg_type = type;
    // Replace rather than fail on a second call.
    header->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    header->nlmsg_seq = seq;
  }
  rt_request(const rt_request&) = delete;  // `header` points into `buffer`
  rt_request& operator=(const rt_request&) = delete;
};

std::string add_address(mnl_socket* s, std::uint32_t seq, unsigned lo, int family,
                        const void* address, std::size_t length, std::uint32_t flags,
                        const std::string& shown) {
  rt_request r(RTM_NEWADDR, seq);
  auto* a = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(r.header, sizeof(ifaddrmsg)));
  a->ifa_family = family;
  a->ifa_prefixlen = length * 8;
  a->ifa_flags = flags & 0xff;
  // Universe, as `ip address add` gives any address outside 127.0.0.0/8.
  a->ifa_scope = RT_SCOPE_UNIVERSE;
  a->ifa_index = lo;
  mnl_attr_put(r.header, IFA_LOCAL, length, address);
  mnl_attr_put(r.header, IFA_ADDRESS, length, address);
  if (flags != 0) mnl_attr_put_u32(r.header, IFA_FLAGS, flags);
  const ack_outcome o = exchange(s, r.buffer, r.header->nlmsg_len, seq, seq);
  return o.error == 0 ? "" : netlink_failed("add the address " + shown + " to lo", o.error);
}

// Every destination of `family` local: the local table's routes are looked up before the main
// table's, and this /0 is the least specific of them, so loopback's and the own addresses' more
// specific routes still win where they apply.
std::string add_local_default_route(mnl_socket* s, std::uint32_t seq, unsigned lo, int family) {
  rt_request r(RTM_NEWROUTE, seq);
  auto* m = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(r.header, sizeof(rtmsg)));
  m->rtm_family = family;
  m->rtm_dst_len = 0;
  m->rtm_table = RT_TABLE_LOCAL;
  m->rtm_protocol = RTPROT_STATIC;
  m->rtm_scope = RT_SCOPE_HOST;
  m->rtm_type = RTN_LOCAL;
  mnl_attr_put_u32(r.header, RTA_OIF, lo);
  const ack_outcome o = exchange(s, r.buffer, r.header->nlmsg_len, seq, seq);
  const char* shown = family == AF_INET ? "0.0.0.0/0" : "::/0";
  return o.error == 0
             ? ""
             : netlink_failed(std::string("add the local route ") + shown + " on lo", o.error);
}

std::string set_up_addresses_and_routes() {
  const unsigned lo = ::if_nametoindex("lo");
  if (lo == 0) return netlink_failed("find lo", errno);
  netlink_socket s = open_netlink(NETLINK_ROUTE);
  if (!s) return netlink_failed("open an rtnetlink socket", errno);
  const in_addr v4{htonl(namespace_ipv4)};
  // No duplicate address detection: nothing else is on lo, and a tentative address (while DAD
  // runs) can be neither bound nor chosen as a source. (Kernels skip DAD on loopback devices
  // today anyway; the flag says so rather than relying on it.)
  std::string error = add_address(s.get(), 1, lo, AF_INET, &v4, sizeof v4, 0, "198.18.0.1/32");
  if (error.empty())
    error = add_address(s.get(), 2, lo, AF_INET6, &namespace_ipv6, sizeof namespace_ipv6,
                        IFA_F_NODAD, "fd62:726b:7200::1/128");
  if (error.empty()) error = add_local_default_route(s.get(), 3, lo, AF_INET);
  if (error.empty()) error = add_local_default_route(s.get(), 4, lo, AF_INET6);
  return error;
}

// --- nftables: the redirecting chain, one batch ---

template <auto free>
struct nftnl_deleter {
  void operator()(auto* p) const { free(p); }
};
using table_ptr = std::unique_ptr<nftnl_table, nftnl_deleter<nftnl_table_free>>;
using chain_ptr = std::unique_ptr<nftnl_chain, nftnl_deleter<nftnl_chain_free>>;
using rule_ptr = std::unique_ptr<nftnl_rule, nftnl_deleter<nftnl_rule_free>>;

template <typename T>
T* allocated(T* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// A rule of the capture chain, built one expression at a time; each expression reads or writes
// register 1 (the 16-byte NFT_REG_1, as nft itself uses) or sets the verdict.
class rule_builder {
 public:
  rule_builder() : rule_(allocated(nftnl_rule_alloc())) {
    nftnl_rule_set_str(rule_.get(), NFTNL_RULE_TABLE, capture_table);
    nftnl_rule_set_str(rule_.get(), NFTNL_RULE_CHAIN, capture_chain);
  }

  rule_builder& meta(std::uint32_t key) {
    nftnl_expr* e = add("meta");
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
    return *this;
  }
  rule_builder& payload(std::uint32_t base, std::uint32_t offset, std::uint32_t length) {
    nftnl_expr* e = add("payload");
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, length);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
    return *this;
  }
  // Compared as bytes: `value` in network order, as the packet holds it.
  rule_builder& equals(const void* value, std::uint32_t length) {
    nftnl_expr* e = add("cmp");
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, value, length);
    return *this;
  }
  rule_builder& equals(std::uint8_t value) { return equals(&value, 1); }
  rule_builder& load(const void* value, std::uint32_t length) {
    nftnl_expr* e = add("immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
    nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, value, length);
    return *this;
  }
  rule_builder& verdict(std::uint32_t code) {
    nftnl_expr* e = add("immediate");
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, code);
    return *this;
  }
  // To the port in register 1 on the local address (127.0.0.1 or ::1 on the output hook).
  rule_builder& redirect() {
    nftnl_expr* e = add("redir");
    nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
    return *this;
  }
  nftnl_rule* get() const { return rule_.get(); }

 private:
  nftnl_expr* add(const char* name) {
    nftnl_expr* e = allocated(nftnl_expr_alloc(name));
    nftnl_rule_add_expr(rule_.get(), e);  // the rule owns it from here
    return e;
  }

  rule_ptr rule_;
};

// The batch under construction: each message numbered, with what it does for the error text.
class nft_batch {
 public:
  nft_batch() : batch_(mnl_nlmsg_batch_start(buffer_, sizeof buffer_)) {
    allocated(batch_);
    nftnl_batch_begin(current(), next_seq_++);
    advance();
    first_ = next_seq_;
  }
  ~nft_batch() { mnl_nlmsg_batch_stop(batch_); }
  nft_batch(const nft_batch&) = delete;
  nft_batch& operator=(const nft_batch&) = delete;

  // A message's header of `type`, acknowledged, with `step` as its failure text; the caller
  // builds the payload under it.
  nlmsghdr* add(std::uint16_t type, std::uint16_t flags, std::string step) {
    steps_.push_back(std::move(step));
    return nftnl_nlmsg_build_hdr(current(), type, NFPROTO_INET, flags | NLM_F_ACK, next_seq_++);
  }
  void added() { advance(); }

  // Sent over `s`, the acks read: "" or the failure sentence.
  std::string commit(mnl_socket* s) {
    const std::uint32_t last = next_seq_ - 1;
    nftnl_batch_end(current(), next_seq_++);
    advance();
    const ack_outcome o =
        exchange(s, mnl_nlmsg_batch_head(batch_), mnl_nlmsg_batch_size(batch_), first_, last);
    if (o.error == 0) return "";
    const bool one_of_ours = o.seq >= first_ && o.seq <= last;
    return netlink_failed(one_of_ours ? steps_[o.seq - first_] : "commit the nftables batch",
                          o.error);
  }

 private:
  char* current() { return static_cast<char*>(mnl_nlmsg_batch_current(batch_)); }
  // The whole batch is about 1 KiB; running out of room would be a bug here.
  void advance() {
    if (!mnl_nlmsg_batch_next(batch_)) throw std::length_error("nftables batch too large");
  }

  // mnl_nlmsg_batch wants room for one message past its end.
  alignas(nlmsghdr) char buffer_[2 * buffer_size];
  mnl_nlmsg_batch* batch_;
  std::uint32_t next_seq_ = 1;
  std::uint32_t first_ = 0;
  std::vector<std::string> steps_;
};

void add_rule(nft_batch& batch, const rule_builder& rule, const std::string& shown) {
  nlmsghdr* h = batch.add(NFT_MSG_NEWRULE, NLM_F_APPEND | NLM_F_CREATE,
                          "add the nftables rule \"" + shown + "\"");
  nftnl_rule_nlmsg_build_payload(h, rule.get());
  batch.added();
}

std::string set_up_redirect(std::uint16_t redirect_port, int* netfilter_socket) {
  table_ptr table(allocated(nftnl_table_alloc()));
  nftnl_table_set_str(table.get(), NFTNL_TABLE_NAME, capture_table);

  chain_ptr chain(allocated(nftnl_chain_alloc()));
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TABLE, capture_table);
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_NAME, capture_chain);
  nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TYPE, "nat");
  nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
  nftnl_chain_set_s32(chain.get(), NFTNL_CHAIN_PRIO, -100);  // NF_IP_PRI_NAT_DST, "dstnat"
  nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_POLICY, NF_ACCEPT);

  nft_batch batch;
  // nft's idiom for "this table, fresh": make it if missing, delete it, make it again, all in
  // one transaction, so a second call replaces the rules instead of appending a second set.
  nftnl_table_nlmsg_build_payload(
      batch.add(NFT_MSG_NEWTABLE, NLM_F_CREATE, "create the nftables table inet broker_capture"),
      table.get());
  batch.added();
  nftnl_table_nlmsg_build_payload(
      batch.add(NFT_MSG_DELTABLE, 0, "replace the nftables table inet broker_capture"),
      table.get());
  batch.added();
  nftnl_table_nlmsg_build_payload(
      batch.add(NFT_MSG_NEWTABLE, NLM_F_CREATE, "create the nftables table inet broker_capture"),
      table.get());
  batch.added();
  nftnl_chain_nlmsg_build_payload(
      batch.add(NFT_MSG_NEWCHAIN, NLM_F_CREATE, "create the nat chain on the output hook"),
      chain.get());
  batch.added();

  // Loopback stays loopback: the broker's own listener and anything else the command serves
  // itself. The inet family sees both protocols, so each address test first checks which.
  const std::uint8_t loopback_net = 127;
  add_rule(batch,
           rule_builder()
               .meta(NFT_META_NFPROTO)
               .equals(NFPROTO_IPV4)
               .payload(NFT_PAYLOAD_NETWORK_HEADER, offsetof(iphdr, daddr), 1)
               .equals(&loopback_net, 1)
               .verdict(NFT_RETURN),
           "ip daddr 127.0.0.0/8 return");
  add_rule(batch,
           rule_builder()
               .meta(NFT_META_NFPROTO)
               .equals(NFPROTO_IPV6)
               .payload(NFT_PAYLOAD_NETWORK_HEADER, offsetof(ip6_hdr, ip6_dst), sizeof(in6_addr))
               .equals(&in6addr_loopback, sizeof(in6_addr))
               .verdict(NFT_RETURN),
           "ip6 daddr ::1 return");
  // DNS over TCP goes to the namespace's own resolver on port 53, as UDP does by the routes.
  const std::uint16_t dns_port = htons(53);
  add_rule(batch,
           rule_builder()
               .meta(NFT_META_L4PROTO)
               .equals(IPPROTO_TCP)
               .payload(NFT_PAYLOAD_TRANSPORT_HEADER, offsetof(tcphdr, dest), sizeof dns_port)
               .equals(&dns_port, sizeof dns_port)
               .verdict(NFT_RETURN),
           "meta l4proto tcp th dport 53 return");
  const std::uint16_t port = htons(redirect_port);
  add_rule(
      batch,
      rule_builder().meta(NFT_META_L4PROTO).equals(IPPROTO_TCP).load(&port, sizeof port).redirect(),
      "meta l4proto tcp redirect to :" + std::to_string(redirect_port));

  netlink_socket s = open_netlink(NETLINK_NETFILTER);
  if (!s) return netlink_failed("open an nfnetlink socket", errno);
  std::string error = batch.commit(s.get());
  // A second descriptor keeps the socket alive past `s`: see set_up_capture.
  if (error.empty() && netfilter_socket)
    *netfilter_socket = ::fcntl(mnl_socket_get_fd(s.get()), F_DUPFD_CLOEXEC, 0);
  return error;
}

}  // namespace

std::string set_up_capture(std::uint16_t redirect_port, int* netfilter_socket) {
  if (netfilter_socket) *netfilter_socket = -1;
  try {
    std::string error = set_up_addresses_and_routes();
    if (error.empty()) error = set_up_redirect(redirect_port, netfilter_socket);
    return error;
  } catch (const std::exception& e) {
    return std::string("could not set up capture: ") + e.what();
  }
}

}  // namespace broker::sandbox
