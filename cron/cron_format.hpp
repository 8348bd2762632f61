// Instants as a person in a time zone reads them: RFC 3339 with the zone's UTC offset at that
// instant ("2026-03-29T03:00:00+02:00"), for `delayctl cron next` and GET /cron/next, so that a
// user can check an expression and its zone before publishing it.
// Threading: like next_after (the zone's rules load on first use).
#pragma once

#include <chrono>
#include <string>

#include "cron/cron_expr.hpp"

namespace delayd::cron {

// The UTC offset of `zone` (nullptr: UTC) at `at`.
std::chrono::seconds utc_offset(Instant at, const date::time_zone* zone);

// `at` in `zone`'s local time with its offset: "YYYY-MM-DDTHH:MM:SS[.mmm]+HH:MM" ("Z" for an
// offset of zero); milliseconds only when not zero. Throws only std::bad_alloc.
std::string format_in_zone(Instant at, const date::time_zone* zone);

}  // namespace delayd::cron
