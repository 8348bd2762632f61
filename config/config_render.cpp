// --print-config: the effective configuration as TOML (a file you can feed back to --config)
// or JSON (for scripts), with secrets masked.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "config/config.hpp"
#include "config/config_registry.hpp"

namespace delayd::config {

using detail::Field;
using detail::Setting;

namespace {

constexpr std::string_view kMask = "***";

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  return out + "\"";
}

std::string shown_string(const Setting& s, const std::string& v) {
  if (s.secret) return v.empty() ? std::string() : std::string(kMask);
  if (s.name == "redis.url") return redis::mask_redis_url(v);
  return v;
}

std::string shown_property(const std::string& name, const std::string& v) {
  return detail::is_secret_property(name) ? std::string(kMask) : v;
}

std::string origin_comment(const Config& c, const std::string& name) {
  const auto it = c.origins.find(name);
  if (it == c.origins.end()) return "";
  return "  # " + it->second;
}

std::string render_toml(const Config& c) {
  std::string out = "# delayd effective configuration (passwords and keys masked)\n";
  std::string_view section;
  std::string tables;  // passthrough tables of the current section, printed after its keys
  const auto flush_tables = [&] {
    out += tables;
    tables.clear();
  };
  for (const auto& s : detail::settings()) {
    if (s.section() != section) {
      flush_tables();
      section = s.section();
      out += "\n[" + std::string(section) + "]\n";
    }
    const std::string name(s.name);
    const std::string key(s.key());
    if (const auto* f = std::get_if<Field<std::string>>(&s.field)) {
      out += key + " = " + toml_string(shown_string(s, f->get(c))) + origin_comment(c, name) + "\n";
    } else if (const auto* f = std::get_if<Field<bool>>(&s.field)) {
      out += key + " = " + (f->get(c) ? "true" : "false") + origin_comment(c, name) + "\n";
    } else if (const auto* f = std::get_if<Field<std::int64_t>>(&s.field)) {
      out += key + " = " + std::to_string(f->get(c)) + origin_comment(c, name) + "\n";
    } else if (const auto* f = std::get_if<Field<std::optional<std::int64_t>>>(&s.field)) {
      if (const auto& v = f->get(c)) {
        out += key + " = " + std::to_string(*v) + origin_comment(c, name) + "\n";
      } else {
        out += "# " + key + " is not set: the url's value applies\n";
      }
    } else if (const auto* f = std::get_if<Field<PropertyMap>>(&s.field)) {
      tables += "\n[" + name + "]\n";
      for (const auto& [k, v] : f->get(c)) {
        tables += toml_string(k) + " = " + toml_string(shown_property(k, v)) + origin_comment(c, name + "." + k) + "\n";
      }
    }
  }
  flush_tables();
  return out;
}

std::string render_json(const Config& c) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  for (const auto& s : detail::settings()) {
    auto& slot = root[std::string(s.section())][std::string(s.key())];
    if (const auto* f = std::get_if<Field<std::string>>(&s.field)) {
      slot = shown_string(s, f->get(c));
    } else if (const auto* f = std::get_if<Field<bool>>(&s.field)) {
      slot = f->get(c);
    } else if (const auto* f = std::get_if<Field<std::int64_t>>(&s.field)) {
      slot = f->get(c);
    } else if (const auto* f = std::get_if<Field<std::optional<std::int64_t>>>(&s.field)) {
      if (const auto& v = f->get(c)) {
        slot = *v;
      } else {
        slot = nullptr;
      }
    } else if (const auto* f = std::get_if<Field<PropertyMap>>(&s.field)) {
      slot = nlohmann::ordered_json::object();
      for (const auto& [k, v] : f->get(c)) slot[k] = shown_property(k, v);
    }
  }
  // Values from the environment need not be UTF-8; replace bad bytes rather than throw.
  return root.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string render_config(const Config& config, ConfigFormat format) {
  return format == ConfigFormat::json ? render_json(config) : render_toml(config);
}

bool print_config_if_asked(const ConfigFlags& flags, const Config& config, std::ostream& out) {
  if (!flags.print_config) return false;
  out << render_config(config, *flags.print_config == "json" ? ConfigFormat::json : ConfigFormat::toml);
  out.flush();
  return true;
}

}  // namespace delayd::config
