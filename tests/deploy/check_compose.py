#!/usr/bin/env python3
"""docker-compose.yml must describe the same system as the local stack.

    check_compose.py validate <repo>   docker-compose accepts the file (`config -q`)
    check_compose.py agree <repo>      the file agrees with scripts/stack.sh, scripts/kafka/pom.xml,
                                       scripts/install-deps.sh and the broker's documented defaults,
                                       and its delayd image is tagged with the project version
    check_compose.py image <repo>      the Dockerfile builds the release as scripts/package.sh
                                       does (its only build command), installs that package, and
                                       names the project version and the Helm chart's uid; every
                                       RUN parses as a shell command (no Docker engine needed)

Each source of truth is read where it lives (stack.sh's defaults and server.properties, the pom's
kafka.version, install-deps' package list); this script holds only what has no other home yet:
the topic names and group id delayd uses by default (EXPECTED_DELAYD_ENV), which it also checks
against what the built delayd prints with --print-config json, when given its path.

Every disagreement is printed with both sides; the exit status is 1 if there is any, 2 if the
check could not run (a file unreadable). A missing tool (docker-compose, PyYAML) exits 77, which
ctest reports as skipped, or 1 under CI=true (tests/support/requires.py). Python 3 standard
library, plus PyYAML only when docker-compose cannot print JSON (1.29 cannot; it depends on PyYAML
itself).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import requires  # noqa: E402  (tests/support/requires.py: the missing-tool rule)

# What delayd's environment in docker-compose.yml must say, and what the broker documents as its
# defaults (checked against `delayd --print-config json`).
EXPECTED_DELAYD_ENV = {
    "DELAYD_KAFKA_INGEST_TOPIC": "delay-ingest",
    "DELAYD_KAFKA_DLQ_TOPIC": "delay-ingest.dlq",
    "DELAYD_KAFKA_READY_TOPIC_TEMPLATE": "ready.{business}",
    "DELAYD_KAFKA_GROUP_ID": "delayd",
}

# server.properties keys of stack.sh that name addresses or paths of the host, which a container
# necessarily sets differently. Every other key must have the same value in both.
KAFKA_KEYS_THAT_DIFFER = {
    "listeners", "advertised.listeners", "controller.quorum.voters",
    "listener.security.protocol.map", "log.dirs",
}
# Kafka image variables that are not server.properties keys, checked separately.
KAFKA_ENV_NOT_PROPERTIES = {"CLUSTER_ID", "KAFKA_HEAP_OPTS"}
# Packages the image needs to compile that are not libraries ending in -dev.
BUILD_TOOLS = {"g++", "cmake", "ninja-build", "pkg-config"}


class CannotRun(Exception):
    pass


class MissingTool(CannotRun):
    """A tool the check needs is not installed: skipped, or failed under CI (support/requires.py)."""


problems = []


def mismatch(what, ours, theirs, ours_name="docker-compose.yml", theirs_name="scripts/stack.sh"):
    problems.append(f"{what}: {ours_name} has {ours!r}, {theirs_name} has {theirs!r}")


def expect(cond, message):
    if not cond:
        problems.append(message)


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CannotRun(f"cannot read {rel}: {e}")


# ---------------------------------------------------------------- docker-compose


def compose_cmd():
    exe = shutil.which("docker-compose")
    if exe is None:
        raise MissingTool("docker-compose not found on PATH: run scripts/install-deps.sh "
                        "(Debian package docker-compose)")
    return exe


def compose_env():
    # The file reads DELAYD_KAFKA_PORT and DELAYD_REDIS_PORT like stack.sh does; compare defaults
    # with defaults, whatever the calling shell has exported.
    return {k: v for k, v in os.environ.items()
            if not k.startswith("DELAYD_") and not k.startswith("COMPOSE_")}


def run_compose(root, *args):
    return subprocess.run([compose_cmd(), "-f", os.path.join(root, "docker-compose.yml"), *args],
                          cwd=root, env=compose_env(), capture_output=True, text=True)


def validate(root):
    r = run_compose(root, "config", "-q")
    if r.returncode != 0:
        problems.append(f"`docker-compose config -q` exited {r.returncode}:\n{r.stderr.strip()}")
    else:
        print("docker-compose accepts docker-compose.yml")


def load_compose(root):
    # Compose v2 prints JSON on request; 1.29 only YAML.
    r = run_compose(root, "config", "--format", "json")
    if r.returncode == 0:
        try:
            return json.loads(r.stdout)
        except ValueError:
            pass
    r = run_compose(root, "config")
    if r.returncode != 0:
        raise CannotRun(f"`docker-compose config` exited {r.returncode}:\n{r.stderr.strip()}")
    try:
        import yaml
        return yaml.safe_load(r.stdout)
    except ImportError:
        pass
    # This interpreter lacks PyYAML; docker-compose 1.x is Python and brings it, so let the
    # interpreter that runs docker-compose turn the YAML into JSON.
    with open(compose_cmd(), "rb") as f:
        shebang = f.readline().decode("utf-8", "replace")
    if shebang.startswith("#!") and "python" in shebang:
        c = subprocess.run(shlex.split(shebang[2:]) + ["-c",
                           "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"],
                           input=r.stdout, capture_output=True, text=True)
        if c.returncode == 0:
            return json.loads(c.stdout)
    raise MissingTool("docker-compose printed YAML and PyYAML is missing (Debian python3-yaml)")


def published_ports(service):
    """[(host_ip, published, target)] from short ("ip:pub:target/proto") or long syntax."""
    out = []
    for p in service.get("ports", []):
        if isinstance(p, dict):
            out.append((p.get("host_ip", ""), str(p.get("published", "")), str(p.get("target", ""))))
            continue
        spec = str(p).split("/")[0]
        parts = spec.rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2]))
        elif len(parts) == 2:
            out.append(("", parts[0], parts[1]))
        else:
            out.append(("", "", parts[0]))
    return out


def env_of(service):
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, None) for e in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def listeners(value):
    """{"NAME": (host, port)} from "NAME://host:port,..."."""
    out = {}
    for item in filter(None, (value or "").split(",")):
        m = re.fullmatch(r"\s*([A-Za-z0-9_]+)://(.*):(\d+)\s*", item)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


# ---------------------------------------------------------------- the other sources of truth


def stack_defaults(stack):
    """Shell variable -> default, from lines like KAFKA_PORT="${DELAYD_KAFKA_PORT:-${KAFKA_PORT:-19092}}"."""
    d = {}
    for m in re.finditer(r'^(\w+)="\$\{DELAYD_\w+:-(?:\$\{\w+:-)?([^}$]*)\}', stack, re.M):
        d[m.group(1)] = m.group(2)
    m = re.search(r"^HOST=(\S+)", stack, re.M)
    if m:
        d["HOST"] = m.group(1)
    for name in ("KAFKA_PORT", "REDIS_PORT", "AUTO_CREATE", "HEAP"):
        if name not in d:
            raise CannotRun(f"scripts/stack.sh: no default found for {name}")
    return d


def stack_kafka_properties(stack, defaults):
    # kafka_config()'s here-documents: the plain stack's listeners and the settings every stack shares.
    body = re.search(r"^kafka_config\(\)\s*\{\n(.*?)^\}$", stack, re.M | re.S)
    docs = re.findall(r"<<\s*'?EOF'?\n(.*?)^EOF$", body.group(1), re.M | re.S) if body else []
    if not docs:
        raise CannotRun("scripts/stack.sh: no kafka_config() here-document found")
    props = {}
    for line in "\n".join(docs).splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key] = re.sub(r"\$\{?(\w+)\}?", lambda v: defaults.get(v.group(1), v.group(0)), value)
    return props


def stack_redis_options(stack):
    joined = stack.replace("\\\n", " ")
    m = re.search(r"^\s*redis-server (--bind .*)$", joined, re.M)
    if not m:
        raise CannotRun("scripts/stack.sh: no `redis-server --bind ...` command found")
    return options(shlex.split(m.group(1).split("||")[0]))


def options(argv):
    """{"--flag": value} from ["--flag", "value", ...]."""
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            out[argv[i]] = value
            i += 2 if value is not None else 1
        else:
            i += 1
    return out


def install_deps_packages(text):
    m = re.search(r"^PACKAGES=\((.*?)^\)", text, re.M | re.S)
    if not m:
        raise CannotRun("scripts/install-deps.sh: no PACKAGES=( ... ) list found")
    return set(re.sub(r"#.*", "", m.group(1)).split())


def dockerfile_stages(text):
    """[(from_line, [instructions])], continuation lines joined, comments dropped."""
    text = re.sub(r"^\s*#.*\n", "", text, flags=re.M).replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.upper().startswith("FROM "):
            stages.append((line, []))
        elif stages:
            stages[-1][1].append(line)
    return stages


def apt_packages(instructions):
    pkgs = set()
    for ins in instructions:
        if not ins.upper().startswith("RUN "):
            continue
        for cmd in re.split(r"&&|;", ins[4:]):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                pkgs |= {w for w in words[words.index("install") + 1:] if not w.startswith("-")}
    return pkgs


# ---------------------------------------------------------------- the checks


def agree(root):
    stack = read(root, "scripts/stack.sh")
    defaults = stack_defaults(stack)
    props = stack_kafka_properties(stack, defaults)
    services = load_compose(root).get("services", {})
    for name in ("kafka", "redis", "delayd"):
        if name not in services:
            raise CannotRun(f"docker-compose.yml has no service {name!r}")
    kafka, redis, delayd = services["kafka"], services["redis"], services["delayd"]
    kenv, denv = env_of(kafka), env_of(delayd)

    # Kafka: image version.
    pom = read(root, "scripts/kafka/pom.xml")
    m = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom)
    if not m:
        raise CannotRun("scripts/kafka/pom.xml: no <kafka.version>")
    image = kafka.get("image", "")
    repo, _, tag = image.rpartition(":")
    expect(repo in ("apache/kafka", "docker.io/apache/kafka"),
           f"kafka image: docker-compose.yml has {image!r}, expected the official apache/kafka")
    if tag != m.group(1):
        mismatch("Kafka version", tag, m.group(1), theirs_name="scripts/kafka/pom.xml kafka.version")

    # Kafka: every server property of the local stack, except addresses and paths.
    expect(props.get("auto.create.topics.enable") == "false",
           f"scripts/stack.sh: auto.create.topics.enable defaults to "
           f"{props.get('auto.create.topics.enable')!r}, expected 'false'")
    expect(kenv.get("KAFKA_AUTO_CREATE_TOPICS_ENABLE") == "false",
           f"docker-compose.yml: KAFKA_AUTO_CREATE_TOPICS_ENABLE is "
           f"{kenv.get('KAFKA_AUTO_CREATE_TOPICS_ENABLE')!r}, expected 'false'")
    compared = set()
    for key, value in props.items():
        var = "KAFKA_" + key.upper().replace(".", "_")
        compared.add(var)
        if key in KAFKA_KEYS_THAT_DIFFER:
            continue
        if kenv.get(var) != value:
            mismatch(f"Kafka {key} (kafka env {var})", kenv.get(var), value)
    for var in sorted(set(kenv) - compared - KAFKA_ENV_NOT_PROPERTIES):
        problems.append(f"Kafka: docker-compose.yml sets {var}={kenv[var]!r}, which the local "
                        f"stack's server.properties does not set")
    heap = defaults["HEAP"]
    if f"-Xmx{heap}" not in (kenv.get("KAFKA_HEAP_OPTS") or ""):
        mismatch("Kafka heap (KAFKA_HEAP_OPTS vs DELAYD_KAFKA_HEAP)", kenv.get("KAFKA_HEAP_OPTS"),
                 f"-Xmx{heap}")

    # Kafka: the host reaches it on 127.0.0.1:<stack port>, advertised as such; containers reach
    # it on an advertised kafka:<port>, which is delayd's bootstrap.
    advertised = listeners(kenv.get("KAFKA_ADVERTISED_LISTENERS"))
    bound = listeners(kenv.get("KAFKA_LISTENERS"))
    host_port = defaults["KAFKA_PORT"]
    kports = published_ports(kafka)
    host_side = [p for p in kports if p[1] == host_port]
    if not host_side:
        mismatch("Kafka host port", [p[1] for p in kports], host_port)
    for ip, pub, target in host_side:
        expect(ip == defaults.get("HOST", "127.0.0.1"),
               f"Kafka: port {pub} is published on {ip or 'all interfaces'!r}, the local stack "
               f"listens on {defaults.get('HOST')!r} only")
        names = [n for n, (_, port) in bound.items() if port == target]
        expect(names, f"Kafka: published port {pub}->{target}, but no KAFKA_LISTENERS entry "
                      f"listens on {target} ({kenv.get('KAFKA_LISTENERS')!r})")
        for n in names:
            expect(advertised.get(n) == ("127.0.0.1", host_port),
                   f"Kafka: listener {n} on {target} is published as 127.0.0.1:{host_port} but "
                   f"advertised as {advertised.get(n)!r}; host clients would be sent elsewhere")
    internal = {f"{h}:{p}" for h, p in advertised.values() if h == "kafka"}
    expect(denv.get("DELAYD_KAFKA_BOOTSTRAP") in internal,
           f"delayd: DELAYD_KAFKA_BOOTSTRAP is {denv.get('DELAYD_KAFKA_BOOTSTRAP')!r}, expected "
           f"one of Kafka's in-network advertised listeners {sorted(internal)}")
    expect(bool(kafka.get("healthcheck", {}).get("test")), "Kafka: no healthcheck")

    # Redis: host port, persistence flags.
    rports = published_ports(redis)
    host_side = [p for p in rports if p[1] == defaults["REDIS_PORT"]]
    if not host_side:
        mismatch("Redis host port", [p[1] for p in rports], defaults["REDIS_PORT"])
    for ip, pub, target in host_side:
        expect(ip == defaults.get("HOST", "127.0.0.1"),
               f"Redis: port {pub} is published on {ip or 'all interfaces'!r}, the local stack "
               f"listens on {defaults.get('HOST')!r} only")
        expect(denv.get("DELAYD_REDIS_URL") == f"redis://redis:{target}",
               f"delayd: DELAYD_REDIS_URL is {denv.get('DELAYD_REDIS_URL')!r}, "
               f"expected 'redis://redis:{target}'")
    command = redis.get("command") or []
    if isinstance(command, str):
        command = shlex.split(command)
    ropts, sopts = options(command), stack_redis_options(stack)
    for flag, want in (("--appendonly", "yes"), ("--appendfsync", "everysec")):
        expect(sopts.get(flag) == want, f"scripts/stack.sh: redis-server {flag} is "
                                        f"{sopts.get(flag)!r}, expected {want!r}")
    for flag in ("--appendonly", "--appendfsync", "--save"):
        if ropts.get(flag) != sopts.get(flag):
            mismatch(f"redis-server {flag}", ropts.get(flag), sopts.get(flag))
    expect(bool(redis.get("healthcheck", {}).get("test")), "Redis: no healthcheck")

    # delayd: waits for healthy servers; topics and group as the broker documents them.
    deps = delayd.get("depends_on") or {}
    for name in ("kafka", "redis"):
        cond = deps.get(name, {}).get("condition") if isinstance(deps, dict) else None
        expect(cond == "service_healthy",
               f"delayd: depends_on {name} has condition {cond!r}, expected 'service_healthy'")
    for var, want in EXPECTED_DELAYD_ENV.items():
        if denv.get(var) != want:
            mismatch(f"delayd {var}", denv.get(var), want, theirs_name="the broker's default")
    expect((denv.get("DELAYD_KAFKA_CREATE_TOPICS") or "").lower() == "true",
           "delayd: DELAYD_KAFKA_CREATE_TOPICS must be 'true' since Kafka's auto-create is off, "
           f"found {denv.get('DELAYD_KAFKA_CREATE_TOPICS')!r}")
    # The broker's own word on its defaults: the built delayd prints its effective configuration.
    if DELAYD_BIN:
        defaults = delayd_defaults(DELAYD_BIN)
        for var, want in EXPECTED_DELAYD_ENV.items():
            section, key = var[len("DELAYD_"):].lower().split("_", 1)
            have = defaults.get(section, {}).get(key)
            if have != want:
                mismatch(f"{var} default", want, have, ours_name="this check",
                         theirs_name="delayd --print-config")
    else:
        print("note: no delayd binary given; defaults checked against this script only")

    # Dockerfile: builds with what install-deps.sh installs.
    stages = dockerfile_stages(read(root, "Dockerfile"))
    expect(len(stages) >= 2, "Dockerfile: expected a build stage and a runtime stage")
    if stages:
        local = install_deps_packages(read(root, "scripts/install-deps.sh"))
        image_build = apt_packages(stages[0][1])
        for p in sorted({p for p in local if p.endswith("-dev")} - image_build):
            problems.append(f"Dockerfile: build stage does not install {p}, "
                            f"which scripts/install-deps.sh installs")
        for p in sorted(BUILD_TOOLS - image_build):
            problems.append(f"Dockerfile: build stage does not install {p}")
        for p in sorted(image_build - local):
            problems.append(f"Dockerfile: build stage installs {p}, "
                            f"which scripts/install-deps.sh does not")
        final = stages[-1][1]
        users = [i.split(None, 1)[1] for i in final if i.upper().startswith("USER ")]
        expect(users and users[-1].split(":")[0] not in ("root", "0"),
               f"Dockerfile: the runtime stage must run as a non-root USER, found {users!r}")
        entry = [i for i in final if i.upper().startswith("ENTRYPOINT ")]
        expect(entry and "delayd" in entry[-1], f"Dockerfile: ENTRYPOINT must run delayd, found {entry!r}")

    # The image of this release: tagged with the project version.
    version = project_version(root)
    expect(delayd.get("image") == f"delayd:{version}",
           f"delayd: image is {delayd.get('image')!r}, expected 'delayd:{version}' (project() in CMakeLists.txt)")


def project_version(root):
    m = re.search(r"^project\(delayd\s+VERSION\s+([0-9.]+)", read(root, "CMakeLists.txt"), re.M)
    if not m:
        raise CannotRun("CMakeLists.txt: no project(delayd VERSION ...)")
    return m.group(1)


def image(root):
    """The Dockerfile builds this release the way scripts/package.sh does, and installs its package."""
    text = read(root, "Dockerfile")
    stages = dockerfile_stages(text)
    if len(stages) != 2:
        raise CannotRun(f"Dockerfile: expected two stages (build, runtime), found {len(stages)}")
    (build_from, build), (_, final) = stages
    alias = build_from.split()[-1] if " AS " in build_from.upper() else None
    version = project_version(root)

    # Every RUN is a shell command Docker's /bin/sh can parse.
    for ins in build + final:
        if ins.upper().startswith("RUN "):
            r = subprocess.run(["sh", "-n", "-c", ins[4:]], capture_output=True, text=True)
            expect(r.returncode == 0, f"Dockerfile: RUN does not parse as sh: {ins[4:]!r}: {r.stderr.strip()}")

    # Build stage: scripts/package.sh is its one build command, with OUT_DIR and the revision.
    runs = [i[4:] for i in build if i.upper().startswith("RUN ")]
    builds = [r for r in runs if "scripts/package.sh" in r]
    expect(len(builds) == 1, f"Dockerfile: the build stage must run scripts/package.sh once, found {builds!r}")
    for r in runs:
        for cmd in re.split(r"&&|\|\||;", r):
            words = [w for w in cmd.split() if not re.fullmatch(r"\w+=\S*", w)]  # past VAR=value
            expect(not words or words[0] not in ("cmake", "cpack", "make", "ninja", "g++", "c++"),
                   f"Dockerfile: the build stage builds by hand ({cmd.strip()!r}); scripts/package.sh is the release's build")
    out_dir = None
    if builds:
        m = re.search(r"\bOUT_DIR=(\S+)", builds[0])
        expect(m, f"Dockerfile: scripts/package.sh runs without OUT_DIR: {builds[0]!r}")
        out_dir = m.group(1).rstrip("/") if m else None
        expect(re.search(r'\bDELAYD_REVISION="?\$\{?DELAYD_REVISION\b', builds[0]),
               f"Dockerfile: scripts/package.sh is not given DELAYD_REVISION from the ARG: {builds[0]!r}")
    expect(any(re.fullmatch(r"ARG DELAYD_REVISION(=\S*)?", i) for i in build),
           "Dockerfile: no ARG DELAYD_REVISION in the build stage (the context has no .git)")
    expect(not any(i.upper().startswith("ENV ") and "BUILD_DIR" in i for i in build),
           "Dockerfile: BUILD_DIR would make scripts/package.sh package another build than the release's")
    # What scripts/package.sh builds: Release, no tests, no benchmarks, the two binaries.
    pkg = read(root, "scripts/package.sh").replace("\\\n", " ")
    configure = [line for line in pkg.splitlines() if re.search(r"\bcmake -S ", line)]
    expect(len(configure) == 1 and all(f in configure[0] for f in (
        "-DCMAKE_BUILD_TYPE=Release", "-DDELAYD_BUILD_TESTS=OFF", "-DDELAYD_BUILD_BENCH=OFF")),
        f"scripts/package.sh: expected one Release configure without tests and benchmarks, found {configure!r}")
    expect(re.search(r"cmake --build .*--target delayd delayctl", pkg),
           "scripts/package.sh: does not build the targets delayd and delayctl")
    expect("cpack -G DEB" in pkg, "scripts/package.sh: does not run cpack -G DEB")
    for tool in ("dpkg-dev", "file"):
        expect(tool in apt_packages(build), f"Dockerfile: the build stage does not install {tool} (CPack's dpkg-shlibdeps)")

    # Runtime stage: the package from the build stage, installed with its Depends, and the
    # librdkafka the build stage made (scripts/librdkafka.sh --install DIR), loaded first.
    copies = [i for i in final if i.upper().startswith("COPY ")]
    deb_copy = [c for c in copies if f"--from={alias}" in c and ".deb" in c]
    expect(len(deb_copy) == 1 and out_dir and f"{out_dir}/" in deb_copy[0],
           f"Dockerfile: the runtime stage must copy the package from {alias}:{out_dir}/, found {copies!r}")
    kafka_builds = [r for r in runs if "scripts/librdkafka.sh" in r]
    m = re.search(r"scripts/librdkafka\.sh --install (\S+)", kafka_builds[0]) if len(kafka_builds) == 1 else None
    expect(m, f"Dockerfile: the build stage must run scripts/librdkafka.sh --install DIR once, found {kafka_builds!r}")
    lib_from = m.group(1).rstrip("/") if m else None
    lib_copy = [c for c in copies if lib_from and f"--from={alias} {lib_from}/ " in c + " "]
    expect(len(lib_copy) == 1, f"Dockerfile: the runtime stage must copy {alias}:{lib_from}/, found {copies!r}")
    lib_dir = lib_copy[0].split()[-1].rstrip("/") if lib_copy else None
    envs = [i for i in final if i.upper().startswith("ENV ") and "LD_LIBRARY_PATH=" in i]
    expect(lib_dir and len(envs) == 1 and re.search(rf"LD_LIBRARY_PATH={re.escape(lib_dir)}(:|\s|$)", envs[0]),
           f"Dockerfile: the runtime stage's LD_LIBRARY_PATH must start with {lib_dir}, found {envs!r}")
    expect(lib_dir and any(i.upper().startswith("RUN ") and f"=> {lib_dir}/librdkafka" in i.replace("\\", "")
                           for i in final),
           f"Dockerfile: no RUN checks that delayd loads librdkafka from {lib_dir}")
    expect(not [c for c in copies if c not in deb_copy + lib_copy],
           f"Dockerfile: the runtime stage copies more than the package and librdkafka: {copies!r}")
    installs = [i for i in final if i.upper().startswith("RUN ") and re.search(r"apt-get install .*\.deb", i)]
    expect(installs, "Dockerfile: the runtime stage does not apt-get install the package (its Depends come with it)")
    # The label names the project version.
    labels = " ".join(i for i in final if i.upper().startswith("LABEL "))
    m = re.search(r'org\.opencontainers\.image\.version="([^"]*)"', labels)
    expect(m and m.group(1) == version,
           f"Dockerfile: org.opencontainers.image.version is {m.group(1) if m else None!r}, CMakeLists.txt says {version}")
    # The user: delayd, with the uid the Helm chart runs as, made before the package (whose
    # postinst keeps it).
    m = re.search(r"^\s*runAsUser:\s*(\d+)", read(root, "deploy/helm/delayd/values.yaml"), re.M)
    uid = m.group(1) if m else None
    useradd = [i for i in final if re.search(r"\buseradd\b.*\bdelayd\b", i)]
    expect(uid and useradd and f"--uid {uid}" in useradd[0],
           f"Dockerfile: no useradd of delayd with the chart's runAsUser {uid}: {useradd!r}")
    if useradd and installs:
        a, b = final.index(useradd[0]), final.index(installs[0])
        expect(a < b or (a == b and useradd[0].find("useradd") < useradd[0].find("apt-get install")),
               "Dockerfile: the user delayd must exist before the package is installed")
    users = [i.split(None, 1)[1] for i in final if i.upper().startswith("USER ")]
    expect(users and users[-1] == "delayd", f"Dockerfile: the runtime stage must end as USER delayd, found {users!r}")
    if not problems:
        print(f"Dockerfile: builds with scripts/package.sh (Release), installs delayd_{version} as uid {uid}, "
              f"version label {version}, librdkafka from scripts/librdkafka.sh in {lib_dir}")


def delayd_defaults(binary):
    """delayd's built-in defaults: --print-config with no DELAYD_* variable in sight."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYD_")}
    try:
        out = subprocess.run([binary, "--print-config", "json"], env=env, capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CannotRun(f"cannot run {binary} --print-config json: {e}")
    return json.loads(out)


DELAYD_BIN = None


def main(argv):
    global DELAYD_BIN
    if len(argv) not in (3, 4) or argv[1] not in ("validate", "agree", "image"):
        print("usage: check_compose.py validate|agree|image <repo> [path to delayd]", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[2])
    DELAYD_BIN = argv[3] if len(argv) == 4 else None
    try:
        {"validate": validate, "agree": agree, "image": image}[argv[1]](root)
    except MissingTool as e:
        return requires.missing_tool(f"check_compose: cannot check: {e}")
    except CannotRun as e:
        print(f"check_compose: cannot check: {e}", file=sys.stderr)
        return 2
    label = "INVALID" if argv[1] == "validate" else "MISMATCH"
    for p in problems:
        print(f"{label}: {p}")
    if problems:
        print(f"check_compose {argv[1]}: {len(problems)} problem(s)")
        return 1
    print(f"check_compose {argv[1]}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
