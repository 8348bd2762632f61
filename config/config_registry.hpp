// The table of every setting in delayd::config::Config: its dotted name, what it does, which
// member holds it, its numeric range, its validity check, whether it is secret. The loader, the validator
// and the printer all walk this one table, so a setting added here is at once readable from
// the file, the environment and --set, checked, and printed; nothing can be forgotten in one
// of them. Internal to the config_* sources.
//
// Invariants: names are unique "section.key" strings, grouped by section in the order
// --print-config shows them; passthrough tables (PropertyMap fields) come after the scalar
// keys of their section, as TOML requires for sub-tables.
// Threading: the table is immutable after static initialisation; read it from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "config/config.hpp"

namespace delayd::config::detail {

// Access to one member of Config. Two function pointers because the loader writes and the
// printer reads through a const Config.
template <class T>
struct Field {
  T& (*mut)(Config&);
  const T& (*get)(const Config&);
};

using AnyField = std::variant<Field<std::string>, Field<bool>, Field<std::int64_t>, Field<std::optional<std::int64_t>>,
                              Field<PropertyMap>>;

struct Setting {
  std::string_view name;  // "section.key"
  // What the setting does, in Markdown, for the configuration reference (delayd
  // --print-reference config; docs/reference/configuration.md). Its links are relative to that
  // page. Default, range, environment name and secrecy are not repeated here: they are the
  // other members.
  std::string_view doc;
  AnyField field;
  std::int64_t min = 0;  // inclusive bounds, for the integer kinds
  std::int64_t max = 0;
  // For strings: the problem with `value`, or empty when it is fine.
  std::string (*check)(std::string_view value) = nullptr;
  bool secret = false;
  // A comma-separated list: in TOML also an array of strings (joined with commas).
  bool list = false;

  std::string_view section() const { return name.substr(0, name.find('.')); }
  std::string_view key() const { return name.substr(name.find('.') + 1); }
};

std::span<const Setting> settings();
const Setting* find_setting(std::string_view name);

// DELAYD_ + upper-cased name with '.' as '_'.
std::string env_name(std::string_view setting_name);

// Passthrough properties whose values must not be printed.
bool is_secret_property(std::string_view property_name);

// "123", "true", "\"text\"" (quoted and escaped), "unset"; secrets as "***".
std::string display_value(const Setting& s, const Config& c);

}  // namespace delayd::config::detail
