#!/usr/bin/env python3
"""The medians over bench/run-trace-cost.sh's rounds: each figure with tracing off and on, and on
over off (for rates: the fraction of the run's own machine limit too, since this machine's limits
move between runs). One run of each is noise on a shared two-core machine; the median of several
alternated ones is the figure to quote.

    trace_cost_medians.py <results dir> <rounds>     reads round<k>/{off,on}/e2e.jsonl
"""
import json
import re
import statistics
import sys

# (title, figure name or pattern, field): the figures the cost is judged on.
ROWS = [
    ("fire capacity, jobs/s", "fire_jobs_per_s", "value"),
    ("fire capacity, fraction of limit", "fire_jobs_per_s", "fraction"),
    ("durable ingest, jobs/s", "ingest_jobs_per_s", "value"),
    ("durable ingest, fraction of limit", "ingest_jobs_per_s", "fraction"),
    ("lateness at the rate, p50 ms", r"lateness_\d+_per_s", "p50"),
    ("lateness at the rate, p99 ms", r"lateness_\d+_per_s", "p99"),
    ("lateness at the rate, p99.9 ms", r"lateness_\d+_per_s", "p999"),
    ("lateness at the rate, max ms", r"lateness_\d+_per_s", "max"),
    ("short delays, p99 ms", r"lateness_short_\d+ms", "p99"),
]


def pretty(v):
    """A fraction with two decimals, milliseconds and rates whole."""
    return f"{v:.2f}" if v < 1 else f"{v:.0f}"


def figures(path):
    """The figures of one run's e2e.jsonl, by name (the first line of each)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                j = json.loads(line)
                out.setdefault(j.get("figure", ""), j)
    return out


def field(runs, pattern, name):
    """The field of the figure matching `pattern` in each run that has it."""
    values = []
    for figs in runs:
        for figure, j in figs.items():
            if re.fullmatch(pattern, figure) and isinstance(j.get(name), (int, float)):
                values.append(float(j[name]))
                break
    return values


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, rounds = sys.argv[1], int(sys.argv[2])
    runs = {side: [figures(f"{out}/round{r}/{side}/e2e.jsonl") for r in range(1, rounds + 1)] for side in ("off", "on")}
    print(f"{'figure':36} {'off (median)':>13} {'on (median)':>12} {'on / off':>9}   off, each round / on, each round")
    for title, pattern, name in ROWS:
        off, on = field(runs["off"], pattern, name), field(runs["on"], pattern, name)
        if not off or not on:
            print(f"{title:36} {'-':>13} {'-':>12} {'-':>9}")
            continue
        m_off, m_on = statistics.median(off), statistics.median(on)
        ratio = f"{m_on / m_off:.2f}" if m_off > 0 else "-"
        each = ", ".join(map(pretty, off)) + " / " + ", ".join(map(pretty, on))
        print(f"{title:36} {pretty(m_off):>13} {pretty(m_on):>12} {ratio:>9}   {each}")


if __name__ == "__main__":
    main()
