#include "storage/job_record.hpp"

#include <algorithm>

namespace delayd::storage {

namespace {

// Lua's %s in Redis, which leaves LC_CTYPE at "C": isspace() of the C locale.
constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
// Lua's [%w_] in the C locale.
constexpr bool is_name_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// The word of `line` from `at` up to the next space (or the end); `at` moves past it.
std::string_view word(std::string_view line, std::size_t& at) {
  const std::size_t end = std::min(line.find(' ', at), line.size());
  const std::string_view w = line.substr(at, end - at);
  at = end;
  return w;
}

// 1 to max_digits of 0-9 as a number; nullopt for anything else.
std::optional<std::int64_t> number(std::string_view w, std::size_t max_digits) {
  if (w.empty() || w.size() > max_digits) return std::nullopt;
  std::int64_t v = 0;
  for (char c : w) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Consumes the single space that separates two words.
bool space(std::string_view line, std::size_t& at) {
  if (at >= line.size() || line[at] != ' ') return false;
  ++at;
  return true;
}

}  // namespace

std::optional<JobRecord> parse_job_record(std::string_view record) {
  const std::size_t nl = record.find('\n');
  if (nl == std::string_view::npos) return std::nullopt;
  const std::string_view line = record.substr(0, nl);
  JobRecord r;
  std::size_t at = 0;
  const std::optional<JobState> state = parse_job_state(word(line, at));
  if (!state || !job_record::is_stored(*state) || !space(line, at)) return std::nullopt;
  r.state = *state;
  const auto deliver_at = number(word(line, at), job_record::kMaxDeliverAtDigits);
  if (!deliver_at || !space(line, at)) return std::nullopt;
  r.deliver_at = *deliver_at;
  const auto attempt = number(word(line, at), job_record::kMaxAttemptDigits);
  if (!attempt || !space(line, at)) return std::nullopt;
  r.attempt = *attempt;
  // The business ends at any white space, not only a space: a tab after it is not part of it
  // (and then breaks the line, as a field must start with a space).
  const std::size_t biz_end = [&] {
    std::size_t e = at;
    while (e < line.size() && !is_space(line[e])) ++e;
    return e;
  }();
  if (biz_end == at) return std::nullopt;
  r.business = std::string(line.substr(at, biz_end - at));
  at = biz_end;
  while (at < line.size()) {
    if (!space(line, at)) return std::nullopt;
    const std::size_t name_from = at;
    while (at < line.size() && is_name_char(line[at])) ++at;
    if (at == name_from || at >= line.size() || line[at] != '=') return std::nullopt;
    std::string name(line.substr(name_from, at - name_from));
    const std::size_t value_from = ++at;
    while (at < line.size() && !is_space(line[at])) ++at;
    r.fields.insert_or_assign(std::move(name), std::string(line.substr(value_from, at - value_from)));
  }
  r.payload = record.substr(nl + 1);
  return r;
}

std::string job_record::encode_field_value(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    // Lua's %s: space, \t, \n, \v, \f, \r.
    if (c == '%' || c == ' ' || (c >= '\t' && c <= '\r')) {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_header_line(JobState state, std::int64_t deliver_at, std::int64_t attempt, std::string_view business,
                               const std::map<std::string, std::string, std::less<>>& fields) {
  std::string line(to_string(state));
  line += ' ' + std::to_string(deliver_at) + ' ' + std::to_string(attempt) + ' ';
  line += business;
  for (std::string_view name : job_record::kFields) {
    if (const auto it = fields.find(name); it != fields.end()) {
      line += ' ';
      line += name;
      line += '=' + it->second;
    }
  }
  return line;
}

std::optional<std::string_view> header_field(std::string_view record, std::string_view name) {
  std::string_view line = record.substr(0, record.find('\n'));
  std::optional<std::string_view> found;
  for (int word = 0; !line.empty(); ++word) {
    const std::size_t end = line.find(' ');
    const std::string_view token = line.substr(0, end);
    line = end == std::string_view::npos ? std::string_view() : line.substr(end + 1);
    if (word < 4) continue;  // state, deliver_at, attempt, business
    if (token.size() > name.size() && token.substr(0, name.size()) == name && token[name.size()] == '=') {
      found = token.substr(name.size() + 1);
    }
  }
  return found;
}

std::optional<std::int64_t> pending_score(const JobRecord& r) {
  const auto it = r.fields.find("nb");
  const std::optional<std::int64_t> nb =
      it == r.fields.end() ? std::nullopt : number(it->second, job_record::kMaxDeliverAtDigits);
  if (r.state == JobState::delay) return std::max(r.deliver_at, nb.value_or(0));
  if (r.state == JobState::ready || r.state == JobState::running) return nb;
  return std::nullopt;
}

}  // namespace delayd::storage
