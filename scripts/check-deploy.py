#!/usr/bin/env python3
"""The deployment, checked without Docker or a cluster.

1. deploy/kubernetes/*.yaml against Kubernetes' schemas (kubernetes-validate,
   strict), then what a schema cannot see: the image's USER is numeric and is
   the pod's runAsUser (runAsNonRoot refuses a named user), the scrape
   annotation names a declared port that --metrics-listen serves, and
   replicas share what they must: one GADGET_APPROVAL_KEY from a Secret, and
   a state store (GADGET_STATE_URL) that a Service and a Deployment in the
   manifests serve, with the password from the same Secret.
1b. deploy/compose.yaml the same way: two or more replicas with one approval
   key and one store, a Redis service, and a balancer whose configuration
   lists every replica; its policy loads (`gadget list`).
2. The image's file layout built from deploy/Dockerfile's second stage in a
   temporary root (binary, plugins, cache, its ENV), its warm-up step run as
   the image's numeric user, then its ENTRYPOINT plus the manifest's args
   started (addresses moved to free loopback ports, the store to a
   redis-server started here with a password): health, ready once the store
   answers, the store named without its password, /metrics with no
   token on the metrics port, an MCP initialize with an in-cluster Host
   header and the token, the entrypoint started with --auth-jwks in place of
   the image's CMD (its default authentication), a foreign Host refused, JSON logs without colour
   codes, SIGHUP reload logged, SIGTERM stops it.

Run by scripts/test.sh after the release build and the guests:
    .tools/k8s/bin/python scripts/check-deploy.py
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
COMPOSE = ROOT / "deploy" / "compose.yaml"
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
# Bounded waits: everything here is local and answers in milliseconds.
START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 10


def fail(message):
    print(f"check-deploy: {message}", file=sys.stderr)
    sys.exit(1)


def runtime_stage(text):
    """The Dockerfile's last stage: its instructions, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    last_from = max(i for i, l in enumerate(lines) if l.startswith("FROM "))
    return lines[last_from:]


def instruction(stage, name):
    return [l[len(name) + 1 :].strip() for l in stage if l.startswith(name + " ")]


def check_manifests(uid):
    validate = Path(sys.executable).parent / "kubernetes-validate"
    result = subprocess.run(
        [str(validate), "--strict", "--quiet", *map(str, MANIFESTS)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        fail(f"kubernetes-validate:\n{result.stdout}{result.stderr}")
    docs = [(path, doc) for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]
    for path, doc in docs:
        if doc.get("kind") != "Deployment" or not is_gadget_host(doc):
            continue
        check_shared_state(path.name, doc, [d for _, d in docs])
        pod = doc["spec"]["template"]
        security = pod["spec"].get("securityContext", {})
        if security.get("runAsNonRoot") and security.get("runAsUser") != uid:
            fail(f"{path.name}: runAsNonRoot needs runAsUser: {uid}, the image's numeric USER")
        container = pod["spec"]["containers"][0]
        ports = {p["containerPort"]: p.get("name") for p in container.get("ports", [])}
        check_rollout(path.name, pod["spec"], container)
        scrape = pod["metadata"].get("annotations", {}).get("prometheus.io/port")
        if scrape is not None and int(scrape) not in ports:
            fail(f"{path.name}: prometheus.io/port {scrape} is not a container port ({sorted(ports)})")
        yield doc, container


def is_gadget_host(deployment):
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return containers[0].get("image", "").startswith("gadget-host")


def env_of(container):
    return {item["name"]: item for item in container.get("env", [])}


def check_shared_state(name, deployment, docs):
    """Replicas share one approval key (else an ask answered on another
    replica is refused as not signed by it) and one state store (else a task
    is unknown to the next replica and a limit counts once per replica); the
    store's host is a Service of these manifests, backed by a Deployment,
    with the password from the same Secret."""
    if deployment["spec"].get("replicas", 1) < 2:
        return
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = env_of(container)
    key = env.get("GADGET_APPROVAL_KEY", {})
    if "secretKeyRef" not in key.get("valueFrom", {}):
        fail(f"{name}: {deployment['spec']['replicas']} replicas need one GADGET_APPROVAL_KEY from a Secret")
    url = env.get("GADGET_STATE_URL", {}).get("value")
    if not url:
        fail(f"{name}: the replicas need a shared store: GADGET_STATE_URL (or --state)")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("redis", "rediss") or parsed.password:
        fail(f"{name}: GADGET_STATE_URL must be redis:// or rediss://, its password in GADGET_STATE_PASSWORD: {url}")
    password = env.get("GADGET_STATE_PASSWORD", {}).get("valueFrom", {}).get("secretKeyRef")
    if password is None:
        fail(f"{name}: the store's password must come from a Secret (GADGET_STATE_PASSWORD)")
    if "." in (parsed.hostname or ""):
        return  # an external store, named by the operator
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    service = services.get(parsed.hostname)
    if service is None or parsed.port not in [p["port"] for p in service["spec"]["ports"]]:
        fail(f"{name}: GADGET_STATE_URL names {parsed.hostname}:{parsed.port}, which no Service here serves")
    selector = service["spec"]["selector"]
    backing = [d for d in docs if d.get("kind") == "Deployment"
               and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
    if not backing:
        fail(f"{name}: no Deployment backs the store's Service {parsed.hostname}")
    store = backing[0]["spec"]["template"]["spec"]["containers"][0]
    store_env = env_of(store)
    shared = [item for item in store_env.values()
              if item.get("valueFrom", {}).get("secretKeyRef") == password]
    if not shared or not any(f"$({item['name']})" in store.get("args", []) for item in shared):
        fail(f"{name}: the store {parsed.hostname} does not require the password the replicas are given")


def check_compose(binary):
    """deploy/compose.yaml: replicas of the image sharing one approval key and
    one store, a Redis, a balancer that lists every replica, a policy that
    loads (`gadget list`)."""
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    replicas = {name: svc for name, svc in services.items() if svc.get("image", "").startswith("gadget-host")}
    if len(replicas) < 2:
        fail(f"compose.yaml: {len(replicas)} replicas; scale-out needs two or more")
    for svc in replicas.values():
        if not {"--auth-token-env", "--auth-jwks"} & {a.split("=")[0] for a in svc.get("command", [])}:
            fail("compose.yaml: a replica's command replaces the image's CMD and names no authentication")
    for what in ("GADGET_APPROVAL_KEY", "GADGET_STATE_URL", "GADGET_STATE_PASSWORD", "GADGET_TOKEN"):
        values = {str(svc.get("environment", {}).get(what)) for svc in replicas.values()}
        if len(values) != 1 or values == {"None"}:
            fail(f"compose.yaml: the replicas do not share one {what}: {values}")
    store = urllib.parse.urlparse(next(iter(replicas.values()))["environment"]["GADGET_STATE_URL"])
    if store.hostname not in services or "redis" not in services[store.hostname].get("image", ""):
        fail(f"compose.yaml: the store {store.hostname} is not a Redis service here")
    if "--requirepass" not in services[store.hostname].get("command", []):
        fail("compose.yaml: the Redis service must require the replicas' password")
    balancers = [svc for svc in services.values() if "nginx" in svc.get("image", "")]
    if not balancers:
        fail("compose.yaml: no balancer in front of the replicas")
    config = None
    for volume in balancers[0].get("volumes", []):
        source, target = volume.split(":")[:2]
        if target == "/etc/nginx/nginx.conf":
            config = (COMPOSE.parent / source).read_text()
    if config is None:
        fail("compose.yaml: the balancer mounts no nginx.conf")
    for name in replicas:
        if not re.search(rf"server\s+{re.escape(name)}:8765\b", config):
            fail(f"compose.yaml: the balancer does not send to {name}:8765")
    for svc in replicas.values():
        for volume in svc.get("volumes", []):
            source, target = volume.split(":")[:2]
            if target == "/etc/gadget-host/config.toml":
                checked = subprocess.run([str(binary), "--config", str(COMPOSE.parent / source), "list"],
                                         capture_output=True, text=True)
                if checked.returncode != 0:
                    fail(f"compose.yaml: its policy {source} fails gadget list:\n{checked.stderr}")


def start_store(password):
    """A redis-server on a free loopback port, persistence off, with a
    password: the store the started image is given."""
    port = free_port()
    store = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--requirepass", password],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return store, port
        except OSError:
            if store.poll() is not None or time.monotonic() > deadline:
                fail("redis-server did not start (scripts/setup-tests.sh installs it)")
            time.sleep(0.05)


def wait_healthy(base, process, what):
    """Until `process` answers /healthz at `base` (bounded); fails with its
    stderr if it exits first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if request(base + "/healthz")[0] == 200:
                return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            fail(f"{what} did not start:\n{process.stderr.read() if process.poll() is not None else ''}")
        time.sleep(0.1)


def check_jwks_entrypoint(entrypoint, run_env, as_user, image):
    """The image's entrypoint with --auth-jwks in place of its CMD starts
    and refuses a request without a token: the entrypoint itself fixes no
    authentication that would conflict."""
    jwks = image / "jwks.json"
    x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    jwks.write_text(json.dumps({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "k1"}]}))
    os.chmod(jwks, 0o644)
    port = free_port()
    args = replace_address(entrypoint, "--listen", f"127.0.0.1:{port}")
    args = replace_address(args, "--metrics-listen", f"127.0.0.1:{free_port()}")
    jwt = subprocess.Popen(
        [*as_user, *args, "--auth-jwks", str(jwks), "--auth-audience", "https://gadgets.example/mcp"],
        env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", jwt, "the entrypoint with --auth-jwks")
        status, _ = request(f"http://127.0.0.1:{port}/mcp", "POST", {"Content-Type": "application/json"}, b"{}")
        if status != 401:
            fail(f"with --auth-jwks, a request without a token got {status}, not 401")
    finally:
        jwt.kill()
        jwt.wait()


def check_rollout(name, spec, container):
    """A rolling update loses no call: the pod keeps serving while the
    Service and the proxies stop sending to it (a preStop pause of at least
    two readiness periods, before SIGTERM starts the drain), and the grace
    period covers the pause, the drain and a margin."""
    pause = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    readiness = container.get("readinessProbe", {}).get("periodSeconds", 10)
    if pause is None or pause < 2 * readiness:
        fail(f"{name}: no preStop sleep of at least {2 * readiness} s (two readiness periods): "
             "a Service keeps sending to a pod that already refuses calls while it drains")
    drain_ms = next((int(a.split("=", 1)[1]) for a in container.get("args", [])
                     if a.startswith("--drain-timeout=")), 30000)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace < pause + drain_ms / 1000 + 5:
        fail(f"{name}: terminationGracePeriodSeconds {grace} does not cover the preStop pause "
             f"({pause} s), the drain ({drain_ms / 1000:g} s) and a 5 s margin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace_address(args, flag, address):
    """Moves `flag ADDR` or `flag=ADDR` to `address`."""
    out, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == flag:
            out += [flag, address]
            skip = True
        elif arg.startswith(flag + "="):
            out.append(f"{flag}={address}")
        else:
            out.append(arg)
    return out


def request(url, method="GET", headers=None, body=None):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=body)
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main():
    stage = runtime_stage(DOCKERFILE.read_text())
    user = instruction(stage, "USER")
    if not user or not re.fullmatch(r"\d+(:\d+)?", user[-1]):
        fail(f"the image's USER must be numeric (runAsNonRoot cannot check a name): {user}")
    uid = int(user[-1].split(":")[0])
    gid = int(user[-1].split(":")[1]) if ":" in user[-1] else uid
    deployments = list(check_manifests(uid))
    binary = ROOT / "target" / "release" / "gadget"
    if not binary.is_file():
        fail(f"{binary} is not built")
    check_compose(binary)
    if not deployments:
        fail("no Deployment in deploy/kubernetes")
    _, container = deployments[0]
    manifest_args = container.get("args", [])
    if not {"--auth-token-env", "--auth-jwks"} & {a.split("=")[0] for a in manifest_args}:
        fail("the manifest's args replace the image's CMD and name no authentication")

    entrypoint = json.loads(instruction(stage, "ENTRYPOINT")[-1])
    env = {}
    for line in instruction(stage, "ENV"):
        for key, value in re.findall(r"(\w+)=(\S+)", line):
            env[key] = value

    image = Path(tempfile.mkdtemp(prefix="gadget-image-"))
    server = None
    store_password = "check-deploy-store-password"
    store, store_port = start_store(store_password)
    try:
        os.chmod(image, 0o755)
        (image / "usr/local/bin").mkdir(parents=True)
        shutil.copy2(binary, image / "usr/local/bin/gadget")
        plugins = image / "opt/gadget/plugins"
        for plugin in sorted((ROOT / "plugins").iterdir()):
            wasm = list(plugin.glob("*.wasm"))
            if not (plugin / "plugin.toml").is_file() or not wasm:
                continue
            (plugins / plugin.name).mkdir(parents=True)
            for file in [plugin / "plugin.toml", *wasm]:
                shutil.copy2(file, plugins / plugin.name / file.name)
        cache = image / "var/lib/gadget/cache"
        cache.mkdir(parents=True)
        config_dir = image / "etc/gadget-host"
        config_dir.mkdir(parents=True)
        (config_dir / "config.toml").write_text('[plugins.web]\nhttp = ["https://example.com"]\n')
        for path in [image, *image.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o755 if path.name == "gadget" else 0o644)
        os.chown(image / "var/lib/gadget", uid, gid)
        os.chown(cache, uid, gid)

        run_env = {
            "PATH": f"{image}/usr/local/bin:/usr/bin:/bin",
            "HOME": str(image / "var/lib/gadget"),
        }
        for key, value in env.items():
            run_env[key] = str(image) + value if value.startswith("/") else value
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        if shutil.which("setpriv") is None or os.geteuid() != 0:
            as_user = []  # not root here: run as whoever we are
        warm = subprocess.run(
            [*as_user, "gadget", "list"], env=run_env, capture_output=True, text=True
        )
        if warm.returncode != 0:
            fail(f"the image's warm-up step (gadget list) failed:\n{warm.stderr}")
        if not any(cache.iterdir()):
            fail("the warm-up step left the compile cache empty")

        port, metrics_port = free_port(), free_port()
        args = entrypoint + manifest_args
        args = replace_address(args, "--listen", f"127.0.0.1:{port}")
        args = replace_address(args, "--metrics-listen", f"127.0.0.1:{metrics_port}")
        token = "check-deploy-token"
        server_env = dict(run_env, GADGET_TOKEN=token)
        secrets = {"GADGET_APPROVAL_KEY": "check-deploy-approval-key", "GADGET_STATE_PASSWORD": store_password}
        for item in container.get("env", []):
            if "value" in item:
                value = item["value"]
                server_env[item["name"]] = str(image) + value if value.startswith("/") else value
            elif item["name"] in secrets:
                server_env[item["name"]] = secrets[item["name"]]
        store_url = f"redis://127.0.0.1:{store_port}/0"
        if "GADGET_STATE_URL" in server_env:
            server_env["GADGET_STATE_URL"] = store_url
        server = subprocess.Popen(
            [*as_user, *args], env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, server, "gadget serve")

        if "GADGET_STATE_URL" in server_env:
            deadline = time.monotonic() + START_TIMEOUT_S
            while request(base + "/readyz")[0] != 200:
                if time.monotonic() > deadline:
                    fail(f"/readyz never said ready with the store at {store_url}")
                time.sleep(0.1)
            store.kill()
            store.wait()
            status, body = request(base + "/readyz")
            if status != 503 or "cannot be reached" not in body or store_password in body:
                fail(f"/readyz with the store gone: {status} {body}")

        status, body = request(f"http://127.0.0.1:{metrics_port}/metrics")
        if status != 200 or "gadget_" not in body:
            fail(f"/metrics on the metrics port: {status} {body[:200]}")
        if request(base + "/metrics")[0] != 401:
            fail("/metrics on the MCP port must need the token")

        initialize = json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "check-deploy", "version": "1"}},
        }).encode()
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        hosts = [a.split("=", 1)[1] for a in manifest_args if a.startswith("--allowed-host=")]
        if not any(h.endswith(".svc.cluster.local") for h in hosts):
            fail("the manifest must accept the Service's in-cluster DNS name (--allowed-host=...svc.cluster.local)")
        for host in hosts:
            status, body = request(base + "/mcp", "POST", dict(headers, Host=f"{host}:8765"), initialize)
            if status != 200:
                fail(f"initialize with Host {host}:8765 was refused: {status} {body[:200]}")
        status, _ = request(base + "/mcp", "POST", dict(headers, Host="evil.example"), initialize)
        if status == 200:
            fail("a foreign Host header was accepted")

        check_jwks_entrypoint(entrypoint, run_env, as_user, image)

        server.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            fail("gadget serve did not stop on SIGTERM")
        logs = server.stderr.read()
        if "\x1b[" in logs:
            fail("the logs carry colour codes off a terminal")
        lines = [l for l in logs.splitlines() if l.strip()]
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if line.startswith("{"):
                    fail(f"a log line is not JSON: {line}")
        messages = " | ".join(str(r.get("fields", {}).get("message", "")) for r in records)
        if "GADGET_STATE_URL" in server_env and f"shared in {store_url}" not in messages:
            fail(f"the start line does not name the shared store (logs: {messages})")
        if store_password in logs:
            fail("the store's password is in the logs")
        if "reloaded" not in messages:
            fail(f"SIGHUP's reload was not logged (logs: {messages})")
        if server.returncode != 0:
            fail(f"gadget serve exited with {server.returncode} on SIGTERM")
        print(f"check-deploy: manifests valid; image layout runs as {uid}:{gid}; "
              f"metrics, in-cluster Host names, the shared store and readiness, JSON logs, reload and stop "
              f"checked; compose.yaml's replicas, store and balancer agree")
    finally:
        if server is not None and server.poll() is None:
            server.kill()
        if store.poll() is None:
            store.kill()
        shutil.rmtree(image, ignore_errors=True)


if __name__ == "__main__":
    main()
