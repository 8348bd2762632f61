#!/usr/bin/env python3
"""The Kubernetes deployment: the Helm chart deploy/helm/delayd and its rendering deploy/k8s/.

    check_k8s.py chart <repo>            `helm lint` accepts the chart; `helm template` renders it
                                         with its default values and with tests/deploy/
                                         k8s_all_on.yaml (Secret, ServiceMonitor, PrometheusRule
                                         on); every object validates against the Kubernetes JSON
                                         schemas (kubernetes-validate, offline, strict: no unknown
                                         field), the two Prometheus Operator objects against the
                                         shape checked here; and the objects agree with delayd:
                                         probes on the admin port (/livez, /readyz), a grace period
                                         above scheduler.shutdown_timeout_ms, non-root with a
                                         read-only root filesystem and nothing writable mounted,
                                         the TOML file's settings and the DELAYD_* variables known
                                         to config/, secrets as files that the Secret holds,
                                         selectors that select, the PrometheusRule's groups equal
                                         to deploy/prometheus/alerts.yml, appVersion equal to the
                                         project version of CMakeLists.txt
    check_k8s.py drift <repo> [--update] deploy/k8s/delayd.yaml is what `helm template` renders
                                         with the default values today (--update rewrites it)

Every problem is printed; the exit status is 1 if there is any, 2 if the check could not run. A
missing tool (helm, kubernetes-validate, PyYAML) exits 77, which ctest reports as skipped, or 1
under CI=true (tests/support/requires.py); scripts/install-deps.sh installs them.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tomllib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import requires  # noqa: E402  (tests/support/requires.py)

CHART = "deploy/helm/delayd"
PLAIN = "deploy/k8s/delayd.yaml"
ALERTS_YML = "deploy/prometheus/alerts.yml"
ALL_ON = "tests/deploy/k8s_all_on.yaml"
RELEASE = "delayd"
# The oldest Kubernetes release the manifests are meant for (its schemas ship with
# kubernetes-validate).
KUBERNETES_VERSION = "1.27.0"
HEADER = ("# delayd on Kubernetes without Helm: `helm template delayd deploy/helm/delayd` with the\n"
          "# chart's default values. Do not edit: change the chart, then run\n"
          "#   python3 tests/deploy/check_k8s.py drift . --update\n"
          "# (tests/deploy checks that this file and the chart agree). Apply with kubectl apply -n <ns> -f.\n")
SECRET_DIR_RE = r"/etc/delayd/secrets"


class MissingTool(Exception):
    pass


class CannotRun(Exception):
    pass


problems = []


def expect(cond, message):
    if not cond:
        problems.append(message)
    return bool(cond)


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CannotRun(f"cannot read {rel}: {e}")


def yaml_module():
    try:
        import yaml
        return yaml
    except ImportError:
        raise MissingTool("PyYAML is missing (pip install pyyaml, or Debian python3-yaml)")


def helm():
    exe = os.environ.get("HELM") or shutil.which("helm")
    if not exe:
        raise MissingTool("helm not found on PATH: run scripts/install-deps.sh (builds it with go install)")
    return exe


def run_helm(*args):
    r = subprocess.run([helm(), *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr.strip()


def render(root, *values_files):
    args = ["template", RELEASE, os.path.join(root, CHART)]
    for f in values_files:
        args += ["-f", os.path.join(root, f)]
    code, out, err = run_helm(*args)
    if code != 0:
        raise CannotRun(f"helm {' '.join(args)} exited {code}: {err}")
    return out


def documents(text):
    return [d for d in yaml_module().safe_load_all(text) if d]


# ---------------------------------------------------------------- facts of the project


def project_version(root):
    m = re.search(r"project\(delayd\s+VERSION\s+([0-9.]+)", read(root, "CMakeLists.txt"))
    if not m:
        raise CannotRun("CMakeLists.txt: no project(delayd VERSION ...)")
    return m.group(1)


def default_shutdown_timeout_ms(root):
    m = re.search(r"shutdown_timeout_ms\s*=\s*(\d+)\s*;", read(root, "config/config.hpp"))
    if not m:
        raise CannotRun("config/config.hpp: no default for shutdown_timeout_ms")
    return int(m.group(1))


def settings(root):
    """The names of delayd's settings (config/config_registry.cpp's table)."""
    names = set(re.findall(r'Setting\{"([a-z0-9_.]+)"', read(root, "config/config_registry.cpp")))
    if len(names) < 20:
        raise CannotRun("config/config_registry.cpp: found too few settings; has it changed shape?")
    return names


def env_name(setting):
    return "DELAYD_" + setting.upper().replace(".", "_")


# ---------------------------------------------------------------- schema


def validate_schema(doc, where):
    try:
        import kubernetes_validate as kv
    except ImportError:
        raise MissingTool("kubernetes-validate is missing (pip install kubernetes-validate)")
    kind = f"{doc.get('apiVersion')}/{doc.get('kind')}"
    if doc.get("apiVersion") == "monitoring.coreos.com/v1":
        return validate_operator_object(doc, where)
    try:
        kv.validate(doc, KUBERNETES_VERSION, strict=True)
    except kv.ValidationError as e:
        problems.append(f"{where}: {kind} {doc['metadata'].get('name')}: {str(e).splitlines()[0]} "
                        f"(at {'/'.join(map(str, e.path))})")
    except kv.SchemaNotFoundError:
        problems.append(f"{where}: no Kubernetes schema for {kind}")
    return kind


def validate_operator_object(doc, where):
    """ServiceMonitor and PrometheusRule have no schema in kubernetes-validate (they are CRDs):
    the fields the chart uses, with their types, as monitoring.coreos.com/v1 defines them."""
    kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name")
    w = f"{where}: {kind} {name}"
    spec = doc.get("spec")
    expect(isinstance(spec, dict), f"{w}: no spec")
    spec = spec or {}
    expect(set(doc) <= {"apiVersion", "kind", "metadata", "spec"}, f"{w}: unknown top-level fields {sorted(doc)}")
    if kind == "ServiceMonitor":
        expect(set(spec) <= {"jobLabel", "selector", "endpoints", "namespaceSelector"},
               f"{w}: unknown spec fields {sorted(spec)}")
        expect(isinstance((spec.get("selector") or {}).get("matchLabels"), dict), f"{w}: spec.selector.matchLabels")
        endpoints = spec.get("endpoints")
        expect(isinstance(endpoints, list) and endpoints, f"{w}: spec.endpoints must be a non-empty list")
        for e in endpoints or []:
            expect(set(e) <= {"port", "path", "interval", "authorization", "scheme"}, f"{w}: endpoint fields {sorted(e)}")
            expect(isinstance(e.get("port"), str), f"{w}: endpoint port must be a port name")
            expect(str(e.get("path", "/metrics")).startswith("/"), f"{w}: endpoint path")
            expect(re.fullmatch(r"\d+(ms|s|m|h)", str(e.get("interval", "30s"))), f"{w}: interval {e.get('interval')!r}")
            auth = e.get("authorization")
            if auth is not None:
                cred = auth.get("credentials") or {}
                expect(auth.get("type", "Bearer") == "Bearer" and set(cred) == {"name", "key"}
                       and all(isinstance(v, str) and v for v in cred.values()),
                       f"{w}: authorization must be {{type: Bearer, credentials: {{name, key}}}}")
    elif kind == "PrometheusRule":
        expect(set(spec) == {"groups"}, f"{w}: spec must hold groups only")
        for g in spec.get("groups") or []:
            expect(isinstance(g.get("name"), str) and isinstance(g.get("rules"), list), f"{w}: group {g!r}")
            for r in g.get("rules") or []:
                expect(set(r) <= {"alert", "record", "expr", "for", "labels", "annotations", "keep_firing_for"}
                       and ("alert" in r) != ("record" in r) and isinstance(r.get("expr"), str),
                       f"{w}: rule {r.get('alert') or r.get('record')!r} is not a Prometheus rule")
    else:
        problems.append(f"{w}: unexpected monitoring.coreos.com kind")
    return f"{doc.get('apiVersion')}/{kind}"


# ---------------------------------------------------------------- what delayd needs


def by_kind(docs):
    out = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_objects(root, docs, where, all_on):
    kinds = by_kind(docs)
    want = {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget"}
    if all_on:
        want |= {"Secret", "ServiceMonitor", "PrometheusRule"}
    expect(set(kinds) == want, f"{where}: objects {sorted(kinds)}, expected {sorted(want)}")
    if "Deployment" not in kinds:
        return
    dep = kinds["Deployment"][0]
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    expect(selects(dep["spec"]["selector"]["matchLabels"], pod_labels), f"{where}: the Deployment selects not its pods")
    containers = spec["containers"]
    expect(len(containers) == 1, f"{where}: expected one container")
    c = containers[0]
    env = {e["name"]: e.get("value") for e in c.get("env") or []}
    # Static membership: an id of each pod's own; one value for all replicas would have them fence
    # each other out of the groups (broker/ingest_stage.hpp, "Static membership").
    for e in c.get("env") or []:
        if e["name"] == "DELAYD_KAFKA_GROUP_INSTANCE_ID":
            field = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            expect(field == "metadata.name", f"{where}: DELAYD_KAFKA_GROUP_INSTANCE_ID is not the pod's name "
                                             f"(metadata.name) but {e.get('value') or e.get('valueFrom')!r}")
    known = settings(root)
    for name in env:
        expect(name in {env_name(s) for s in known}, f"{where}: {name} is no setting of delayd (config/config_registry.cpp)")

    # Image: the chart's appVersion, which is the project's version.
    version = project_version(root)
    expect(c["image"].endswith(f":{version}"), f"{where}: image {c['image']} is not tagged {version}")

    # The configuration file: the ConfigMap's TOML, every key a setting, mounted where --config says.
    args = c.get("args") or []
    expect(args[:1] == ["--config"] and len(args) == 2, f"{where}: args {args}, expected --config FILE")
    config_path = args[1] if len(args) == 2 else ""
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    cm_dir, _, cm_key = config_path.rpartition("/")
    mount = mounts.get(cm_dir)
    if expect(mount, f"{where}: nothing mounted at {cm_dir} (--config {config_path})"):
        cm_name = (volumes.get(mount["name"]) or {}).get("configMap", {}).get("name")
        cms = [m for m in kinds.get("ConfigMap", []) if m["metadata"]["name"] == cm_name]
        if expect(cms and cm_key in cms[0].get("data", {}), f"{where}: ConfigMap {cm_name} has no {cm_key}"):
            try:
                toml = tomllib.loads(cms[0]["data"][cm_key])
            except tomllib.TOMLDecodeError as e:
                toml = {}
                problems.append(f"{where}: {cm_key} is not TOML: {e}")
            for section, table in toml.items():
                for key in table:
                    expect(f"{section}.{key}" in known, f"{where}: {cm_key}: [{section}] {key} is no setting of delayd")

    # The admin port: what delayd listens on is the container port the probes and the Service use.
    listen = env.get("DELAYD_ADMIN_LISTEN") or ""
    m = re.fullmatch(r"0\.0\.0\.0:(\d+)", listen)
    expect(m, f"{where}: DELAYD_ADMIN_LISTEN is {listen!r}, expected 0.0.0.0:<port> (probes come from the kubelet)")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
    expect(m and ports.get("admin") == int(m.group(1)), f"{where}: container port admin {ports.get('admin')} "
                                                       f"is not delayd's admin.listen port")
    for probe, path in (("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        expect(get.get("path") == path and get.get("port") == "admin",
               f"{where}: {probe} is {get}, expected GET {path} on port admin")

    # Grace: Kubernetes must not SIGKILL a drain (scheduler.shutdown_timeout_ms) in progress.
    timeout_ms = int(env.get("DELAYD_SCHEDULER_SHUTDOWN_TIMEOUT_MS") or default_shutdown_timeout_ms(root))
    grace = spec.get("terminationGracePeriodSeconds", 30)
    expect(grace * 1000 >= timeout_ms + 10_000, f"{where}: terminationGracePeriodSeconds {grace} is not 10 s "
                                                f"above scheduler.shutdown_timeout_ms {timeout_ms}")

    # Non-root, read-only root filesystem, nothing writable mounted (delayd writes no file).
    psc, csc = spec.get("securityContext") or {}, c.get("securityContext") or {}
    expect(psc.get("runAsNonRoot") is True and (psc.get("runAsUser") or 0) > 0, f"{where}: pod not non-root")
    expect(csc.get("readOnlyRootFilesystem") is True, f"{where}: root filesystem not read-only")
    expect(csc.get("allowPrivilegeEscalation") is False, f"{where}: privilege escalation allowed")
    expect("ALL" in ((csc.get("capabilities") or {}).get("drop") or []), f"{where}: capabilities not dropped")
    for mnt in c.get("volumeMounts") or []:
        expect(mnt.get("readOnly") is True, f"{where}: {mnt['mountPath']} is mounted writable")
    for v in volumes.values():
        expect("configMap" in v or "secret" in v, f"{where}: volume {v['name']} is neither a ConfigMap nor a Secret")

    # Secrets: files, each *_file variable naming a key the mounted Secret holds; never values in env.
    for name, value in env.items():
        expect(not re.search(r"TOKEN$|PASSWORD$", name), f"{where}: secret {name} given as a value, not a file")
    file_vars = {n: v for n, v in env.items() if n.endswith("_FILE")}
    secret_volumes = [v for v in volumes.values() if "secret" in v]
    if all_on:
        expect(file_vars, f"{where}: no *_FILE variables although a Secret is given")
        for name, path in file_vars.items():
            directory, _, key = path.rpartition("/")
            mnt = mounts.get(directory)
            vol = volumes.get(mnt["name"]) if mnt else None
            secret_name = (vol or {}).get("secret", {}).get("secretName")
            secrets = [s for s in kinds.get("Secret", []) if s["metadata"]["name"] == secret_name]
            expect(secrets and key in (secrets[0].get("data") or {}),
                   f"{where}: {name}={path}: no Secret mounted at {directory} holds {key!r}")
    else:
        expect(not file_vars and not secret_volumes, f"{where}: secrets wired although none is given")

    # Service, PDB, ServiceMonitor select what they should.
    for kind in ("Service", "PodDisruptionBudget"):
        for o in kinds.get(kind, []):
            sel = o["spec"]["selector"]
            sel = sel.get("matchLabels", sel) if kind == "PodDisruptionBudget" else sel
            expect(selects(sel, pod_labels), f"{where}: {kind} {o['metadata']['name']} selects not delayd's pods")
    for svc in kinds.get("Service", []):
        expect(any(p.get("targetPort") == "admin" and p.get("name") == "admin" for p in svc["spec"]["ports"]),
               f"{where}: the Service does not expose the admin port as 'admin'")
    for pdb in kinds.get("PodDisruptionBudget", []):
        expect(pdb["spec"].get("maxUnavailable", 0) != 0 or "minAvailable" in pdb["spec"],
               f"{where}: the PodDisruptionBudget allows no disruption (node drains would hang)")
    for sm in kinds.get("ServiceMonitor", []):
        svc = kinds["Service"][0]
        svc_labels = svc["metadata"]["labels"]
        expect(selects(sm["spec"]["selector"]["matchLabels"], svc_labels), f"{where}: the ServiceMonitor selects not the Service")
        expect(svc_labels.get(sm["spec"].get("jobLabel")) == "delayd",
               f"{where}: the ServiceMonitor's job label is not \"delayd\" (the alerts select job=\"delayd\")")
        for e in sm["spec"]["endpoints"]:
            expect(e["port"] == "admin" and e.get("path") == "/metrics", f"{where}: ServiceMonitor endpoint {e}")
            cred = (e.get("authorization") or {}).get("credentials")
            if cred:
                secrets = [s for s in kinds.get("Secret", []) if s["metadata"]["name"] == cred["name"]]
                expect(secrets and cred["key"] in secrets[0].get("data", {}),
                       f"{where}: the ServiceMonitor's token {cred} is not in a Secret the chart gives")
    for pr in kinds.get("PrometheusRule", []):
        alerts = yaml_module().safe_load(read(root, ALERTS_YML))
        expect(pr["spec"]["groups"] == alerts["groups"],
               f"{where}: the PrometheusRule's groups differ from {ALERTS_YML}")


def check_chart(root):
    chart = yaml_module().safe_load(read(root, f"{CHART}/Chart.yaml"))
    version = project_version(root)
    expect(str(chart.get("appVersion")) == version,
           f"{CHART}/Chart.yaml: appVersion {chart.get('appVersion')!r}, but CMakeLists.txt says {version}")
    values = yaml_module().safe_load(read(root, f"{CHART}/values.yaml"))
    expect(values.get("shutdownTimeoutMs") == default_shutdown_timeout_ms(root),
           f"{CHART}/values.yaml: shutdownTimeoutMs {values.get('shutdownTimeoutMs')} is not delayd's default "
           f"scheduler.shutdown_timeout_ms {default_shutdown_timeout_ms(root)} (config/config.hpp)")
    for label, extra in (("default values", []), ("all on", ["-f", os.path.join(root, ALL_ON)])):
        code, out, err = run_helm("lint", "--strict", os.path.join(root, CHART), *extra)
        expect(code == 0, f"helm lint --strict ({label}) exited {code}:\n{out}{err}")
    total = 0
    for label, files, all_on in (("default values", [], False), ("all on", [ALL_ON], True)):
        docs = documents(render(root, *files))
        kinds = [validate_schema(d, label) for d in docs]
        check_objects(root, docs, label, all_on)
        total += len(docs)
        print(f"helm template ({label}): {len(docs)} objects, schema-validated for Kubernetes "
              f"{KUBERNETES_VERSION}: {', '.join(kinds)}")
    return total


def check_drift(root, update):
    rendered = HEADER + render(root)
    path = os.path.join(root, PLAIN)
    if update:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(rendered)
        print(f"wrote {PLAIN}")
        return
    committed = read(root, PLAIN)
    if committed != rendered:
        diff = "".join(difflib.unified_diff(committed.splitlines(True), rendered.splitlines(True),
                                            f"{PLAIN} (committed)", "helm template (the chart today)"))
        problems.append(f"{PLAIN} differs from what the chart renders; run "
                        f"`python3 tests/deploy/check_k8s.py drift . --update` (never edit it by hand):\n{diff}")
    else:
        print(f"{PLAIN} is what `helm template {RELEASE} {CHART}` renders")


def main(argv):
    if len(argv) < 3 or argv[1] not in ("chart", "drift") or argv[3:] not in ([], ["--update"]):
        print("usage: check_k8s.py chart <repo> | drift <repo> [--update]", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[2])
    try:
        if argv[1] == "chart":
            check_chart(root)
        else:
            check_drift(root, argv[3:] == ["--update"])
    except MissingTool as e:
        return requires.missing_tool(f"check_k8s: cannot check: {e}")
    except (CannotRun, subprocess.SubprocessError, OSError, KeyError, TypeError) as e:
        print(f"check_k8s: cannot check: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"PROBLEM: {p}")
    if problems:
        print(f"check_k8s {argv[1]}: {len(problems)} problem(s)")
        return 1
    print(f"check_k8s {argv[1]}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
