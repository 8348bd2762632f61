#include "support/kafka_acls.hpp"

#include <librdkafka/rdkafka.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>

namespace delayd::testing {
namespace {

rd_kafka_AclOperation_t acl_operation(const std::string& op) {
  if (op == "Read") return RD_KAFKA_ACL_OPERATION_READ;
  if (op == "Write") return RD_KAFKA_ACL_OPERATION_WRITE;
  if (op == "Describe") return RD_KAFKA_ACL_OPERATION_DESCRIBE;
  if (op == "Create") return RD_KAFKA_ACL_OPERATION_CREATE;
  FAIL("unknown ACL operation " << op);
  return RD_KAFKA_ACL_OPERATION_UNKNOWN;
}

rd_kafka_ResourceType_t acl_resource(AclResource r) {
  return r == AclResource::topic ? RD_KAFKA_RESOURCE_TOPIC : RD_KAFKA_RESOURCE_GROUP;
}

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};

std::unique_ptr<rd_kafka_t, KafkaDeleter> admin_client(const std::vector<std::pair<std::string, std::string>>& props) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  std::array<char, 512> err{};
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err.data(), err.size()) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      FAIL("ACL client property " << k << ": " << err.data());
    }
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err.data(), err.size());
  if (rk == nullptr) FAIL("ACL client: " << err.data());
  return std::unique_ptr<rd_kafka_t, KafkaDeleter>(rk);
}

// Waits for the admin result event and fails the test on any error in it.
void await(rd_kafka_queue_t* queue, rd_kafka_event_type_t type, const char* what) {
  std::unique_ptr<rd_kafka_event_t, EventDeleter> ev(rd_kafka_queue_poll(queue, 30000));
  REQUIRE(ev != nullptr);
  REQUIRE(rd_kafka_event_type(ev.get()) == type);
  INFO(what << ": " << (rd_kafka_event_error_string(ev.get()) ? rd_kafka_event_error_string(ev.get()) : ""));
  REQUIRE(rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR_NO_ERROR);
  if (type == RD_KAFKA_EVENT_CREATEACLS_RESULT) {
    size_t n = 0;
    const rd_kafka_acl_result_t** results =
        rd_kafka_CreateAcls_result_acls(rd_kafka_event_CreateAcls_result(ev.get()), &n);
    for (size_t i = 0; i < n; ++i) {
      const rd_kafka_error_t* e = rd_kafka_acl_result_error(results[i]);
      INFO(what << ": " << (e ? rd_kafka_error_string(e) : ""));
      REQUIRE(e == nullptr);
    }
  }
}

// How many of `acls` the broker's authorizer holds for `principal` (DescribeAcls is answered by
// the broker from the ACLs it applies, which follow the controller's a moment later).
std::size_t held(rd_kafka_t* rk, rd_kafka_queue_t* queue, const std::string& principal, const std::vector<Acl>& acls) {
  std::array<char, 512> err{};
  rd_kafka_AclBindingFilter_t* filter = rd_kafka_AclBindingFilter_new(
      RD_KAFKA_RESOURCE_ANY, nullptr, RD_KAFKA_RESOURCE_PATTERN_ANY, principal.c_str(), nullptr,
      RD_KAFKA_ACL_OPERATION_ANY, RD_KAFKA_ACL_PERMISSION_TYPE_ANY, err.data(), err.size());
  REQUIRE(filter != nullptr);
  rd_kafka_DescribeAcls(rk, filter, nullptr, queue);
  rd_kafka_AclBinding_destroy(filter);
  std::unique_ptr<rd_kafka_event_t, EventDeleter> ev(rd_kafka_queue_poll(queue, 30000));
  REQUIRE(ev != nullptr);
  REQUIRE(rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR_NO_ERROR);
  size_t n = 0;
  const rd_kafka_AclBinding_t** bindings =
      rd_kafka_DescribeAcls_result_acls(rd_kafka_event_DescribeAcls_result(ev.get()), &n);
  std::size_t found = 0;
  for (const auto& a : acls) {
    for (size_t i = 0; i < n; ++i) {
      if (rd_kafka_AclBinding_restype(bindings[i]) == acl_resource(a.resource) &&
          a.name == rd_kafka_AclBinding_name(bindings[i]) &&
          rd_kafka_AclBinding_operation(bindings[i]) == acl_operation(a.operation)) {
        ++found;
        break;
      }
    }
  }
  return found;
}

}  // namespace

// Transactional-id ACLs (prefixed) through Kafka's ACL tool, one call for all of them.
void set_transactional_acls(const std::string& user, const std::vector<Acl>& acls, bool grant) {
  if (acls.empty()) return;
  std::string cmd = std::string("'") + DELAYD_SOURCE_DIR + "/scripts/stack.sh' acl " +
                    (grant ? "--add" : "--remove --force") + " --allow-principal 'User:" + user +
                    "' --resource-pattern-type prefixed";
  std::set<std::string> names;
  std::set<std::string> operations;
  for (const auto& a : acls) {
    names.insert(a.name);
    operations.insert(a.operation);
  }
  for (const auto& n : names) cmd += " --transactional-id '" + n + "'";
  for (const auto& o : operations) cmd += " --operation " + o;
  cmd += " >/dev/null 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

void set_acls(const std::vector<std::pair<std::string, std::string>>& admin, const std::string& user,
              const std::vector<Acl>& all, bool grant) {
  std::vector<Acl> acls;
  std::vector<Acl> transactional;
  for (const auto& a : all) (a.resource == AclResource::transactional_id ? transactional : acls).push_back(a);
  set_transactional_acls(user, transactional, grant);
  if (acls.empty()) return;
  auto rk = admin_client(admin);
  std::unique_ptr<rd_kafka_queue_t, QueueDeleter> queue(rd_kafka_queue_new(rk.get()));
  const std::string principal = "User:" + user;
  std::array<char, 512> err{};
  std::vector<rd_kafka_AclBinding_t*> bindings;
  for (const auto& a : acls) {
    rd_kafka_AclBinding_t* b =
        grant ? rd_kafka_AclBinding_new(acl_resource(a.resource), a.name.c_str(), RD_KAFKA_RESOURCE_PATTERN_LITERAL,
                                        principal.c_str(), "*", acl_operation(a.operation),
                                        RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, err.data(), err.size())
              : rd_kafka_AclBindingFilter_new(
                    acl_resource(a.resource), a.name.c_str(), RD_KAFKA_RESOURCE_PATTERN_LITERAL, principal.c_str(), "*",
                    acl_operation(a.operation), RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW, err.data(), err.size());
    REQUIRE(b != nullptr);
    bindings.push_back(b);
  }
  if (grant) {
    rd_kafka_CreateAcls(rk.get(), bindings.data(), bindings.size(), nullptr, queue.get());
    await(queue.get(), RD_KAFKA_EVENT_CREATEACLS_RESULT, "CreateAcls");
  } else {
    rd_kafka_DeleteAcls(rk.get(), bindings.data(), bindings.size(), nullptr, queue.get());
    await(queue.get(), RD_KAFKA_EVENT_DELETEACLS_RESULT, "DeleteAcls");
  }
  rd_kafka_AclBinding_destroy_array(bindings.data(), bindings.size());
  // Returns once the broker applies them, so that the caller's next step meets the new ACLs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const std::size_t n = held(rk.get(), queue.get(), principal, acls);
    if (grant ? n == acls.size() : n == 0) return;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace delayd::testing
