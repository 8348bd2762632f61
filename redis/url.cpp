// redis://[[user]:password@]host[:port][/db], as hiredis users write it, and
// redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0] for a cluster's seed nodes;
// rediss:// and redis-cluster+tls:// are the same over TLS (the files and the verification name
// come from settings of their own: TlsOptions). No unix sockets.
#include "redis/url.hpp"

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "base/text_encoding.hpp"

namespace delayd::redis {

namespace {

// The four schemes: one server or a cluster, plain or over TLS.
struct Scheme {
  std::string_view prefix;
  bool cluster;
  bool tls;
};
constexpr Scheme kSchemes[] = {{"redis://", false, false},
                               {"rediss://", false, true},
                               {"redis-cluster://", true, false},
                               {"redis-cluster+tls://", true, true}};

std::string percent_decode(std::string_view s, const char* what) {
  auto out = base::percent_decode(s);
  if (!out) throw std::invalid_argument(std::string("bad percent-escape in the ") + what);
  return std::move(*out);
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// Splits the authority (between "redis://" and the first '/') into userinfo and host:port.
// The last '@' separates them, so an unescaped '@' in a password still parses.
struct Authority {
  std::string_view userinfo;  // without the '@'
  bool has_userinfo = false;
  std::string_view hostport;
};

Authority split_authority(std::string_view authority) {
  Authority a;
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    a.userinfo = authority.substr(0, at);
    a.has_userinfo = true;
    a.hostport = authority.substr(at + 1);
  } else {
    a.hostport = authority;
  }
  return a;
}

// host[:port] or [v6]:port, as in a url's authority.
std::pair<std::string, int> parse_host_port(std::string_view hostport, int default_port) {
  std::string_view host = hostport;
  std::string_view port;
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("unclosed '[' in the host");
    const std::string_view after = host.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') throw std::invalid_argument("unexpected text after ']' in the host");
      port = after.substr(1);
      if (port.empty()) throw std::invalid_argument("empty port");
    }
    host = host.substr(1, close - 1);
  } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
    if (port.empty()) throw std::invalid_argument("empty port");
  }
  if (host.empty()) throw std::invalid_argument("missing host");
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '/' || c == '?' || c == '#' || c == '@' || c == '[' || c == ']' || c == ',') {
      throw std::invalid_argument("bad character in the host");
    }
  }
  int out_port = default_port;
  if (!port.empty()) {
    unsigned p = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), p);
    if (!all_digits(port) || r.ec != std::errc{} || p < 1 || p > 65535) {
      throw std::invalid_argument("port must be a number from 1 to 65535");
    }
    out_port = static_cast<int>(p);
  }
  return {std::string(host), out_port};
}

}  // namespace

RedisTarget parse_redis_target(std::string_view url) {
  const Scheme* scheme = nullptr;
  for (const Scheme& s : kSchemes) {
    if (url.starts_with(s.prefix)) scheme = &s;
  }
  if (scheme == nullptr) {
    throw std::invalid_argument(
        "must start with redis://, rediss:// (TLS), redis-cluster:// or redis-cluster+tls:// (forms: "
        "redis://[[user]:password@]host[:port][/db], redis-cluster://[[user]:password@]host:port[,host:port...])");
  }
  const bool cluster = scheme->cluster;
  std::string_view rest = url.substr(scheme->prefix.size());
  const auto slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);

  RedisTarget t;
  RedisOptions& ep = t.options;
  ep.tls.enabled = scheme->tls;
  const Authority a = split_authority(authority);
  if (a.has_userinfo) {
    const auto colon = a.userinfo.find(':');
    if (colon == std::string_view::npos) {
      // "redis://secret@host" is ambiguous between a user and a password; refusing it also
      // keeps a password from being printed as if it were a user name.
      throw std::invalid_argument("the part before '@' must be user:password or :password");
    }
    ep.user = percent_decode(a.userinfo.substr(0, colon), "user");
    ep.password = percent_decode(a.userinfo.substr(colon + 1), "password");
  }

  if (cluster) {
    std::string_view list = a.hostport;
    while (true) {
      const auto comma = list.find(',');
      t.cluster_seeds.push_back(parse_host_port(list.substr(0, comma), ep.port));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    std::tie(ep.host, ep.port) = t.cluster_seeds.front();
  } else {
    std::tie(ep.host, ep.port) = parse_host_port(a.hostport, ep.port);
  }

  if (!path.empty()) {
    std::int64_t db = 0;
    const auto r = std::from_chars(path.data(), path.data() + path.size(), db);
    if (!all_digits(path) || r.ec != std::errc{} || db > 2'147'483'647) {
      throw std::invalid_argument("the path must be a database number (/0, /1, ...)");
    }
    if (cluster && db != 0) throw std::invalid_argument("a Redis Cluster has only database 0");
    ep.db = static_cast<int>(db);
  }
  return t;
}

RedisOptions parse_redis_url(std::string_view url) { return parse_redis_target(url).options; }

std::string mask_redis_url(std::string_view url) {
  // Best effort for any text, valid or not, since it also masks urls that failed to parse.
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const std::size_t start = scheme_end + 3;
  const auto slash = url.find('/', start);
  const std::string_view authority =
      url.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  const auto colon = authority.find(':');
  std::string out(url.substr(0, start));
  if (colon != std::string_view::npos && colon < at) {
    out += authority.substr(0, colon + 1);
  }
  // Without a ':' the whole userinfo might be a password; hide all of it.
  out += "***";
  out += url.substr(start + at);
  return out;
}

}  // namespace delayd::redis
