#!/usr/bin/env python3
"""The monitoring part of docker-compose.yml: Prometheus scraping delayd, Grafana showing it.

    check_monitoring.py prometheus <repo>   deploy/prometheus/prometheus.yml: `promtool check config`
                                            accepts it (and its commented bearer-token variant);
                                            it scrapes the compose file's delayd on its admin port
                                            every 5 s
    check_monitoring.py dashboard <repo>    deploy/grafana/dashboards/delayd.json parses; every
                                            delayd_* and process_* name in it is one that
                                            admin/metric_catalog.cpp lists (a histogram for _bucket,
                                            _sum, _count; a counter or histogram under rate());
                                            every label it groups by is one delayd sets; every
                                            expression parses (`promtool check rules`); the
                                            panels the dashboard promises are there; it uses the
                                            provisioned data source
    check_monitoring.py alerts <repo>       deploy/prometheus/alerts.yml: `promtool check rules`
                                            accepts it and `promtool test rules` passes
                                            alerts_test.yml; its expressions use only metrics and
                                            labels delayd registers (rate() of counters only),
                                            select job="delayd"; each alert has a severity, a
                                            summary, a description and a unit test; the chart's
                                            files/alerts.yml links to it
    check_monitoring.py compose <repo>      the prometheus and grafana services mount deploy/
                                            read-only where their configuration says, and publish
                                            every port (delayd's admin port too) on 127.0.0.1 only

Every problem is printed; the exit status is 1 if there is any, 2 if the check could not run
(a file unreadable). A missing tool (promtool, docker-compose, PyYAML) exits 77, which ctest
reports as skipped, or 1 under CI=true (tests/support/requires.py). promtool comes with Debian's
`prometheus` package, docker-compose with `docker-compose`; scripts/install-deps.sh installs both.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_compose as cc  # noqa: E402  (load_compose, env_of, published_ports, CannotRun, MissingTool)
from check_compose import requires  # noqa: E402  (tests/support/requires.py)

CannotRun = cc.CannotRun

PROMETHEUS_YML = "deploy/prometheus/prometheus.yml"
DASHBOARD_JSON = "deploy/grafana/dashboards/delayd.json"
DATASOURCES_YML = "deploy/grafana/provisioning/datasources/prometheus.yml"
DASHBOARDS_YML = "deploy/grafana/provisioning/dashboards/delayd.yml"
METRICS_CPP = "admin/metric_catalog.cpp"  # the metric table admin/metrics.cpp registers from
METRICS_USE_CPP = "admin/metrics.cpp"
ALERTS_YML = "deploy/prometheus/alerts.yml"
ALERTS_TEST_YML = "deploy/prometheus/alerts_test.yml"
CHART_ALERTS = "deploy/helm/delayd/files/alerts.yml"

# The alerts listed in docs/operating/deploying.md, "Deploying on Kubernetes".
REQUIRED_ALERTS = ("DelaydDown", "DelaydNotReady", "DelaydLatenessHigh", "DelaydDeadLettersGrowing",
                   "DelaydOutage", "DelaydClockSkew", "DelaydClockUnsynchronized", "DelaydClockErrorBoundLarge", "DelaydRedisMayDropJobs",
                   "DelaydIngestLagGrowing", "DelaydJobsOverdue", "DelaydInstanceIdle")

SCRAPE_INTERVAL = "5s"

# What the dashboard must show (issue #10): metric -> what the panel is about. For histograms,
# the quantiles that must be taken of their buckets.
REQUIRED_METRICS = {
    "delayd_jobs_accepted_total": "jobs accepted per second",
    "delayd_jobs_delivered_total": "jobs delivered per second",
    "delayd_jobs_cancelled_total": "jobs cancelled per second",
    "delayd_jobs_failed_total": "jobs failed per second",
    "delayd_jobs_dead_lettered_total": "jobs dead-lettered per second",
    "delayd_jobs_held": "jobs held",
    "delayd_wheel_timers": "wheel timers",
    "delayd_jobs_pending": "pending per shard",
    "delayd_next_due_seconds": "next due",
    "delayd_rebalances_total": "rebalances",
    "delayd_outage": "outages by dependency",
    "process_resident_memory_bytes": "process memory",
    "process_cpu_seconds_total": "process CPU",
    "process_open_fds": "process file descriptors",
}
REQUIRED_QUANTILES = {
    "delayd_lateness_seconds": ("0.5", "0.99"),
    "delayd_redis_request_seconds": ("0.99",),
    "delayd_kafka_produce_seconds": ("0.99",),
    "delayd_transaction_commit_seconds": ("0.99",),
}
REQUIRED_BY = {"delayd_jobs_pending": "shard", "delayd_outage": "dependency"}

# Labels Prometheus itself adds, and the histogram bucket label.
TARGET_LABELS = {"instance", "job", "le"}
# Grafana's variables, replaced by something PromQL parses before `promtool check rules`.
GRAFANA_VARIABLES = {
    "$__rate_interval": "20s", "$__interval": "5s", "$__range": "30m", "$instance": ".*",
}

problems = []


def expect(cond, message):
    if not cond:
        problems.append(message)


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CannotRun(f"cannot read {rel}: {e}")


def load_yaml(text, name):
    try:
        import yaml
        return yaml.safe_load(text)
    except ImportError:
        pass
    # As check_compose.py does: docker-compose 1.x is Python and brings PyYAML.
    exe = shutil.which("docker-compose")
    if exe:
        with open(exe, "rb") as f:
            shebang = f.readline().decode("utf-8", "replace")
        if shebang.startswith("#!") and "python" in shebang:
            c = subprocess.run(shlex.split(shebang[2:]) + ["-c",
                               "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
                               input=text, capture_output=True, text=True)
            if c.returncode == 0:
                return json.loads(c.stdout)
    raise cc.MissingTool(f"cannot parse {name}: PyYAML is missing (Debian python3-yaml)")


def promtool():
    exe = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not exe:
        raise cc.MissingTool("promtool not found on PATH: run scripts/install-deps.sh "
                        "(Debian package prometheus)")
    return exe


def run_promtool(*args):
    r = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def compose_services(root):
    services = cc.load_compose(root).get("services", {})
    for name in ("delayd", "prometheus", "grafana"):
        if name not in services:
            raise CannotRun(f"docker-compose.yml has no service {name!r}")
    return services


def admin_port(delayd):
    listen = cc.env_of(delayd).get("DELAYD_ADMIN_LISTEN") or ""
    m = re.fullmatch(r"(.*):(\d+)", listen)
    if not m:
        raise CannotRun(f"docker-compose.yml: delayd's DELAYD_ADMIN_LISTEN is {listen!r}, "
                        f"expected <address>:<port>")
    return m.group(1), m.group(2)


def mounts(service, root):
    """{container path: (host path relative to root or as given, read_only)}"""
    out = {}
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            source, target, ro = v.get("source", ""), v.get("target", ""), bool(v.get("read_only"))
        else:
            parts = str(v).split(":")
            if len(parts) == 1:
                continue  # anonymous volume
            source, target = parts[0], parts[1]
            ro = len(parts) > 2 and "ro" in parts[2].split(",")
        if os.path.isabs(source) and os.path.abspath(source).startswith(root + os.sep):
            source = os.path.relpath(source, root)
        elif source.startswith("./"):
            source = os.path.normpath(source)
        out[target] = (source, ro)
    return out


# ---------------------------------------------------------------- prometheus


def check_prometheus(root):
    path = os.path.join(root, PROMETHEUS_YML)
    code, out = run_promtool("check", "config", path)
    expect(code == 0, f"`promtool check config {PROMETHEUS_YML}` exited {code}:\n{out}")
    if code == 0:
        print(f"promtool accepts {PROMETHEUS_YML}")

    text = read(root, PROMETHEUS_YML)
    config = load_yaml(text, PROMETHEUS_YML) or {}
    services = compose_services(root)
    _, port = admin_port(services["delayd"])
    want_target = f"delayd:{port}"
    global_interval = (config.get("global") or {}).get("scrape_interval", "1m")
    jobs = [j for j in config.get("scrape_configs") or []
            if any(want_target in (sc.get("targets") or []) for sc in j.get("static_configs") or [])]
    expect(len(jobs) == 1, f"{PROMETHEUS_YML}: expected one scrape job with target {want_target!r} "
                           f"(compose service delayd, DELAYD_ADMIN_LISTEN's port), found {len(jobs)}")
    for job in jobs:
        expect(job.get("job_name") == "delayd",
               f"{PROMETHEUS_YML}: the delayd job is named {job.get('job_name')!r}; the dashboard "
               f"selects job=\"delayd\"")
        interval = job.get("scrape_interval", global_interval)
        expect(interval == SCRAPE_INTERVAL,
               f"{PROMETHEUS_YML}: delayd is scraped every {interval}, expected {SCRAPE_INTERVAL}")
        expect(job.get("metrics_path", "/metrics") == "/metrics",
               f"{PROMETHEUS_YML}: metrics_path is {job.get('metrics_path')!r}, delayd serves /metrics")
        expect(job.get("scheme", "http") == "http",
               f"{PROMETHEUS_YML}: scheme is {job.get('scheme')!r}, delayd's admin endpoint is plain HTTP")
        auth = job.get("authorization") or {}
        expect("credentials" not in auth and "bearer_token" not in job,
               f"{PROMETHEUS_YML}: an inline token; use authorization.credentials_file")
        token = cc.env_of(services["delayd"]).get("DELAYD_ADMIN_TOKEN")
        if token:
            file = auth.get("credentials_file") or job.get("bearer_token_file")
            expect(bool(file), f"{PROMETHEUS_YML}: docker-compose.yml gives delayd an admin token, "
                               f"but the delayd job has no authorization.credentials_file")
            if file:
                expect(file in mounts(services["prometheus"], root),
                       f"docker-compose.yml: Prometheus reads its token from {file}, which the "
                       f"prometheus service does not mount")

    # The commented bearer-token block, uncommented, must be valid too (with a token file there).
    lines = text.splitlines()
    block = [i for i, line in enumerate(lines) if re.match(r"\s*# authorization:\s*$", line)]
    expect(len(block) == 1, f"{PROMETHEUS_YML}: expected one commented `# authorization:` block "
                            f"showing how to pass delayd's admin token")
    if block:
        with tempfile.TemporaryDirectory() as tmp:
            token_file = os.path.join(tmp, "admin-token")
            with open(token_file, "w") as f:
                f.write("secret\n")
            i, variant = block[0], list(lines)
            indent = len(lines[i]) - len(lines[i].lstrip())
            while i < len(variant) and variant[i].lstrip().startswith("#") and \
                    len(variant[i]) - len(variant[i].lstrip()) == indent:
                variant[i] = variant[i].replace("# ", "", 1)
                i += 1
            uncommented = "\n".join(variant) + "\n"
            m = re.search(r"credentials_file:\s*(\S+)", uncommented)
            expect(m is not None, f"{PROMETHEUS_YML}: the commented block names no credentials_file")
            if m:
                uncommented = uncommented.replace(m.group(1), token_file)
                variant_path = os.path.join(tmp, "prometheus.yml")
                with open(variant_path, "w") as f:
                    f.write(uncommented)
                code, out = run_promtool("check", "config", variant_path)
                expect(code == 0, f"{PROMETHEUS_YML} with its `authorization` block uncommented: "
                                  f"promtool check config exited {code}:\n{out}")
                parsed = load_yaml(uncommented, "the uncommented variant") or {}
                delayd_jobs = [j for j in parsed.get("scrape_configs") or [] if j.get("job_name") == "delayd"]
                expect(delayd_jobs and (delayd_jobs[0].get("authorization") or {}).get("credentials_file"),
                       f"{PROMETHEUS_YML}: the commented `authorization` block is not the delayd job's")


# ---------------------------------------------------------------- dashboard


def registered_metrics(root):
    """{name: "counter"|"gauge"|"histogram"} as admin/metric_catalog.cpp lists them (and
    admin/metrics.cpp registers them), and every label name either file gives."""
    text = read(root, METRICS_CPP)
    found = {}
    labels = set()
    for m in re.finditer(r'\{Metric::\w+,\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)",\s*MetricType::(counter|gauge|histogram),'
                         r'\s*"([a-z_,]*)"', text):
        found[m.group(1)] = m.group(2)
        labels |= {label for label in m.group(3).split(",") if label}
    if len(found) < 10:
        raise CannotRun(f"{METRICS_CPP}: found only {len(found)} metrics "
                        f"({{Metric::..., \"name\", MetricType::..., \"labels\", ...}}); has it changed shape?")
    use = read(root, METRICS_USE_CPP)
    labels |= set(re.findall(r'\{\{\s*"([a-z_]+)"\s*,', use))
    labels |= set(re.findall(r'labelled\(\s*[\w.]+\s*,\s*[\w.]+\s*,\s*"([a-z_]+)"', use))
    return found, labels


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


def all_panels(dashboard):
    for p in dashboard.get("panels") or []:
        yield p
        yield from p.get("panels") or []


def check_names(where, texts, metrics, required=True):
    """Every delayd_* and process_* name in `texts` is registered (a histogram's _bucket, _sum
    and _count series too)."""
    used = set()
    for s in texts:
        used |= set(re.findall(r"\b((?:delayd|process)_[a-z0-9_]+)", s))
    expect(used or not required, f"{where}: no delayd_* or process_* metric names at all")
    for name in sorted(used):
        if name in metrics:
            continue
        base, _, suffix = name.rpartition("_")
        if suffix in ("bucket", "sum", "count") and base in metrics:
            expect(metrics[base] == "histogram", f"{where}: {name}, but {base} is a "
                                                 f"{metrics[base]}, not a histogram")
        else:
            problems.append(f"{where}: {name} is not a metric {METRICS_CPP} registers")
    return used


def check_expr(where, e, metrics, labels):
    """rate() and increase() only of counters and histogram series; labels grouped by and
    selected on are labels delayd (or Prometheus) sets; histogram_quantile keeps `le`."""
    for m in re.finditer(r"\b(?:rate|irate|increase)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", e):
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        ok = metrics.get(name) == "counter" or (base != name and metrics.get(base) == "histogram")
        expect(ok, f"{where}: {m.group(0)}...: {name} is not a counter")
    for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", e):
        for label in filter(None, (x.strip() for x in m.group(1).split(","))):
            expect(label in labels, f"{where}: `{e}` groups by {label!r}, a label delayd does not set")
    for m in re.finditer(r"\{([^{}]*)\}", e):
        for label in re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", m.group(1)):
            expect(label in labels, f"{where}: `{e}` selects on {label!r}, a label delayd does not set")
    if "histogram_quantile" in e:
        kept = {x.strip() for g in re.findall(r"\bby\s*\(([^)]*)\)", e) for x in g.split(",")}
        expect("le" in kept, f"{where}: `{e}`: histogram_quantile of a sum that keeps no `le`")


def check_dashboard(root):
    try:
        dashboard = json.loads(read(root, DASHBOARD_JSON))
    except ValueError as e:
        problems.append(f"{DASHBOARD_JSON} is not JSON: {e}")
        return
    metrics, labels = registered_metrics(root)
    labels |= TARGET_LABELS

    # Every metric name anywhere in the dashboard (expressions, variables, descriptions).
    check_names(DASHBOARD_JSON, strings(dashboard), metrics)

    targets = [(p.get("title"), t) for p in all_panels(dashboard) for t in p.get("targets") or []]
    exprs = [t.get("expr", "") for _, t in targets]
    expect(exprs, f"{DASHBOARD_JSON}: no panel has a query")
    variable_queries = []
    for v in (dashboard.get("templating") or {}).get("list") or []:
        q = v.get("query")
        variable_queries.append(q.get("query", "") if isinstance(q, dict) else str(q or ""))

    for e in exprs:
        check_expr(DASHBOARD_JSON, e, metrics, labels)
    for _, t in targets:
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat") or ""):
            expect(label in labels, f"{DASHBOARD_JSON}: legend {t.get('legendFormat')!r} shows "
                                    f"{label!r}, a label delayd does not set")

    # What the dashboard promises.
    joined = "\n".join(exprs)
    for name, what in REQUIRED_METRICS.items():
        expect(re.search(rf"\b{name}\b", joined), f"{DASHBOARD_JSON}: no panel queries {name} ({what})")
    for name, quantiles in REQUIRED_QUANTILES.items():
        for q in quantiles:
            expect(any(re.search(rf"histogram_quantile\(\s*{re.escape(q)}\s*,", e) and f"{name}_bucket" in e
                       for e in exprs),
                   f"{DASHBOARD_JSON}: no panel shows histogram_quantile({q}, ...{name}_bucket...)")
    for name, label in REQUIRED_BY.items():
        expect(any(name in e and re.search(rf"by\s*\([^)]*\b{label}\b", e) for e in exprs),
               f"{DASHBOARD_JSON}: {name} is not shown by {label}")

    # Every expression parses: promtool checks them as recording rules.
    rules = []
    for i, e in enumerate(exprs + [q for q in variable_queries if not q.startswith("label_values(")]):
        for var, value in GRAFANA_VARIABLES.items():
            e = e.replace(var, value)
        expect("$" not in e, f"{DASHBOARD_JSON}: `{e}` uses a Grafana variable this check does not know")
        rules.append({"record": f"dashboard:expr_{i}", "expr": e})
    for q in variable_queries:
        m = re.fullmatch(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)", q)
        if q.startswith("label_values("):
            expect(m and m.group(1) in metrics and m.group(2) in labels,
                   f"{DASHBOARD_JSON}: variable query {q!r} is not label_values(<delayd metric>, <label>)")
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
        rules_path = f.name
    try:
        code, out = run_promtool("check", "rules", rules_path)
    finally:
        os.unlink(rules_path)
    expect(code == 0, f"{DASHBOARD_JSON}: promtool check rules rejects its expressions:\n{out}")
    if code == 0:
        print(f"promtool parses the {len(rules)} expressions of {DASHBOARD_JSON}")

    # Grafana: the provisioned data source is the one the dashboard names, and points at the
    # compose service prometheus.
    datasources = (load_yaml(read(root, DATASOURCES_YML), DATASOURCES_YML) or {}).get("datasources") or []
    uids = {d.get("uid"): d for d in datasources}
    for title, t in targets:
        uid = (t.get("datasource") or {}).get("uid")
        expect(uid in uids, f"{DASHBOARD_JSON}: panel {title!r} uses data source {uid!r}, "
                            f"not one {DATASOURCES_YML} provisions ({sorted(map(str, uids))})")
    for d in datasources:
        expect(d.get("type") == "prometheus" and re.fullmatch(r"http://prometheus:9090/?", d.get("url", "")),
               f"{DATASOURCES_YML}: data source {d.get('name')!r} is not the compose service "
               f"prometheus (http://prometheus:9090)")
    expect(dashboard.get("uid"), f"{DASHBOARD_JSON}: no uid (links to the dashboard would change)")
    ids = [p.get("id") for p in all_panels(dashboard)]
    expect(len(ids) == len(set(ids)), f"{DASHBOARD_JSON}: panel ids repeat: {ids}")


# ---------------------------------------------------------------- alerts


def check_alerts(root):
    """deploy/prometheus/alerts.yml: promtool accepts it and its unit tests pass; its expressions
    use only what delayd registers; every alert the README promises is there, with a severity,
    a summary and a description; the chart's PrometheusRule reads this very file."""
    path = os.path.join(root, ALERTS_YML)
    code, out = run_promtool("check", "rules", path)
    expect(code == 0, f"`promtool check rules {ALERTS_YML}` exited {code}:\n{out}")
    code, out = run_promtool("test", "rules", os.path.join(root, ALERTS_TEST_YML))
    expect(code == 0, f"`promtool test rules {ALERTS_TEST_YML}` exited {code}:\n{out}")
    if code == 0:
        print(f"promtool test rules {ALERTS_TEST_YML}: SUCCESS")

    metrics, labels = registered_metrics(root)
    labels |= TARGET_LABELS
    groups = (load_yaml(read(root, ALERTS_YML), ALERTS_YML) or {}).get("groups") or []
    rules = [r for g in groups for r in g.get("rules") or []]
    names = [r.get("alert") for r in rules]
    expect(sorted(names) == sorted(REQUIRED_ALERTS), f"{ALERTS_YML}: alerts {sorted(map(str, names))}, "
                                                     f"expected {sorted(REQUIRED_ALERTS)}")
    for r in rules:
        where = f"{ALERTS_YML}: {r.get('alert') or r.get('record')}"
        expr = str(r.get("expr", ""))
        used = check_names(where, [expr], metrics, required=False)
        expect(used or re.fullmatch(r'up\{job="delayd"\} == 0', expr.strip()),
               f"{where}: `{expr}` uses no delayd metric (only DelaydDown may use Prometheus' `up`)")
        check_expr(where, expr, metrics, labels)
        expect(re.search(r'job="delayd"', expr), f"{where}: `{expr}` does not select job=\"delayd\"")
        expect((r.get("labels") or {}).get("severity") in ("critical", "warning"),
               f"{where}: severity must be critical or warning")
        annotations = r.get("annotations") or {}
        expect(annotations.get("summary") and annotations.get("description"),
               f"{where}: needs a summary and a description")
        # Template labels the alert can carry: the expression's own, or what it keeps.
        for label in re.findall(r"\$labels\.(\w+)", " ".join(map(str, annotations.values()))):
            expect(label in labels, f"{where}: its annotations show {label!r}, a label delayd does not set")
    tests = read(root, ALERTS_TEST_YML)
    for name in names:
        expect(f"alertname: {name}" in tests, f"{ALERTS_TEST_YML}: no test of {name}")
    # One home: the chart's copy is a link to this file.
    link = os.path.join(root, CHART_ALERTS)
    expect(os.path.islink(link) and os.path.realpath(link) == os.path.realpath(path),
           f"{CHART_ALERTS} should be a symbolic link to {ALERTS_YML} (one home for the rules)")


# ---------------------------------------------------------------- compose


def check_compose(root):
    services = compose_services(root)
    for name, service in services.items():
        for ip, pub, target in cc.published_ports(service):
            expect(ip == "127.0.0.1", f"docker-compose.yml: {name} publishes {pub}->{target} on "
                                      f"{ip or 'all interfaces'!r}, expected 127.0.0.1 only")
    # delayd's admin port reaches the host (curl /metrics) on loopback, and Prometheus over the
    # compose network, so delayd listens on every interface inside its container.
    address, port = admin_port(services["delayd"])
    expect(address in ("0.0.0.0", "", "[::]"),
           f"docker-compose.yml: delayd's admin endpoint listens on {address!r} inside its "
           f"container; Prometheus cannot reach delayd:{port}")
    expect(any(t == port for _, _, t in cc.published_ports(services["delayd"])),
           f"docker-compose.yml: delayd's admin port {port} is not published on 127.0.0.1")

    prom = services["prometheus"]
    expect(str(prom.get("image", "")).split(":")[0] in ("prom/prometheus", "docker.io/prom/prometheus"),
           f"docker-compose.yml: prometheus image is {prom.get('image')!r}, expected prom/prometheus")
    command = prom.get("command") or []
    if isinstance(command, str):
        command = shlex.split(command)
    config_file = next((c.split("=", 1)[1] for c in command if c.startswith("--config.file=")),
                       "/etc/prometheus/prometheus.yml")
    pm = mounts(prom, root)
    expect(pm.get(config_file) == (PROMETHEUS_YML, True),
           f"docker-compose.yml: prometheus reads {config_file}, which should be {PROMETHEUS_YML} "
           f"mounted read-only; mounts are {pm}")
    expect(any(t == "9090" for _, _, t in cc.published_ports(prom)),
           "docker-compose.yml: prometheus does not publish its port 9090")

    graf = services["grafana"]
    expect(str(graf.get("image", "")).split(":")[0] in ("grafana/grafana", "docker.io/grafana/grafana"),
           f"docker-compose.yml: grafana image is {graf.get('image')!r}, expected grafana/grafana")
    gm = mounts(graf, root)
    expect(gm.get("/etc/grafana/provisioning") == ("deploy/grafana/provisioning", True),
           f"docker-compose.yml: grafana must mount deploy/grafana/provisioning read-only at "
           f"/etc/grafana/provisioning; mounts are {gm}")
    providers = (load_yaml(read(root, DASHBOARDS_YML), DASHBOARDS_YML) or {}).get("providers") or []
    expect(providers, f"{DASHBOARDS_YML}: no dashboard providers")
    for p in providers:
        path = (p.get("options") or {}).get("path", "")
        expect(gm.get(path) == ("deploy/grafana/dashboards", True),
               f"{DASHBOARDS_YML}: provider {p.get('name')!r} loads {path!r}, where docker-compose.yml "
               f"should mount deploy/grafana/dashboards read-only; mounts are {gm}")
    genv = cc.env_of(graf)
    expect((genv.get("GF_AUTH_ANONYMOUS_ENABLED") or "").lower() == "true"
           and genv.get("GF_AUTH_ANONYMOUS_ORG_ROLE") == "Viewer",
           "docker-compose.yml: grafana should let anonymous users view (GF_AUTH_ANONYMOUS_ENABLED=true, "
           "GF_AUTH_ANONYMOUS_ORG_ROLE=Viewer), and no more")
    home = genv.get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        directory, _, file = home.rpartition("/")
        expect(gm.get(directory, ("",))[0] == "deploy/grafana/dashboards"
               and os.path.isfile(os.path.join(root, "deploy/grafana/dashboards", file)),
               f"docker-compose.yml: grafana's home dashboard {home} is not a file of "
               f"deploy/grafana/dashboards")
    expect(any(t == "3000" for _, _, t in cc.published_ports(graf)),
           "docker-compose.yml: grafana does not publish its port 3000")


def main(argv):
    checks = {"prometheus": check_prometheus, "dashboard": check_dashboard, "alerts": check_alerts,
              "compose": check_compose}
    if len(argv) != 3 or argv[1] not in checks:
        print("usage: check_monitoring.py prometheus|dashboard|alerts|compose <repo>", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[2])
    try:
        checks[argv[1]](root)
    except cc.MissingTool as e:
        return requires.missing_tool(f"check_monitoring: cannot check: {e}")
    except (CannotRun, subprocess.SubprocessError, OSError) as e:
        print(f"check_monitoring: cannot check: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"PROBLEM: {p}")
    if problems:
        print(f"check_monitoring {argv[1]}: {len(problems)} problem(s)")
        return 1
    print(f"check_monitoring {argv[1]}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
