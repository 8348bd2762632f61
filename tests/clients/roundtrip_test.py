#!/usr/bin/env python3
"""The Python client (clients/python) against a real delayd and the local stack: it schedules jobs
(at an instant, after a delay), cancels one, reschedules one, and works off the ready topics with
its consumer helper, which reports each job running and finished, with heartbeats for a business
whose ack timeout is shorter than the work. Checked through Kafka (ready records never before
their deliver-at, every record of a job keyed by its job-id, reports echoing the attempt, nothing
delivered for the cancelled job) and through Redis (`delayctl get`: each job's final state, and no
redelivery of the job that heartbeats held).

    roundtrip_test.py <delayd> <delayctl> <output dir>     (needs KAFKA_BOOTSTRAP, REDIS_URL)
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from checks import Checks, delayd_env, wait_for  # noqa: E402
from requires import missing_tool  # noqa: E402

# Of business "slow": its job works 7.5 s, held by heartbeats every 0.5 s. The ack deadline runs
# from the mark after Kafka acknowledged the ready record, and the worker's first report must reach
# delayd before it: 6 s leaves room for a consumer that a loaded machine keeps waiting (1.4 s seen
# in CI with a 1.5 s timeout, 2.9 s with 3 s: both then missed), and the work still outlasts it by
# 1.5 s.
ACK_TIMEOUT_MS = 6000
SLOW_WORK_S = 7.5
READY_PARTITIONS = 4  # of each ready topic: as many as delayd gives those it creates


def now_ms():
    return time.time_ns() // 1_000_000


def main():
    delayd, delayctl, out_dir = sys.argv[1:4]
    try:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        # Debian's python3-confluent-kafka is installed for /usr/bin/python3; a python3 of its own
        # earlier on PATH (pyenv, a venv) may not have it: run under Debian's then.
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__), *sys.argv[1:]])
        return missing_tool("no python3 can import confluent_kafka (Debian package python3-confluent-kafka)")
    from delayd_client import Client, work
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("FAIL: KAFKA_BOOTSTRAP and REDIS_URL must be set (scripts/stack.sh up; its env)")
        return 1

    run = f"pyclient-{os.getpid()}-{time.time_ns()}"
    env = delayd_env(run, bootstrap, redis_url)
    ingest, status = env["DELAYD_KAFKA_INGEST_TOPIC"], run + ".status"
    env.update({
        "DELAYD_KAFKA_STATUS_TOPIC": status,
        "DELAYD_SCHEDULER_BUSINESS": f"slow.ack_timeout_ms={ACK_TIMEOUT_MS}",
    })
    ready_topics = [run + ".ready.rt", run + ".ready.slow"]
    log_path = os.path.join(out_dir, run + ".log")
    log = open(log_path, "w")
    proc = subprocess.Popen([delayd], env=env, stdout=log, stderr=subprocess.STDOUT)
    checks = Checks()
    failures, check = checks.failures, checks.check

    def wait(what, cond, seconds):
        return wait_for(what, cond, seconds, proc)

    def get(job):
        r = subprocess.run([delayctl, "get", job], env=env, capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else {}

    def read_all(topic):
        """Every record of `topic`, from the beginning, as Kafka has it."""
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": run + ".reader." + topic,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        out, idle_since = [], time.time()
        while time.time() - idle_since < 1.5:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m)
                idle_since = time.time()
        c.close()
        return out

    def hdr(msg, name):
        return next((v.decode() for k, v in msg.headers() or [] if k == name and v is not None), None)

    try:
        wait("delayd's partitions", lambda: "assigned" in open(log_path).read(), 60)
        # The worker is reading before any job is scheduled: the slow job's ack timeout runs from
        # its ready record's production, so a worker still joining its group when that record
        # comes would see it redelivered however quickly it heartbeats. The ready topics are
        # created here, as an operator who does not let delayd create topics would (delayd's own
        # request then finds them there), so that the worker is assigned them before any record.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for topic, f in admin.create_topics([NewTopic(t, READY_PARTITIONS, 1) for t in ready_topics]).items():
            f.result(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": run + ".worker",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(ready_topics)
        early, assign_deadline = 0, time.time() + 60
        while len(consumer.assignment()) < len(ready_topics) * READY_PARTITIONS:
            if time.time() > assign_deadline:
                raise AssertionError(f"the worker's consumer was not assigned the ready topics in 60 s: {consumer.assignment()}")
            m = consumer.poll(0.1)
            early += 1 if m is not None and not m.error() else 0
        check(early == 0, f"no ready record before any job was scheduled ({early})")

        client = Client(bootstrap, ingest_topic=ingest, status_topic=status)
        # One job goes round before the timed part (scheduled, delivered, read by the worker's
        # consumer, reported, the report applied), so that a Kafka still settling new groups and
        # transactions (seconds of it, seen in CI) does not eat into the slow job's ack timeout.
        warm = f"{run}-warm"
        client.schedule("rt", b"warm", delay=0, job_id=warm)
        client.flush()
        warm_deadline = time.time() + 60
        while True:
            if time.time() > warm_deadline:
                raise AssertionError("the warm-up job was not delivered in 60 s")
            m = consumer.poll(0.2)
            if m is not None and not m.error() and hdr(m, "job-id") == warm:
                break
        client.report(m, "finished")
        client.flush()
        consumer.commit(message=m, asynchronous=False)
        wait("the warm-up job's report applied", lambda: get(warm).get("state") == "finished", 60)
        ids = {n: f"{run}-{n}" for n in ("at", "delay", "cancelled", "moved", "slow")}
        t0 = now_ms()
        at = t0 + 2000
        client.schedule("rt", b"at", at=at, job_id=ids["at"], headers=[("trace-id", "t-at")])
        client.schedule("rt", b"delay", delay=1500, job_id=ids["delay"])
        client.schedule("rt", b"cancelled", delay=2500, job_id=ids["cancelled"])
        client.schedule("rt", b"moved", at=t0 + 60_000, job_id=ids["moved"])
        client.schedule("slow", b"slow", delay=500, job_id=ids["slow"])
        client.cancel(ids["cancelled"])
        client.reschedule(ids["moved"], delay=1000)
        client.flush()
        t_sent = now_ms()

        seen = []

        def handler(msg):
            seen.append((msg, now_ms()))
            if msg.topic().endswith(".slow"):
                time.sleep(SLOW_WORK_S)

        done = work(client, consumer, handler, heartbeat=0.5, count=4, poll_timeout=0.2)
        check(done == 4, f"the worker handled 4 ready records ({done})")
        # The cancelled job was due at t0 + 2.5 s: by now it would have come.
        while now_ms() < t0 + 4000:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                seen.append((m, now_ms()))
        consumer.close()

        by_id = {hdr(m, "job-id"): (m, got) for m, got in seen}
        check(sorted(by_id) == sorted(ids[n] for n in ("at", "delay", "moved", "slow")) and len(seen) == 4,
              f"one ready record each for the jobs not cancelled: {sorted(by_id)}")
        for job, (m, got) in by_id.items():
            due = int(hdr(m, "deliver-at"))
            _, produced = m.timestamp()
            check(produced >= due and got >= due,
                  f"{job}: produced {produced - due} ms and consumed {got - due} ms after its deliver-at, never early")
            check(m.key() == job.encode() and hdr(m, "attempt") == "1", f"{job}: keyed by its id, attempt 1")
        if ids["at"] in by_id:
            m = by_id[ids["at"]][0]
            check(int(hdr(m, "deliver-at")) == at and hdr(m, "trace-id") == "t-at" and m.value() == b"at",
                  "the 'at' job: due at the instant given, its header and value carried")
        if ids["delay"] in by_id:
            due = int(hdr(by_id[ids["delay"]][0], "deliver-at"))
            check(t0 + 1500 <= due <= t_sent + 1500, "the 'delay' job: due 1500 ms after its record")
        if ids["moved"] in by_id:
            due = int(hdr(by_id[ids["moved"]][0], "deliver-at"))
            check(t0 + 1000 <= due <= t_sent + 1000, "the rescheduled job: due 1000 ms after the reschedule, not in 60 s")

        expected = {ids["at"]: "finished", ids["delay"]: "finished", ids["moved"]: "finished",
                    ids["slow"]: "finished", ids["cancelled"]: "cancelled"}
        try:
            wait("every job's final state", lambda: all(get(j).get("state") == s for j, s in expected.items()), 15)
        except AssertionError:
            pass
        for job, state in expected.items():
            j = get(job)
            check(j.get("state") == state, f"delayctl get {job}: state {j.get('state')}, expected {state}")
        slow = get(ids["slow"])
        check(slow.get("attempt") == 1 and slow.get("redelivered", 0) == 0,
              f"the slow job ({SLOW_WORK_S} s of work, ack timeout {ACK_TIMEOUT_MS} ms) was held by heartbeats: "
              f"attempt {slow.get('attempt')}, redelivered {slow.get('redelivered', 0)}")

        reports = read_all(status)
        per_job = {}
        for m in reports:
            check(m.key() == hdr(m, "job-id").encode() and hdr(m, "attempt") == "1",
                  f"report {hdr(m, 'job-id')} {hdr(m, 'status')}: keyed by its job-id, attempt 1 echoed")
            per_job.setdefault(hdr(m, "job-id"), []).append(hdr(m, "status"))
        for job in by_id:
            statuses = per_job.get(job, [])
            check(statuses[:1] == ["running"] and statuses[-1:] == ["finished"], f"{job}: reports {statuses}")
        beats = per_job.get(ids["slow"], []).count("running")
        check(beats >= 1 + int(SLOW_WORK_S / 0.5) - 1, f"the slow job's heartbeats: {beats} running reports")
        for m in read_all(ingest):
            check(m.key() == hdr(m, "job-id").encode(), f"ingest record {hdr(m, 'op') or 'schedule'} of "
                  f"{hdr(m, 'job-id')}: keyed by its job-id")
    except AssertionError as e:
        failures.append(str(e))
        print("FAIL", e)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    if failures:
        print(open(log_path).read()[-4000:])
        print(f"0 passed, 1 failed: {len(failures)} check(s) failed")
        return 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
