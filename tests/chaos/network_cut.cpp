#include "network_cut.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "support/requires.hpp"

namespace delayd::chaos {

namespace {

// Runs a shell command; its standard output, and its exit status in `status`.
std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    status = -1;
    return out;
  }
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  status = ::pclose(p);
  return out;
}

}  // namespace

void require_cuts() {
  testing::require_setup(::geteuid() == 0, "partition tests cut an instance off with iptables, which needs root");
  testing::require_tool("iptables", "Debian package iptables; scripts/install-deps.sh installs it");
  int status = 0;
  const std::string out = run("iptables -w -S OUTPUT", status);
  testing::require_setup(status == 0, "iptables cannot list its OUTPUT chain here: " + out);
}

NetworkCut::NetworkCut(uid_t uid, std::vector<int> ports) : uid_(uid), ports_(std::move(ports)) {
  heal_all();  // what an earlier test killed half-way left
  int status = 0;
  const std::string out = run("iptables -w -A " + rule(), status);
  INFO("iptables -A " << rule() << ": " << out);
  REQUIRE(status == 0);
  active_ = true;
}

NetworkCut::~NetworkCut() {
  if (!active_) return;
  int status = 0;
  run("iptables -w -D " + rule(), status);
  active_ = false;
}

void NetworkCut::heal() {
  if (!active_) return;
  int status = 0;
  const std::string out = run("iptables -w -D " + rule(), status);
  active_ = false;
  INFO("iptables -D " << rule() << ": " << out);
  REQUIRE(status == 0);
}

std::string NetworkCut::rule() const {
  std::ostringstream ports;
  for (std::size_t i = 0; i < ports_.size(); ++i) ports << (i ? "," : "") << ports_[i];
  return "OUTPUT -o lo -p tcp -m owner --uid-owner " + std::to_string(uid_) + " -m multiport --dports " + ports.str() +
         " -m comment --comment " + kCutComment + " -j DROP";
}

int NetworkCut::heal_all() {
  int status = 0;
  const std::string rules = run("iptables -w -S OUTPUT", status);
  if (status != 0) return 0;
  int n = 0;
  std::istringstream lines(rules);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(kCutComment) == std::string::npos || line.rfind("-A ", 0) != 0) continue;
    int ignored = 0;
    run("iptables -w -D " + line.substr(3), ignored);
    ++n;
  }
  return n;
}

int port_of(const std::string& address) {
  const auto colon = address.rfind(':');
  std::string rest = colon == std::string::npos ? "" : address.substr(colon + 1);
  while (!rest.empty() && (rest.back() == '/' || !std::isdigit(static_cast<unsigned char>(rest.back())))) {
    rest.pop_back();
  }
  std::size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  return digits == 0 ? 0 : std::stoi(rest.substr(0, digits));
}

}  // namespace delayd::chaos
