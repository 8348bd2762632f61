"""Publishing to delayd, and working off its ready records, over confluent-kafka."""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

from .records import (INGEST, ContractError, Duration, Instant, Record, cancel_record, header_of, report_record,
                      reschedule_record, schedule_record)


class DeliveryError(RuntimeError):
    """Kafka did not acknowledge a record."""


class Client:
    """Publishes delayd's records. `producer` is a confluent_kafka.Producer (one is made from
    `bootstrap` when not given); the topics are the deployment's kafka.ingest_topic and
    kafka.status_topic. Each call checks its arguments (ContractError, with delayd's message),
    produces, and returns the Record it sent; flush() waits until Kafka has them all."""

    def __init__(self, bootstrap: Optional[str] = None, *, producer: Any = None,
                 ingest_topic: str = "delay-ingest", status_topic: str = "delay-status") -> None:
        if producer is None:
            from confluent_kafka import Producer  # imported here: records.py needs no Kafka
            producer = Producer({"bootstrap.servers": bootstrap or "127.0.0.1:19092", "enable.idempotence": True})
        self.producer = producer
        self.topics = {INGEST: ingest_topic, "status": status_topic}
        self._errors: List[str] = []

    def _send(self, record: Record) -> Record:
        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                self._errors.append(str(err))
        self.producer.produce(self.topics[record.topic], key=record.key, value=record.value,
                              headers=list(record.headers), on_delivery=on_delivery)
        self.producer.poll(0)
        return record

    def schedule(self, business: str, value: Optional[str | bytes], **options: Any) -> Record:
        """Schedules `value` for `business` at `at=` (epoch ms, RFC 3339, aware datetime) or after
        `delay=` (ms or timedelta); options as records.schedule_record (job_id, key, headers,
        repeat_every, repeat_count, repeat_cron, repeat_tz, repeat_until, repeat_catchup,
        max_lateness, upsert)."""
        return self._send(schedule_record(business, value, **options))

    def cancel(self, job_id: str) -> Record:
        return self._send(cancel_record(job_id))

    def reschedule(self, job_id: str, *, at: Optional[Instant] = None, delay: Optional[Duration] = None) -> Record:
        return self._send(reschedule_record(job_id, at=at, delay=delay))

    def report(self, ready: Any, status: str, *, error: Optional[str] = None,
               retry_after: Optional[Duration] = None) -> Record:
        """Reports on a ready record (a confluent_kafka.Message, or its headers as a list of
        pairs), echoing its job-id and attempt."""
        headers = ready.headers() if hasattr(ready, "headers") else ready
        return self._send(report_record(headers, status, error=error, retry_after=retry_after))

    def flush(self, timeout: float = 30.0) -> None:
        """Waits until Kafka has acknowledged every record sent; DeliveryError if it has not."""
        left = self.producer.flush(timeout)
        errors, self._errors = self._errors, []
        if left > 0 or errors:
            raise DeliveryError(f"{left} record(s) not acknowledged within {timeout} s; errors: {errors}")


class Retry(Exception):
    """Raised by a handler: report the job failed, and have it delivered again after `after`
    (ms or timedelta) instead of delayd's backoff."""

    def __init__(self, error: str, after: Optional[Duration] = None) -> None:
        super().__init__(error)
        self.after = after


def work(client: Client, consumer: Any, handler: Callable[[Any], None], *, heartbeat: Optional[float] = None,
         count: int = 0, poll_timeout: float = 1.0, stop: Optional[threading.Event] = None) -> int:
    """Works off the ready records `consumer` (a subscribed confluent_kafka.Consumer with
    enable.auto.commit false) reads: for each one reports `running`, calls handler(message), and
    reports `finished`, or `failed` with the exception's text (Retry: with its retry_after). With
    `heartbeat` (seconds; less than the business's scheduler.ack_timeout_ms) it repeats `running`
    that often while the handler runs, so delayd does not deliver the job again. The offset is
    committed once Kafka has the reports. Returns after `count` records (0: until `stop` is set)."""
    done = 0
    while (count == 0 or done < count) and not (stop is not None and stop.is_set()):
        msg = consumer.poll(poll_timeout)
        if msg is None or msg.error():
            continue  # an error here is transient (a ready topic not created yet): poll again
        if header_of(msg.headers(), "job-id") is None:
            continue  # not one of delayd's ready records
        client.report(msg, "running")
        client.flush()
        beating = threading.Event()
        beat = None
        if heartbeat:
            def beat_loop() -> None:
                while not beating.wait(heartbeat):
                    client.report(msg, "running")
            beat = threading.Thread(target=beat_loop, daemon=True)
            beat.start()
        try:
            handler(msg)
            outcome: Tuple[str, Optional[str], Optional[Duration]] = ("finished", None, None)
        except Retry as r:
            outcome = ("failed", str(r), r.after)
        except Exception as e:  # the handler's failure is the job's, reported to delayd
            outcome = ("failed", f"{type(e).__name__}: {e}", None)
        finally:
            beating.set()
            if beat is not None:
                beat.join()
        client.report(msg, outcome[0], error=outcome[1], retry_after=outcome[2])
        client.flush()
        consumer.commit(message=msg, asynchronous=False)
        done += 1
    return done


__all__ = ["Client", "ContractError", "DeliveryError", "Retry", "work"]
