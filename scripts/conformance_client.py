#!/usr/bin/env python3
"""The client leg of the official MCP conformance suite: what the suite runs
as "the client" (`conformance client --command "python3
scripts/conformance_client.py"`, the scenario server's URL appended, the
scenario named in MCP_CONFORMANCE_SCENARIO). The client under test is
gadget-host's upstream client (`[mcp-servers.NAME] url = ...`): this script
writes a policy naming the scenario's server, lists its tools through
`gadget` and runs a model's call of each one (`gadget run`) with arguments
its schema accepts, as a gadget-host user would; what the server asks
(elicitation) is answered from `--answers` (a form's JSON, accepting).

The auth scenarios are met by the upstream client's OAuth: the scenario's
authorization server grants without a person, and the tokens are kept
(GADGET_STATE_DIR, this run's own) from the listing to the calls, as they
are between a user's runs. What an operator would configure comes from the
scenario's context: a client registered out of band (pre-registration),
and where the host's client ID metadata document is published.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GADGET = ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "gadget"
PREFIX = "conformance_"
# Where the suite's scenarios expect a client's ID metadata document.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
# Each gadget command is bounded: the suite's own per-scenario timeout is
# 30 s, and a hung command must not outlive it.
COMMAND_SECONDS = 20


def arguments_for(schema):
    """The smallest arguments the schema's required properties accept."""
    samples = {"number": 1, "integer": 1, "string": "tést ✓", "boolean": True, "object": {}, "array": []}
    properties = (schema or {}).get("properties") or {}
    found = {}
    for name in (schema or {}).get("required") or []:
        kind = (properties.get(name) or {}).get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        found[name] = samples.get(kind, "test")
    return found


def gadget(policy, *args):
    env = dict(os.environ, GADGET_STATE_DIR=str(policy.parent / "state"), CONFORMANCE_SECRET=SECRET)
    return subprocess.run(
        [str(GADGET), "--config", str(policy), "--plugins", str(policy.parent / "no-plugins"), *args],
        capture_output=True, text=True, timeout=COMMAND_SECONDS, env=env,
    )


def oauth_table():
    """The policy's `oauth` for the scenario: its pre-registered client, if
    it gives one, and the client ID metadata document's address."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    fields = [f"client-metadata-url = {json.dumps(CLIENT_METADATA_URL)}"]
    if context.get("client_id") and context.get("client_secret"):
        global SECRET
        SECRET = context["client_secret"]
        fields.append(f"client-id = {json.dumps(context['client_id'])}")
        fields.append('client-secret-env = "CONFORMANCE_SECRET"')
    return "{ " + ", ".join(fields) + " }"


SECRET = ""


def main():
    url = sys.argv[-1]
    with tempfile.TemporaryDirectory() as home:
        policy = Path(home) / "policy.toml"
        (Path(home) / "no-plugins").mkdir()
        policy.write_text(f'[mcp-servers.conformance]\nurl = {json.dumps(url)}\nprefix = "{PREFIX}"\n'
                          f'oauth = {oauth_table()}\n')
        listed = gadget(policy, "schemas", "--format", "mcp")
        sys.stderr.write(listed.stderr)
        if listed.returncode != 0:
            return listed.returncode
        answers = Path(home) / "answers.txt"
        answers.write_text('{"confirmed": true}\n' * 8)
        for number, tool in enumerate(json.loads(listed.stdout or "[]")):
            if not tool["name"].startswith(PREFIX):
                continue
            block = [f"!!!GADGET_START:{tool['name']}:call_{number}"]
            for key, value in arguments_for(tool.get("inputSchema")).items():
                block += [f"!!!ARG:{key}", value if isinstance(value, str) else json.dumps(value)]
            response = Path(home) / "response.txt"
            response.write_text("\n".join(block + ["!!!GADGET_END", ""]))
            ran = gadget(policy, "run", "--answers", str(answers), str(response))
            print(f"{tool['name']}: exit {ran.returncode}\n{ran.stdout}{ran.stderr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
