// A real redis-server for one test: on a free loopback port (and a unix socket in its own temp
// dir), no persistence, killed when the test ends. It can be killed, restarted on the same port,
// stopped (SIGSTOP) and resumed, to reach the client's fault paths. A missing redis-server
// fails the test with a message, rather than skipping it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/temp_dir.hpp"

namespace broker::test {

struct redis_server_options {
  std::string password;  // --requirepass when not empty
};

class redis_server {
 public:
  explicit redis_server(redis_server_options options = {}) : options_(std::move(options)) {
    if (std::system("command -v redis-server >/dev/null 2>&1") != 0)
      FAIL(
          "redis-server is not installed (apt-get install redis-server): the [redis] tests "
          "run against a real one");
    port_ = free_port();
    socket_path_ = (dir_.path / "redis.sock").string();
    start();
  }
  ~redis_server() { kill(); }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& socket_path() const { return socket_path_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // Starts it (again, on the same port and socket) and waits until it accepts connections.
  void start() {
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     port,
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_.path.string(),
                                     "--unixsocket",
                                     socket_path_,
                                     "--unixsocketperm",
                                     "700",
                                     "--daemonize",
                                     "no"};
    if (!options_.password.empty()) {
      args.push_back("--requirepass");
      args.push_back(options_.password);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // not left behind by a crashed test
      if (getppid() != parent) _exit(1);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, 1);
      dup2(null, 2);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!accepts()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("redis-server exited at start (port " << port_ << ")");
      }
      if (std::chrono::steady_clock::now() > deadline) FAIL("redis-server did not start");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void restart() {
    kill();
    start();
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

 private:
  static std::uint16_t free_port() {
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0);
    socklen_t len = sizeof sin;
    getsockname(s, reinterpret_cast<sockaddr*>(&sin), &len);
    close(s);
    return ntohs(sin.sin_port);
  }

  // Both the TCP port and the unix socket take connections.
  bool accepts() const {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port_);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::strncpy(sun.sun_path, socket_path_.c_str(), sizeof sun.sun_path - 1);
    const int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool ok = connect(t, reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0 &&
                    connect(u, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0;
    close(t);
    close(u);
    return ok;
  }

  redis_server_options options_;
  temp_dir dir_;
  std::uint16_t port_ = 0;
  std::string socket_path_;
  pid_t pid_ = -1;
};

}  // namespace broker::test
