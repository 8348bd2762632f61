"""A plain OTLP/HTTP trace receiver, for tests and benchmarks: POST /v1/traces with a body in
OTLP/HTTP JSON (what delayd sends) or OTLP/HTTP protobuf (what the Python SDK's exporter sends).

Every request is decoded with the OTLP protobuf definitions (opentelemetry-proto), strictly: a JSON
field the schema does not have, a wrong type or an id that is not 32/16 hex digits makes the
request fail with 400 and is kept in `errors`, so a test sees it. JSON ids are hex (OTLP's rule, not
protobuf's base64): they are checked and turned into bytes before the protobuf JSON parser runs.

    sink = Sink(); sink.endpoint -> "http://127.0.0.1:<port>"; sink.spans() -> list of dicts
    python3 otlp_sink.py --port N [--quiet]   runs until killed; counts spans (for benchmarks),
                                              printing "spans N requests M errors E" on SIGTERM
"""
import base64
import json
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)

HEX = {32: re.compile(r"^[0-9a-f]{32}$"), 16: re.compile(r"^[0-9a-f]{16}$")}


def _hex_to_b64(obj, key, size, where):
    if key not in obj:
        return
    value = obj[key]
    if value == "" and key == "parentSpanId":
        return
    if not isinstance(value, str) or not HEX[size].match(value):
        raise ValueError(f"{where}.{key} is not {size} lowercase hex digits: {value!r}")
    obj[key] = base64.b64encode(bytes.fromhex(value)).decode()


def parse_json(body):
    doc = json.loads(body)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for i, span in enumerate(ss.get("spans", [])):
                where = f"spans[{i}]"
                _hex_to_b64(span, "traceId", 32, where)
                _hex_to_b64(span, "spanId", 16, where)
                _hex_to_b64(span, "parentSpanId", 16, where)
                for k, link in enumerate(span.get("links", [])):
                    _hex_to_b64(link, "traceId", 32, f"{where}.links[{k}]")
                    _hex_to_b64(link, "spanId", 16, f"{where}.links[{k}]")
    req = ExportTraceServiceRequest()
    json_format.ParseDict(doc, req, ignore_unknown_fields=False)
    return req


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def flatten(req):
    """The spans of an ExportTraceServiceRequest as plain dicts, ids as hex."""
    out = []
    for rs in req.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({
                    "service": resource.get("service.name"),
                    "resource": resource,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attributes": {a.key: _value(a.value) for a in s.attributes},
                    "links": [(l.trace_id.hex(), l.span_id.hex()) for l in s.links],
                    "status": (s.status.code, s.status.message),
                })
    return out


class Sink:
    def __init__(self, port=0, count_only=False):
        self._lock = threading.Lock()
        self._spans = []
        self.errors = []
        self.requests = {"json": 0, "protobuf": 0}
        self.count = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                try:
                    if self.path != "/v1/traces":
                        raise ValueError(f"unexpected path {self.path}")
                    if ctype == "application/json":
                        if count_only:
                            # Cheap on purpose (a benchmark's receiver must not take the CPU it
                            # measures): every span has exactly one start time.
                            n = body.count(b'"startTimeUnixNano"')
                            spans = None
                        else:
                            spans = flatten(parse_json(body))
                        kind, answer = "json", b"{}"
                    elif ctype == "application/x-protobuf":
                        req = ExportTraceServiceRequest()
                        req.ParseFromString(body)
                        spans = flatten(req)
                        kind, answer = "protobuf", ExportTraceServiceResponse().SerializeToString()
                    else:
                        raise ValueError(f"unexpected content type {ctype!r}")
                except Exception as e:  # noqa: BLE001 - every bad request is a finding
                    with sink._lock:
                        sink.errors.append(f"{ctype}: {e}")
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with sink._lock:
                    sink.requests[kind] += 1
                    if spans is None:
                        sink.count += n
                    else:
                        sink.count += len(spans)
                        sink._spans.extend(spans)
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def spans(self):
        with self._lock:
            return list(self._spans)

    def close(self):
        self._server.shutdown()
        self._server.server_close()


def main():
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 4318
    sink = Sink(port=port, count_only=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(f"otlp sink on {sink.endpoint}", flush=True)
    done.wait()
    print(f"spans {sink.count} requests {sink.requests['json'] + sink.requests['protobuf']} errors {len(sink.errors)}",
          flush=True)
    for e in sink.errors[:5]:
        print("error:", e, flush=True)
    sink.close()


if __name__ == "__main__":
    main()
