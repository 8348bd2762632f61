// The version interlock: delayd refuses to start beside a delayd it cannot share a consumer group
// or a Redis prefix with, instead of both running and losing entries (docs/upgrading.md).
//
// Two marks, each checked at start-up (broker/service.cpp), before any group is joined:
//   the layout     every key under the Redis prefix follows one layout (kLayout: 2 since 0.4,
//                  waiting records in each shard's hash, fenced in-flight entries, delivery logs;
//                  1 up to 0.3). JobStore::claim_layout() records it; a newer layout than this
//                  delayd's means a later version has written there: refused, since this one
//                  would misread it. An older one (0.3's) is upgraded in place: 0.4 reads 0.3's
//                  records and moves each into the new layout as it meets it.
//   the members    every Kafka client of this delayd carries a client.id that names its version
//                  and layout (client_id()). A member of one of this delayd's consumer groups
//                  whose client.id does not name this layout (0.3 names none) is another
//                  version's instance, still running: refused, since two layouts in one group
//                  hand each other shards they cannot read. This look is given up after 5 s
//                  without an answer from Kafka, or at once when Kafka refuses it (a login, an
//                  ACL): start-up goes on and the groups' own join says what is wrong (a check
//                  that could hold delayd down for a Kafka fault would be worse than none).
// A refusal is logged as one sentence that says what to do, and start-up ends with exit status 2
// (the error model's fatal class: a deployment mistake, not a fault a retry could clear). What
// cannot be refused: a 0.3 instance started after this one (it checks nothing), and a rollback
// to 0.3 once 0.4 has written (0.3 cannot read 0.4's layout): docs/upgrading.md says so.
// Threading: pure functions, and strangers() on the calling thread (one admin request per group).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/kafka_admin.hpp"
#include "connectors/kafka_error.hpp"
#include "storage/job_store.hpp"

namespace delayd::broker {

// The layout this delayd writes under its Redis prefix.
inline constexpr int kLayout = 2;

// "delayd-<version>-layout<kLayout>", followed by "-<the user's client.id>" when the user set one
// (kafka.properties.client.id): the client.id of every Kafka client of this delayd.
std::string client_id(const std::optional<std::string>& users);
// `props` with client.id set so (the user's own, if any, kept at its end).
connectors::Properties with_client_id(connectors::Properties props);
// Whether a group member's client.id says it is a delayd of this layout.
bool same_layout(std::string_view client_id);

// The members of `groups` that are no delayd of this layout, each as "client id <id> on <host>
// in group <group>". Throws KafkaError when Kafka does not answer.
std::vector<std::string> strangers(connectors::KafkaAdmin& admin, const std::vector<std::string>& groups,
                                   int timeout_ms = 5000);

// The refusals' sentences.
std::string layout_refusal(const storage::JobStore::Layout& found, const std::string& prefix);
std::string members_refusal(const std::vector<std::string>& strangers);

}  // namespace delayd::broker
