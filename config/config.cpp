#include "config/config.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <toml.hpp>

#include "base/text_encoding.hpp"
#include "config/business_policy.hpp"
#include "config/config_names.hpp"
#include "config/config_registry.hpp"
#include "config/redis_options.hpp"
#include "redis/tls.hpp"

extern char** environ;

namespace delayd::config {

using detail::Field;
using detail::Setting;

namespace {

constexpr std::string_view kConfigEnv = "DELAYD_CONFIG";

[[noreturn]] void fail(std::string_view subject, std::string_view origin, std::string_view problem) {
  std::string msg = "config error: ";
  msg += subject;
  if (!origin.empty()) {
    msg += " (from ";
    msg += origin;
    msg += ')';
  }
  msg += ": ";
  msg += problem;
  throw ConfigError(msg);
}

// ---- finding settings by name, with a hint for typos ------------------------------------

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string unknown_setting_problem(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = 3;  // further than this is not a typo but a different word
  for (const auto& s : detail::settings()) {
    const std::size_t d = edit_distance(name, s.name);
    if (d < best_distance) {
      best_distance = d;
      best = s.name;
    }
  }
  const auto dot = name.find('.');
  if (best.empty() && dot != std::string_view::npos) {
    // A misspelt section makes every key in it unknown; name the section instead.
    const std::string_view section = name.substr(0, dot);
    bool known = false;
    std::string_view nearest;
    for (const auto& s : detail::settings()) {
      known = known || s.section() == section;
      if (edit_distance(section, s.section()) < 3) nearest = s.section();
    }
    if (!known) {
      std::string problem = "unknown section [" + std::string(section) + "]";
      if (!nearest.empty()) problem += "; did you mean [" + std::string(nearest) + "]?";
      return problem;
    }
  }
  if (best.empty()) {
    // Right key, wrong or missing section: "bootstrap" or "redis.bootstrap".
    const std::string_view key = name.substr(name.rfind('.') + 1);
    for (const auto& s : detail::settings()) {
      if (s.key() == key) best = s.name;
    }
  }
  std::string problem = "unknown setting";
  if (!best.empty()) {
    problem += "; did you mean ";
    problem += best;
    problem += '?';
  }
  return problem;
}

// A name from --set: a setting, or "<passthrough table>.<property>".
struct Target {
  const Setting* setting = nullptr;
  std::string property;  // non-empty for one entry of a passthrough table
};

Target resolve(std::string_view name) {
  if (const Setting* s = detail::find_setting(name)) return {s, {}};
  for (const auto& s : detail::settings()) {
    if (!std::holds_alternative<Field<PropertyMap>>(s.field)) continue;
    if (name.size() > s.name.size() + 1 && name.starts_with(s.name) && name[s.name.size()] == '.') {
      return {&s, std::string(name.substr(s.name.size() + 1))};
    }
  }
  return {};
}

// ---- text values (environment and --set) ------------------------------------------------

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (text.empty() || (text[0] == '+')) return std::nullopt;
  const auto r = std::from_chars(first, last, v);
  if (r.ec != std::errc{} || r.ptr != last) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  return std::nullopt;
}

// "k=v,k2=v2"; "\," is a literal comma and "\\" a literal backslash, so values such as a
// broker list can still be written. Empty items are skipped.
std::vector<std::pair<std::string, std::string>> parse_property_list(std::string_view text, std::string_view subject,
                                                                     std::string_view origin) {
  std::vector<std::string> items(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ',' || text[i + 1] == '\\')) {
      items.back().push_back(text[++i]);
    } else if (c == ',') {
      items.emplace_back();
    } else {
      items.back().push_back(c);
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : items) {
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      fail(subject, origin,
           "expected a comma-separated list of name=value, but " + base::quote_for_message(item) +
               " has no '=' (write a literal comma as \\,)");
    }
    out.emplace_back(trim(std::string_view(item).substr(0, eq)), trim(std::string_view(item).substr(eq + 1)));
  }
  return out;
}

void set_property(Config& c, const Setting& s, const std::string& property, std::string value,
                  const std::string& origin) {
  std::get<Field<PropertyMap>>(s.field).mut(c)[property] = std::move(value);
  c.origins[std::string(s.name) + "." + property] = origin;
}

// Assigns `text` to the setting; only the type is checked here, ranges once all sources are in.
void set_from_text(Config& c, const Target& t, std::string_view text, const std::string& origin) {
  const Setting& s = *t.setting;
  const std::string subject = std::string(s.name) + (t.property.empty() ? "" : "." + t.property);
  const auto shown = [&] { return subject + " = " + base::quote_for_message(s.secret ? "***" : text); };
  if (!t.property.empty()) {
    set_property(c, s, t.property, std::string(text), origin);
    return;
  }
  if (const auto* f = std::get_if<Field<std::string>>(&s.field)) {
    f->mut(c) = std::string(text);
  } else if (const auto* f = std::get_if<Field<bool>>(&s.field)) {
    const auto v = parse_bool(text);
    if (!v) fail(shown(), origin, "not a boolean (true or false)");
    f->mut(c) = *v;
  } else if (const auto* f = std::get_if<Field<std::int64_t>>(&s.field)) {
    const auto v = parse_int(text);
    if (!v) fail(shown(), origin, "not an integer");
    f->mut(c) = *v;
  } else if (const auto* f = std::get_if<Field<std::optional<std::int64_t>>>(&s.field)) {
    const auto v = parse_int(text);
    if (!v) fail(shown(), origin, "not an integer");
    f->mut(c) = *v;
  } else {
    for (auto& [k, v] : parse_property_list(text, subject, origin)) {
      set_property(c, s, k, std::move(v), origin);
    }
    return;
  }
  c.origins[std::string(s.name)] = origin;
}

// ---- the TOML file ----------------------------------------------------------------------

// The whole content of the file at `path`; fails with `subject` and `origin` when it cannot be
// opened or read.
std::string read_file(const std::string& path, std::string_view subject, std::string_view origin) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(subject, origin, std::string("cannot open: ") + std::strerror(errno));
  std::string data;
  char buf[8192];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) data.append(buf, n);
  if (std::ferror(f.get())) fail(subject, origin, std::string("cannot read: ") + std::strerror(errno));
  return data;
}

const char* toml_type_name(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return "a boolean";
    case toml::value_t::integer:
      return "an integer";
    case toml::value_t::floating:
      return "a float";
    case toml::value_t::string:
      return "a string";
    case toml::value_t::offset_datetime:
    case toml::value_t::local_datetime:
    case toml::value_t::local_date:
    case toml::value_t::local_time:
      return "a date/time";
    case toml::value_t::array:
      return "an array";
    case toml::value_t::table:
      return "a table";
    default:
      return "nothing";
  }
}

// Table entries in file order, so that the first problem reported is the first in the file.
std::vector<std::pair<std::string, const toml::value*>> entries_in_order(const toml::value& table) {
  std::vector<std::pair<std::string, const toml::value*>> out;
  for (const auto& [k, v] : table.as_table()) out.emplace_back(k, &v);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto la = a.second->location().line();
    const auto lb = b.second->location().line();
    return la != lb ? la < lb : a.first < b.first;
  });
  return out;
}

class FileLoader {
 public:
  FileLoader(Config& c, std::string path) : c_(c), path_(std::move(path)) {}

  void load(const std::string& path_origin) {
    const std::string text = read_file(path_, "config file " + base::quote_for_message(path_, 500), path_origin);
    toml::value root;
    try {
      std::istringstream in(text);
      root = toml::parse(in, path_);
    } catch (const std::exception& e) {
      fail("config file " + base::quote_for_message(path_, 500), path_origin,
           std::string("not valid TOML:\n") + e.what());
    }
    for (const auto& [section, value] : entries_in_order(root)) {
      if (!value->is_table()) {
        if (known_section(section)) wrong_type(section, *value, "a table");
        fail(section, origin(*value), unknown_setting_problem(section));
      }
      const auto entries = entries_in_order(*value);
      if (entries.empty() && !known_section(section)) {
        fail("[" + section + "]", origin(*value), "unknown section");
      }
      // An unknown section fails on its first key, whose full name gets the typo hint.
      for (const auto& [key, v] : entries) apply(section + "." + key, *v);
    }
  }

 private:
  static bool known_section(std::string_view name) {
    for (const auto& s : detail::settings()) {
      if (s.section() == name) return true;
    }
    return false;
  }

  std::string origin(const toml::value& v) const {
    return "file " + path_ + " line " + std::to_string(v.location().line());
  }

  [[noreturn]] void wrong_type(const std::string& name, const toml::value& v, const char* expected) {
    fail(name, origin(v), std::string("expected ") + expected + ", got " + toml_type_name(v));
  }

  // toml11 3.7 reads an integer that does not fit in 64 bits as the nearest limit without a
  // word; treat the limits themselves as overflow, since no setting accepts them anyway.
  std::int64_t integer(const std::string& name, const toml::value& v) {
    const std::int64_t x = v.as_integer();
    if (x == std::numeric_limits<std::int64_t>::max() || x == std::numeric_limits<std::int64_t>::min()) {
      fail(name, origin(v), "integer at or beyond the 64-bit range");
    }
    return x;
  }

  void apply(const std::string& name, const toml::value& v) {
    const Setting* s = detail::find_setting(name);
    if (s == nullptr) fail(name, origin(v), unknown_setting_problem(name));
    if (const auto* f = std::get_if<Field<std::string>>(&s->field)) {
      if (s->list && v.is_array()) {
        std::string joined;
        for (const auto& item : v.as_array()) {
          if (!item.is_string() || item.as_string().str.find(',') != std::string::npos) {
            wrong_type(name, v, "a string or an array of strings without commas");
          }
          joined += (joined.empty() ? "" : ",") + item.as_string().str;
        }
        f->mut(c_) = joined;
        c_.origins[name] = origin(v);
        return;
      }
      if (!v.is_string()) wrong_type(name, v, s->list ? "a string or an array of strings" : "a string");
      f->mut(c_) = v.as_string().str;
    } else if (const auto* f = std::get_if<Field<bool>>(&s->field)) {
      if (!v.is_boolean()) wrong_type(name, v, "a boolean");
      f->mut(c_) = v.as_boolean();
    } else if (const auto* f = std::get_if<Field<std::int64_t>>(&s->field)) {
      if (!v.is_integer()) wrong_type(name, v, "an integer");
      f->mut(c_) = integer(name, v);
    } else if (const auto* f = std::get_if<Field<std::optional<std::int64_t>>>(&s->field)) {
      if (!v.is_integer()) wrong_type(name, v, "an integer");
      f->mut(c_) = integer(name, v);
    } else {
      if (!v.is_table()) wrong_type(name, v, "a table");
      apply_properties(*s, "", v);
      return;
    }
    c_.origins[name] = origin(v);
  }

  // Unquoted dotted keys (security.protocol = "SSL") make nested tables in TOML; flattening
  // them back means both spellings of a librdkafka property work.
  void apply_properties(const Setting& s, const std::string& prefix, const toml::value& table) {
    for (const auto& [k, v] : entries_in_order(table)) {
      const std::string property = prefix + k;
      const std::string name = std::string(s.name) + "." + property;
      std::string text;
      switch (v->type()) {
        case toml::value_t::table:
          apply_properties(s, property + ".", *v);
          continue;
        case toml::value_t::string:
          text = v->as_string().str;
          break;
        case toml::value_t::integer:
          text = std::to_string(integer(name, *v));
          break;
        case toml::value_t::boolean:
          text = v->as_boolean() ? "true" : "false";
          break;
        default:
          wrong_type(name, *v, "a string, integer or boolean");
      }
      set_property(c_, s, property, std::move(text), origin(*v));
    }
  }

  Config& c_;
  std::string path_;
};

// ---- environment and flags --------------------------------------------------------------

void apply_env(Config& c, const Environment& env) {
  for (const auto& s : detail::settings()) {
    const std::string var = detail::env_name(s.name);
    if (auto it = env.find(var); it != env.end()) {
      set_from_text(c, Target{&s, {}}, it->second, "env " + var);
    }
  }
  for (const auto& [var, value] : env) {
    if (!var.starts_with("DELAYD_") || var == kConfigEnv) continue;
    bool known = false;
    for (const auto& s : detail::settings()) known = known || detail::env_name(s.name) == var;
    if (!known) c.warnings.push_back("ignoring unknown environment variable " + var);
  }
}

void apply_set(Config& c, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    fail("--set " + base::quote_for_message(assignment), "", "expected section.key=value");
  }
  const std::string name = trim(assignment.substr(0, eq));
  if (name.empty()) fail("--set " + base::quote_for_message(assignment), "", "expected section.key=value");
  const Target t = resolve(name);
  if (t.setting == nullptr) fail(name, "--set", unknown_setting_problem(name));
  set_from_text(c, t, assignment.substr(eq + 1), "--set");
}

// ---- secrets given as files --------------------------------------------------------------

// Secret settings that may be given as a file instead (a Kubernetes secret mounted as a file):
// the secret, and the setting that names its file.
struct SecretFile {
  std::string_view secret;
  std::string_view file;
};
constexpr SecretFile kSecretFiles[] = {{"admin.token", "admin.token_file"},
                                       {"admin.read_token", "admin.read_token_file"},
                                       {"redis.password", "redis.password_file"},
                                       {"kafka.sasl_password", "kafka.sasl_password_file"}};

// " (from <origin>)" of a setting, or "" for a default.
std::string from_origin(const Config& c, std::string_view name) {
  const auto it = c.origins.find(std::string(name));
  return it == c.origins.end() ? "" : " (from " + it->second + ")";
}

// The content of the file `path` names, without its trailing newline (LF or CRLF, however many).
// Fails naming `file` (the setting) and the path when it cannot be read or holds nothing else.
std::string read_secret_file(const Config& c, std::string_view file, const std::string& path) {
  const std::string subject = std::string(file) + " = " + base::quote_for_message(path, 500);
  const auto it = c.origins.find(std::string(file));
  const std::string origin = it == c.origins.end() ? "" : it->second;
  std::string data = read_file(path, subject, origin);
  while (!data.empty() && (data.back() == '\n' || data.back() == '\r')) data.pop_back();
  if (data.empty()) fail(subject, origin, "the file is empty");
  return data;
}

// Reads each secret given as a file into its setting, whose origin then names the file.
void read_secret_files(Config& c) {
  for (const auto& [secret_name, file_name] : kSecretFiles) {
    const Setting& secret = *detail::find_setting(secret_name);
    const std::string path = std::get<Field<std::string>>(detail::find_setting(file_name)->field).get(c);
    if (path.empty()) continue;
    std::string& value = std::get<Field<std::string>>(secret.field).mut(c);
    if (!value.empty()) {
      fail(std::string(secret_name) + from_origin(c, secret_name) + " and " + std::string(file_name) + " = " +
               base::quote_for_message(path, 500) + from_origin(c, file_name),
           "", "both are set; give the secret or the file that holds it, not both");
    }
    value = read_secret_file(c, file_name, path);
    c.origins[std::string(secret_name)] = std::string(file_name) + " " + path;
  }
}

// ---- validation -------------------------------------------------------------------------

[[noreturn]] void invalid(const Config& c, const Setting& s, std::string_view problem) {
  std::string subject = std::string(s.name) + " = " + detail::display_value(s, c);
  std::string origin;
  if (auto it = c.origins.find(std::string(s.name)); it != c.origins.end()) origin = it->second;
  fail(subject, origin, problem);
}

void check_properties(const Config& c, const Setting& s, const PropertyMap& props) {
  struct Owned {
    std::string_view property;
    std::string_view setting;
  };
  // Properties delayd derives from its own settings; a passthrough copy would silently fight
  // with them, so point at the real setting instead.
  constexpr Owned kOwned[] = {{"bootstrap.servers", "kafka.bootstrap"},
                              {"metadata.broker.list", "kafka.bootstrap"},
                              {"group.id", "kafka.group_id"},
                              {"group.instance.id", "kafka.group_instance_id"},
                              {"message.timeout.ms", "kafka.message_timeout_ms"},
                              {"delivery.timeout.ms", "kafka.message_timeout_ms"}};
  for (const auto& [k, v] : props) {
    const std::string name = std::string(s.name) + "." + k;
    const auto origin_it = c.origins.find(name);
    const std::string origin = origin_it == c.origins.end() ? "" : origin_it->second;
    const std::string subject = name + " = " + (detail::is_secret_property(k) ? "\"***\"" : base::quote_for_message(v));
    if (k.empty() || k.find_first_of(" \t\r\n=,") != std::string::npos) {
      fail(subject, origin, "a property name must be non-empty, without spaces, '=' or ','");
    }
    for (const auto& owned : kOwned) {
      if (k == owned.property) {
        fail(subject, origin, "delayd sets this property itself; use " + std::string(owned.setting) + " instead");
      }
    }
    if (k == "sasl.password" && !c.kafka.sasl_password.empty()) {
      fail(subject, origin, "kafka.sasl_password (or kafka.sasl_password_file) is set too; give the password once");
    }
  }
}

// The TLS settings agree with the url, and their files can be used: a TLS setting with a plain
// url would be ignored (delayd never falls back to plaintext silently, nor lets a user think it
// encrypts when it does not), and a file that cannot be read fails now, not at the first job.
void check_redis_tls(const Config& c) {
  const bool tls_url = redis::parse_redis_url(c.redis.url).tls.enabled;  // the url was checked already
  if (!tls_url) {
    const std::pair<std::string_view, bool> given[] = {{"redis.tls_ca_file", !c.redis.tls_ca_file.empty()},
                                                       {"redis.tls_cert_file", !c.redis.tls_cert_file.empty()},
                                                       {"redis.tls_key_file", !c.redis.tls_key_file.empty()},
                                                       {"redis.tls_server_name", !c.redis.tls_server_name.empty()},
                                                       {"redis.tls_verify", !c.redis.tls_verify}};
    for (const auto& [name, set] : given) {
      if (set) {
        invalid(c, *detail::find_setting(name),
                "is set but redis.url is not a TLS url (use rediss:// or redis-cluster+tls://)");
      }
    }
    return;
  }
  const redis::TlsOptions tls = redis_options(c).tls;
  try {
    (void)redis::TlsContext(tls);
  } catch (const redis::TlsSetupError& e) {
    invalid(c, *detail::find_setting("redis.tls_" + std::string(e.setting)), e.what());
  }
}

}  // namespace

// ---- public API -------------------------------------------------------------------------

std::string KafkaConfig::ready_topic(std::string_view business) const {
  return render_ready_topic(ready_topic_template, business);
}

std::int64_t WheelSettings::range_ms() const {
  // Clamp so that even an unvalidated Config cannot overflow the shift or the product.
  const std::int64_t bits = std::clamp<std::int64_t>(slot_bits, 0, 12);
  const std::int64_t tick = std::clamp<std::int64_t>(tick_ms, 0, 60'000);
  return tick << (3 * bits);
}

redis::RedisOptions redis_options(const Config& config) {
  redis::RedisOptions o;
  try {
    o = redis::parse_redis_url(config.redis.url);
  } catch (const std::invalid_argument& e) {
    fail("redis.url = " + base::quote_for_message(redis::mask_redis_url(config.redis.url)), "", e.what());
  }
  if (!config.redis.password.empty()) o.password = config.redis.password;
  if (config.redis.db) o.db = static_cast<int>(*config.redis.db);
  o.timeout_ms = static_cast<int>(config.redis.timeout_ms);
  o.tls.ca_file = config.redis.tls_ca_file;
  o.tls.cert_file = config.redis.tls_cert_file;
  o.tls.key_file = config.redis.tls_key_file;
  o.tls.server_name = config.redis.tls_server_name;
  o.tls.verify = config.redis.tls_verify;
  return o;
}

void validate_config(const Config& c) {
  for (const auto& s : detail::settings()) {
    if (const auto* f = std::get_if<Field<std::string>>(&s.field)) {
      if (s.check != nullptr) {
        if (std::string problem = s.check(f->get(c)); !problem.empty()) invalid(c, s, problem);
      }
    } else if (const auto* f = std::get_if<Field<std::int64_t>>(&s.field)) {
      const std::int64_t v = f->get(c);
      if (v < s.min || v > s.max) {
        invalid(c, s, "must be from " + std::to_string(s.min) + " to " + std::to_string(s.max));
      }
    } else if (const auto* f = std::get_if<Field<std::optional<std::int64_t>>>(&s.field)) {
      if (const auto& v = f->get(c); v && (*v < s.min || *v > s.max)) {
        invalid(c, s, "must be from " + std::to_string(s.min) + " to " + std::to_string(s.max));
      }
    } else if (const auto* f = std::get_if<Field<PropertyMap>>(&s.field)) {
      if (s.name == "scheduler.business") {
        try {
          (void)BusinessPolicies(c);
        } catch (const ConfigError& e) {
          invalid(c, s, e.what());
        }
      } else {
        check_properties(c, s, f->get(c));
      }
    }
  }
  // Relations between settings, each reported against the setting a user would change.
  if (c.kafka.dlq_topic == c.kafka.ingest_topic) {
    invalid(c, *detail::find_setting("kafka.dlq_topic"), "must differ from kafka.ingest_topic");
  }
  {
    const detail::Setting& list = *detail::find_setting("kafka.ingest_topics");
    std::set<std::string> seen;
    bool chronos = false;
    for (const auto& t : ingest_topics(c)) {
      if (!seen.insert(t.topic).second) invalid(c, list, "names topic " + t.topic + " twice");
      if (t.topic == c.kafka.dlq_topic || t.topic == c.kafka.status_topic) {
        invalid(c, list, "names " + t.topic + ", which is kafka.dlq_topic or kafka.status_topic");
      }
      chronos = chronos || t.format == IngestFormat::chronos;
    }
    if (chronos && c.chronos.output_topic.empty()) {
      invalid(c, *detail::find_setting("chronos.output_topic"), "must be set: kafka.ingest_topics has a chronos topic");
    }
  }
  const std::int64_t range = c.wheel.range_ms();
  if (c.scheduler.load_window_ms >= range) {
    invalid(c, *detail::find_setting("scheduler.load_window_ms"),
            "must be less than the wheel range (" + std::to_string(range) + " ms = wheel.tick_ms " +
                std::to_string(c.wheel.tick_ms) + " * 2^(3 * " + "wheel.slot_bits " +
                std::to_string(c.wheel.slot_bits) + "))");
  }
  if (c.scheduler.max_value_bytes + kReadyRecordReserveBytes > producer_max_message_bytes(c)) {
    invalid(c, *detail::find_setting("scheduler.max_value_bytes"),
            "leaves no room under the producer's message.max.bytes (" + std::to_string(producer_max_message_bytes(c)) +
                ") for delayd's own headers: it must be at most " +
                std::to_string(producer_max_message_bytes(c) - kReadyRecordReserveBytes) +
                " (or raise kafka.producer_properties.message.max.bytes)");
  }
  if (c.redis.db && *c.redis.db != 0 && redis::parse_redis_target(c.redis.url).is_cluster()) {
    invalid(c, *detail::find_setting("redis.db"), "must be 0 with a redis-cluster:// url (a cluster has only db 0)");
  }
  check_redis_tls(c);
  if (!c.kafka.status_topic.empty() &&
      (c.kafka.status_topic == c.kafka.ingest_topic || c.kafka.status_topic == c.kafka.dlq_topic)) {
    invalid(c, *detail::find_setting("kafka.status_topic"), "must differ from kafka.ingest_topic and kafka.dlq_topic");
  }
  if (c.scheduler.process_retry_max_ms < c.scheduler.process_retry_base_ms) {
    invalid(c, *detail::find_setting("scheduler.process_retry_max_ms"),
            "must not be less than scheduler.process_retry_base_ms (" +
                std::to_string(c.scheduler.process_retry_base_ms) + ")");
  }
  if (!c.admin.read_token.empty() && c.admin.read_token == c.admin.token) {
    invalid(c, *detail::find_setting("admin.read_token"), "must differ from admin.token");
  }
  if (c.scheduler.retry_backoff_max_ms < c.scheduler.retry_backoff_ms) {
    invalid(c, *detail::find_setting("scheduler.retry_backoff_max_ms"),
            "must not be less than scheduler.retry_backoff_ms (" + std::to_string(c.scheduler.retry_backoff_ms) + ")");
  }
}

std::vector<std::string> split_business_list(std::string_view list) {
  std::vector<std::string> out;
  if (trim(list).empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = list.find(',', start);
    out.push_back(trim(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

std::int64_t producer_max_message_bytes(const Config& c) {
  std::int64_t limit = 1'000'000;  // librdkafka's default
  for (const auto& [k, v] : kafka_properties(c, KafkaClient::producer)) {
    if (k != "message.max.bytes") continue;
    std::int64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && p == v.data() + v.size() && n > 0) limit = n;
  }
  return limit;
}

std::size_t max_ready_record_bytes(const Config& c) {
  return static_cast<std::size_t>(std::max<std::int64_t>(producer_max_message_bytes(c) - kReadyRecordReserveBytes, 1));
}

KafkaProperties kafka_properties(const Config& c, KafkaClient client) {
  KafkaProperties out;
  const auto put = [&out](const std::string& k, const std::string& v) {
    for (auto& [name, value] : out) {
      if (name == k) {
        value = v;
        return;
      }
    }
    out.emplace_back(k, v);
  };
  put("bootstrap.servers", c.kafka.bootstrap);
  if (client == KafkaClient::consumer) put("group.id", c.kafka.group_id);
  if (client == KafkaClient::producer) {
    put("message.timeout.ms", std::to_string(c.kafka.message_timeout_ms));
  }
  for (const auto& [k, v] : c.kafka.properties) put(k, v);
  if (!c.kafka.sasl_password.empty()) put("sasl.password", c.kafka.sasl_password);
  if (client == KafkaClient::consumer) {
    for (const auto& [k, v] : c.kafka.consumer_properties) put(k, v);
  }
  if (client == KafkaClient::producer) {
    for (const auto& [k, v] : c.kafka.producer_properties) put(k, v);
  }
  return out;
}

Environment process_environment() {
  Environment env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string_view entry(*p);
    if (!entry.starts_with("DELAYD_") && !entry.starts_with("OTEL_")) continue;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

void add_config_flags(CLI::App& app, ConfigFlags& flags) {
  app.add_option_function<std::string>(
         "--config", [&flags](const std::string& v) { flags.config_file = v; },
         "TOML configuration file (default: $DELAYD_CONFIG, else built-in defaults)")
      ->type_name("FILE");
  app.add_option("--set", flags.sets,
                 "Override one setting, e.g. --set scheduler.fire_batch=200 or "
                 "--set kafka.properties.security.protocol=SSL (repeatable)")
      ->type_name("SECTION.KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option_function<std::string>(
         "--kafka-bootstrap", [&flags](const std::string& v) { flags.kafka_bootstrap = v; },
         "Same as --set kafka.bootstrap=HOST:PORT[,...]")
      ->type_name("HOST:PORT");
  app.add_option_function<std::string>(
         "--redis-url", [&flags](const std::string& v) { flags.redis_url = v; }, "Same as --set redis.url=URL")
      ->type_name("URL");
  app.add_option_function<std::string>(
         "--log-level", [&flags](const std::string& v) { flags.log_level = v; },
         "Same as --set log.level=LEVEL (trace, debug, info, warn, error)")
      ->type_name("LEVEL");
  app.add_option_function<std::string>(
         "--print-config", [&flags](const std::string& v) { flags.print_config = v; },
         "Print the effective configuration (secrets masked) as toml (default) or json, then "
         "exit")
      ->expected(0, 1)
      ->default_str("toml")
      ->check(CLI::IsMember({"toml", "json"}))
      ->type_name("FORMAT");
}

Config load_config(const ConfigFlags& flags, const Environment& env) {
  Config c;
  std::optional<std::string> path;
  std::string path_origin;
  if (flags.config_file) {
    path = *flags.config_file;
    path_origin = "--config";
  } else if (auto it = env.find(std::string(kConfigEnv)); it != env.end()) {
    path = it->second;
    path_origin = "env " + std::string(kConfigEnv);
  }
  if (path) FileLoader(c, *path).load(path_origin);
  apply_env(c, env);
  for (const auto& assignment : flags.sets) apply_set(c, assignment);
  const auto shortcut = [&c](const std::optional<std::string>& v, std::string_view name, const char* flag) {
    if (v) set_from_text(c, Target{detail::find_setting(name), {}}, *v, flag);
  };
  shortcut(flags.kafka_bootstrap, "kafka.bootstrap", "--kafka-bootstrap");
  shortcut(flags.redis_url, "redis.url", "--redis-url");
  shortcut(flags.log_level, "log.level", "--log-level");
  read_secret_files(c);
  validate_config(c);
  c.tracing = read_otel_env(env);
  return c;
}

}  // namespace delayd::config
