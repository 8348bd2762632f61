"""The Python environment of the trace tests: the OpenTelemetry SDK, its OTLP/HTTP exporter, the
confluent-kafka instrumentation and the OTLP protobuf definitions, from PyPI, pinned, in a venv of
their own (Debian packages none of them, and the instrumentation needs a newer confluent-kafka
than Debian's python3-confluent-kafka, which the other tests use).

    python3 tests/support/otel_venv.py          creates (or completes) the venv; install-deps runs it
    otel_venv.python()                          the venv's interpreter, or None if it is not made
"""
import os
import subprocess
import sys

VENV = "/opt/delayd-test-tools/otel-venv"
# One release train: instrumentation 0.48b0 goes with the SDK 1.27.0; the instrumentation
# supports confluent-kafka up to 2.4.0.
PACKAGES = [
    "confluent-kafka==2.4.0",
    "opentelemetry-api==1.27.0",
    "opentelemetry-sdk==1.27.0",
    "opentelemetry-exporter-otlp-proto-http==1.27.0",
    "opentelemetry-proto==1.27.0",
    "opentelemetry-instrumentation-confluent-kafka==0.48b0",
]
# What the venv must import to count as made.
PROBE = ("import confluent_kafka, opentelemetry.sdk.trace, opentelemetry.proto.collector.trace.v1.trace_service_pb2, "
         "opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.instrumentation.confluent_kafka")


def python():
    exe = os.path.join(VENV, "bin", "python")
    if not os.path.exists(exe):
        return None
    ok = subprocess.run([exe, "-c", PROBE], capture_output=True).returncode == 0
    return exe if ok else None


def create():
    if python():
        return 0
    subprocess.run(["/usr/bin/python3", "-m", "venv", VENV], check=True)
    pip = os.path.join(VENV, "bin", "pip")
    subprocess.run([pip, "install", "--quiet", "--disable-pip-version-check", *PACKAGES], check=True)
    return 0 if python() else 1


if __name__ == "__main__":
    sys.exit(create())
