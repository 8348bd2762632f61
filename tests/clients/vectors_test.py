#!/usr/bin/env python3
"""The Python client against the shared test vectors (clients/vectors/*.json): every good call
must build exactly the vector's record (topic, key, headers in order, value), every bad call
must raise ContractError with the vector's message (or, for a record only delayd can refuse,
build that record). No Kafka needed: records.py is pure.

    python3 tests/clients/vectors_test.py [clients/vectors]
"""
import datetime as dt
import json
import os
import random
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
from delayd_client import records  # noqa: E402
from delayd_client.records import ContractError, Record  # noqa: E402

VECTORS = os.path.join(ROOT, "clients", "vectors")


def load():
    for name in sorted(os.listdir(VECTORS)):
        if name.endswith(".json"):
            with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
                yield name, json.load(f)


def call(name, args):
    """The vector's call on the Python client's record builders."""
    args = dict(args)
    if name == "schedule":
        business, value = args.pop("business"), args.pop("value")
        if "headers" in args:
            args["headers"] = [tuple(h) for h in args["headers"]]
        return records.schedule_record(business, value, **args)
    if name == "cancel":
        return records.cancel_record(**args)
    if name == "reschedule":
        return records.reschedule_record(args.pop("job_id"), **args)
    assert name == "report", name
    ready = [tuple(h) for h in args.pop("ready_headers")]
    return records.report_record(ready, args.pop("status"), **args)


def as_record(r):
    return Record(r["topic"], r["key"], tuple(tuple(h) for h in r["headers"]), r["value"])


class Vectors(unittest.TestCase):
    def test_contract_version(self):
        for name, doc in load():
            self.assertEqual(doc["contract_version"], records.CONTRACT_VERSION, name)

    def test_good(self):
        n = 0
        for name, doc in load():
            for v in doc["good"]:
                with self.subTest(file=name, vector=v["name"]):
                    self.assertEqual(call(v["call"], v["args"]), as_record(v["record"]))
                    n += 1
        self.assertGreaterEqual(n, 20)

    def test_bad(self):
        n = 0
        for name, doc in load():
            for v in doc["bad"]:
                with self.subTest(file=name, vector=v["name"]):
                    if v["checked_by"] == "delayd":  # the client sends it; delayd refuses it
                        self.assertEqual(call(v["call"], v["args"]), as_record(v["record"]))
                    else:
                        with self.assertRaises(ContractError) as e:
                            call(v["call"], v["args"])
                        self.assertEqual(str(e.exception), v["error"])
                    n += 1
        self.assertGreaterEqual(n, 30)


class PythonTypes(unittest.TestCase):
    """What the vectors cannot say in JSON: datetimes and timedeltas."""

    def test_datetime_at_rounds_up_to_the_millisecond(self):
        at = dt.datetime(2026, 11, 22, 10, 0, 0, 900, tzinfo=dt.timezone.utc)
        r = records.schedule_record("orders", None, at=at, job_id="j")
        self.assertIn(("deliver-at", "1795341600001"), r.headers)

    def test_datetime_with_offset(self):
        at = dt.datetime(2026, 11, 22, 11, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
        r = records.reschedule_record("j", at=at)
        self.assertEqual(r.headers[-1], ("deliver-at", "1795341600000"))

    def test_naive_datetime_is_refused(self):
        with self.assertRaisesRegex(ContractError, "aware datetime"):
            records.schedule_record("orders", None, at=dt.datetime(2026, 11, 22, 10), job_id="j")

    def test_timedelta(self):
        r = records.schedule_record("orders", "v", delay=dt.timedelta(seconds=1, microseconds=1), job_id="j",
                                    repeat_every=dt.timedelta(hours=1))
        self.assertIn(("delay-ms", "1001"), r.headers)
        self.assertIn(("repeat-every-ms", "3600000"), r.headers)

    def test_report_takes_bytes_headers_as_kafka_gives_them(self):
        r = records.report_record([("job-id", b"j-1"), ("attempt", b"3")], "finished")
        self.assertEqual(r, Record("status", "j-1", (("job-id", "j-1"), ("status", "finished"), ("attempt", "3"))))

    def test_rfc3339_round_trip(self):
        """The client's RFC 3339 reading against Python's own calendar, over the whole range."""
        rng = random.Random(7)
        for ms in [0, records.MAX_EPOCH_MS] + [rng.randrange(records.MAX_EPOCH_MS) for _ in range(2000)]:
            text = records.format_rfc3339_ms(ms)
            self.assertEqual(records.parse_timestamp_ms(text), (ms, ""), text)
            t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
            self.assertEqual(text, t.isoformat(timespec="milliseconds").replace("+00:00", "Z"))

    def test_headers_as_a_mapping(self):
        r = records.schedule_record("orders", "v", delay=1, job_id="j", headers={"trace-id": "t"})
        self.assertEqual(r.headers[-1], ("trace-id", "t"))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        VECTORS = sys.argv.pop(1)
    unittest.main(verbosity=1)
