#!/usr/bin/env bash
# What held requests cost (issue 29, docs/policy.md): a `broker serve` whose layer asks
# ("on_deny": "ask") gets N plain-HTTP requests (each with a 1 KiB body) to a host its policy does
# not list, all held at once waiting for a person. Reported: the broker's RSS and thread count
# before and with the N held (from /proc), the time `broker pending --json` takes to list them,
# and, after one `broker deny` (which refuses every request held for the host), how long until
# all N clients have their 403 approval_denied (all are checked).
# Usage: bench/asks.sh [path/to/broker]   (env: N=1000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
N=${N:-1000}
work=$(mktemp -d)
broker_pid=''
trap '[[ -n $broker_pid ]] && kill $broker_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
mkdir -m 700 "$work/run"
export XDG_RUNTIME_DIR=$work/run HOME=$work
echo '{"on_deny": "ask", "allow": [{"host": "listed.test"}]}' > "$work/policy.json"
"$broker" serve --listen 127.0.0.1:0 --policy "$work/policy.json" --log-dir "$work/logs" \
  --timeout ask=10m > "$work/ready" 2> "$work/stderr" &
broker_pid=$!
for _ in $(seq 100); do grep -q listening "$work/ready" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$work/ready")
status() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$broker_pid/status"; }

BROKER=$broker PORT=$port N=$N PID=$broker_pid python3 - <<'PY'
import json, os, resource, socket, subprocess, time
n, port, pid, broker = int(os.environ["N"]), int(os.environ["PORT"]), os.environ["PID"], os.environ["BROKER"]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, n + 256))
def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
def pending():
    t0 = time.monotonic()
    p = subprocess.run([broker, "pending", "--json"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout), time.monotonic() - t0
time.sleep(0.3)
rss0, threads0 = status("VmRSS"), status("Threads")
body = b"x" * 1024
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST http://asked.test/item/%d HTTP/1.1\r\nHost: asked.test\r\n"
              b"Content-Length: %d\r\n\r\n" % (i, len(body)) + body)
    socks.append(s)
deadline = time.monotonic() + 60
while True:
    held, took = pending()
    if len(held) >= n or time.monotonic() > deadline:
        break
    time.sleep(0.2)
assert len(held) == n, f"only {len(held)} of {n} held"
time.sleep(0.5)
rss1, threads1 = status("VmRSS"), status("Threads")
t0 = time.monotonic()
subprocess.run([broker, "deny", held[0]["id"]], capture_output=True, check=True)
refused = 0
for s in socks:
    s.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    refused += data.startswith(b"HTTP/1.1 403") and b"approval_denied" in data
    s.close()
released = time.monotonic() - t0
assert refused == n, f"{refused} of {n} got 403 approval_denied"
print(f"held requests        {n} (1 KiB body each)")
print(f"broker RSS           {rss0} KiB idle -> {rss1} KiB held: "
      f"{(rss1 - rss0) * 1024 / n / 1024:.1f} KiB per held request")
print(f"broker threads       {threads0} idle -> {threads1} held")
print(f"broker pending       {took * 1000:.0f} ms to list {n}")
print(f"broker deny          all {n} answered 403 approval_denied in {released * 1000:.0f} ms")
PY
