// NetworkCut: a real network partition on the loopback for one user's processes: iptables rules
// that drop every TCP packet that user's sockets send to some ports (Kafka's, Redis's), without a
// reset, so the peers see nothing and the process's calls hang until their own timeouts, as across
// a cut cable. A fault test runs the delayd to cut off as that user (DelaydProcess::run_as()).
//
// Every rule carries the comment kCutComment. heal() deletes this cut's rules; the destructor
// heals (also when the test fails); heal_all() deletes every rule that carries the comment, what a
// test killed half-way (ctest's timeout) left, and runs at the start of each cut and from
// scripts/test.sh at the end of a run, so that no rule outlives the tests.
// Needs root and iptables (Debian's package, a test-only dependency: scripts/install-deps.sh):
// require_cuts() skips without them, or fails under CI=true.
// Threading: the test's thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace delayd::chaos {

inline constexpr const char* kCutComment = "delayd-test-cut";

// The user the cut-off instance runs as: nobody.
inline constexpr uid_t kCutUid = 65534;
inline constexpr gid_t kCutGid = 65534;

// Skips the test (fails under CI=true) unless this process can add iptables rules.
void require_cuts();

class NetworkCut {
 public:
  // Drops what `uid`'s processes send to `ports` on the loopback, from now on.
  NetworkCut(uid_t uid, std::vector<int> ports);
  ~NetworkCut();  // heal()
  NetworkCut(const NetworkCut&) = delete;
  NetworkCut& operator=(const NetworkCut&) = delete;

  // Deletes this cut's rules (idempotent); fails the test if iptables refuses.
  void heal();
  bool active() const { return active_; }
  // Deletes every rule carrying kCutComment; returns how many.
  static int heal_all();

 private:
  std::string rule() const;  // the rule's spec, without -A/-D

  uid_t uid_;
  std::vector<int> ports_;
  bool active_ = false;
};

// The port of a host:port (Kafka's bootstrap) or of a redis:// URL.
int port_of(const std::string& address);

}  // namespace delayd::chaos
