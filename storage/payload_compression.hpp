// Payloads kept compressed in Redis: a job's payload (key, value and headers, header_codec.hpp)
// larger than a threshold is stored zstd-compressed, and its record's header line carries the
// field z=1 (job_record.hpp's kFields: the Lua scripts keep it through every rewrite, and never
// read a payload's bytes, only whether there is one). Every reader in C++ (the claim, get(), the
// console, delayctl, a retry, a redrive) goes through read_payload(), which undoes it; a record
// written before, or below the threshold, has no z and reads as it is.
//
// Why zstd at level 1: on the JSON documents jobs carry (names repeated, about 1 KiB), about
// half of a value's bytes (a pending job keeps 0.61 of its bytes in all), for about 12 us of
// delayd's CPU a job (docs/performance.md, "Compressed payloads"), and Debian ships it (libzstd).
// Errors: read_payload() throws std::invalid_argument for a frame that does not decompress (the
// record is then corrupt, as one whose payload does not decode is).
// Threading: any thread; each keeps its own zstd contexts (thread_local).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::storage {

// The record field that marks a compressed payload, and its value.
inline constexpr std::string_view kCompressedField = "z";
inline constexpr std::string_view kCompressedValue = "1";

// `encoded` compressed, when it is longer than `above` bytes (0: never) and compression makes it
// shorter; nullopt otherwise (store it as it is).
std::optional<std::string> compress_payload(std::string_view encoded, std::size_t above);
// The encoded payload (header_codec.hpp) of a record's payload bytes: decompressed when the record
// says z=1.
std::string read_payload(std::string_view stored, bool compressed);

}  // namespace delayd::storage
