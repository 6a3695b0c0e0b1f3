#!/usr/bin/env bash
# HTTP/2 through the broker beside direct (issue 30), rounds interleaved, medians and ratios:
#   h2load c1   h2load -c 1 -m 10 (N requests of /small, 10 streams at once on one connection)
#   h2load c8   h2load -c 8 -m 10
#               direct: h2load to a private nginx speaking h2; broker: the same h2load inside
#               `broker wrap` (h2load has no proxy option: its connections are captured), the
#               default intercepting path with a credential bound to the host, HTTP/2 on both
#               sides (nginx chooses h2 when the broker offers it).
#               haproxy: the same h2load to haproxy 2.6 terminating TLS with h2 on both sides in front
#               of the same nginx (no policy, swap, scrubbing or audit): what a TLS-to-TLS HTTP/2
#               proxy gets on this machine, the anchor for the broker's ratio (issue 32).
#               nghttpx: the same, nghttpx terminating TLS with h2 on both sides (issue 55: every
#               contender of the HTTP/2 table speaks h2).
#   gRPC unary  calls/s of a python grpcio client (8 threads) to a grpcio server on TLS, direct
#               vs through `broker serve` (grpc.http_proxy), intercepted, h2 both sides.
#   idle h2     broker RSS per idle intercepted HTTP/2 connection: N clients through CONNECT,
#               TLS with ALPN h2, one GET, then silent; (after - before) / N. goal <= 64 KiB.
# Needs: nginx-light (http_v2), nghttp2-client (h2load), python3-grpcio, python3-h2; haproxy
# (optional: its column is nan without it).
# Usage: bench/h2.sh [path/to/broker] [rounds]   (env: N=20000 IDLE=500 CALLS=2000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-5}
N=${N:-20000} IDLE=${IDLE:-500} CALLS=${CALLS:-2000}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; for f in nginx haproxy nghttpx; do
      [[ -f $work/$f.pid ]] && kill "$(cat "$work/$f.pid")" 2>/dev/null; done; wait 2>/dev/null
      rm -rf "$work"' EXIT
die() { echo "$(basename "$0"): $*" >&2; exit 1; }
command -v h2load > /dev/null || die "h2load not found (apt-get install nghttp2-client)"
[[ -f $PEERS/leaf.pem ]] || "${SHARED:-$root/../shared}/bench/setup-peers.sh"
source "$root/bench/policies.sh"
PY=/usr/bin/python3  # Debian's, where python3-grpcio and python3-h2 are
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

source "$root/bench/h2_peers.sh"
map=(--connect-to "api.example.test:8443:127.0.0.1:$port" --upstream-ca "$PEERS/upstream-ca.pem")

nport=
if command -v nghttpx > /dev/null; then
  nport=$(free_port)
  nghttpx --daemon --pid-file="$work/nghttpx.pid" --conf=/dev/null \
    --frontend="127.0.0.1,$nport" --backend="127.0.0.1,$port;;tls;sni=api.example.test;proto=h2" \
    --cacert="$PEERS/upstream-ca.pem" --workers=2 --no-ocsp --no-via \
    --errorlog-file="$work/nghttpx.err" "$PEERS/leaf.key" "$PEERS/leaf.pem" < /dev/null \
    2>> "$work/nghttpx.err" || nport=
  for _ in $(seq 50); do [[ -z $nport ]] || [[ -s $work/nghttpx.pid ]] && break; sleep 0.1; done
fi

# h2load's requests/s, or nan when any request failed.
h2rate() { # h2load args...
  local out
  out=$("$@" 2>&1) || { echo nan; return; }
  grep -q "requests: $N total, $N started, $N done, $N succeeded" <<< "$out" || { echo nan; return; }
  grep -o 'finished in [0-9.]*[a-z]*, [0-9.]* req/s' <<< "$out" | awk '{print $4}'
}
direct_h2load() { h2rate h2load -n "$N" "$@" "https://127.0.0.1:$port/small"; }
haproxy_h2load() {
  if [[ -n $hport ]]; then h2rate h2load -n "$N" "$@" "https://127.0.0.1:$hport/small"; else echo nan; fi
}
nghttpx_h2load() {
  if [[ -n $nport ]]; then h2rate h2load -n "$N" "$@" "https://127.0.0.1:$nport/small"; else echo nan; fi
}
broker_h2load() {
  h2rate "$broker" wrap --policy "$work/mitm.json" --log-dir "$work/wrap-logs" "${map[@]}" \
    --log-level warn -- h2load -n "$N" "$@" https://api.example.test:8443/small
}

# A grpcio server on TLS (the peer's certificate for api.example.test) and a client that makes
# CALLS unary calls from 8 threads, direct or through a proxy; prints calls/s.
cat > "$work/grpc_bench.py" <<'PY'
import sys, time, threading
from concurrent import futures
import grpc
mode, peers = sys.argv[1], sys.argv[2]
if mode == "serve":
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    echo = grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {"Unary": echo}),))
    creds = grpc.ssl_server_credentials([(open(peers + "/leaf.key", "rb").read(), open(peers + "/leaf.pem", "rb").read())])
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    print(port, flush=True)
    server.wait_for_termination()
port, calls, ca, proxy = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
options = [("grpc.ssl_target_name_override", "api.example.test")]
target = f"127.0.0.1:{port}"
if proxy != "-":
    options = [("grpc.http_proxy", proxy)]
    target = f"api.example.test:8443"
ch = grpc.secure_channel(target, grpc.ssl_channel_credentials(open(ca, "rb").read()), options)
call = ch.unary_unary("/bench.Echo/Unary")
call(b"warm", timeout=10)
def worker(n):
    for _ in range(n):
        call(b"x" * 100, timeout=10)
t0 = time.time()
threads = [threading.Thread(target=worker, args=(calls // 8,)) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(calls // 8 * 8 / (time.time() - t0))
PY
"$PY" "$work/grpc_bench.py" serve "$PEERS" > "$work/grpc.port" 2> "$work/grpc.err" &
pids+=($!)
for _ in $(seq 50); do [[ -s $work/grpc.port ]] && break; sleep 0.1; done
grpc_port=$(head -1 "$work/grpc.port")
"$broker" serve --listen 127.0.0.1:0 --policy "$work/mitm.json" --log-dir "$work/serve-logs" \
  --ca-dir "$work/ca" --upstream-ca "$PEERS/upstream-ca.pem" \
  --connect-to "api.example.test:8443:127.0.0.1:$grpc_port" --log-level warn > "$work/serve.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
grpc_proxy=$(grep -o 'http://[0-9.:]*' "$work/serve.out" | head -1)
grpc_rate() { # proxy ca
  "$PY" "$work/grpc_bench.py" client "$PEERS" "$grpc_port" "$CALLS" "$2" "$1" 2>>"$work/grpc-client.err" ||
    { tail -3 "$work/grpc-client.err" >&2; echo nan; }
}

for round in $(seq "$rounds"); do
  echo "c1 direct $(direct_h2load -c 1 -m 10)" >> "$work/results"
  echo "c1 broker $(broker_h2load -c 1 -m 10)" >> "$work/results"
  echo "c1 haproxy $(haproxy_h2load -c 1 -m 10)" >> "$work/results"
  echo "c1 nghttpx $(nghttpx_h2load -c 1 -m 10)" >> "$work/results"
  echo "c8 direct $(direct_h2load -c 8 -m 10)" >> "$work/results"
  echo "c8 broker $(broker_h2load -c 8 -m 10)" >> "$work/results"
  echo "c8 haproxy $(haproxy_h2load -c 8 -m 10)" >> "$work/results"
  echo "c8 nghttpx $(nghttpx_h2load -c 8 -m 10)" >> "$work/results"
  echo "grpc direct $(grpc_rate - "$PEERS/upstream-ca.pem")" >> "$work/results"
  echo "grpc broker $(grpc_rate "$grpc_proxy" "$work/ca/ca.pem")" >> "$work/results"
done

# Idle intercepted HTTP/2 connections: RSS per connection on a fresh broker.
"$broker" serve --listen 127.0.0.1:0 --policy "$work/mitm.json" --log-dir "$work/idle-logs" \
  --ca-dir "$work/ca" "${map[@]}" --log-level warn > "$work/idle.out" 2>&1 &
idle_pid=$!
pids+=($idle_pid)
for _ in $(seq 50); do grep -q listening "$work/idle.out" 2>/dev/null && break; sleep 0.1; done
idle_proxy=$(grep -o 'http://[0-9.:]*' "$work/idle.out" | head -1 | sed 's|http://||')
cat > "$work/idle_h2.py" <<'PY'
import socket, ssl, sys, time
import h2.connection, h2.config, h2.events
host, port = sys.argv[1].split(":")
n, ca, pid = int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def open_one():
    s = socket.create_connection((host, int(port)))
    s.sendall(b"CONNECT api.example.test:8443 HTTP/1.1\r\nHost: api.example.test:8443\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname="api.example.test")
    assert t.selected_alpn_protocol() == "h2"
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", "api.example.test:8443"), (":path", "/small")], end_stream=True)
    t.sendall(c.data_to_send())
    done = False
    while not done:
        for e in c.receive_data(t.recv(65536)):
            if isinstance(e, h2.events.StreamEnded):
                done = True
        t.sendall(c.data_to_send())
    return t, c
warm = [open_one() for _ in range(20)]
time.sleep(1)
before = rss()
conns = [open_one() for _ in range(n)]
time.sleep(2)
after = rss()
print((after - before) / n)
PY
idle_kib=$("$PY" "$work/idle_h2.py" "$idle_proxy" "$IDLE" "$work/ca/ca.pem" "$idle_pid" 2>"$work/idle.err" || echo nan)
[[ $idle_kib == nan ]] && cat "$work/idle.err" >&2

python3 - "$work/results" "$idle_kib" "$IDLE" <<'PY'
import math, statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def med(metric, who):
    xs = [float(r[2]) for r in rows if r[0] == metric and r[1] == who and r[2] != "nan"]
    return statistics.median(xs) if xs else math.nan
print(f"{'':14} {'direct':>10} {'broker':>10} {'ratio':>7} goal    {'haproxy':>10} {'ratio':>7}"
      f" {'nghttpx':>10} {'ratio':>7}")
for metric, label in (("c1", "h2load c1 m10"), ("c8", "h2load c8 m10"), ("grpc", "gRPC unary")):
    d, b = med(metric, "direct"), med(metric, "broker")
    anchor = ""
    if metric != "grpc":
        for peer in ("haproxy", "nghttpx"):
            h = med(metric, peer)
            anchor += f"{h:10.0f} {h / d:7.2f} "
    print(f"{label:14} {d:10.0f} {b:10.0f} {b / d:7.2f} >= 0.6  {anchor}")
print(f"{'idle h2 conn':14} {sys.argv[2]:>10} KiB of broker RSS each ({sys.argv[3]} connections), goal <= 64 KiB")
PY
