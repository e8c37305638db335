"""An MCP server that speaks only protocol 2026-07-28 (stateless: no
`initialize` handshake, `server/discover` instead), as servers that dropped
the stateful lifecycle do. For the upstream client's test
(host/cli/tests/all/upstream.rs). Standard library only.

Usage: modern_only.py PORT_FILE   (writes the port it listens on, serves
until killed, and stops by itself after 120 s)

It serves `echo`; `pester`, which asks 40 questions (`input_required`)
whatever the answers, and `answered`, how many answers each retry carried;
and `seen`, whose result is each request's method and
MCP-Protocol-Version header so far.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "2026-07-28"
SEEN = []
# How many answers each retry of `pester` carried.
ANSWERED = []

TOOLS = [
    {
        "name": "echo",
        "description": "Says the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "seen", "description": "What this server was sent.", "inputSchema": {"type": "object"}},
    {"name": "pester", "description": "Asks 40 questions again, whatever the answers.", "inputSchema": {"type": "object"}},
    {"name": "answered", "description": "How many answers each retry of pester carried.", "inputSchema": {"type": "object"}},
]


def result(request):
    method = request.get("method")
    if method == "server/discover":
        return {
            "resultType": "complete",
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-only", "version": "1.0.0"}},
        }
    if method == "tools/list":
        return {"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "private"}
    if method == "tools/call":
        params = request.get("params") or {}
        if params.get("name") == "echo":
            text = (params.get("arguments") or {}).get("text", "")
            return {"resultType": "complete", "content": [{"type": "text", "text": f"echo: {text}"}]}
        if params.get("name") == "pester":
            rounds = int(params.get("requestState") or 0) + 1
            if rounds > 1:
                ANSWERED.append(len(params.get("inputResponses") or {}))
            question = {"method": "elicitation/create", "params": {
                "message": f"Round {rounds}: sure?",
                "requestedSchema": {"type": "object", "properties": {"confirmed": {"type": "boolean"}}},
            }}
            return {
                "resultType": "input_required",
                "inputRequests": {f"q{i}": question for i in range(40)},
                "requestState": str(rounds),
            }
        if params.get("name") == "answered":
            return {"resultType": "complete", "content": [{"type": "text", "text": json.dumps(ANSWERED)}]}
        if params.get("name") == "seen":
            return {"resultType": "complete", "content": [{"type": "text", "text": json.dumps(SEEN)}]}
    return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            request = json.loads(body)
        except ValueError:
            return self.send_error(400)
        version = self.headers.get("MCP-Protocol-Version")
        method = request.get("method")
        SEEN.append([method, version])
        if "id" not in request:
            self.send_response(202)
            self.end_headers()
            return
        if method == "initialize" or version != VERSION and method != "server/discover":
            # What such a server answers the old handshake.
            answer = {"jsonrpc": "2.0", "id": request["id"],
                      "error": {"code": -32600, "message": f"unsupported protocol version {version!r}; this server speaks {VERSION}"}}
            status = 400
        else:
            found = result(request)
            answer = {"jsonrpc": "2.0", "id": request["id"]}
            if found is None:
                answer["error"] = {"code": -32601, "message": f"method not found: {method}"}
            else:
                answer["result"] = found
            status = 200
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(405)
        self.end_headers()

    do_DELETE = do_GET


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    threading.Timer(120, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
