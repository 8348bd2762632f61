// TLS-only redis-server processes a test starts itself (--port 0 --tls-port on a free loopback
// port), with the certificates of scripts/tls-certs.sh made once per test process in a temporary
// directory: tests/redis/tls_test.cpp (the connection) and tests/e2e/tls_test.cpp (delayd).
// Each server dies with the test process (PR_SET_PDEATHSIG) and is stopped by its destructor.
// Its data lives in a directory of its own with an AOF fsynced on every write, so a stop() and
// start() (perhaps with another certificate) keeps every key.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/free_port.hpp"
#include "support/requires.hpp"

namespace delayd::testing {

// A temporary directory, removed with everything in it when the object goes (for a static
// one: when the test process exits normally, a failed test included).
struct TempDir {
  explicit TempDir(std::filesystem::path p) : path(std::move(p)) {}
  TempDir(TempDir&& other) noexcept : path(std::exchange(other.path, {})) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir& operator=(TempDir&&) = delete;
  std::filesystem::path path;  // empty once moved from
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// The certificates of scripts/tls-certs.sh, made once per test process and removed when it ends.
inline const std::filesystem::path& certs() {
  static const TempDir dir = [] {
    require_tool("openssl", "Debian package openssl");
    require_tool("redis-server", "Debian package redis-server");
    char tmpl[] = "/tmp/delayd-tls-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    TempDir made{std::filesystem::path(tmpl)};
    const std::string cmd = std::string(DELAYD_REPO_DIR) + "/scripts/tls-certs.sh " + tmpl + " >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    return made;
  }();
  return dir.path;
}

inline std::string cert(const std::string& name) { return (certs() / name).string(); }

// redis-server with TLS only on a free port, serving `cert_name`.crt/.key; it dies with the test.
class TlsRedis {
 public:
  explicit TlsRedis(std::string cert_name = "server", bool require_client_cert = true)
      : cert_name_(std::move(cert_name)), require_client_cert_(require_client_cert), port_(free_port()) {
    char tmpl[] = "/tmp/delayd-tls-redis-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    start();
  }
  ~TlsRedis() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TlsRedis(const TlsRedis&) = delete;
  TlsRedis& operator=(const TlsRedis&) = delete;

  int port() const { return port_; }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // Starts it (again, on the same port, with the same data; with cert_name's certificate when
  // given) and waits until it accepts connections.
  void start(const std::string& cert_name = "") {
    if (!cert_name.empty()) cert_name_ = cert_name;
    const std::vector<std::string> argv = {"redis-server",
                                           "--port",
                                           "0",
                                           "--tls-port",
                                           std::to_string(port_),
                                           "--bind",
                                           "127.0.0.1",
                                           "--dir",
                                           dir_,
                                           "--save",
                                           "",
                                           "--appendonly",
                                           "yes",
                                           "--appendfsync",
                                           "always",
                                           "--tls-cert-file",
                                           cert(cert_name_ + ".crt"),
                                           "--tls-key-file",
                                           cert(cert_name_ + ".key"),
                                           "--tls-ca-cert-file",
                                           cert("ca.crt"),
                                           "--tls-auth-clients",
                                           require_client_cert_ ? "yes" : "no"};
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const int fd = ::open("/dev/null", O_WRONLY);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    // Accepting TCP connections is enough: the handshake is what each test checks.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(port_));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
      if (up) return;
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string cert_name_;
  bool require_client_cert_;
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace delayd::testing
