"""An MCP server that speaks only protocol 2026-07-28 (stateless: no
`initialize` handshake, `server/discover` instead), as servers that dropped
the stateful lifecycle do. For the upstream client's test
(host/cli/tests/all/upstream.rs). Standard library only.

Usage: modern_only.py PORT_FILE [--oauth]   (writes the port it listens
on, serves until killed, and stops by itself after 120 s)

With --oauth, /mcp wants a bearer token from the authorization server it
also is (protected resource metadata, authorization server metadata,
dynamic registration, PKCE S256, `iss` in the response): its authorization
page wants a person, who approves by following the page's link.

It serves `echo`; `pester`, which asks 40 questions (`input_required`)
whatever the answers, and `answered`, how many answers each retry carried;
and `seen`, whose result is each request's method and
MCP-Protocol-Version header so far.
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

OAUTH = "--oauth" in sys.argv
# code -> (code_challenge, redirect_uri); the tokens issued.
CODES = {}
TOKENS = set()
REFRESH = set()

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

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def send_json(self, status, value, headers=()):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def oauth_get(self):
        """The authorization server's and the resource's documents, and
        the page a person approves on."""
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            return self.send_json(200, {"resource": self.base() + "/mcp", "authorization_servers": [self.base()]})
        if url.path == "/.well-known/oauth-authorization-server":
            return self.send_json(200, {
                "issuer": self.base(), "authorization_endpoint": self.base() + "/authorize",
                "token_endpoint": self.base() + "/token", "registration_endpoint": self.base() + "/register",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
                "token_endpoint_auth_methods_supported": ["none"],
            })
        if url.path == "/authorize":
            # A person is needed: the page links to the approval.
            code = secrets.token_hex(8)
            CODES[code] = (query.get("code_challenge"), query["redirect_uri"])
            back = query["redirect_uri"] + "?" + urlencode({"code": code, "state": query.get("state", ""), "iss": self.base()})
            page = f"Approve gadget-host? approve: /approve?{urlencode({'to': back})}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            return self.wfile.write(page)
        if url.path == "/revoke":
            # Every access token stops working (refresh tokens still do).
            TOKENS.clear()
            return self.send_json(200, {"revoked": True})
        if url.path == "/approve":
            self.send_response(302)
            self.send_header("Location", query["to"])
            self.send_header("Content-Length", "0")
            return self.end_headers()
        self.send_response(404)
        self.end_headers()

    def oauth_post(self, body):
        """Registration and the token endpoint; False for /mcp."""
        path = urlparse(self.path).path
        if path == "/register":
            registration = json.loads(body)
            return self.send_json(201, {"client_id": "client-" + secrets.token_hex(4),
                                        "redirect_uris": registration.get("redirect_uris", []),
                                        "token_endpoint_auth_method": "none"}) or True
        if path == "/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            if form.get("grant_type") == "refresh_token":
                if form.get("refresh_token") not in REFRESH:
                    return self.send_json(400, {"error": "invalid_grant"}) or True
            else:
                challenge, _ = CODES.pop(form.get("code"), (None, None))
                verifier = form.get("code_verifier", "").encode()
                computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if challenge is None or computed != challenge:
                    return self.send_json(400, {"error": "invalid_grant"}) or True
            token, refresh = "tok-" + secrets.token_hex(8), "ref-" + secrets.token_hex(8)
            TOKENS.add(token)
            REFRESH.add(refresh)
            return self.send_json(200, {"access_token": token, "refresh_token": refresh,
                                        "token_type": "Bearer", "expires_in": 3600}) or True
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[len("Bearer "):] not in TOKENS:
            challenge = f'Bearer resource_metadata="{self.base()}/.well-known/oauth-protected-resource/mcp"'
            return self.send_json(401, {"error": "invalid_token"}, [("WWW-Authenticate", challenge)]) or True
        return False

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if OAUTH and self.oauth_post(body):
            return
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
        if OAUTH and not self.path.startswith("/mcp"):
            return self.oauth_get()
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
