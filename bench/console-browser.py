#!/usr/bin/env python3
"""A person browsing the console without pause: GET /jobs pages at a fixed rate, following each
walk's cursor and starting a new walk at its end, cycling through the filters given. Prints one
JSON line when stopped (SIGTERM): pages, errors, and the pages' latency percentiles.

    console-browser.py --port 9464 --rate 10 --filter 'state=delay&business=bench' [--filter ...]
"""
import argparse
import json
import signal
import sys
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--rate", type=float, default=10.0)
parser.add_argument("--filter", action="append", required=True)
args = parser.parse_args()

stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)
latencies, errors, which, cursor = [], 0, 0, None
next_at = time.monotonic()
while not stop:
    query = args.filter[which % len(args.filter)] + "&limit=50" + (f"&cursor={cursor}" if cursor else "")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/jobs?{query}", timeout=10) as r:
            page = json.load(r)
        latencies.append((time.monotonic() - started) * 1000)
        cursor = page.get("next")
        if cursor is None:
            which += 1
    except Exception:  # noqa: BLE001 - counted, the browsing goes on
        errors += 1
        cursor = None
    next_at += 1.0 / args.rate
    time.sleep(max(0.0, next_at - time.monotonic()))
latencies.sort()


def pct(p):
    return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2) if latencies else None


print(json.dumps({"figure": "browsing", "pages": len(latencies), "errors": errors, "rate": args.rate,
                  "page_p50_ms": pct(0.5), "page_p99_ms": pct(0.99), "filters": args.filter}))
sys.stdout.flush()
