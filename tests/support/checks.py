"""The shape of the Python end-to-end tests: checks that are counted rather than stopping the test
(so one run shows every failure), and waits for a condition while the delayd under test runs.

    checks = Checks()
    checks.check(ok, "what was expected")      prints "ok   ..." or "FAIL ...", and remembers a failure
    checks.failures                            what failed, in order
    wait_for("what", cond, seconds, proc)      cond()'s first true value; AssertionError when the
                                               time is up or `proc` (a Popen) has exited
    delayd_env(run, bootstrap, redis_url)      the environment of a delayd of the test's own: its
                                               topics, group and Redis prefix named after `run`
    free_port()                                a TCP port on 127.0.0.1 that is free and that no
                                               outgoing connection will take
"""
import os
import random
import socket
import time


# Ports below the kernel's ephemeral range are never handed to an outgoing connection, so one
# that binds now stays free until delayd (or a server of the test) binds it; a port the kernel
# chose (port 0) is in that range, and a client's connection took one once before delayd bound
# it. From 28000: above the stack's fixed ports (Kafka, Redis, the cluster and its bus).
PRIVATE_PORTS_FROM = 28000


def free_port():
    """A port of 127.0.0.1 that nothing holds now and no outgoing connection will take."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    rng = random.SystemRandom()
    for _ in range(100 if low > PRIVATE_PORTS_FROM + 1000 else 0):
        port = rng.randrange(PRIVATE_PORTS_FROM, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # an unusual ephemeral range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def delayd_env(run, bootstrap, redis_url):
    """os.environ plus the settings of a delayd whose topics, consumer group and Redis prefix are
    the run's own: ingest <run>.ingest, dead letters <run>.dlq, ready <run>.ready.{business},
    topics created by delayd."""
    env = dict(os.environ)
    env.update({
        "DELAYD_KAFKA_BOOTSTRAP": bootstrap, "DELAYD_REDIS_URL": redis_url,
        "DELAYD_KAFKA_INGEST_TOPIC": run + ".ingest", "DELAYD_KAFKA_DLQ_TOPIC": run + ".dlq",
        "DELAYD_KAFKA_READY_TOPIC_TEMPLATE": run + ".ready.{business}", "DELAYD_KAFKA_GROUP_ID": run,
        "DELAYD_REDIS_PREFIX": run, "DELAYD_KAFKA_CREATE_TOPICS": "true",
    })
    return env


class Checks:
    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)
        return ok


def wait_for(what, cond, seconds, proc=None, poll=0.1):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError("delayd exited")
        time.sleep(poll)
    raise AssertionError("timed out waiting for " + what)
