// Who may do what on the admin endpoint's token-protected paths (all but /, /healthz, /livez, /readyz).
//
// A request reads (GET, HEAD) or writes (any other method: DELETE, POST, PUT, PATCH, ...).
// Its bearer token ("Authorization: Bearer <token>", the scheme in any case) grants an Access:
//
//   no token configured          open: anyone may read and write (as before tokens existed)
//   admin.token                  admin: reads and writes
//   admin.read_token             read: reads only; a write gets 403
//   neither matches, or no token 401
//
// With only admin.read_token configured, nobody may write: the read token gets 403 and any
// other request 401. Tokens are compared in constant time (in the configured token's length),
// and the request's token is compared with both, whichever matches.
// Threading: pure functions.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <optional>
#include <string_view>

#include "admin/http_server.hpp"

namespace delayd::admin {

enum class Access { open, read, admin };

// "open", "read", "admin": the level's name in /whoami and in audit lines.
std::string_view to_string(Access access);

// True for every method but GET and HEAD.
bool is_write(boost::beast::http::verb method);

// What `req`'s bearer token grants, given the configured tokens (empty: not configured);
// nullopt when a token is configured and the request carries none that matches (401).
std::optional<Access> access_of(const HttpRequest& req, std::string_view admin_token, std::string_view read_token);

// Whether `access` may make a request of `method`: open and admin anything, read only reads.
bool allows(Access access, boost::beast::http::verb method);

}  // namespace delayd::admin
