#include "capture/dns_responder.hpp"

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/asio.hpp"
#include "base/race.hpp"
#include "capture/dns_message.hpp"
#include "live/live_session.hpp"
#include "session/log.hpp"

#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND 78  // linux/in6.h; not in every libc's netinet/in.h
#endif

namespace broker::capture {

namespace {

// Long enough that resolvers do not ask again for every connection; the address stays the
// name's for the whole session anyway.
constexpr std::uint32_t answer_ttl = 60;
// A TCP client gets this long for each message, and at most this many connections are served
// at once (RFC 7766 §6.2 lets a server close idle ones).
constexpr auto tcp_message_time = std::chrono::seconds(10);
constexpr std::size_t max_tcp_clients = 64;

std::string bytes_of(const config::ip_address& a) {
  const std::size_t n = a.v4 ? 4 : 16;
  return std::string(reinterpret_cast<const char*>(a.bytes.data()), n);
}

bool is_localhost(std::string_view name) {
  return name == "localhost" || name.ends_with(".localhost");
}

config::ip_address from_reverse(const std::array<std::uint8_t, 16>& bytes) {
  config::ip_address a;
  a.v4 = false;
  a.bytes = bytes;
  return a;
}

}  // namespace

dns_outcome answer_dns(std::string_view wire, bool over_tcp, const config::policy_set& policy,
                       synthetic_addresses& names, bool asks) {
  dns_outcome out;
  auto parsed = dns::parse_query(wire);
  if (auto* failed = std::get_if<dns::parse_failure>(&parsed)) {
    // A response is never answered: two responders would answer each other for ever.
    if (failed->header_read && failed->id && !failed->is_response)
      out.response =
          dns::build_header_only(*failed->id, failed->opcode,
                                 failed->opcode != 0 ? dns::rcode::notimp : dns::rcode::formerr);
    return out;
  }
  const auto& query = std::get<dns::query>(parsed);
  const auto& q = query.q;
  auto reply = [&](dns::rcode code, const std::vector<dns::record>& answers = {}) {
    out.response = dns::build_response(query, code, answers, over_tcp ? 65535 : query.udp_payload);
    return out;
  };
  if (query.opcode != 0) return reply(dns::rcode::notimp);
  if (query.edns && query.edns_version != 0) return reply(dns::rcode::badvers);
  if (q.qclass != 1 && q.qclass != 255) return reply(dns::rcode::refused);
  const bool want_a = q.qtype == dns::type::a || q.qtype == dns::type::any;
  const bool want_aaaa = q.qtype == dns::type::aaaa || q.qtype == dns::type::any;

  if (is_localhost(q.name)) {
    std::vector<dns::record> answers;
    if (want_a) answers.push_back({dns::type::a, answer_ttl, std::string("\x7f\0\0\x01", 4)});
    if (want_aaaa) answers.push_back({dns::type::aaaa, answer_ttl, std::string(15, '\0') + '\x01'});
    return reply(dns::rcode::noerror, answers);
  }
  if (q.qtype == dns::type::ptr) {
    if (auto address = dns::reverse_name_address(q.name)) {
      auto name = names.name_of(from_reverse(*address));
      auto encoded = name ? dns::encode_name(*name) : std::nullopt;
      if (!encoded) return reply(dns::rcode::nxdomain);
      return reply(dns::rcode::noerror, {{dns::type::ptr, answer_ttl, std::move(*encoded)}});
    }
  }
  const auto verdict = q.name.empty() ? config::verdict{} : policy.check_name(q.name);
  // A name a person may approve resolves, so that its connection arrives and is asked about.
  if (!verdict.allowed && !(asks && verdict.askable)) {
    out.refused = refused_name{q.name, dns::type_name(q.qtype),
                               verdict.rule.empty() ? "default_deny" : verdict.rule};
    return reply(dns::rcode::nxdomain);
  }
  if (!want_a && !want_aaaa) return reply(dns::rcode::noerror);
  const auto normalized = config::normalize_host(q.name);
  const auto assigned = normalized ? names.assign(*normalized) : std::nullopt;
  if (!assigned) return reply(dns::rcode::servfail);
  std::vector<dns::record> answers;
  if (want_a) answers.push_back({dns::type::a, answer_ttl, bytes_of(assigned->v4)});
  if (want_aaaa) answers.push_back({dns::type::aaaa, answer_ttl, bytes_of(assigned->v6)});
  return reply(dns::rcode::noerror, answers);
}

namespace {

using asio::ip::udp;

class responder : public std::enable_shared_from_this<responder> {
 public:
  responder(asio::io_context& io, int udp_fd, int tcp_fd, std::shared_ptr<live::live_session> ctx)
      : udp_(io), tcp_(io), ctx_(std::move(ctx)) {
    error_code ec;
    udp_.assign(udp::v6(), udp_fd, ec);
    if (ec) throw std::runtime_error("the DNS socket: " + ec.message());
    tcp_.assign(tcp::v6(), tcp_fd, ec);
    if (ec) throw std::runtime_error("the DNS listener: " + ec.message());
  }

  void start() {
    asio::co_spawn(udp_.get_executor(), serve_udp(shared_from_this()), asio::detached);
    asio::co_spawn(tcp_.get_executor(), accept_tcp(shared_from_this()), asio::detached);
  }

 private:
  std::string answer(std::string_view wire, bool over_tcp) {
    auto outcome = answer_dns(wire, over_tcp, *ctx_->policy(), *ctx_->clients().synthetic_names,
                              ctx_->asks() != nullptr || ctx_->learns());
    if (outcome.refused) audit(*outcome.refused);
    return std::move(outcome.response);
  }

  void audit(const refused_name& r) {
    session::audit_entry e;
    e.event = "dns";
    e.method = r.type;
    e.scheme = "dns";
    e.host = r.name;
    e.port = 53;
    e.allowed = false;
    e.rule = r.rule;
    e.error = "policy_denied";
    if (!ctx_->record_dns(e))
      session::log(spdlog::level::warn, session::log_tag(ctx_->session_id()),
                   "could not audit a refused DNS name");
  }

  static asio::awaitable<void> serve_udp(std::shared_ptr<responder> self) {
    const int fd = self->udp_.native_handle();
    const int one = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
    // Lets the answer come from an address that is not configured (only routed here).
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);
    std::vector<char> buffer(65536);
    for (;;) {
      auto [ec] = co_await self->udp_.async_wait(udp::socket::wait_read, use_tuple);
      if (ec == asio::error::operation_aborted || !self->udp_.is_open()) co_return;
      while (self->answer_datagram(fd, buffer)) {
      }
    }
  }

  // One datagram in, one answer out, from the address the query was sent to: a query to an
  // IPv6 address the namespace routes to itself (a resolver's literal address) would otherwise
  // be answered from the namespace's own address, and resolvers drop such answers. (IPv4 needs
  // nothing: there the kernel takes the destination as the client's source address already.)
  // False when nothing was waiting. A plain function, not part of the coroutine: its control
  // buffers need cmsghdr's alignment, which a coroutine frame does not promise for locals.
  bool answer_datagram(int fd, std::vector<char>& buffer) {
    sockaddr_in6 sender{};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    iovec data{buffer.data(), buffer.size()};
    msghdr message{};
    message.msg_name = &sender;
    message.msg_namelen = sizeof sender;
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &message, MSG_DONTWAIT);
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;  // else an ICMP error: go on
    auto response = answer(std::string_view(buffer.data(), static_cast<std::size_t>(n)), false);
    if (response.empty()) return true;
    std::optional<in6_addr> to_address;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c))
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo info;
        std::memcpy(&info, CMSG_DATA(c), sizeof info);
        if (!IN6_IS_ADDR_V4MAPPED(&info.ipi6_addr)) to_address = info.ipi6_addr;
      }
    iovec out{response.data(), response.size()};
    msghdr reply{};
    reply.msg_name = &sender;
    reply.msg_namelen = message.msg_namelen;
    reply.msg_iov = &out;
    reply.msg_iovlen = 1;
    alignas(cmsghdr) char reply_control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    if (to_address) {
      reply.msg_control = reply_control;
      reply.msg_controllen = sizeof reply_control;
      cmsghdr* c = CMSG_FIRSTHDR(&reply);
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
      in6_pktinfo info{};
      info.ipi6_addr = *to_address;
      std::memcpy(CMSG_DATA(c), &info, sizeof info);
    }
    (void)::sendmsg(fd, &reply, MSG_DONTWAIT | MSG_NOSIGNAL);
    return true;
  }

  static asio::awaitable<void> accept_tcp(std::shared_ptr<responder> self) {
    for (;;) {
      auto [ec, socket] = co_await self->tcp_.async_accept(use_tuple);
      if (ec == asio::error::operation_aborted || !self->tcp_.is_open()) co_return;
      if (ec || self->tcp_clients_ >= max_tcp_clients) continue;
      ++self->tcp_clients_;
      asio::co_spawn(self->tcp_.get_executor(), serve_tcp(self, std::move(socket)),
                     [self](std::exception_ptr) { --self->tcp_clients_; });
    }
  }

  static asio::awaitable<void> serve_tcp(std::shared_ptr<responder> self, tcp::socket socket) {
    for (;;) {
      std::string message;
      auto read_one = [&]() -> asio::awaitable<void> {
        std::array<unsigned char, 2> length{};
        auto [ec, n] = co_await asio::async_read(socket, asio::buffer(length), use_tuple);
        if (ec) co_return;
        message.resize(static_cast<std::size_t>(length[0]) << 8 | length[1]);
        auto [ec2, m] = co_await asio::async_read(socket, asio::buffer(message), use_tuple);
        if (ec2) message.clear();
      };
      if (co_await base::race(read_one(), sleep(tcp_message_time)) != 0 || message.empty())
        co_return;
      auto response = self->answer(message, true);
      if (response.empty()) co_return;
      std::string framed;
      framed.push_back(static_cast<char>(response.size() >> 8));
      framed.push_back(static_cast<char>(response.size() & 0xff));
      framed += response;
      auto [ec, n] = co_await asio::async_write(socket, asio::buffer(framed), use_tuple);
      if (ec) co_return;
    }
  }

  static asio::awaitable<void> sleep(std::chrono::steady_clock::duration d) {
    asio::steady_timer timer(co_await asio::this_coro::executor, d);
    co_await timer.async_wait(use_tuple);
  }

  udp::socket udp_;
  tcp::acceptor tcp_;
  std::shared_ptr<live::live_session> ctx_;
  std::size_t tcp_clients_ = 0;  // on the io_context's one thread
};

}  // namespace

void start_dns_responder(asio::io_context& io, int udp_fd, int tcp_fd,
                         std::shared_ptr<live::live_session> ctx) {
  std::make_shared<responder>(io, udp_fd, tcp_fd, std::move(ctx))->start();
}

}  // namespace broker::capture
