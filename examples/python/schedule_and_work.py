#!/usr/bin/env python3
"""Schedules a few jobs with the Python client (clients/python), cancels one, moves one, and works
them off as they come due, reporting each running and finished.

    python3 examples/python/schedule_and_work.py --bootstrap 127.0.0.1:19092 --business demo

Needs confluent-kafka (Debian: python3-confluent-kafka; pip: confluent-kafka) and delayd running
with its status topic (kafka.status_topic). Run from a checkout, or `pip install clients/python`.
"""
import argparse
import os
import threading
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from confluent_kafka import Consumer  # noqa: E402

from delayd_client import Client, work  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:19092")
    p.add_argument("--business", default="demo")
    p.add_argument("--ingest-topic", default="delay-ingest")
    p.add_argument("--status-topic", default="delay-status")
    p.add_argument("--ready-topic", help="the business's ready topic (default: ready.<business>)")
    args = p.parse_args()

    client = Client(args.bootstrap, ingest_topic=args.ingest_topic, status_topic=args.status_topic)
    run = uuid.uuid4().hex[:8]
    client.schedule(args.business, b"in two seconds", delay=2000, job_id=f"demo-{run}-1")
    client.schedule(args.business, b"at an instant", at=int(time.time() * 1000) + 3000, job_id=f"demo-{run}-2")
    client.schedule(args.business, b"never", delay=4000, job_id=f"demo-{run}-3")
    client.cancel(f"demo-{run}-3")
    client.schedule(args.business, b"moved", delay=3_600_000, job_id=f"demo-{run}-4")
    client.reschedule(f"demo-{run}-4", delay=1000)
    client.flush()  # Kafka has all six records
    print(f"scheduled demo-{run}-1, -2, -4 (and -3, cancelled)", flush=True)

    # The business's workers: one group, so a job earlier runs left is worked off once, here too.
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "schedule-and-work-example",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})  # the ready topic may be new
    consumer.subscribe([args.ready_topic or f"ready.{args.business}"])

    mine = {f"demo-{run}-{n}" for n in (1, 2, 4)}
    stop = threading.Event()

    def handle(msg) -> None:  # the work; an exception would report the job failed
        job = msg.key().decode()
        print(f"{job} attempt {dict(msg.headers())['attempt'].decode()}: {msg.value()!r}", flush=True)
        mine.discard(job)
        if not mine:
            stop.set()

    work(client, consumer, handle, stop=stop)  # reports running, then finished, for each record
    consumer.close()


if __name__ == "__main__":
    main()
