// The status page served at GET / by the admin endpoint: one self-contained HTML document
// (inline CSS and JavaScript, inline SVG charts, nothing fetched from anywhere but this endpoint's
// own /stats, /overview, /whoami, /jobs, /jobs/{id}, /jobs/bulk, /dead-letters,
// /dead-letters/redrive and /operations). Its Content-Security-Policy (status_page_csp()) lets the
// browser enforce that: no other origin, no external script, style, image or font.
//
// Its sources are admin/ui/status.html, status.css and status.js, compiled in (cmake/EmbedText.cmake);
// the page is status.html with the other two inline in place of the tags that load them.
//
// What it shows, refreshed every 2 s: the current problem (or "all well"), held / in wheel / in
// flight / next due, pending jobs per business and per shard, the due timeline (/overview's
// windows, as bars), the lateness histogram, delivered and accepted per second over the last
// 10 minutes (computed in the browser from successive counters; kept in the page's memory only),
// the counters since start, and a form that looks a job up by id. Below, the Jobs view: a search
// box (job-id or prefix) and filters (state, business, due range, error text) over GET /jobs, a
// paged table, a drawer with the job's record (payload preview, history) and its lateness, the
// actions on it (cancel, run now, reschedule, retry, each after a confirm()), and a bulk action on
// the current filter: the dry run's count first, then the operation's progress. Below that, the
// Dead letters view: filters (reason word or error text, business, since, until) over
// GET /dead-letters, a paged table of the dead-letter topic's records (when, reason, error, job,
// business, source record, size, redrive count), and a redrive of the filter's dead letters
// (POST /dead-letters/redrive) in the same two steps as the bulk action.
//
// Element ids the tests read (each element's text is the number, en-US digit grouping):
//   held, in_wheel, in_flight, next_due (RFC 3339 or "none"), pending (from /overview),
//   accepted, delivered, counter-<name> (every counter of /stats), business-<name>,
//   shard-<name>, due-<i> (window i of /overview's "due"), lateness-<i> (bucket i of
//   /stats' lateness.counts), lateness-count, polls (successful refreshes so far), problem.
// The Jobs view's (tests/admin/console_page_test.py drives them): jobs-search, jobs-state,
//   jobs-business, jobs-due-from, jobs-due-to, jobs-error, jobs-go, jobs-table (rows
//   job-row-<id>, each with a button that opens the drawer), jobs-more, jobs-note; job-drawer,
//   drawer-record, drawer-lateness, act-cancel, act-run-now, act-at, act-reschedule, act-retry,
//   act-result; bulk-action, bulk-rate, bulk-dry, bulk-run, bulk-result (data-status: the
//   operation's status).
//
// Token: with admin.token set, open the page as http://host:port/#token=<token>. The page reads
// the token from the URL fragment (never sent to the server in the URL) and sends it as
// "Authorization: Bearer <token>" with its requests. The page itself is served without one.
// It asks /whoami what the token grants, keeps the answer in its variable `access`, shows it
// (element access) and, for the read token, sets the class read-only on <body>, which hides
// every element of class "write".
//
// Threading: constant data; any thread.
#pragma once

#include <string_view>

namespace delayd::admin {

// The HTML document (UTF-8).
std::string_view status_page_html();
// The Content-Security-Policy header value to serve it with.
std::string_view status_page_csp();

}  // namespace delayd::admin
