#include "admin/access.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

namespace delayd::admin {

namespace http = boost::beast::http;

namespace {

// The methods that only read; every other one writes.
constexpr http::verb kReadMethods[] = {http::verb::get, http::verb::head};

// Constant-time equality (in the length of `expected`), so a token cannot be guessed byte by
// byte from response times.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

}  // namespace

std::string_view to_string(Access access) {
  switch (access) {
    case Access::open:
      return "open";
    case Access::read:
      return "read";
    case Access::admin:
      return "admin";
  }
  return "open";
}

bool is_write(http::verb method) {
  for (const http::verb read : kReadMethods) {
    if (method == read) return false;
  }
  return true;
}

std::optional<Access> access_of(const HttpRequest& req, std::string_view admin_token, std::string_view read_token) {
  if (admin_token.empty() && read_token.empty()) return Access::open;
  const auto it = req.find(http::field::authorization);
  const std::string_view given =
      it == req.end() ? std::string_view{} : std::string_view(it->value().data(), it->value().size());
  const bool bearer = given.size() > 7 && boost::beast::iequals(boost::beast::string_view(given.data(), 7),
                                                                "Bearer ");  // scheme: any case
  if (!bearer) return std::nullopt;
  const std::string_view token = given.substr(7);
  // Both compared, whichever matches, so the time taken does not tell which one did.
  const bool admin = !admin_token.empty() && same_secret(token, admin_token);
  const bool read = !read_token.empty() && same_secret(token, read_token);
  if (admin) return Access::admin;
  if (read) return Access::read;
  return std::nullopt;
}

bool allows(Access access, http::verb method) { return access != Access::read || !is_write(method); }

}  // namespace delayd::admin
