#!/usr/bin/env python3
"""delayd's cron (cron/cron_expr.hpp) against Python's croniter, an independent implementation.

    croniter_diff.py <cron_next_tool> [--expressions N] [--seed S] [--examples K]

Generates N random expressions (default 10 000) in the part of the grammar croniter 1.3.5 reads
the same way, each with a start instant in one of 14 zones: random instants of 2026-2035, and
instants just before every daylight-saving transition of 2026-2027 (Europe/Berlin,
America/New_York, Australia/Lord_Howe and six more zones; the zones without DST, Asia/Tokyo
among them, get instants before Berlin's, New York's and Lord Howe's). For each start,
delayd's next three instants (cron_next_tool, one process for all) are compared twice:

  reference  croniter without a zone, on the wall clock (where it knows no DST), its local times
             turned into instants by the DST rules of cron_expr.hpp with Python's zoneinfo
             (a spring-gap time is the gap's end, an overlap time its first pass, equal instants
             one delivery). This checks the grammar, the calendar and the DST mapping, each
             against code delayd does not share. Every disagreement fails.

  croniter   croniter with the zone, as it is meant to be used (pytz, which croniter 1.3.5's
             DST code assumes; with zoneinfo its day-crossing correction misfires), a fresh
             croniter from each start, compared instant by instant. A disagreement is allowed
             only where the rules differ, and each is classified:
               spring gap      delayd fires a skipped local time at the end of the gap; croniter
                               fires it an hour (the shift) later, or before the gap
               autumn overlap  croniter fires a repeated local time a second time; delayd fires
                               it once, at its first instant
               DST shift       croniter's answer is delayd's shifted by the size of a DST
                               transition that lies between the start and the answer: croniter
                               1.3.5 does its date arithmetic at pytz's fixed offset of the start
                               and corrects it only within a day (its own bug: the wall time it
                               answers is not one the expression names, 04:02 for `2 3 * * *`)
             Any other disagreement fails, and so does a croniter error other than its 50-year
             search limit. The reference check is what makes these allowances safe: whatever
             croniter does across a transition, delayd's answer there must equal the reference's.

Both comparisons apply Vixie's rule around croniter (one croniter per day field, the earlier
answer), as croniter does itself, because croniter 1.3.5 gives up when one of the two never
matches within 50 years (Feb 30, or any Saturday in February).

Left out of the generated grammar, because croniter reads them differently or not at all (each
is covered by tests/cron's unit tests and the reference model instead): W and LW (croniter has
neither), a day field that lists every day while the other is restricted (croniter turns it
into *, which changes Vixie's rule), n#k or nL together with a restricted day-of-month
(croniter then applies both), n#k or nL mixed with plain weekdays in one list (croniter refuses
it), 7 or a range to SUN in six-field expressions (croniter 1.3.5 leaves 7 unmapped there), and
days 29-31 unless every month allowed has them (croniter steps to a day the month lacks into
the next month, past its first days: `*/15,6` after Feb 22 gives Mar 6, not Mar 1).
Answers after 2036 are not compared: date/tz and pytz know no transitions after 2037, zoneinfo
does.

Prints the counts (expressions, start instants, zones, agreements, disagreements by category)
and examples of each category. Exit status 0 when nothing fails, 1 otherwise, 77 when croniter
is missing (1 under CI=true; tests/support/requires.py). Python 3.9+ standard library plus
croniter, pytz and dateutil (Debian: python3-croniter, which brings the other two).
"""
import argparse
import calendar
import os
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import requires  # noqa: E402  (tests/support/requires.py: the missing-tool rule)

ZONES = [
    "UTC",
    "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo",
    "Europe/London", "America/Santiago", "Australia/Adelaide", "Antarctica/Troll",
    "America/St_Johns", "Pacific/Chatham", "Asia/Kolkata", "Asia/Kathmandu", "America/Sao_Paulo",
]
NO_DST = ["UTC", "Asia/Tokyo", "Asia/Kolkata", "Asia/Kathmandu", "America/Sao_Paulo"]
ALWAYS_AT_TRANSITIONS = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
COMPARE_UNTIL = calendar.timegm((2037, 1, 1, 0, 0, 0)) * 1000
CRONITER_YEARS = 50  # croniter's default max_years_between_matches
MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


# ------------------------------------------------------------------------------------------
# Expressions: (delayd's text, croniter's text), field by field
# ------------------------------------------------------------------------------------------

class Generator:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def chance(self, percent):
        return self.rng.randrange(100) < percent

    def item(self, lo, hi, forms=5):
        """A number, range or step over lo..hi, and the values it stands for; forms=3 leaves out
        */n and a/n, which run to the field's end whatever hi is."""
        r = self.rng
        a = r.randint(lo, hi)
        b = r.randint(a, hi)
        step = r.randint(1, max(1, (hi - lo + 1) // 2))
        form = [0, 1, 3, 2, 4][r.randrange(forms)]
        if form == 0:
            return str(a), {a}
        if form == 1:
            return f"{a}-{b}", set(range(a, b + 1))
        if form == 2:
            return f"*/{step}", set(range(lo, hi + 1, step))
        if form == 3:
            return f"{a}-{b}/{step}", set(range(a, b + 1, step))
        return f"{a}/{step}", set(range(a, hi + 1, step))

    def plain(self, lo, hi, star, low_bias=None):
        if self.chance(star):
            return "*"
        items = 1 if self.chance(70) else self.rng.randint(2, 4)
        out = []
        for _ in range(items):
            if low_bias is not None and self.chance(50):
                out.append(str(self.rng.randint(*low_bias)))  # the hours clocks change in
            else:
                out.append(self.item(lo, hi)[0])
        return ",".join(out)

    def day_of_month(self, long_months_only):
        """(text, restricted). Days 29-31 only when every month allowed has them: croniter 1.3.5
        steps to a day the month lacks into the next month, past its first days (*/15,6 after
        Feb 22 gives Mar 6, not Mar 1; 1,31,L skips June 30)."""
        if self.chance(55):
            return ("*" if self.chance(80) else "?"), False
        while True:
            items = 1 if self.chance(70) else self.rng.randint(2, 3)
            with_l = self.chance(25)
            texts, days = (["L"], {"L"}) if with_l else ([], set())
            for _ in range(items - with_l):
                t, v = self.item(1, 31) if long_months_only else self.item(1, 28, forms=3)
                texts.append(t)
                days |= v
            self.rng.shuffle(texts)
            if len(days) < 31:  # croniter would turn a full list (L counts as one) into *
                return ",".join(texts), True

    def month(self):
        """(text, the months it allows)."""
        if self.chance(70):
            return "*", set(range(1, 13))
        if self.chance(20):
            months = self.rng.sample([1, 3, 5, 7, 8, 10, 12], self.rng.randint(1, 3))
            return ",".join(MONTHS[m - 1] if self.chance(50) else str(m) for m in months), set(months)
        if self.chance(30):
            a = self.rng.randrange(12)
            b = self.rng.randrange(a, 12)
            return MONTHS[a] + "-" + MONTHS[b], set(range(a + 1, b + 2))
        items = 1 if self.chance(70) else self.rng.randint(2, 3)
        texts, months = [], set()
        for _ in range(items):
            t, v = self.item(1, 12)
            texts.append(t)
            months |= v
        return ",".join(texts), months

    def day_of_week(self, six, dom_restricted):
        """(delayd's text, croniter's text)."""
        if self.chance(55):
            return ("*", "*") if self.chance(80) else ("?", "*")
        if not dom_restricted and self.chance(35):
            # n#k and nL, alone or with each other; croniter writes the last weekday n as Ln.
            ours, theirs = [], []
            for _ in range(1 if self.chance(70) else 2):
                w = self.rng.randint(0, 6)
                if self.chance(50):
                    k = self.rng.randint(1, 5)
                    name = self.rng.choice([str(w), DAYS[w]])
                    ours.append(f"{name}#{k}")
                    theirs.append(f"{name}#{k}")
                else:
                    ours.append(self.rng.choice([f"{w}L", f"{DAYS[w]}L"]))
                    theirs.append(f"L{w}")
            return ",".join(ours), ",".join(theirs)
        while True:
            items = 1 if self.chance(70) else self.rng.randint(2, 3)
            texts, days = [], set()
            for _ in range(items):
                form = self.rng.randrange(4)
                if form == 0:  # a range of names, possibly to SUN
                    a = self.rng.randint(1, 6)
                    if not six and self.chance(30):
                        texts.append(f"{DAYS[a]}-SUN")
                        days |= set(range(a, 7)) | {0}
                    else:
                        b = self.rng.randint(a, 6)
                        texts.append(f"{DAYS[a]}-{DAYS[b]}")
                        days |= set(range(a, b + 1))
                elif form == 1 and not six:  # 7 is Sunday
                    texts.append("7")
                    days.add(0)
                else:
                    t, v = self.item(0, 6)
                    if six and "/" in t and "-" not in t and not t.startswith("*"):
                        continue  # a/n runs to 7, which croniter leaves unmapped with six fields
                    if not six and "/" in t and "-" not in t:
                        a, n = (int(x) if x != "*" else 0 for x in t.split("/"))
                        v = {x % 7 for x in range(a, 8, n)}  # a/n and */n run to 7 (Sunday)
                    texts.append(t)
                    days |= v
            if texts and len(days) < 7:
                return ",".join(texts), ",".join(texts)

    def expression(self):
        six = self.chance(35)
        second = self.plain(0, 59, 40) if six else None
        minute = self.plain(0, 59, 30)
        hour = self.plain(0, 23, 35, low_bias=(0, 3))
        month, months = self.month()
        dom, dom_restricted = self.day_of_month(months <= {1, 3, 5, 7, 8, 10, 12})
        dow_ours, dow_theirs = self.day_of_week(six, dom_restricted)
        ours = " ".join(([second] if six else []) + [minute, hour, dom, month, dow_ours])
        theirs = " ".join([minute, hour, "*" if dom == "?" else dom, month, dow_theirs] + ([second] if six else []))
        return ours, theirs, six


# ------------------------------------------------------------------------------------------
# Time zones, with Python's zoneinfo (the reference) and pytz (croniter's)
# ------------------------------------------------------------------------------------------

def offset_at(zone, ts):
    """UTC offset in seconds at epoch second ts."""
    return int(datetime.fromtimestamp(ts, zone).utcoffset().total_seconds())


def first_with_offset(zone, lo, hi):
    """The smallest epoch second in (lo, hi] with the offset of hi (offset(lo) != offset(hi))."""
    target = offset_at(zone, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset_at(zone, mid) == target:
            hi = mid
        else:
            lo = mid
    return hi


def transitions(zone, year_from, year_to):
    """Epoch seconds at which the zone's UTC offset changes, in [year_from, year_to]."""
    out = []
    t = calendar.timegm((year_from, 1, 1, 0, 0, 0))
    end = calendar.timegm((year_to + 1, 1, 1, 0, 0, 0))
    step = 3600 * 6
    prev = offset_at(zone, t)
    while t < end:
        nxt = t + step
        off = offset_at(zone, nxt)
        if off != prev:
            out.append(first_with_offset(zone, t, nxt))
            prev = off
        t = nxt
    return out


def shifts(zone, lo, hi):
    """The sizes in ms of the zone's offset changes between epoch seconds lo and hi."""
    out = set()
    step = 3600 * 6
    t, prev = lo, offset_at(zone, lo)
    while t < hi:
        nxt = min(t + step, hi)
        off = offset_at(zone, nxt)
        if off != prev:
            out.add(abs(off - prev) * 1000)
            prev = off
        t = nxt
    return out


def local_seconds(naive):
    """A naive wall-clock datetime as seconds since 1970-01-01 on that wall clock."""
    return calendar.timegm(naive.timetuple())


def wall(zone, ts):
    """The naive wall-clock time of epoch second ts in zone."""
    return datetime.fromtimestamp(ts, zone).replace(tzinfo=None)


def instant_of(zone, naive):
    """(epoch second, kind) of a wall-clock time by cron_expr.hpp's rules: kind is 'unique',
    'overlap' (the first of two instants) or 'gap' (the first instant after the gap)."""
    ls = local_seconds(naive)
    candidates = sorted({ls - int(naive.replace(tzinfo=zone, fold=f).utcoffset().total_seconds()) for f in (0, 1)})
    real = [t for t in candidates if wall(zone, t) == naive]
    if len(real) == 2:
        return real[0], "overlap"
    if len(real) == 1:
        return real[0], "unique"
    return first_with_offset(zone, candidates[0], candidates[-1]), "gap"


def second_pass(zone, ts):
    """True iff the wall time of epoch second ts was shown before, in an autumn overlap."""
    naive = wall(zone, ts)
    return instant_of(zone, naive)[0] < ts


# ------------------------------------------------------------------------------------------
# The two ways of asking croniter
# ------------------------------------------------------------------------------------------

class Croniter:
    def __init__(self, croniter_module, pytz_module, zoneinfo_class):
        self.croniter = croniter_module.croniter
        self.bad_date = croniter_module.CroniterBadDateError
        self.pytz = pytz_module
        self.zoneinfo = zoneinfo_class
        self.zones = {}

    def zone(self, name):
        if name not in self.zones:
            self.zones[name] = (self.zoneinfo(name), self.pytz.timezone(name))
        return self.zones[name]

    @staticmethod
    def split_days(expr):
        """[expr] or, when both day fields are restricted, [day-of-month only, day-of-week only]:
        Vixie's rule applied around croniter, whose own gives up when one of the two never
        matches within 50 years (Feb 30 or a Saturday in February)."""
        f = expr.split()
        if f[2] == "*" or f[4] == "*":
            return [expr]
        return [" ".join(f[:4] + ["*"] + f[5:]), " ".join(f[:2] + ["*"] + f[3:])]

    def wall_clock_matches(self, expr, start):
        """croniter's matches after naive wall time `start`, in order, without repeats."""
        streams = []
        for e in self.split_days(expr):
            it = self.croniter(e, start)  # naive: croniter's pure wall clock, no DST
            streams.append([it, None])
        while True:
            for s in streams:
                if s[1] is None and s[0] is not None:
                    try:
                        s[1] = s[0].get_next(datetime)
                    except self.bad_date:
                        s[0] = None
            live = [s for s in streams if s[1] is not None]
            if not live:
                return
            first = min(s[1] for s in live)
            for s in live:
                if s[1] == first:
                    s[1] = None
            yield first

    def reference(self, expr, zone_name, after_ms, count, limit=20000):
        """delayd's rules on croniter's wall-clock matches: [(epoch ms, kind, naive wall time)]."""
        zone = self.zone(zone_name)[0]
        floor_s = after_ms // 1000
        matches = self.wall_clock_matches(expr, wall(zone, floor_s))
        out = []
        for _ in range(limit):
            if len(out) == count:
                break
            naive = next(matches, None)
            if naive is None:
                break
            ts, kind = instant_of(zone, naive)
            if ts * 1000 > after_ms and (not out or ts * 1000 > out[-1][0]):
                out.append((ts * 1000, kind, naive))
        return out

    def matches(self, expr, naive):
        """croniter's verdict on a wall-clock time: is it a match?"""
        return next(self.wall_clock_matches(expr, naive - timedelta(seconds=1)), None) == naive

    def with_zone(self, expr, zone_name, after_ms):
        """croniter's next instant after after_ms, with the zone (pytz): epoch ms, or 'gave up'."""
        tz = self.zone(zone_name)[1]
        start = datetime.fromtimestamp(after_ms / 1000, tz)
        answers = []
        for e in self.split_days(expr):
            try:
                answers.append(int(round(self.croniter(e, start).get_next(float) * 1000)))
            except self.bad_date:
                pass
        return min(answers) if answers else "gave up"


# ------------------------------------------------------------------------------------------
# The comparison
# ------------------------------------------------------------------------------------------

def rfc3339(zone, ms):
    if not isinstance(ms, int):
        return str(ms)
    d = datetime.fromtimestamp(ms / 1000, zone)
    return d.isoformat(timespec="seconds") + " (" + datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%SZ") + ")"


def run_tool(tool, lines):
    text = "".join(f"{expr}\t{zone}\t{ms}\t{count}\n" for expr, zone, ms, count in lines)
    proc = subprocess.run([tool], input=text, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {tool} exited {proc.returncode}: {proc.stderr.strip()}")
    out = proc.stdout.splitlines()
    if len(out) != len(lines):
        raise SystemExit(f"FAIL: {tool} answered {len(out)} lines for {len(lines)}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool")
    ap.add_argument("--expressions", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20260329)
    ap.add_argument("--examples", type=int, default=2)
    args = ap.parse_args()

    try:
        import croniter
        import pytz
        from zoneinfo import ZoneInfo
    except ImportError:
        # Debian's python3-croniter is installed for /usr/bin/python3; a python3 of its own earlier
        # on PATH (pyenv, a venv) cannot import it: run under Debian's then.
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__), *sys.argv[1:]])
        return requires.missing_tool("croniter is not installed (Debian package python3-croniter)")
    if not os.access(args.tool, os.X_OK):
        print(f"FAIL: {args.tool} is not an executable (build the target cron_next_tool)")
        return 1

    started = time.monotonic()
    cron = Croniter(croniter, pytz, ZoneInfo)
    gen = Generator(args.seed)
    rng = random.Random(args.seed + 1)

    # Start instants: before every transition of 2026-2027, then random ones.
    starts = []  # (zone, epoch ms, near a transition)
    near = {}
    for name in ZONES:
        if name in NO_DST:
            continue
        near[name] = transitions(cron.zone(name)[0], 2026, 2027)
    for name, ts_list in near.items():
        per = 60 if name in ALWAYS_AT_TRANSITIONS else 25
        for t in ts_list:
            for i in range(per):
                before = [1, 1000, 60_000][i] if i < 3 else rng.randint(1, 26 * 3600 * 1000)
                starts.append((name, t * 1000 - before, True))
                if name in ALWAYS_AT_TRANSITIONS and i % 6 == 0:
                    starts.append((rng.choice(NO_DST[1:]), t * 1000 - before, True))
    lo = calendar.timegm((2026, 1, 1, 0, 0, 0)) * 1000
    hi = calendar.timegm((2036, 1, 1, 0, 0, 0)) * 1000
    while len(starts) < args.expressions:
        starts.append((rng.choice(ZONES), rng.randint(lo, hi), False))
    rng.shuffle(starts)

    cases = []  # (ours, theirs, six, zone, after ms, near)
    for zone, ms, is_near in starts[: max(args.expressions, len(starts))]:
        ours, theirs, six = gen.expression()
        cases.append((ours, theirs, six, zone, ms, is_near))

    answers = run_tool(args.tool, [(c[0], c[3], c[4], 3) for c in cases])

    counts = {"reference agree": 0, "reference disagree": 0, "croniter agree": 0,
              "spring gap": 0, "autumn overlap": 0, "DST shift": 0, "other": 0,
              "croniter gave up": 0, "not compared": 0}
    examples = {k: [] for k in counts}
    instants = 0
    zones_seen = set()
    near_count = 0

    def example(kind, text):
        if len(examples[kind]) < args.examples:
            examples[kind].append(text)

    for (ours_text, theirs_text, six, zone_name, after, is_near), answer in zip(cases, answers):
        zones_seen.add(zone_name)
        near_count += is_near
        where = f"'{ours_text}' (croniter '{theirs_text}') in {zone_name}"
        if not answer.startswith("ok"):
            counts["other"] += 1
            example("other", f"{where}: cron_next_tool: {answer}")
            continue
        ours = [int(x) for x in answer.split()[1:]]
        zone = cron.zone(zone_name)[0]

        # 1. The reference: croniter's wall clock and delayd's DST rules.
        ref = cron.reference(theirs_text, zone_name, after, 3)
        ref_ms = [r[0] for r in ref]
        n = len([t for t in ours if t < COMPARE_UNTIL])
        same = ours[:n] == ref_ms[:n]
        if same and n == len(ours) < 3:  # the schedule ends: so must the reference, in range
            same = len(ref_ms) == n or ref_ms[n] >= COMPARE_UNTIL
        if same:
            counts["reference agree"] += 1
        else:
            counts["reference disagree"] += 1
            example("reference disagree", f"{where} after {rfc3339(zone, after)}: delayd "
                    f"{[rfc3339(zone, t) for t in ours]}, reference {[rfc3339(zone, t) for t in ref_ms]}")
            continue

        # 2. croniter with the zone, from the start and from each of delayd's answers.
        froms = [after] + ours[:2]
        for k, start in enumerate(froms):
            if k >= len(ours) or ours[k] >= COMPARE_UNTIL:
                counts["not compared"] += 1
                break
            instants += 1
            mine = ours[k]
            theirs = cron.with_zone(theirs_text, zone_name, start)
            if theirs == mine:
                counts["croniter agree"] += 1
                continue
            kind, naive = ref[k][1], ref[k][2]
            line = (f"{where} after {rfc3339(zone, start)}: delayd {rfc3339(zone, mine)}, "
                    f"croniter {rfc3339(zone, theirs)}")
            if theirs == "gave up":
                category = "croniter gave up" if mine - start > (CRONITER_YEARS - 1) * 365 * 86400_000 else "other"
            elif kind == "gap":
                category = "spring gap"
            elif theirs < mine and second_pass(zone, theirs // 1000) and cron.matches(theirs_text, wall(zone, theirs // 1000)):
                category = "autumn overlap"
            elif abs(theirs - mine) in shifts(zone, start // 1000, max(mine, theirs) // 1000):
                category = "DST shift"
            else:
                category = "other"
            counts[category] += 1
            example(category, line)

    disagreements = {k: counts[k] for k in ("spring gap", "autumn overlap", "DST shift", "croniter gave up", "other")}
    print(f"croniter_diff: croniter {getattr(croniter, '__version__', '1.3.5')}, pytz {pytz.__version__}, "
          f"seed {args.seed}, {time.monotonic() - started:.1f} s")
    print(f"  expressions: {len(cases)} ({sum(c[2] for c in cases)} with seconds), zones: {len(zones_seen)}, "
          f"start instants: {len(cases)} ({near_count} within 26 h before a DST transition of 2026-2027)")
    print(f"  reference (croniter's wall clock + delayd's DST rules), next 3 instants: "
          f"{counts['reference agree']} agree, {counts['reference disagree']} disagree")
    print(f"  croniter with the zone: {instants} instants compared, {counts['croniter agree']} agree, "
          f"{sum(disagreements.values())} disagree:")
    for k, v in disagreements.items():
        allowed = "FAILS" if k == "other" else "allowed"
        print(f"    {k:<17} {v:>6}   ({allowed})")
    print(f"  not compared (an answer after 2036, beyond the tz tables): {counts['not compared']}")
    for k, lines in examples.items():
        for line in lines:
            print(f"  e.g. {k}: {line}")
    failed = counts["reference disagree"] + counts["other"]
    print("croniter_diff: " + ("FAIL" if failed else "OK"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
