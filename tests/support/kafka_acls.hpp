// ACLs on the test stack (scripts/stack.sh with DELAYD_KAFKA_SASL=1), granted and revoked by a
// test's own admin client (the stack's super user, test_env.hpp: kafka_client_properties()) with
// librdkafka's CreateAcls and DeleteAcls. Literal resource names, allow, any host. Transactional
// ids, which librdkafka 2.0's admin API cannot name, are granted by prefix through Kafka's own ACL
// tool (scripts/stack.sh acl).
// Threading: single-threaded tests. (kafka_acls.cpp: librdkafka stays out of the tests' headers.)
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace delayd::testing {

enum class AclResource {
  topic,
  group,
  transactional_id,  // a prefix: every transactional id that starts with the name
};

struct Acl {
  AclResource resource;
  std::string name;
  std::string operation;  // "Read", "Write", "Describe", "Create"
};

// Grants (or, with grant false, revokes) each ACL to User:<user>, through a client with `admin`'s
// properties. Returns once the broker has answered; fails the test on any error.
void set_acls(const std::vector<std::pair<std::string, std::string>>& admin, const std::string& user,
              const std::vector<Acl>& acls, bool grant = true);

}  // namespace delayd::testing
