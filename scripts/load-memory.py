"""Memory under a hostile load (issue 54): CALLS (default 10,000)
`tools/call` requests on CLIENTS (32) keep-alive connections to `gadget
serve`, one in ten to a hostile gadget of the misbehave fixture (a memory
bomb, an endless loop, an oversized result, log and stdio floods, deep
recursion, a 20 MiB error, a panic; ONLY=NAME for one of them), the rest
to Calculator. Prints the server's RSS at 1,000, 2,000 and 5,000 calls and
at the end, its peak (sampled every 50 ms, and the kernel's VmHWM), and the
curve. EXTRA adds lines to the policy's [limits] (host-memory-mib = 384).

Run: python3 scripts/load-memory.py target/release/gadget \
         target/wasm32-wasip2/guest/fixture_misbehave.wasm plugins
"""
import http.client, json, os, subprocess, sys, threading, time, socket

gadget, misbehave, plugins = sys.argv[1], sys.argv[2], sys.argv[3]
calls = int(os.environ.get("CALLS", "10000"))
clients = int(os.environ.get('CLIENTS', '32'))
HOSTILE = [("MemoryBomb", {}), ("LoopForever", {}), ("Oversized", {"bytes": 4_000_000}),
           ("LogFlood", {}), ("StdioFlood", {}), ("Recurse", {}), ("HugeError", {}), ("Panic", {})]
only = os.environ.get("ONLY")
if only:
    HOSTILE = [h for h in HOSTILE if h[0] == only]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
import tempfile
policy = os.path.join(tempfile.mkdtemp(), "policy.toml")
open(policy, "w").write("[limits]\nmax-timeout-ms = 200\n" + os.environ.get("EXTRA", ""))
server = subprocess.Popen([gadget, "--config", policy, "--plugins", plugins, "--plugins", misbehave,
                           "serve", "--listen", f"127.0.0.1:{port}", "--max-concurrent-calls", "256"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def status(key):
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) // 1024
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", port)).close(); break
    except OSError:
        time.sleep(0.05)
nxt = [0]; lock = threading.Lock(); marks = {}; wrong = [0]
samples = []
def body(i):
    if i % 10 == 0:
        name, args = HOSTILE[(i // 10) % len(HOSTILE)]
    else:
        name, args = "Calculator", {"operation": "add", "a": i, "b": 1}
    return name, json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": name, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
def client():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while True:
        with lock:
            nxt[0] += 1; i = nxt[0]
        if i > calls:
            return
        name, data = body(i)
        try:
            conn.request("POST", "/mcp", data, {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call", "Mcp-Name": name})
            r = conn.getresponse(); r.read()
            if r.status != 200: wrong[0] += 1
        except Exception:
            wrong[0] += 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        if i in (1000, 2000, 5000, calls):
            marks[i] = status("VmRSS:")
def sampler():
    while server.poll() is None and nxt[0] <= calls:
        samples.append((nxt[0], status("VmRSS:"))); time.sleep(0.05)
t0 = time.time()
threads = [threading.Thread(target=client) for _ in range(clients)]
st = threading.Thread(target=sampler); st.start()
for t in threads: t.start()
for t in threads: t.join()
took = time.time() - t0
time.sleep(1)
after = status("VmRSS:")
hwm = status("VmHWM:")
server.kill(); server.wait()
peak = max(r for _, r in samples) if samples else 0
print(f"{calls} calls in {took:.1f} s, wrong {wrong[0]}; RSS MiB at 1000: {marks.get(1000)}, 2000: {marks.get(2000)}, 5000: {marks.get(5000)}, end: {marks.get(calls)}, 1 s after: {after}; peak sampled {peak}, VmHWM {hwm}; peak/at-1000 {peak / max(1, marks.get(1000) or 1):.2f}")
curve = samples[:: max(1, len(samples)//20)]
print("curve (calls, MiB):", curve)
