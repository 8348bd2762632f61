// free_port(): a loopback TCP port for a server a test starts (a delayd's admin endpoint, a Redis
// of its own) that nothing holds now and that no outgoing connection will take before the server
// binds it. A port the kernel chooses (bind to port 0) lies in its ephemeral range, from which
// the clients of the stack draw theirs too, and one was once taken by a connection before delayd
// bound it. So the port is drawn at random below that range (/proc/sys/net/ipv4/
// ip_local_port_range) and from kPrivatePortsFrom up, above the stack's fixed ports (Kafka,
// Redis, the cluster and its bus); one that binds now is free. tests/support/checks.py's
// free_port() does the same for the Python tests.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>

namespace delayd::testing {

inline constexpr int kPrivatePortsFrom = 28000;

// Binds `port` of 127.0.0.1 and lets it go: the port bound (the kernel's choice for 0), or -1
// if it does not bind now.
inline int loopback_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

// A free loopback port below the ephemeral range (the kernel's choice if that range is unusual);
// throws std::runtime_error if none binds.
inline std::uint16_t free_port() {
  int low = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  if (low > kPrivatePortsFrom + 1000) {
    std::mt19937 gen(std::random_device{}());
    std::uniform_int_distribution<int> pick(kPrivatePortsFrom, low - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (const int port = loopback_bind(pick(gen)); port > 0) return static_cast<std::uint16_t>(port);
    }
  }
  if (const int port = loopback_bind(0); port > 0) return static_cast<std::uint16_t>(port);
  throw std::runtime_error("no free loopback port");
}

}  // namespace delayd::testing
