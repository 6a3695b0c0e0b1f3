#include "capture/attribution.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "tests/unit/proxy/loopback_connection.hpp"

using namespace broker::capture;
using namespace broker::test;

namespace {

// The first holder found (the highest pid), as the audit record names it.
std::optional<broker::config::program_holder> owner_of(const connection& c, int netns_pid = 0,
                                                       const std::vector<int>& candidates = {}) {
  auto found = find_socket_holders(c.client_end.ip, c.client_end.port, c.server_end.ip,
                                   c.server_end.port, netns_pid, candidates);
  if (!found) return std::nullopt;
  return found->holders.front();
}

std::vector<int> pids_of(const std::optional<socket_holders>& found) {
  std::vector<int> pids;
  if (found)
    for (const auto& h : found->holders) pids.push_back(h.pid);
  return pids;
}

}  // namespace

TEST_CASE("an IPv4 loopback client is attributed to this process", "[attribution]") {
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  const auto owner = owner_of(*c);
  REQUIRE(owner);
  CHECK(owner->pid == getpid());
  CHECK(owner->exe == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(owner_of(*c, 0, {getpid()})->pid == getpid());
  CHECK(owner_of(*c, getpid(), {})->pid == getpid());  // our own netns, named by a pid
  CHECK(find_socket_holders(c->client_end.ip, c->client_end.port, c->server_end.ip,
                            static_cast<std::uint16_t>(c->server_end.port + 1), 0,
                            {}) == std::nullopt);
  CHECK(find_socket_holders("not an ip", 1, "127.0.0.1", 2, 0, {}) == std::nullopt);
  CHECK(owner_of(*c, 999999999, {}) == std::nullopt);  // no such netns_pid
}

TEST_CASE("candidates limit the search to their process trees", "[attribution]") {
  child_process idle([] {});  // forked before the sockets exist: it holds none of them
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  CHECK(owner_of(*c, 0, {idle.pid}) == std::nullopt);
  CHECK(owner_of(*c, 0, {idle.pid, getpid()})->pid == getpid());
}

TEST_CASE("a client connection opened by a forked child is the child's", "[attribution]") {
  fd_guard listener(make_socket(AF_INET, "127.0.0.1", 0, true));
  REQUIRE(listener.fd >= 0);
  const std::uint16_t port = name_of(listener.fd, false).port;
  child_process child([port] { make_socket(AF_INET, "127.0.0.1", port, false); });
  fd_guard accepted(accept_within(listener.fd, 5000));
  REQUIRE(accepted.fd >= 0);
  const endpoint client = name_of(accepted.fd, true);
  const endpoint server = name_of(accepted.fd, false);
  auto everywhere = find_socket_holders(client.ip, client.port, server.ip, server.port, 0, {});
  REQUIRE(everywhere);
  CHECK(pids_of(everywhere) == std::vector<int>{child.pid});
  CHECK(everywhere->complete);
  CHECK(everywhere->holders[0].exe == std::filesystem::read_symlink("/proc/self/exe").string());
  // Found as a descendant of a candidate.
  auto in_tree = find_socket_holders(client.ip, client.port, server.ip, server.port, 0, {getpid()});
  CHECK(pids_of(in_tree) == std::vector<int>{child.pid});
}

TEST_CASE("IPv6 and v4-mapped client ends", "[attribution]") {
  if (auto c = open_connection(AF_INET6, "::1", AF_INET6, "::1")) {
    CHECK(c->client_end.ip == "::1");
    CHECK(owner_of(*c)->pid == getpid());
    CHECK(pids_of(find_socket_holders("[::1]", c->client_end.port, "::1", c->server_end.port, 0,
                                      {})) == std::vector<int>{getpid()});
  } else {
    WARN("no IPv6 loopback here; skipped the ::1 case");
  }
  // An IPv4 client to a dual-stack listener: the proxy sees ::ffff:127.0.0.1.
  auto mapped_server = open_connection(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(mapped_server);
  CHECK(mapped_server->client_end.ip == "::ffff:127.0.0.1");
  CHECK(owner_of(*mapped_server)->pid == getpid());
  // An IPv6 client socket connecting to a v4-mapped address: its end is in tcp6.
  auto mapped_client = open_connection(AF_INET, "127.0.0.1", AF_INET6, "::ffff:127.0.0.1");
  REQUIRE(mapped_client);
  CHECK(owner_of(*mapped_client)->pid == getpid());
}

TEST_CASE("a client in another network namespace, named by netns_pid", "[attribution]") {
  int ports[2];  // the child's client and server ports on its own 127.0.0.1, or 0s
  REQUIRE(pipe2(ports, O_CLOEXEC) == 0);
  fd_guard read_end(ports[0]), write_end(ports[1]);
  child_process child([&] {
    std::uint16_t found[2] = {0, 0};
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    const bool isolated = unshare(CLONE_NEWNET) == 0;  // the socket below is in the new netns
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (isolated && ioctl(s, SIOCGIFFLAGS, &lo) == 0 &&
        (lo.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &lo) == 0)) {
      const int listener = make_socket(AF_INET, "127.0.0.1", 0, true);
      found[1] = listener < 0 ? 0 : name_of(listener, false).port;
      const int client = make_socket(AF_INET, "127.0.0.1", found[1], false);
      found[0] = client < 0 ? 0 : name_of(client, false).port;
    }
    (void)!write(ports[1], found, sizeof found);
  });
  write_end.reset();  // a child that dies early ends the read below
  std::uint16_t found[2] = {0, 0};
  REQUIRE(read(read_end.fd, found, sizeof found) == sizeof found);
  if (found[0] == 0 || found[1] == 0) {
    FAIL("cannot create a network namespace here, so this cannot be tested");
  }
  CHECK(pids_of(find_socket_holders("127.0.0.1", found[0], "127.0.0.1", found[1], child.pid, {})) ==
        std::vector<int>{child.pid});
  CHECK(pids_of(find_socket_holders("127.0.0.1", found[0], "127.0.0.1", found[1], child.pid,
                                    {child.pid})) == std::vector<int>{child.pid});
  // Not in the broker's own namespace's table.
  CHECK(find_socket_holders("127.0.0.1", found[0], "127.0.0.1", found[1], 0, {}) == std::nullopt);
}

TEST_CASE("with a sock_diag socket, the same owners without the table", "[attribution]") {
  auto diag = sock_diag::open();
  REQUIRE(diag);
  auto owner =
      [&](const connection& c,
          const std::vector<int>& candidates) -> std::optional<broker::config::program_holder> {
    auto found = find_socket_holders(c.client_end.ip, c.client_end.port, c.server_end.ip,
                                     c.server_end.port, 0, candidates, diag.get());
    if (!found) return std::nullopt;
    return found->holders.front();
  };
  auto v4 = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(v4);
  REQUIRE(owner(*v4, {getpid()}));
  CHECK(owner(*v4, {getpid()})->pid == getpid());
  CHECK(owner(*v4, {})->exe == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(diag->proven());
  // A miss is not retried in the table once sock_diag has proven itself (the table would not
  // have it either); a bad address is nullopt as before.
  CHECK(find_socket_holders(v4->client_end.ip, v4->client_end.port, v4->server_end.ip,
                            static_cast<std::uint16_t>(v4->server_end.port + 1), 0, {getpid()},
                            diag.get()) == std::nullopt);
  CHECK(find_socket_holders("not an ip", 1, "127.0.0.1", 2, 0, {}, diag.get()) == std::nullopt);
  if (auto v6 = open_connection(AF_INET6, "::1", AF_INET6, "::1")) {
    CHECK(owner(*v6, {getpid()})->pid == getpid());
  }
  auto mapped_server = open_connection(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(mapped_server);
  CHECK(owner(*mapped_server, {getpid()})->pid == getpid());
  auto mapped_client = open_connection(AF_INET, "127.0.0.1", AF_INET6, "::ffff:127.0.0.1");
  REQUIRE(mapped_client);
  CHECK(owner(*mapped_client, {getpid()})->pid == getpid());

  // A connection opened by a forked child is the child's.
  fd_guard listener(make_socket(AF_INET, "127.0.0.1", 0, true));
  REQUIRE(listener.fd >= 0);
  const std::uint16_t port = name_of(listener.fd, false).port;
  child_process child([port] { make_socket(AF_INET, "127.0.0.1", port, false); });
  connection c;
  c.accepted.fd = accept_within(listener.fd, 5000);
  REQUIRE(c.accepted.fd >= 0);
  c.client_end = name_of(c.accepted.fd, true);
  c.server_end = name_of(c.accepted.fd, false);
  REQUIRE(owner(c, {getpid()}));
  CHECK(owner(c, {getpid()})->pid == child.pid);
  CHECK(owner(c, {child.pid})->pid == child.pid);
}

TEST_CASE("every process holding the socket is found, the newest first", "[attribution]") {
  auto diag = sock_diag::open();
  REQUIRE(diag);
  auto c = open_connection(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1");
  REQUIRE(c);
  child_process inherited([] {});  // forked after the connection: it holds the client end too
  auto holders = [&](const std::vector<int>& candidates) {
    return find_socket_holders(c->client_end.ip, c->client_end.port, c->server_end.ip,
                               c->server_end.port, 0, candidates, diag.get());
  };
  const auto found = holders({getpid()});
  REQUIRE(found);
  CHECK(found->complete);
  CHECK(pids_of(found) ==
        std::vector<int>{std::max(getpid(), inherited.pid), std::min(getpid(), inherited.pid)});
  struct stat self {};
  REQUIRE(stat("/proc/self/exe", &self) == 0);
  for (const auto& h : found->holders) {
    CHECK(h.exe == std::filesystem::read_symlink("/proc/self/exe").string());
    REQUIRE(h.file);
    CHECK(h.file->dev == self.st_dev);
    CHECK(h.file->ino == self.st_ino);
  }
  // A search of the child's tree alone finds the child alone; the table gives the same.
  CHECK(pids_of(holders({inherited.pid})) == std::vector<int>{inherited.pid});
  CHECK(pids_of(find_socket_holders(c->client_end.ip, c->client_end.port, c->server_end.ip,
                                    c->server_end.port, 0, {getpid()})) == pids_of(found));
}

namespace {

int held_until_closed = -1;  // the read end the thread below waits on

void* wait_then_exit(void*) {
  char byte;
  (void)!read(held_until_closed, &byte, 1);
  _exit(0);
}

}  // namespace

TEST_CASE("a socket held by a process whose first thread has exited is found in its threads",
          "[attribution]") {
  fd_guard listener(make_socket(AF_INET, "127.0.0.1", 0, true));
  REQUIRE(listener.fd >= 0);
  const std::uint16_t port = name_of(listener.fd, false).port;
  int release[2];
  REQUIRE(pipe2(release, O_CLOEXEC) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(release[1]);
    held_until_closed = release[0];
    make_socket(AF_INET, "127.0.0.1", port, false);  // kept open by the thread left
    pthread_t thread;
    if (pthread_create(&thread, nullptr, wait_then_exit, nullptr) != 0) _exit(1);
    syscall(SYS_exit, 0);  // this thread alone: /proc/<pid>/fd shows nothing from now on
  }
  close(release[0]);
  fd_guard done(release[1]);
  fd_guard accepted(accept_within(listener.fd, 5000));
  REQUIRE(accepted.fd >= 0);
  const endpoint client = name_of(accepted.fd, true);
  const endpoint server = name_of(accepted.fd, false);
  // Until the first thread is a zombie, its table is the one searched.
  const std::string leader = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid);
  bool exited = false;
  for (int i = 0; i < 500 && !exited; ++i) {
    std::ifstream stat(leader + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    exited = text.find(") Z ") != std::string::npos;
    if (!exited) usleep(10 * 1000);
  }
  REQUIRE(exited);
  std::error_code ec;
  CHECK(std::filesystem::directory_iterator(leader + "/fd", ec) ==
        std::filesystem::directory_iterator());
  const auto found = find_socket_holders(client.ip, client.port, server.ip, server.port, 0, {pid});
  CHECK(pids_of(found) == std::vector<int>{pid});
  if (found) {
    CHECK(found->complete);
    CHECK(found->holders[0].exe == std::filesystem::read_symlink("/proc/self/exe").string());
    CHECK(found->holders[0].file);
  }
  CHECK(pids_of(find_socket_holders(client.ip, client.port, server.ip, server.port, 0,
                                    {getpid()})) == std::vector<int>{pid});
  done.reset();
  waitpid(pid, nullptr, 0);
}

TEST_CASE("the /proc/net/tcp hex format", "[attribution]") {
  if constexpr (std::endian::native != std::endian::little) return;  // samples are from x86
  const std::string_view v4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 1157601 1 00000000919b0b25 100 0 0 10 0\n"
      "   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        "
      "0 4242 1 0000000000000000 20 4 30 10 -1\n"
      "   2: 0100007F:C350 0100007F\n";
  const auto rows = detail::parse_tcp_table(v4, false);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].state == 0x0A);
  CHECK(rows[0].inode == 1157601);
  CHECK(rows[1].local_ip == detail::parse_ip("127.0.0.1"));
  CHECK(rows[1].local_port == 50000);
  CHECK(rows[1].remote_ip == detail::parse_ip("::ffff:127.0.0.1"));
  CHECK(rows[1].remote_port == 8080);
  CHECK(rows[1].state == 1);
  CHECK(rows[1].inode == 4242);
  CHECK_FALSE(detail::parse_tcp_line("   0: 0100007F:1F90", false));

  const std::string_view v6 =
      "   0: 00000000000000000000000001000000:A410 0000000000000000FFFF00000100007F:0050 01 "
      "00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 20 4 0 10 -1\n";
  const auto row = detail::parse_tcp_line(v6.substr(0, v6.size() - 1), true);
  REQUIRE(row);
  CHECK(row->local_ip == detail::parse_ip("::1"));
  CHECK(row->local_port == 0xA410);
  CHECK(row->remote_ip == detail::parse_ip("127.0.0.1"));
  CHECK(row->remote_port == 80);
  CHECK(row->inode == 77);
  CHECK_FALSE(detail::parse_tcp_line(v6, false));  // v6 addresses are not v4 rows
  CHECK(detail::parse_ip("fe80::1%eth0") == detail::parse_ip("fe80::1"));
}
