#!/usr/bin/env python3
"""The table of bench/run-scale.sh: reads its scale.jsonl (one JSON figure per line, each with
"phase") and prints each phase's figures, with the targets of #50 beside them. Phases that did
not run are left out. Usage: bench/scale_table.py RESULTS/scale.jsonl"""
import json
import sys


def load(path):
    figures = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            key = (j.get("phase", ""), j.get("peer", "delayd"), j.get("figure", ""))
            figures[key] = j
    return figures


def fmt(v, digits=0):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}".replace(",", " ")
    if isinstance(v, int):
        return f"{v:,}".replace(",", " ")
    return str(v)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    fig = load(sys.argv[1])
    rows = []

    def get(phase, name, field="value", peer="delayd"):
        return fig.get((phase, peer, name), {}).get(field)

    def row(label, value, target=""):
        rows.append((label, value, target))

    if ("fill", "delayd", "fill_jobs_per_s") in fig:
        n = get("fill", "fill_jobs_per_s", "n")
        row(f"fill: {fmt(n)} jobs accepted, jobs/s", fmt(get("fill", "fill_jobs_per_s"), 0))
        part = get("fill", "fill_rate_along", "part")
        row(f"fill: the first / the last {fmt(part)}, jobs/s",
            f"{fmt(get('fill', 'fill_rate_along', 'first_jobs_per_s'))} / {fmt(get('fill', 'fill_rate_along', 'last_jobs_per_s'))}")
        row("fill: the last's rate over the first's", fmt(get("fill", "fill_rate_along"), 2), ">= 0.9")
        if ("fill", "delayd", "fill_aof_rewrites") in fig:
            row(f"fill: Redis's AOF rewrites during it (automatic {get('fill', 'fill_aof_rewrites', 'automatic')})",
                fmt(get("fill", "fill_aof_rewrites")))
        row("Redis bytes per pending job", fmt(get("fill", "redis_bytes_per_pending_job"), 0))
        rss = get("fill", "delayd_rss")
        row("delayd RSS at the end of the fill (highest), MiB",
            f"{fmt(rss / 1024 if rss else None, 0)} ({fmt((get('fill', 'delayd_rss', 'max_kib') or 0) / 1024, 0)})", "<= 256")
        cpu = fig.get(("fill", "delayd", "fill_cpu"), {})
        row("fill CPU per job, µs: delayd / Redis / Kafka",
            " / ".join(fmt(cpu.get(k), 1) for k in ("delayd_us_per_job", "redis_us_per_job", "kafka_us_per_job")))
        due = fig.get(("fill", "delayd", "fill_due_lateness_ms"), {})
        row("jobs due during the fill: count, p99 ms, early",
            f"{fmt(due.get('count'))}, {fmt(due.get('p99'))}, {fmt(due.get('early'))}", "early 0")
    for fill, what in (("hash", "HSET"), ("plain", "HSET and ZADD"), ("buckets", "HSET, ZADD into its second"), ("accept", "delayd's accept script")):
        if ("redis-fill", "delayd", f"redis_fill_{fill}") in fig:
            f = fig[("redis-fill", "delayd", f"redis_fill_{fill}")]
            row(f"Redis alone, {what}: µs a job, the first / the last tenth",
                f"{fmt(f.get('first_us_per_job'), 1)} / {fmt(f.get('last_us_per_job'), 1)}")
            row(f"Redis alone, {what}: the first's over the last's", fmt(f.get("value"), 2))
    if ("restart", "delayd", "restart_readyz_ms") in fig:
        row("restart with the fill waiting: /readyz, ms after start", fmt(get("restart", "restart_readyz_ms")))
        row("restart: first fire / first on-time fire, ms after start",
            f"{fmt(get('restart', 'restart_first_fire_ms'))} / {fmt(get('restart', 'restart_first_on_time_fire_ms'))}", "<= 5 000")
        after = fig.get(("restart", "delayd", "restart_due_after_lateness_ms"), {})
        row("restart: jobs due after the start, count, p50 / p99 / max ms",
            f"{fmt(after.get('count'))}, {fmt(after.get('p50'))} / {fmt(after.get('p99'))} / {fmt(after.get('max'))}")
        row("console first page (GET /jobs), ms", fmt(get("restart", "console_first_page_ms")), "<= 50")
        row("delayctl stats, ms", fmt(get("restart", "delayctl_stats_ms")), "<= 1 000")
        row("restart: early / duplicates since the fill",
            f"{fmt(get('restart', 'watch_check', 'early'))} / {fmt(get('restart', 'watch_check', 'duplicates'))}", "0 / 0")
    if ("burst", "delayd", "fire_jobs_per_s") in fig:
        ref = get("burst-ref", "fire_jobs_per_s")
        burst = get("burst", "fire_jobs_per_s")
        ref_other = fig.get(("burst-ref-other", "delayd", "burst_other_lateness_per_s"), {})
        beside = f", {fmt(ref_other.get('target_rate'))} other jobs/s meanwhile" if ref_other else ""
        alone = get("burst-alone", "fire_jobs_per_s")
        if alone:
            row(f"fire capacity on {fmt(get('burst-alone', 'fire_jobs_per_s', 'n'))}, no other jobs, jobs/s", fmt(alone, 0))
        after = get("burst-ref-after", "fire_jobs_per_s")
        if after:
            row(f"fire capacity on {fmt(get('burst-ref', 'fire_jobs_per_s', 'n'))}{beside}, before / after the million, jobs/s",
                f"{fmt(ref, 0)} / {fmt(after, 0)}")
        else:
            row(f"fire capacity on {fmt(get('burst-ref', 'fire_jobs_per_s', 'n'))}{beside}, jobs/s", fmt(ref, 0))
        row(f"{fmt(get('burst', 'fire_jobs_per_s', 'n'))} due within {fmt(get('burst', 'fire_jobs_per_s', 'spread_ms'))} ms: drained in, s",
            fmt((get("burst", "fire_jobs_per_s", "last_ready_after_first_due_ms") or 0) / 1000, 1), "<= 15")
        if after and ref and burst:
            row("  its rate over the capacity: the mean of the two (before, after)",
                f"{fmt(2 * burst / (ref + after), 2)} ({fmt(burst / ref, 2)}, {fmt(burst / after, 2)})", ">= 0.9")
        else:
            row("  its rate over the capacity on the smaller burst", fmt(burst / ref if burst and ref else None, 2), ">= 0.9")
        late = fig.get(("burst", "delayd", "burst_lateness_ms"), {})
        row("  lateness p50 / p99 / max, ms",
            f"{fmt(late.get('p50'))} / {fmt(late.get('p99'))} / {fmt(late.get('max'))}")
        row("  early / duplicates / out of due order in a partition",
            f"{fmt(get('burst', 'burst_check', 'early'))} / {fmt(get('burst', 'burst_check', 'duplicates'))} / {fmt(late.get('out_of_order'))}", "early 0")
        other = fig.get(("burst-other", "delayd", "burst_other_lateness_per_s"), {})
        if other:
            row(f"  other jobs at {fmt(other.get('target_rate'))}/s meanwhile: p50 / p99 / max, ms",
                f"{fmt(other.get('p50'))} / {fmt(other.get('p99'))} / {fmt(other.get('max'))}")
    if ("soak", "delayd", "lateness_soak_per_s") in fig:
        soak = fig[("soak", "delayd", "lateness_soak_per_s")]
        check = fig.get(("soak", "delayd", "lateness_soak_check"), {})
        faults = fig.get(("soak", "delayd", "soak_faults"), {})
        row(f"soak: {fmt(soak.get('seconds'))} s at {fmt(soak.get('target_rate'))}/s, {fmt(faults.get('value'))} kill -9, "
            f"{fmt(faults.get('redis_restarts'))} Redis restart: lost / early / duplicates",
            f"{fmt(check.get('lost'))} / {fmt(check.get('early'))} / {fmt(check.get('duplicates'))}", "0 / 0 / counted")
        row("soak: lateness p50 / p99 / max, ms", f"{fmt(soak.get('p50'))} / {fmt(soak.get('p99'))} / {fmt(soak.get('max'))}")
        if "cancels" in check:
            c, r = check.get("cancels", {}), check.get("reschedules", {})
            row("soak: cancels sent / too late, reschedules sent / too late",
                f"{fmt(c.get('sent'))} / {fmt(c.get('missed'))}, {fmt(r.get('sent'))} / {fmt(r.get('missed'))}")
            row("soak: retries after a failed report, repeat occurrences, reports sent",
                f"{fmt(check.get('retries', {}).get('delivered'))} of {fmt(check.get('retries', {}).get('expected'))}, "
                f"{fmt(check.get('repeat_occurrences', {}).get('delivered'))}, {fmt(check.get('reports'))}")
        growth = fig.get(("soak", "delayd", "soak_growth"), {})
        row("soak: growth per 10 min after the first 10, RSS / Redis",
            f"{fmt((growth.get('rss_per_10_min') or 0) * 100, 2)} % / {fmt((growth.get('redis_per_10_min') or 0) * 100, 2)} %", "<= 1 %")
    cost_rates = sorted({k[2] for k in fig if k[0] == "cost" and k[2].endswith("_cpu")},
                        key=lambda s: int(s.split("_")[1]) if s.split("_")[1].isdigit() else 0)
    for name in cost_rates:
        d = fig.get(("cost", "delayd", name), {})
        b = fig.get(("cost", "bullmq", name), {})
        rate = name.split("_")[1]
        ours = (d.get("delayd_us_per_job") or 0) + (d.get("redis_us_per_job") or 0)
        row(f"cost at {rate}/s, µs per whole life: delayd / Redis / Kafka",
            " / ".join(fmt(d.get(k), 1) for k in ("delayd_us_per_job", "redis_us_per_job", "kafka_us_per_job")))
        if b:
            theirs = (b.get("node_us_per_job") or 0) + (b.get("redis_us_per_job") or 0)
            row(f"cost at {rate}/s, µs per whole life: BullMQ node / Redis",
                " / ".join(fmt(b.get(k), 1) for k in ("node_us_per_job", "redis_us_per_job")))
            row(f"  delayd + Redis over BullMQ + Redis at {rate}/s", fmt(ours / theirs if theirs else None, 2), "<= 0.25")
    width = max((len(r[0]) for r in rows), default=10)
    for label, value, target in rows:
        print(f"{label:<{width}}  {value:>24}  {target}")


if __name__ == "__main__":
    main()
