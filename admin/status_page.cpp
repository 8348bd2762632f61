#include "admin/status_page.hpp"

#include <string>

#include "admin/status_page_files.hpp"

namespace delayd::admin {

namespace {

// The tags of admin/ui/status.html that stand for its style sheet and its script; the served
// page has the files inline in their place.
constexpr std::string_view kCssTag = "<link rel=\"stylesheet\" href=\"status.css\">";
constexpr std::string_view kJsTag = "<script src=\"status.js\"></script>";

constexpr bool once(std::string_view text, std::string_view part) {
  const std::size_t at = text.find(part);
  return at != std::string_view::npos && text.find(part, at + 1) == std::string_view::npos;
}
static_assert(once(ui::status_html, kCssTag), "admin/ui/status.html must link status.css once");
static_assert(once(ui::status_html, kJsTag), "admin/ui/status.html must load status.js once");
// Inline, a closing tag inside the text would end the element early.
static_assert(ui::status_css.find("</style") == std::string_view::npos, "status.css closes the style element");
static_assert(ui::status_js.find("</script") == std::string_view::npos, "status.js closes the script element");

std::string inline_files() {
  std::string page(ui::status_html);
  page.replace(page.find(kCssTag), kCssTag.size(), "<style>\n" + std::string(ui::status_css) + "</style>");
  page.replace(page.find(kJsTag), kJsTag.size(), "<script>\n" + std::string(ui::status_js) + "</script>");
  return page;
}

// Only this origin's JSON may be fetched; scripts and styles are the inline ones.
constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace

std::string_view status_page_html() {
  static const std::string page = inline_files();  // built once, on first use (thread-safe)
  return page;
}

std::string_view status_page_csp() { return kCsp; }

}  // namespace delayd::admin
