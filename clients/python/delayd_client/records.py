"""The records delayd's contract asks for, built and checked without Kafka.

Every function here is pure: it returns a `Record` (which topic, key, headers in order, value) or
raises `ContractError` with the message delayd's own ingest parser (contract/ingest_parse.cpp)
would put on the dead letter, so a bad call fails in the producer instead of in the dead-letter
topic. clients/vectors/ holds the calls and records every client must agree on.

Rules every record follows:
  * every record of one job (schedule, cancel, reschedule, status report) is keyed by its
    job-id, so that they land in one partition, in order (docs/producing.md, "Reschedule", "Latest wins");
  * only headers of the contract (README's table, docs/producing.md) are written; the caller's
    own `headers` are carried after them, in their order.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

# The contract version these records follow (README, "The contract"); clients/vectors/ states it
# too, and the package's major version follows it.
CONTRACT_VERSION = 1

# Header names (delayd's home for them: contract/ingest_parse.hpp).
OP = "op"
JOB_ID = "job-id"
DELIVER_AT = "deliver-at"
DELAY_MS = "delay-ms"
BUSINESS = "business"
ATTEMPT = "attempt"
REPEAT_EVERY = "repeat-every-ms"
REPEAT_COUNT = "repeat-count"
REPEAT_CRON = "repeat-cron"
REPEAT_TZ = "repeat-tz"
REPEAT_UNTIL = "repeat-until"
REPEAT_CATCHUP = "repeat-catchup"
MAX_LATENESS = "max-lateness-ms"
REPEAT = "repeat"
STATUS = "status"
ERROR = "error"
RETRY_AFTER = "retry-after-ms"
# Headers the caller may not pass in `headers`: the client writes them from its arguments, or
# delayd writes them on the ready record.
RESERVED = (OP, JOB_ID, DELIVER_AT, DELAY_MS, BUSINESS, ATTEMPT, REPEAT_EVERY, REPEAT_COUNT, REPEAT_CRON,
            REPEAT_TZ, REPEAT_UNTIL, REPEAT_CATCHUP, MAX_LATENESS, REPEAT, "redrive-count")

MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_BUSINESS_CHARS = 100
MAX_JOB_ID_CHARS = 200
DERIVED_JOB_ID_PREFIX = "auto:"
STATUSES = ("running", "finished", "failed")
CATCHUPS = ("latest", "all", "none")

# Which topic a record goes to: the ingest topic or the status topic (their names are the
# deployment's: kafka.ingest_topic, kafka.status_topic).
INGEST = "ingest"
STATUS_TOPIC = "status"

Instant = Union[int, str, _dt.datetime]   # epoch ms, RFC 3339 text, or an aware datetime
Duration = Union[int, _dt.timedelta]      # milliseconds, or a timedelta
Header = Tuple[str, Optional[Union[str, bytes]]]
HeaderList = Sequence[Header]


class ContractError(ValueError):
    """A call delayd would refuse; the message is the one delayd's parser gives, where it has one."""


@dataclass(frozen=True)
class Record:
    """One Kafka record: `topic` is INGEST or STATUS_TOPIC, headers in the order they are sent."""
    topic: str
    key: Optional[str]
    headers: Tuple[Tuple[str, Optional[Union[str, bytes]]], ...] = field(default_factory=tuple)
    value: Optional[Union[str, bytes]] = None


def _quote(value: Union[str, bytes], max_bytes: int = 80) -> str:
    """config::quote_for_message: in double quotes, \\ and \" escaped, bytes outside 0x20-0x7e as
    \\xNN, cut after 80 bytes with "..."."""
    data = value.encode() if isinstance(value, str) else value
    out = ['"']
    for n, c in enumerate(data):
        if n == max_bytes:
            out.append("...")
            break
        ch = chr(c)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= c <= 0x7E:
            out.append(ch)
        else:
            out.append(f"\\x{c:02x}")
    out.append('"')
    return "".join(out)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date, any year (0000 too)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _parse_rfc3339(s: str) -> Tuple[Optional[int], str]:
    """(epoch ms, "") or (None, "syntax" | "bad_field" | "out_of_range"), as time_format.cpp."""
    digits = "0123456789"

    def fixed(pos: int, n: int) -> Optional[int]:
        part = s[pos:pos + n]
        return int(part) if len(part) == n and all(c in digits for c in part) else None

    if len(s) < 20:
        return None, "syntax"
    year, month, day = fixed(0, 4), fixed(5, 2), fixed(8, 2)
    hour, minute, second = fixed(11, 2), fixed(14, 2), fixed(17, 2)
    if (None in (year, month, day, hour, minute, second) or s[4] != "-" or s[7] != "-" or s[10] not in "Tt"
            or s[13] != ":" or s[16] != ":"):
        return None, "syntax"
    pos, millis = 19, 0
    if s[pos] == ".":
        pos += 1
        start, below_ms = pos, False
        while pos < len(s) and s[pos] in digits:
            if pos - start < 3:
                millis = millis * 10 + int(s[pos])
            elif s[pos] != "0":
                below_ms = True
            pos += 1
        n = pos - start
        if n < 1 or n > 9:
            return None, "syntax"
        millis *= 10 ** max(0, 3 - n)
        if below_ms:
            millis += 1  # never early: a part of a millisecond rounds up
    if pos >= len(s):
        return None, "syntax"
    offset_s, off_h, off_m = 0, 0, 0
    if s[pos] in "Zz":
        pos += 1
    elif s[pos] in "+-":
        oh, om = fixed(pos + 1, 2), fixed(pos + 4, 2)
        if oh is None or pos + 3 >= len(s) or s[pos + 3] != ":" or om is None:
            return None, "syntax"
        off_h, off_m = oh, om
        offset_s = (oh * 3600 + om * 60) * (-1 if s[pos] == "-" else 1)
        pos += 6
    else:
        return None, "syntax"
    if pos != len(s):
        return None, "syntax"
    assert year is not None and month is not None and day is not None
    assert hour is not None and minute is not None and second is not None
    if (not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month) or hour > 23 or minute > 59
            or second > 60 or off_h > 23 or off_m > 59):
        return None, "bad_field"
    days = _days_from_civil(year, month, day)
    ms = (days * 86400 + hour * 3600 + minute * 60 + second - offset_s) * 1000 + millis
    if ms < 0 or ms > MAX_EPOCH_MS:
        return None, "out_of_range"
    return ms, ""


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[m - 1]


def parse_timestamp_ms(text: str) -> Tuple[Optional[int], str]:
    """contract::parse_timestamp_ms: all digits is epoch ms, anything else must be RFC 3339."""
    if text and all(c in "0123456789" for c in text):
        v = int(text)
        return (v, "") if v <= MAX_EPOCH_MS else (None, "out_of_range")
    return _parse_rfc3339(text)


def format_rfc3339_ms(epoch_ms: int) -> str:
    """contract::format_rfc3339_ms: "2026-11-22T10:00:00.123Z"."""
    t = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=epoch_ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def _ref(name: str) -> str:
    return f"header '{name}'"


def _instant_text(name: str, at: Instant) -> str:
    """The header text of an instant: epoch ms as given, RFC 3339 text as given, a datetime as
    epoch ms (a part of a millisecond rounds up: never early)."""
    if isinstance(at, _dt.datetime):
        if at.tzinfo is None or at.utcoffset() is None:
            raise ContractError(f"{name} must be an aware datetime (with a tzinfo): {at.isoformat()}")
        delta = at - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        us = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return str(-((-us) // 1000))
    if isinstance(at, bool) or not isinstance(at, (int, str)):
        raise ContractError(f"{name} must be epoch milliseconds (int), RFC 3339 text or a datetime: {at!r}")
    return str(at)


def _check_deliver_at(text: str) -> int:
    ms, error = parse_timestamp_ms(text)
    if ms is not None:
        return ms
    what = {"syntax": "is not epoch milliseconds or RFC 3339",
            "bad_field": "is not a valid date and time",
            "out_of_range": "is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z"}[error]
    raise ContractError(f"{_ref(DELIVER_AT)} {what}: {_quote(text)}")


def _ms_text(name: str, d: Duration) -> str:
    """Milliseconds as header text; a timedelta's part of a millisecond rounds up."""
    if isinstance(d, _dt.timedelta):
        us = (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
        return str(-((-us) // 1000))
    if isinstance(d, bool) or not isinstance(d, int):
        raise ContractError(f"{name} must be milliseconds (int) or a timedelta: {d!r}")
    return str(d)


def _check_delay(text: str) -> None:
    if not text or any(c not in "0123456789" for c in text):
        raise ContractError(f"{_ref(DELAY_MS)} is not a non-negative decimal number of milliseconds: {_quote(text)}")
    if int(text) > MAX_EPOCH_MS:
        raise ContractError(f"{_ref(DELAY_MS)} is too large: {_quote(text)}")


def _check_number(name: str, text: str, lo: int, hi: int) -> int:
    """number_header(): decimal digits only, within [lo, hi]."""
    if not text or any(c not in "0123456789" for c in text) or not lo <= int(text) <= hi:
        raise ContractError(f"{_ref(name)} must be a decimal number from {lo} to {hi}: {_quote(text)}")
    return int(text)


def check_job_id(job_id: str) -> None:
    """A job-id a producer may choose: 1-200 of 0x21-0x7E, not starting with "auto:"."""
    data = job_id.encode()
    if not 1 <= len(data) <= MAX_JOB_ID_CHARS or any(c < 0x21 or c > 0x7E for c in data):
        raise ContractError(f"{_ref(JOB_ID)} must be 1-{MAX_JOB_ID_CHARS} printable ASCII characters without "
                            f"spaces: {_quote(job_id)} ({len(data)} bytes)")
    if job_id.startswith(DERIVED_JOB_ID_PREFIX):
        raise ContractError(f"{_ref(JOB_ID)} must not start with '{DERIVED_JOB_ID_PREFIX}', which is kept for the "
                            f"ids delayd derives: {_quote(job_id)}")


def check_business(business: str) -> None:
    ok = 1 <= len(business) <= MAX_BUSINESS_CHARS and all(c.isascii() and (c.isalnum() or c in "._-")
                                                          for c in business)
    if not ok:
        raise ContractError(f"{_ref(BUSINESS)} must be 1-{MAX_BUSINESS_CHARS} characters of [A-Za-z0-9._-]: "
                            f"{_quote(business)} ({len(business.encode())} bytes)")


def _time_headers(at: Optional[Instant], delay: Optional[Duration],
                  optional: bool) -> Tuple[List[Header], Optional[int]]:
    """The deliver-at or delay-ms header, checked; and the instant when it is known."""
    if at is not None and delay is not None:
        raise ContractError("both deliver-at and delay-ms given")
    if at is not None:
        text = _instant_text("at", at)
        return [(DELIVER_AT, text)], _check_deliver_at(text)
    if delay is not None:
        text = _ms_text("delay", delay)
        _check_delay(text)
        return [(DELAY_MS, text)], None
    if optional:
        return [], None
    raise ContractError("missing header 'deliver-at' (or 'delay-ms')")


def _key(job_id: Optional[str], key: Optional[str]) -> Optional[str]:
    if job_id is not None and key is not None and key != job_id:
        raise ContractError(f"key {_quote(key)} differs from job_id {_quote(job_id)}: every record of a job is "
                            "keyed by its job-id, so that its cancel, reschedule and reports land in its partition")
    return job_id if job_id is not None else key


def _own_headers(headers: Optional[Union[HeaderList, Mapping[str, Optional[Union[str, bytes]]]]]) -> List[Header]:
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
    for name, _ in items:
        if name in RESERVED:
            raise ContractError(f"{_ref(name)} is delayd's: give it through the client's arguments, not in headers")
    return items


def schedule_record(business: str, value: Optional[Union[str, bytes]], *, at: Optional[Instant] = None,
                    delay: Optional[Duration] = None, job_id: Optional[str] = None, key: Optional[str] = None,
                    headers: Optional[Union[HeaderList, Mapping[str, Optional[Union[str, bytes]]]]] = None,
                    repeat_every: Optional[Duration] = None, repeat_count: Optional[int] = None,
                    repeat_cron: Optional[str] = None, repeat_tz: Optional[str] = None,
                    repeat_until: Optional[Instant] = None, repeat_catchup: Optional[str] = None,
                    max_lateness: Optional[Duration] = None, upsert: bool = False) -> Record:
    """The ingest record that schedules `value` for `business` (README, "Publishing a delayed
    message"). Checks run in the order delayd's parser runs them, so the first problem is named
    as delayd would name it. A cron expression and a time zone are checked by delayd only."""
    out: List[Header] = []
    if upsert:
        out.append((OP, "upsert"))
    if job_id is not None:
        check_job_id(job_id)
        out.append((JOB_ID, job_id))
    elif upsert:
        raise ContractError("op 'upsert' needs header 'job-id'")
    record_key = _key(job_id, key)
    times, at_ms = _time_headers(at, delay, optional=repeat_cron is not None)
    check_business(business)
    out.append((BUSINESS, business))
    out += times

    every_text = _ms_text("repeat_every", repeat_every) if repeat_every is not None else None
    if every_text is not None:
        _check_number(REPEAT_EVERY, every_text, 1, 1 << 53)
    count_text = str(repeat_count) if repeat_count is not None else None
    if count_text is not None:
        _check_number(REPEAT_COUNT, count_text, 1, 1_000_000_000)
    if repeat_cron is not None and every_text is not None:
        raise ContractError("headers 'repeat-cron' and 'repeat-every-ms' given: one or the other")
    repeats = every_text is not None or repeat_cron is not None
    if count_text is not None and not repeats:
        raise ContractError("header 'repeat-count' given without 'repeat-every-ms'")
    if repeat_tz is not None and repeat_cron is None:
        raise ContractError("header 'repeat-tz' given without 'repeat-cron'")
    until_text = None
    until_ms = None
    if repeat_until is not None:
        if not repeats:
            raise ContractError(f"{_ref(REPEAT_UNTIL)} given without 'repeat-every-ms' or 'repeat-cron'")
        until_text = _instant_text("repeat_until", repeat_until)
        until_ms, _ = parse_timestamp_ms(until_text)
        if until_ms is None:
            raise ContractError(f"{_ref(REPEAT_UNTIL)} is not epoch milliseconds or RFC 3339 within 1970..9999: "
                                f"{_quote(until_text)}")
    if repeat_catchup is not None:
        if not repeats:
            raise ContractError(f"{_ref(REPEAT_CATCHUP)} given without 'repeat-every-ms' or 'repeat-cron'")
        if repeat_catchup not in CATCHUPS:
            raise ContractError(f"{_ref(REPEAT_CATCHUP)} must be 'latest', 'all' or 'none': {_quote(repeat_catchup)}")
    # A calendar repeat's first occurrence needs its expression evaluated: delayd checks that one.
    if until_ms is not None and at_ms is not None and repeat_cron is None and until_ms < at_ms:
        raise ContractError(f"{_ref(REPEAT_UNTIL)} is before the first occurrence, {format_rfc3339_ms(at_ms)}")
    lateness_text = _ms_text("max_lateness", max_lateness) if max_lateness is not None else None
    if lateness_text is not None:
        _check_number(MAX_LATENESS, lateness_text, 1, 1 << 53)

    for name, text in ((REPEAT_EVERY, every_text), (REPEAT_CRON, repeat_cron), (REPEAT_TZ, repeat_tz),
                       (REPEAT_COUNT, count_text), (REPEAT_UNTIL, until_text), (REPEAT_CATCHUP, repeat_catchup),
                       (MAX_LATENESS, lateness_text)):
        if text is not None:
            out.append((name, text))
    out += _own_headers(headers)
    return Record(INGEST, record_key, tuple(out), value)


def cancel_record(job_id: str) -> Record:
    """The ingest record that cancels `job_id` (contract::cancel_record)."""
    check_job_id(job_id)
    return Record(INGEST, job_id, ((OP, "cancel"), (JOB_ID, job_id)), None)


def reschedule_record(job_id: str, *, at: Optional[Instant] = None, delay: Optional[Duration] = None) -> Record:
    """The ingest record that moves a waiting job to `at`, or `delay` after this record's
    timestamp (docs/producing.md, "Reschedule")."""
    check_job_id(job_id)
    times, _ = _time_headers(at, delay, optional=False)
    return Record(INGEST, job_id, ((OP, "reschedule"), (JOB_ID, job_id), *times), None)


def header_of(headers: Optional[Iterable[Tuple[str, Optional[Union[str, bytes]]]]], name: str) -> Optional[str]:
    """The first header called `name` as text, or None (delayd reads the first of a repeated name)."""
    for n, v in headers or ():
        if n == name:
            return v.decode() if isinstance(v, bytes) else v
    return None


def report_record(ready_headers: Optional[Iterable[Tuple[str, Optional[Union[str, bytes]]]]], status: str, *,
                  error: Optional[str] = None, retry_after: Optional[Duration] = None) -> Record:
    """The status record about the ready record whose headers are `ready_headers`: its job-id and
    attempt echoed (docs/consuming.md, "Status reports")."""
    job_id = header_of(ready_headers, JOB_ID)
    if job_id is None:
        raise ContractError("status record without header 'job-id'")
    check_job_id(job_id)
    if status not in STATUSES:
        raise ContractError(f"{_ref(STATUS)} must be 'running', 'finished' or 'failed': {_quote(status)}")
    out: List[Header] = [(JOB_ID, job_id), (STATUS, status)]
    attempt = header_of(ready_headers, ATTEMPT)
    if attempt is not None:
        out.append((ATTEMPT, attempt))
    if error is not None:
        out.append((ERROR, error))
    if retry_after is not None:
        if status != "failed":
            raise ContractError(f"retry_after is only for status 'failed', not {_quote(status)}")
        text = _ms_text("retry_after", retry_after)
        _check_number(RETRY_AFTER, text, 0, 86_400_000)
        out.append((RETRY_AFTER, text))
    if attempt is not None:
        _check_number(ATTEMPT, attempt, 1, 1_000_000_000)
    return Record(STATUS_TOPIC, job_id, tuple(out), None)
