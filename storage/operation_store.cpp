#include "storage/operation_store.hpp"

#include <cstdio>
#include <random>

#include "storage/lua/embedded.hpp"

namespace delayd::storage {

OperationStore::OperationStore(redis::RedisClient& redis, const KeySchema& keys) : redis_(redis), keys_(keys) {}

std::string OperationStore::create(const Fields& fields, std::int64_t now_ms) {
  std::random_device rd;
  const std::uint64_t n = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(n));
  redis::Command hset{"HSET", keys_.operation(id)};
  for (const auto& [k, v] : fields) {
    hset.push_back(k);
    hset.push_back(v);
  }
  redis_.command(hset);
  // The list forgets what expired (kKeepEnded after it ended, so at least that long after it began).
  const auto keep_ms = std::chrono::duration_cast<std::chrono::milliseconds>(kKeepEnded).count();
  redis_.command({"ZREMRANGEBYSCORE", keys_.operations(), "-inf", "(" + std::to_string(now_ms - keep_ms)});
  redis_.command({"ZADD", keys_.operations(), std::to_string(now_ms), id});
  return id;
}

std::optional<OperationStore::Fields> OperationStore::load(const std::string& id) {
  auto r = redis_.command({"HGETALL", keys_.operation(id)});
  const redis::ReplyView v = r.view();
  if (!v.is_array() || v.size() == 0) return std::nullopt;
  Fields out;
  for (std::size_t i = 0; i + 1 < v.size(); i += 2) out[std::string(v[i].str())] = std::string(v[i + 1].str());
  return out;
}

void OperationStore::save(const std::string& id, const Fields& fields) {
  if (fields.empty()) return;
  redis::Command hset{"HSET", keys_.operation(id)};
  for (const auto& [k, v] : fields) {
    hset.push_back(k);
    hset.push_back(v);
  }
  redis_.command(hset);
}

void OperationStore::ended(const std::string& id) {
  const auto keep_s = std::chrono::duration_cast<std::chrono::seconds>(kKeepEnded).count();
  redis_.command({"EXPIRE", keys_.operation(id), std::to_string(keep_s)});
}

std::vector<std::string> OperationStore::list() {
  auto r = redis_.command({"ZREVRANGE", keys_.operations(), "0", std::to_string(kListMax - 1)});
  std::vector<std::string> ids;
  for (std::size_t i = 0; r.view().is_array() && i < r.view().size(); ++i) ids.emplace_back(r.view()[i].str());
  return ids;
}

bool OperationStore::lease(const std::string& id, const std::string& member, std::chrono::milliseconds ttl,
                           bool give_up) {
  auto r = redis_.command({"EVAL", std::string(lua::kOpLease), "1", keys_.operation_lease(id), member,
                           std::to_string(ttl.count()), give_up ? "1" : "0"});
  return r.view().is_integer() && r.view().integer() == 1;
}

}  // namespace delayd::storage
