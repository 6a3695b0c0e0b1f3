# shellcheck shell=bash disable=SC2154
# Sourced by bench/footprint.sh and bench/scale.sh: finds or builds bench/loadgen, starts a
# private nginx (the ../shared/bench peer's certificate and files, on a free loopback port, with
# room for thousands of connections) and `broker serve` instances mapping api.example.test:8443
# onto it, and reads a process's RSS and fd count from /proc.
# Needs (set by the sourcing script): $root, $broker, $work (a scratch dir), $PEERS.

die() { echo "$(basename "$0"): $*" >&2; exit 1; }

command -v nginx > /dev/null || die "nginx not found (apt-get install nginx-light)"
command -v python3 > /dev/null || die "python3 not found"
[[ -x $broker ]] || die "no broker binary at $broker (build it, or pass its path as \$1)"
if [[ ! -f $PEERS/leaf.pem ]]; then
  "${SHARED:-$root/../shared}/bench/setup-peers.sh" ||
    die "no nginx peer in $PEERS (run ../shared/bench/setup-peers.sh)"
fi

# The loadgen: $LOADGEN, else a bench build dir's (brought up to date), else a new build-bench/.
find_loadgen() {
  if [[ -n ${LOADGEN:-} ]]; then loadgen=$LOADGEN; return; fi
  local dir
  for dir in "$root/build-bench" "$root/build"; do
    if grep -q 'BROKER_BENCH:BOOL=ON' "$dir/CMakeCache.txt" 2> /dev/null; then
      cmake --build "$dir" --target loadgen > "$work/loadgen-build.log" 2>&1 ||
        { cat "$work/loadgen-build.log" >&2; die "building loadgen in $dir failed"; }
      loadgen=$dir/bench/loadgen
      return
    fi
  done
  # bench/CMakeLists.txt asks for Google Benchmark even though loadgen does not use it.
  dpkg -s libbenchmark-dev > /dev/null 2>&1 ||
    die "no bench build dir, and building one needs libbenchmark-dev (apt-get install libbenchmark-dev)"
  echo "building loadgen in $root/build-bench ..." >&2
  { cmake -S "$root" -B "$root/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBROKER_BENCH=ON -DBROKER_TESTS=OFF &&
    cmake --build "$root/build-bench" -j2 --target loadgen; } > "$work/loadgen-build.log" 2>&1 ||
    { cat "$work/loadgen-build.log" >&2; die "building loadgen failed"; }
  loadgen=$root/build-bench/bench/loadgen
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A plain-HTTP listener on $status_port: stub_status at /status counts the connections nginx
# accepted, and the peer's files are there too (a plain-HTTP upstream, bench/gateway.sh).
# Long header and keep-alive timeouts: an idle tunnel that never sends a request must outlive
# the measurement (nginx closes it after client_header_timeout otherwise).
start_nginx() {
  nginx_port=$(free_port) status_port=$(free_port)
  cat > "$work/nginx.conf" <<NG
worker_processes 1;
worker_rlimit_nofile 40000;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 600s;
  client_header_timeout 600s;
  server {
    listen 127.0.0.1:$nginx_port ssl;
    server_name api.example.test;
    ssl_certificate $PEERS/leaf.pem;
    ssl_certificate_key $PEERS/leaf.key;
    root $PEERS/www;
    # An MCP server's answer to a tools/call, whatever is posted (bench/mcp.sh).
    location = /mcp {
      default_type application/json;
      return 200 '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}';
    }
  }
  server {
    listen 127.0.0.1:$status_port;
    root $PEERS/www;
    location = /status { stub_status; }
  }
}
NG
  nginx -c "$work/nginx.conf" -e "$work/nginx.err" || die "nginx did not start ($work/nginx.err)"
  local _
  for _ in $(seq 50); do
    curl -sf -o /dev/null --cacert "$PEERS/upstream-ca.pem" \
      --connect-to "api.example.test:8443:127.0.0.1:$nginx_port" https://api.example.test:8443/small &&
      return
    sleep 0.1
  done
  die "nginx on 127.0.0.1:$nginx_port does not answer"
}
# The connections nginx has accepted so far (the broker's upstream handshakes).
nginx_accepts() { curl -s "http://127.0.0.1:$status_port/status" | awk 'NR == 3 { print $1 }'; }
stop_nginx() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid")" 2> /dev/null
  rm -f "$work/nginx.pid"
}

# start_broker NAME POLICY [serve args...]: sets broker_pid and proxy (127.0.0.1:PORT).
start_broker() {
  local name=$1 policy=$2 _
  shift 2
  "$broker" serve --listen 127.0.0.1:0 --policy "$policy" --log-dir "$work/logs-$name" \
    --ca-dir "$work/ca" --upstream-ca "$PEERS/upstream-ca.pem" \
    --connect-to "api.example.test:8443:127.0.0.1:$nginx_port" --log-level warn "$@" \
    > "$work/$name.out" 2> "$work/$name.err" &
  broker_pid=$!
  for _ in $(seq 100); do
    proxy=$(grep -o 'listening on http://[0-9.:]*' "$work/$name.out" 2> /dev/null | sed 's|.*//||' || true)
    [[ -n $proxy ]] && return
    kill -0 "$broker_pid" 2> /dev/null || break
    sleep 0.1
  done
  cat "$work/$name.err" >&2
  die "broker serve ($name) did not start"
}
stop_broker() {
  kill "$broker_pid" 2> /dev/null && wait "$broker_pid" 2> /dev/null
  broker_pid=
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
fd_count() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }

# Waits until the process's fd count has not moved for 2 s (at most 60 s): connections drained.
settle() {
  local pid=$1 last=-1 same=0 now _
  for _ in $(seq 240); do
    now=$(fd_count "$pid")
    if [[ $now == "$last" ]]; then
      same=$((same + 1))
      ((same >= 8)) && return
    else
      same=0 last=$now
    fi
    sleep 0.25
  done
}

# hold_idle OUT ARGS...: runs `loadgen idle ARGS` in the background and returns once it has set
# up every connection (its "ready" line is in OUT); sets idle_pid. end_idle stops it.
hold_idle() {
  local out=$1 _
  shift
  "$loadgen" idle "$@" > "$out" 2> "$out.err" &
  idle_pid=$!
  while ! grep -q '"ready"' "$out" 2> /dev/null; do
    kill -0 "$idle_pid" 2> /dev/null || { cat "$out.err" >&2; die "loadgen idle failed"; }
    sleep 0.2
  done
}
end_idle() {
  kill -TERM "$idle_pid" 2> /dev/null
  wait "$idle_pid" 2> /dev/null || true
  idle_pid=
}

# json FILE KEY [LINE-PATTERN]: a field of the (last matching) JSON line of FILE.
json() {
  python3 - "$@" <<'PY'
import json, sys
path, key = sys.argv[1], sys.argv[2]
pattern = sys.argv[3] if len(sys.argv) > 3 else ""
rows = [json.loads(l) for l in open(path) if l.startswith("{") and pattern in l]
print(rows[-1].get(key, "") if rows else "")
PY
}

source "$root/bench/policies.sh"
