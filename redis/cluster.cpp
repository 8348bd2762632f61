#include "redis/cluster.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>

namespace delayd::redis {

namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
constexpr std::array<std::uint16_t, 256> make_crc16_table() {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000U) ? ((crc << 1) ^ 0x1021U) : (crc << 1);
    t[i] = static_cast<std::uint16_t>(crc & 0xffffU);
  }
  return t;
}
constexpr std::array<std::uint16_t, 256> kCrc16 = make_crc16_table();

std::uint16_t crc16(std::string_view s) {
  unsigned crc = 0;
  for (char c : s) {
    crc = ((crc << 8) ^ kCrc16[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xffU]) & 0xffffU;
  }
  return static_cast<std::uint16_t>(crc);
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// Where a command goes.
struct Route {
  enum Kind { slot, any, every_primary, cross_slot } kind = any;
  int slot_no = -1;
};

Route route_of(const Command& argv) {
  if (argv.empty()) return {};
  const std::string name = upper(argv[0]);
  std::vector<std::string_view> keys;
  if (name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO" || name == "FCALL" ||
      name == "FCALL_RO") {
    std::size_t n = 0;
    if (argv.size() < 3) return {};
    const auto& a = argv[2];
    const auto r = std::from_chars(a.data(), a.data() + a.size(), n);
    if (r.ec != std::errc{} || r.ptr != a.data() + a.size() || n > argv.size() - 3) return {};  // server says why
    for (std::size_t i = 0; i < n; ++i) keys.push_back(argv[3 + i]);
  } else if (name == "SCRIPT" || name == "FLUSHALL" || name == "FLUSHDB" || name == "FUNCTION") {
    return {Route::every_primary, -1};
  } else if (name == "DEL" || name == "UNLINK" || name == "EXISTS" || name == "MGET" || name == "TOUCH" ||
             name == "WATCH" || name == "SINTER" || name == "SUNION" || name == "SDIFF" || name == "PFCOUNT") {
    for (std::size_t i = 1; i < argv.size(); ++i) keys.push_back(argv[i]);
  } else if (name == "MSET" || name == "MSETNX") {
    for (std::size_t i = 1; i < argv.size(); i += 2) keys.push_back(argv[i]);
  } else if (name == "PING" || name == "INFO" || name == "TIME" || name == "ECHO" || name == "DBSIZE" ||
             name == "CLUSTER" || name == "COMMAND" || name == "CONFIG" || name == "CLIENT" || name == "WAIT" ||
             name == "SCAN" || name == "KEYS" || name == "RANDOMKEY" || name == "HELLO" || name == "LASTSAVE" ||
             name == "ROLE") {
    return {};
  } else if (argv.size() >= 2) {
    keys.push_back(argv[1]);
  }
  if (keys.empty()) return {};
  const int first = redis_key_slot(keys.front());
  for (std::string_view k : keys) {
    if (redis_key_slot(k) != first) return {Route::cross_slot, -1};
  }
  return {Route::slot, first};
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381". An empty host means "the node you
// asked" (a node that does not know its own address).
struct Redirect {
  bool ask = false;
  int slot = -1;
  std::string host;
  int port = 0;
};

std::optional<Redirect> parse_redirect(std::string_view err) {
  Redirect r;
  if (err.starts_with("MOVED ")) {
    err.remove_prefix(6);
  } else if (err.starts_with("ASK ")) {
    err.remove_prefix(4);
    r.ask = true;
  } else {
    return std::nullopt;
  }
  const auto space = err.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot = err.substr(0, space);
  const std::string_view hostport = err.substr(space + 1);
  const auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view port = hostport.substr(colon + 1);
  auto s = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
  auto p = std::from_chars(port.data(), port.data() + port.size(), r.port);
  if (s.ec != std::errc{} || s.ptr != slot.data() + slot.size() || p.ec != std::errc{} ||
      p.ptr != port.data() + port.size() || r.slot < 0 || r.slot >= kRedisClusterSlots || r.port < 1 ||
      r.port > 65535) {
    return std::nullopt;
  }
  r.host = std::string(hostport.substr(0, colon));
  if (r.host.size() >= 2 && r.host.front() == '[' && r.host.back() == ']') r.host = r.host.substr(1, r.host.size() - 2);
  return r;
}

}  // namespace

std::string RedisNodeAddress::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::uint16_t redis_key_slot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    if (const auto close = key.find('}', open + 1); close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % kRedisClusterSlots);
}

RedisReply make_error_reply(std::string_view message) {
  // Parsed by hiredis's own reader, so the reply is allocated and freed the way every other is.
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader(redisReaderCreate(), redisReaderFree);
  if (!reader) throw std::bad_alloc();
  const std::string wire = "-" + std::string(message) + "\r\n";
  void* raw = nullptr;
  if (redisReaderFeed(reader.get(), wire.data(), wire.size()) != REDIS_OK ||
      redisReaderGetReply(reader.get(), &raw) != REDIS_OK || raw == nullptr) {
    throw std::logic_error("make_error_reply: hiredis could not parse an error line");
  }
  return RedisReply(static_cast<redisReply*>(raw));
}

RedisCluster::RedisCluster(RedisClusterOptions options) : options_(std::move(options)) {
  slots_.fill(-1);
  if (options_.seeds.empty()) throw std::invalid_argument("redis cluster: no seed nodes");
  for (const auto& s : options_.seeds) node_index(s);
  try {
    refresh_slots();
  } catch (const RedisIoError&) {
    if (!not_cluster_.empty()) throw RedisCommandError(not_cluster_);
    throw;
  }
}

std::size_t RedisCluster::node_index(const RedisNodeAddress& address) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].address == address) return i;
  }
  nodes_.push_back(Node{address, nullptr});
  return nodes_.size() - 1;
}

RedisConnection& RedisCluster::connection(std::size_t node) {
  Node& n = nodes_[node];
  if (!n.conn) {
    RedisOptions o = options_.node;
    o.host = n.address.host;
    o.port = n.address.port;
    n.conn = std::make_unique<RedisConnection>(std::move(o));  // throws when unreachable
  }
  return *n.conn;
}

bool RedisCluster::try_refresh(std::size_t node) {
  try {
    RedisReply reply = connection(node).command({"CLUSTER", "SLOTS"});
    const ReplyView v = reply.view();
    if (v.is_error()) {
      not_cluster_ = "redis " + nodes_[node].address.to_string() + ": CLUSTER SLOTS refused (" + v.error() +
                     "); is it a cluster node? use redis:// for a single server";
      return false;
    }
    std::array<int, kRedisClusterSlots> fresh{};
    fresh.fill(-1);
    bool any = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const ReplyView range = v[i];
      const long long from = range[0].integer();
      const long long to = range[1].integer();
      const ReplyView primary = range[2];
      std::string host(primary[0].str());
      const long long port = primary[1].integer();
      if (host.empty() || host == "?") host = nodes_[node].address.host;
      if (from < 0 || to >= kRedisClusterSlots || from > to || port < 1 || port > 65535) return false;
      const std::size_t owner = node_index({host, static_cast<int>(port)});
      for (long long s = from; s <= to; ++s) fresh[static_cast<std::size_t>(s)] = static_cast<int>(owner);
      any = true;
    }
    if (!any) return false;  // a node that has not joined a cluster yet
    slots_ = fresh;
    ++stats_.refreshes;
    primaries_.clear();
    for (int owner : slots_) {
      if (owner >= 0 &&
          std::find(primaries_.begin(), primaries_.end(), static_cast<std::size_t>(owner)) == primaries_.end()) {
        primaries_.push_back(static_cast<std::size_t>(owner));
      }
    }
    return true;
  } catch (const RedisIoError&) {
    return false;
  } catch (const RedisCommandError&) {
    return false;  // an answer of the wrong shape, or AUTH refused by that node: ask another
  }
}

void RedisCluster::refresh_slots() {
  // The primaries we know first (most likely current), then every other node ever seen.
  std::vector<std::size_t> order = primaries_;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  }
  for (std::size_t i : order) {
    if (try_refresh(i)) return;
  }
  throw RedisIoError("redis cluster: no node answered CLUSTER SLOTS with a slot map");
}

void RedisCluster::refresh_quietly() noexcept {
  try {
    refresh_slots();
  } catch (...) {
    // The caller throws its own RedisIoError; the next call tries again.
  }
}

std::vector<RedisReply> RedisCluster::send(std::size_t node, const std::vector<Command>& commands) {
  written_.insert(node);
  try {
    return connection(node).pipeline(commands);
  } catch (const RedisIoError&) {
    refresh_quietly();
    throw;
  }
}

std::size_t RedisCluster::owner_or_refresh(int slot) {
  if (slots_[static_cast<std::size_t>(slot)] < 0) refresh_quietly();
  const int owner = slots_[static_cast<std::size_t>(slot)];
  if (owner < 0) throw RedisIoError("redis cluster: slot " + std::to_string(slot) + " has no primary");
  return static_cast<std::size_t>(owner);
}

std::size_t RedisCluster::any_primary() {
  if (primaries_.empty()) refresh_slots();
  return primaries_.front();
}

RedisReply RedisCluster::broadcast(const Command& argv) {
  if (primaries_.empty()) refresh_slots();
  const std::vector<std::size_t> targets = primaries_;
  std::optional<RedisReply> first;
  std::optional<RedisReply> error;
  for (std::size_t node : targets) {
    auto replies = send(node, {argv});
    RedisReply& r = replies.front();
    if (r.view().is_error()) {
      if (!error) error.emplace(std::move(r));
    } else if (!first) {
      first.emplace(std::move(r));
    }
  }
  if (error) return std::move(*error);
  return std::move(*first);
}

std::vector<RedisReply> RedisCluster::command_on_every_server(const Command& argv) {
  require_idle("command_on_every_server()");
  if (primaries_.empty()) refresh_slots();
  const std::vector<std::size_t> targets = primaries_;
  std::vector<RedisReply> out;
  for (std::size_t node : targets) out.push_back(std::move(send(node, {argv}).front()));
  return out;
}

RedisReply RedisCluster::command(const Command& argv) {
  auto replies = pipeline({argv});
  return std::move(replies.front());
}

std::vector<RedisReply> RedisCluster::pipeline(const std::vector<Command>& commands) {
  require_idle("pipeline()");
  return run(commands);
}

void RedisCluster::post(const std::vector<Command>& commands) { posted_.push_back(commands); }

std::vector<RedisReply> RedisCluster::collect() {
  if (posted_.empty()) throw std::logic_error("redis cluster: collect() without a post()");
  const std::vector<Command> commands = std::move(posted_.front());
  posted_.pop_front();
  try {
    return run(commands);
  } catch (const RedisIoError&) {
    posted_.clear();  // as a connection forgets its posts when it fails
    throw;
  }
}

void RedisCluster::abandon() noexcept { posted_.clear(); }

void RedisCluster::require_idle(const char* what) const {
  if (!posted_.empty()) {
    throw std::logic_error(std::string("redis cluster: ") + what + " while " + std::to_string(posted_.size()) +
                           " post() calls wait to be collected");
  }
}

std::vector<RedisReply> RedisCluster::run(const std::vector<Command>& commands) {
  std::vector<std::optional<RedisReply>> out(commands.size());
  std::vector<Pending> pending;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const Route r = route_of(commands[i]);
    switch (r.kind) {
      case Route::cross_slot:
        ++stats_.cross_slot;
        out[i].emplace(make_error_reply("CROSSSLOT Keys in request don't hash to the same slot (refused by delayd)"));
        break;
      case Route::every_primary:
        out[i].emplace(broadcast(commands[i]));
        break;
      case Route::any:
        pending.push_back({i, any_primary(), false});
        break;
      case Route::slot:
        pending.push_back({i, owner_or_refresh(r.slot_no), false});
        break;
    }
  }

  for (int round = 0; !pending.empty(); ++round) {
    if (round > options_.max_redirects) {
      throw RedisIoError("redis cluster: a command was redirected more than " + std::to_string(options_.max_redirects) +
                         " times (slots moving)");
    }
    // One round trip per node, commands in batch order; ASKING before each asked command.
    std::map<std::size_t, std::vector<const Pending*>> by_node;
    for (const Pending& p : pending) by_node[p.node].push_back(&p);
    std::vector<Pending> next;
    bool moved = false;
    for (const auto& [node, group] : by_node) {
      std::vector<Command> batch;
      for (const Pending* p : group) {
        if (p->asking) batch.push_back({"ASKING"});
        batch.push_back(commands[p->index]);
      }
      std::vector<RedisReply> replies = send(node, batch);
      std::size_t at = 0;
      for (const Pending* p : group) {
        if (p->asking) ++at;  // ASKING's +OK
        RedisReply& reply = replies[at++];
        const ReplyView v = reply.view();
        std::optional<Redirect> redirect;
        if (v.is_error()) redirect = parse_redirect(v.error());
        if (!redirect) {
          out[p->index].emplace(std::move(reply));
          continue;
        }
        const RedisNodeAddress to{redirect->host.empty() ? nodes_[node].address.host : redirect->host, redirect->port};
        const std::size_t target = node_index(to);
        if (redirect->ask) {
          ++stats_.asked;
        } else {
          ++stats_.moved;
          slots_[static_cast<std::size_t>(redirect->slot)] = static_cast<int>(target);
          moved = true;
        }
        next.push_back({p->index, target, redirect->ask});
      }
    }
    if (moved) refresh_quietly();  // the entries set above are enough if no node answers
    pending = std::move(next);
  }

  std::vector<RedisReply> result;
  result.reserve(out.size());
  for (auto& r : out) result.push_back(std::move(*r));
  return result;
}

void RedisCluster::wait_replicas(int replicas, int timeout_ms) {
  require_idle("wait_replicas()");
  if (replicas <= 0) {
    written_.clear();
    return;
  }
  // A node written to that is no longer a primary (it failed over): whether its writes reached
  // the new primary cannot be known, so the caller must write again (to the new primary, which
  // the next wait covers). It is forgotten here, so that the repeat can succeed.
  for (auto it = written_.begin(); it != written_.end();) {
    if (std::find(primaries_.begin(), primaries_.end(), *it) != primaries_.end()) {
      ++it;
      continue;
    }
    const std::string who = nodes_[*it].address.to_string();
    written_.erase(it);
    throw RedisIoError("redis " + who + ": no longer a primary since it was written to; write again");
  }
  const Command wait{"WAIT", std::to_string(replicas), std::to_string(timeout_ms)};
  for (auto it = written_.begin(); it != written_.end();) {
    RedisReply r = std::move(send(*it, {wait}).front());
    const ReplyView v = r.view();
    if (!v.is_integer() || v.integer() < replicas) {
      const std::string who = nodes_[*it].address.to_string();
      if (v.is_error()) {  // "WAIT cannot be used with replica instances": a failover we had not seen
        written_.erase(it);
        refresh_quietly();
      }
      const std::string what = "redis " + who + ": WAIT " + std::to_string(replicas) + ": ";
      if (v.is_integer()) {
        throw RedisNotDurable(what + std::to_string(v.integer()) + " replicas acknowledged within " +
                              std::to_string(timeout_ms) + " ms");
      }
      throw RedisIoError(what + (v.is_error() ? v.error() : std::string("unexpected reply")));
    }
    it = written_.erase(it);
  }
}

std::vector<RedisNodeAddress> RedisCluster::primaries() const {
  std::vector<RedisNodeAddress> out;
  for (std::size_t i : primaries_) out.push_back(nodes_[i].address);
  return out;
}

std::optional<RedisNodeAddress> RedisCluster::slot_owner(int slot) const {
  if (slot < 0 || slot >= kRedisClusterSlots) return std::nullopt;
  const int owner = slots_[static_cast<std::size_t>(slot)];
  if (owner < 0) return std::nullopt;
  return nodes_[static_cast<std::size_t>(owner)].address;
}

RedisReply RedisCluster::command_on(const RedisNodeAddress& node, const Command& argv) {
  return std::move(send(node_index(node), {argv}).front());
}

}  // namespace delayd::redis
