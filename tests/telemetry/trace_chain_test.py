#!/usr/bin/env python3
"""One trace chain through the delay, seen by a real OTLP receiver: a producer instrumented by
OpenTelemetry's confluent-kafka instrumentation publishes a job; delayd (OTEL_* variables set)
accepts it and, at its deliver-at, publishes the ready record; a consumer instrumented the same way
reads it and processes it in a span continued from the record's traceparent. Every span goes to
the same receiver (tests/support/otlp_sink.py): delayd's as OTLP/HTTP JSON, the Python SDK's as
OTLP/HTTP protobuf, both decoded strictly with the OTLP protobuf definitions.

Checked: the accept span is a child of the producer's send span (same trace); the publish span
starts a new trace linked to the producer's span and carries the job's attributes; the ready
record's traceparent names the publish span; the consumer's span is its child. Also: a job whose
record has no traceparent gets spans of its own (a root accept span, an unlinked publish span);
and delayd's JSON log line about a traced job carries its trace_id and span_id. The chain is
printed as text.

    trace_chain_test.py <delayd> <output dir>      (needs KAFKA_BOOTSTRAP, REDIS_URL)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import otel_venv  # noqa: E402
from checks import Checks, delayd_env, wait_for  # noqa: E402
from requires import missing_tool  # noqa: E402

KIND = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def now_ms():
    return time.time_ns() // 1_000_000


def main():
    delayd, out_dir = sys.argv[1:3]
    venv_python = otel_venv.python()
    if os.path.realpath(sys.executable) != os.path.realpath(venv_python or sys.executable):
        os.execv(venv_python, [venv_python, os.path.abspath(__file__), *sys.argv[1:]])
    if venv_python is None:
        return missing_tool(f"no OpenTelemetry venv at {otel_venv.VENV} (python3 tests/support/otel_venv.py)")
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    from opentelemetry import propagate, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otlp_sink import Sink

    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; its env)")
        return 1

    sink = Sink()
    provider = TracerProvider(resource=Resource.create({"service.name": "trace-test-client"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sink.endpoint + "/v1/traces")))
    tracer = provider.get_tracer("trace-test")

    run = f"traces-{os.getpid()}-{time.time_ns()}"
    env = delayd_env(run, bootstrap, redis_url)
    ingest = env["DELAYD_KAFKA_INGEST_TOPIC"]
    ready = env["DELAYD_KAFKA_READY_TOPIC_TEMPLATE"].replace("{business}", "orders")
    env.update({
        "DELAYD_LOG_FORMAT": "json",
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint, "OTEL_SERVICE_NAME": "delayd-under-test",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,team=platform%20tools",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    })
    log_path = os.path.join(out_dir, run + ".log")
    log = open(log_path, "w")
    proc = subprocess.Popen([delayd], env=env, stdout=log, stderr=subprocess.STDOUT)
    checks = Checks()
    failures, check = checks.failures, checks.check

    def wait(what, cond, seconds):
        return wait_for(what, cond, seconds, proc)

    def span(pred):
        return next((s for s in sink.spans() if pred(s)), None)

    try:
        wait("delayd's partitions", lambda: "assigned" in open(log_path).read(), 60)
        producer = ConfluentKafkaInstrumentor.instrument_producer(
            Producer({"bootstrap.servers": bootstrap}), tracer_provider=provider)
        traced_id, plain_id, early_id = run + "-traced", run + "-plain", run + "-early"
        due = now_ms() + 1500

        def job_headers(job_id):
            return [("deliver-at", str(due)), ("business", "orders"), ("job-id", job_id)]

        # A cancel before its job: accepted straight into cancelled, with an info line about it,
        # written inside the accept span's log scope.
        producer.produce(ingest, key=early_id, value=None, headers=[("op", "cancel"), ("job-id", early_id)])
        producer.flush(10)
        producer.produce(ingest, key=early_id, value=b"never", headers=job_headers(early_id))
        producer.produce(ingest, key=traced_id, value=b"traced", headers=job_headers(traced_id))
        producer.flush(10)
        # Without the instrumentation: a record with no traceparent.
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce(ingest, key=plain_id, value=b"plain", headers=job_headers(plain_id))
        plain.flush(10)

        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait("the ready topic", lambda: ready in admin.list_topics(timeout=5).topics, 20)
        consumer = ConfluentKafkaInstrumentor.instrument_consumer(
            Consumer({"bootstrap.servers": bootstrap, "group.id": run + ".worker", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False}), tracer_provider=provider)
        consumer.subscribe([ready])
        records = {}
        deadline = time.time() + 20
        while len(records) < 2 and time.time() < deadline:
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            headers = [(k, v.decode()) for k, v in m.headers() or []]
            job = dict(headers).get("job-id")
            records[job] = headers
            # The consumer's work, continued from the record's context (as a consumer of delayd does).
            with tracer.start_as_current_span("process " + job, context=propagate.extract(dict(headers)),
                                              kind=trace.SpanKind.CONSUMER):
                pass
        consumer.poll(0.1)  # ends the instrumentation's receive span of the last record
        consumer.close()
        check(sorted(records) == sorted([traced_id, plain_id]), f"both jobs delivered: {sorted(records)}")

        accept = wait("delayd's accept span", lambda: span(
            lambda s: s["service"] == "delayd-under-test" and s["attributes"].get("delayd.job_id") == traced_id
            and s["name"].startswith("accept")), 15)
        producer_span = span(lambda s: s["span_id"] == accept["parent_id"])
        check(producer_span is not None and producer_span["service"] == "trace-test-client"
              and producer_span["kind"] == 4 and producer_span["trace_id"] == accept["trace_id"],
              "delayd's accept span is a child of the producer's send span, in its trace")
        check(accept["kind"] == 5 and accept["name"] == "accept " + ingest
              and accept["attributes"].get("messaging.system") == "kafka"
              and accept["attributes"].get("messaging.destination.name") == ingest
              and accept["attributes"].get("delayd.business") == "orders"
              and accept["attributes"].get("delayd.deliver_at") == due
              and accept["attributes"].get("delayd.accept") == "created",
              f"the accept span's kind, name and attributes: {accept['name']} {accept['attributes']}")
        check(accept["resource"].get("deployment.environment") == "test"
              and accept["resource"].get("team") == "platform tools" and accept["resource"].get("service.version"),
              f"delayd's resource carries OTEL_RESOURCE_ATTRIBUTES and its version: {accept['resource']}")

        publish = wait("delayd's publish span", lambda: span(
            lambda s: s["service"] == "delayd-under-test" and s["attributes"].get("delayd.job_id") == traced_id
            and s["name"].startswith("send")), 15)
        check(publish["trace_id"] != accept["trace_id"] and publish["parent_id"] == ""
              and publish["links"] == [(producer_span["trace_id"], producer_span["span_id"])],
              "the publish span starts a new trace, linked to the producer's span")
        a = publish["attributes"]
        check(publish["kind"] == 4 and publish["name"] == "send " + ready and a.get("messaging.destination.name") == ready
              and a.get("delayd.attempt") == 1 and a.get("delayd.lateness_ms", -1) >= 0
              and "messaging.kafka.offset" in a and publish["status"][0] != 2,
              f"the publish span's kind, name and attributes: {publish['name']} {a}")
        check(publish["start"] >= due * 1_000_000, "the publish span begins no earlier than the deliver-at")
        tp = dict(records[traced_id]).get("traceparent")
        check(tp == f"00-{publish['trace_id']}-{publish['span_id']}-01",
              f"the ready record's traceparent names the publish span: {tp}")
        check(sum(1 for k, _ in records[traced_id] if k in ("traceparent", "tracestate")) == 1,
              "the ready record has one traceparent and no tracestate")
        work = wait("the consumer's span", lambda: span(lambda s: s["name"] == "process " + traced_id), 10)
        check(work["trace_id"] == publish["trace_id"] and work["parent_id"] == publish["span_id"],
              "the consumer's span continues from the publish span")
        receive = span(lambda s: s["service"] == "trace-test-client" and s["kind"] == 5
                       and (publish["trace_id"], publish["span_id"]) in s["links"])
        check(receive is not None, "the instrumented consumer's receive span links to the publish span")

        plain_accept = wait("the plain job's accept span", lambda: span(
            lambda s: s["attributes"].get("delayd.job_id") == plain_id and s["name"].startswith("accept")), 10)
        plain_publish = wait("the plain job's publish span", lambda: span(
            lambda s: s["attributes"].get("delayd.job_id") == plain_id and s["name"].startswith("send")), 10)
        check(plain_accept["parent_id"] == "" and plain_publish["links"] == []
              and dict(records[plain_id]).get("traceparent") == f"00-{plain_publish['trace_id']}-{plain_publish['span_id']}-01",
              "a job without traceparent: a root accept span, an unlinked publish span named by its ready record")

        early_accept = wait("the early-cancelled job's accept span", lambda: span(
            lambda s: s["attributes"].get("delayd.job_id") == early_id and s["name"].startswith("accept")), 10)
        check(early_accept["attributes"].get("delayd.accept") == "cancelled_early", "its accept says cancelled_early")
        lines = [json.loads(l) for l in open(log_path) if l.startswith("{")]
        about = [l for l in lines if l.get("job_id") == early_id]
        check(any(l.get("trace_id") == early_accept["trace_id"] and l.get("span_id") == early_accept["span_id"]
                  for l in about), f"delayd's JSON log line about it names its trace and span: {about}")
        check(not sink.errors, f"the receiver decoded every request strictly: {sink.errors}")
        check(sink.requests["json"] > 0 and sink.requests["protobuf"] > 0,
              f"requests in both encodings: {sink.requests}")

        print("\nthe chain, as the receiver got it:")
        chain = [producer_span, accept, publish, receive, work]
        for s in chain:
            if s is None:
                continue
            links = ", links " + ", ".join(f"{t[:8]}…/{p}" for t, p in s["links"]) if s["links"] else ""
            print(f"  {s['service']:<18} {KIND.get(s['kind'], s['kind']):<8} {s['name']:<48} trace {s['trace_id'][:8]}… "
                  f"span {s['span_id']} parent {s['parent_id'] or '-':<16}{links}")
        keys = ("delayd.job_id", "delayd.attempt", "delayd.lateness_ms", "messaging.destination.partition.id",
                "messaging.kafka.offset")
        print("  publish attributes: " + ", ".join(f"{k}={publish['attributes'].get(k)}" for k in keys))
    except AssertionError as e:
        failures.append(str(e))
        print("FAIL " + str(e))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        sink.close()
    if failures:
        print(f"{len(failures)} failed; delayd's log: {log_path}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
