// The single place where the Kafka connectors' log lines go: librdkafka's own log and error
// events, and the wrappers' remarks (forced properties, non-fatal consumer errors).
//
// Invariants: there is always a hook; the default writes "kafka <level>: <message>" to stderr.
// Threading: librdkafka logs from its internal threads, so the hook is called from threads the
// caller does not own, possibly concurrently; it must be thread-safe. set_log_hook() may be
// called at any time (it is guarded), but is meant to be called once at start-up, before any
// client is created, so that no line goes to the old hook after the call.
#pragma once

#include <functional>
#include <string_view>

namespace delayd::connectors {

enum class LogLevel { debug, info, warning, error };

using LogHook = std::function<void(LogLevel, std::string_view)>;

// An empty hook restores the default (stderr).
void set_log_hook(LogHook hook);

// Hands one line to the current hook. Never throws: a failing hook must not take a librdkafka
// thread down with it.
void log(LogLevel level, std::string_view message) noexcept;

// librdkafka speaks syslog levels (0 emergency .. 7 debug).
LogLevel level_from_syslog(int syslog_level) noexcept;

}  // namespace delayd::connectors
