#!/usr/bin/env python3
"""A worker that tells delayd what became of each job it consumes.

It reads a ready topic, and for every ready record:
  1. reports the job `running` on the status topic,
  2. does its work (here: sleeps --work-ms),
  3. reports it `finished`, or `failed` with an `error` (every --fail-every'th record).

After a `failed` report delayd delivers the job again (its next ready record has `attempt` + 1)
until the business's scheduler.max_process_attempts are used up; then the job goes to the
dead-letter topic and its state is `failed`. That needs the payload after delivery: give the
business scheduler.keep_payload = true (see docs/consuming.md, "Job lifecycle").

Each report is acknowledged by Kafka before the ready record's offset is committed. A worker
that dies in between reads the record again and repeats its reports, which delayd ignores.

    python3 examples/lifecycle_consumer.py --bootstrap 127.0.0.1:19092 --ready-topic ready.orders

Needs confluent-kafka (Debian: python3-confluent-kafka; pip: confluent-kafka).
"""
import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def header(msg, name):
    """The first header called `name`, as text (delayd's headers are ASCII), or None."""
    for key, value in msg.headers() or []:
        if key == name:
            return value.decode() if value is not None else None
    return None


def report(producer, topic, job_id, attempt, status, error=None):
    """Publishes one status record. The key is the job-id, so one job's reports stay in order.
    `attempt` echoes the ready record's: a report about an earlier delivery is then ignored."""
    headers = [("job-id", job_id), ("status", status)]
    if attempt:
        headers.append(("attempt", attempt))
    if error:
        headers.append(("error", error))
    producer.produce(topic, key=job_id, value=None, headers=headers, on_delivery=raise_on_error)


def raise_on_error(err, msg):
    if err is not None:
        raise KafkaException(err)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:19092", help="Kafka bootstrap servers")
    p.add_argument("--ready-topic", required=True, help="the business's ready topic, e.g. ready.orders")
    p.add_argument("--status-topic", default="delay-status", help="delayd's kafka.status_topic")
    p.add_argument("--group", default="lifecycle-example", help="consumer group id")
    p.add_argument("--fail-every", type=int, default=0, metavar="N",
                   help="report every N-th record failed (0: never)")
    p.add_argument("--count", type=int, default=0, metavar="N", help="exit after N records (0: run until Ctrl-C)")
    p.add_argument("--work-ms", type=int, default=100, help="how long the pretend work takes")
    args = p.parse_args()

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,  # commit by hand, once the reports are out
    })
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True})
    consumer.subscribe([args.ready_topic])

    done = 0
    try:
        while args.count == 0 or done < args.count:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                # The ready topic appears with the business's first job; until then, wait.
                if msg.error().code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    print(f"consumer: {msg.error()}", file=sys.stderr)
                continue

            job_id = header(msg, "job-id")
            attempt = header(msg, "attempt")
            done += 1
            report(producer, args.status_topic, job_id, attempt, "running")
            time.sleep(args.work_ms / 1000)  # the work; a long one would repeat "running" as a heartbeat

            if args.fail_every and done % args.fail_every == 0:
                outcome = "failed"
                report(producer, args.status_topic, job_id, attempt, "failed", error=f"pretend failure of record {done}")
            else:
                outcome = "finished"
                report(producer, args.status_topic, job_id, attempt, "finished")

            if producer.flush(30) > 0:  # wait for the reports (a failed one raises)
                raise KafkaException(f"status reports for {job_id} were not acknowledged within 30 s")
            consumer.commit(message=msg, asynchronous=False)
            print(f"{job_id} attempt={attempt} {outcome}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        producer.flush(30)


if __name__ == "__main__":
    main()
