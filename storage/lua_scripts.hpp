// The Lua scripts that move jobs between states, a whole batch of one shard per call. Their text
// lives in storage/lua/*.lua, one file per script with its keys, arguments, stride and replies
// documented at its top; the build compiles them in (storage/CMakeLists.txt, as
// storage/lua/embedded.hpp: lua::kPrelude, lua::kAccept, ...).
//
// Every script takes the same keys, all in the shard's hash slot (so one call is atomic on a
// single primary and legal under Redis Cluster):
//   KEYS[1] the shard's pending set, KEYS[2] its counters, KEYS[3] its quarantine hash,
//   KEYS[4] its in-flight hash, KEYS[5] its owner, KEYS[6..] one job record per job of the batch.
// and ARGV[1] now (epoch ms), ARGV[2] retention_s of finished jobs (0: kept for ever),
// ARGV[3] a script-specific number, ARGV[4] the caller's fence (below), then a fixed number of
// arguments per job (its "stride", given under each script), the first of which is always the
// job-id.
//
// FENCING. A broker that owns a shard holds its fence: the epoch it got from take_shard.lua, which
// INCRs it in KEYS[5] ("<epoch> <member> <since_ms>") at every assignment, so a later owner
// always holds a larger one. The scripts that decide what gets produced, or that rewrite what
// the owner of the moment relies on, refuse the whole call (error "FENCED <owner>") unless
// ARGV[4] is the current epoch: claim, release (which re-scores) and mark_failed. So a broker
// whose shard moved on (revoked while it was busy, or paused past its session) produces nothing
// new and cannot undo the new owner's in-flight entry or fail a job the new owner delivers.
// The in-flight entry records the claiming epoch ("<attempt> <firing_at> <epoch>").
// Not fenced, on purpose: accept and cancel (they apply records of the ingest topic, which are
// facts whichever member reads them, and are idempotent), and mark_ready, which reports a fact
// too (Kafka acknowledged a ready record): refusing it would let the new owner's later cancel,
// failure or retry contradict a record that is in the ready topic. ARGV[4] = '' (tools and
// tests, which own no shard) skips the check.
// A call returns one group of values per job, in the order of KEYS[6..].
//
// A job record is one Redis string (key_schema.hpp gives the format): a header line
// "<state> <deliver_at> <attempt> <business>[ <name>=<value>]..." then "\n" then the payload.
// prelude.lua parses and writes it; every batch script is the prelude followed by its body. A
// record that does not parse is "corrupt": the script that meets it says so, and claim sets it
// aside.
// Counters ("<business>|<state>" in KEYS[2]) are bumped once per batch and business.
//
// Threading: immutable texts.
#pragma once

#include "storage/lua/embedded.hpp"
