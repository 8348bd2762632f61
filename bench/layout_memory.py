#!/usr/bin/env python3
"""Redis bytes per pending job under the storage layouts delayd could use, measured.

A design aid for the pending-job layout (docs/performance/history-2026-11-24.md, "Where a target is missed"): it
starts a redis-server of its own (from PATH, on a free port, no persistence), fills it with N
pending jobs in each layout, and prints used_memory per job. Nothing of delayd runs: the records
are of the size delayd writes (a header line and a payload of VALUE bytes, as storage/job_record.hpp
lays them out), the keys are named as storage/key_schema.hpp names them, and each layout is written
with the commands it would use. The layouts:

  keys+zset     today: a string key per job and one sorted set per shard (member: the job-id)
  keys+leaves   the record keys, and the pending entries in small sorted sets of at most
                LEAF (128) entries, which Redis keeps as listpacks (zset-max-listpack-entries),
                found through a per-shard directory (a sorted set of leaves by their lowest
                score); leaves split in two when full, as jobs arrive in random order
  hash+leaves   the records as fields of one hash per shard (while pending), and the leaves
  keys+buckets  the record keys, and the pending entries in small sorted sets chosen by the
                job-id's hash (about 96 entries each, as a linear hash table that splits a bucket
                at a time keeps them), with a directory of the buckets by their lowest score
  hash+buckets  the records as fields of one hash per shard, and those buckets
  hash+zset     the records as fields of one hash per shard, and today's sorted set
  member+index  the record as the pending set's member ("<job-id> <record>"), and an index
                job-id -> deliver_at in hashes of about 100 fields each (listpacks), so that a
                job is found by its id

Usage: bench/layout_memory.py [--jobs N] [--value BYTES] [--id-length L] [--prefix P]
       [--shard S] [--layouts a,b,...]
Prints one line per layout, then one JSON line per layout (name, bytes per job).
"""
import argparse
import bisect
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
import checks  # noqa: E402  (tests/support: free_port)

LEAF = 128  # Redis's default zset-max-listpack-entries


class Resp:
    """A minimal RESP client: pipelined commands, replies read and checked for errors."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        self.queued = 0
        self.out = []

    def send(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.out.append(b"".join(parts))
        self.queued += 1
        if self.queued >= 1000:
            self.flush()

    def _line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(1 << 16)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply " + repr(line))

    def flush(self):
        if self.out:
            self.sock.sendall(b"".join(self.out))
            self.out = []
        replies = [self._reply() for _ in range(self.queued)]
        self.queued = 0
        return replies

    def call(self, *args):
        self.flush()
        self.send(*args)
        return self.flush()[0]


def varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def used_memory(r):
    info = r.call("INFO", "memory").decode()
    return int(next(l.split(":")[1] for l in info.splitlines() if l.startswith("used_memory:")))


def leaves_of(scored, rng):
    """The leaves a B-tree-like index of listpack leaves ends with when the jobs arrive in
    random order: a leaf that reaches LEAF + 1 entries splits into two halves."""
    order = list(range(len(scored)))
    rng.shuffle(order)
    mins, leaves = [], []  # leaves sorted by their lowest (score, id); each a sorted list
    for k in order:
        e = scored[k]
        i = max(0, bisect.bisect_right(mins, e) - 1)
        if not leaves:
            mins.append(e)
            leaves.append([e])
            continue
        bisect.insort(leaves[i], e)
        mins[i] = leaves[i][0]
        if len(leaves[i]) > LEAF:
            half = leaves[i][len(leaves[i]) // 2:]
            del leaves[i][len(leaves[i]) // 2:]
            leaves.insert(i + 1, half)
            mins.insert(i + 1, half[0])
    return leaves


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200000)
    ap.add_argument("--value", type=int, default=200, help="the message value's bytes")
    ap.add_argument("--id-length", type=int, default=16)
    ap.add_argument("--prefix", default="delayd")
    ap.add_argument("--shard", default="delay-ingest:0")
    ap.add_argument("--layouts", default="keys+zset,keys+leaves,hash+leaves,keys+buckets,hash+buckets,hash+zset,member+index")
    a = ap.parse_args()
    server = shutil.which("redis-server")
    if not server:
        print("layout_memory: redis-server is not on PATH", file=sys.stderr)
        return 2
    rng = random.Random(20261127)
    n = a.jobs
    ids = [("j%0" + str(a.id_length - 1) + "d") % i for i in range(n)]
    scores = [1900000000000 + rng.randrange(0, 86_400_000) for _ in range(n)]
    # A record as storage/job_record.hpp writes it: the header line, then header_codec's payload
    # (a null key, the value, no headers: lengths are varints of length + 1, 0 for null).
    payload = b"\x00" + varint(a.value + 1) + b"v" * a.value
    records = [b"delay %d 0 orders\n" % s + payload for s in scores]
    tag = f"{a.prefix}:{{{a.shard}}}"
    tmp = tempfile.mkdtemp(prefix="delayd-layout-")
    port = checks.free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                r = Resp(port)
                r.call("PING")
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("redis-server did not start")
        version = next(l for l in r.call("INFO", "server").decode().splitlines() if l.startswith("redis_version:"))
        results = []
        for layout in a.layouts.split(","):
            r.call("FLUSHALL")
            before = used_memory(r)
            recs, pend = layout.split("+")
            if layout == "member+index":
                buckets = max(1, n // 100)
                for i in range(n):
                    r.send("ZADD", f"{tag}:pending", scores[i], ids[i].encode() + b" " + records[i])
                    r.send("HSET", f"{tag}:ids:{zlib.crc32(ids[i].encode()) % buckets}", ids[i], scores[i])
                r.flush()
                if r.call("OBJECT", "ENCODING", f"{tag}:ids:0").decode() != "listpack":
                    raise RuntimeError("an id index hash is not a listpack: check hash-max-listpack-*")
                recs = pend = None
            for i in range(n if recs else 0):
                if recs == "keys":
                    r.send("SET", f"{tag}:job:{ids[i]}", records[i])
                else:
                    r.send("HSET", f"{tag}:records", ids[i], records[i])
            r.flush()
            if pend is None:
                pass
            elif pend == "buckets":
                nb = max(1, n // 96)
                lowest = {}
                for i in range(n):
                    b = zlib.crc32(ids[i].encode()) % nb
                    r.send("ZADD", f"{tag}:pq:{b}", scores[i], ids[i])
                    lowest[b] = min(lowest.get(b, scores[i]), scores[i])
                for b, low in lowest.items():
                    r.send("ZADD", f"{tag}:pending", low, str(b))
                r.flush()
                if r.call("OBJECT", "ENCODING", f"{tag}:pq:0").decode() != "listpack":
                    raise RuntimeError("a bucket is not a listpack: check zset-max-listpack-*")
            elif pend == "zset":
                for i in range(n):
                    r.send("ZADD", f"{tag}:pending", scores[i], ids[i])
            else:
                leaves = leaves_of(sorted(zip(scores, ids)), rng)
                for no, leaf in enumerate(leaves):
                    # One entry at a time, as accepts would add them (a listpack grows by realloc).
                    for s_, i_ in leaf:
                        r.send("ZADD", f"{tag}:pl:{no}", s_, i_)
                    r.send("ZADD", f"{tag}:pending", leaf[0][0], str(no))
                enc = r.call("OBJECT", "ENCODING", f"{tag}:pl:0").decode()
                if enc != "listpack":
                    raise RuntimeError(f"a leaf is {enc}, not listpack: check zset-max-listpack-*")
            r.flush()
            per_job = (used_memory(r) - before) / n
            results.append((layout, per_job))
            print(f"{layout:12s} {per_job:6.0f} B per pending job")
        print(f"# {n} jobs, value {a.value} B, ids of {a.id_length} characters, keys '{tag}:...', {version}")
        for layout, per_job in results:
            print(json.dumps({"figure": "redis_bytes_per_pending_job", "layout": layout, "jobs": n,
                              "value_bytes": a.value, "id_length": a.id_length, "bytes": round(per_job)}))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
