#!/usr/bin/env bash
# Runs ../shared/bench (direct, tinyproxy, squid ssl-bump, mitmproxy) with broker serve added as a
# tunnel contender and a MITM contender (intercepted, credential bound), all on loopback.
# Needs: nginx-light tinyproxy squid-openssl mitmproxy curl.
# Usage: bench/yardstick.sh [path/to/broker]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=${1:-$root/build/broker}
shared=${SHARED:-$root/../shared}
export PEERS=${PEERS:-/tmp/peers}
"$shared/bench/setup-peers.sh"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cat > "$work/tunnel.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443], "tunnel": true } ] }
JSON
# The MITM contender: the default path, intercepted, with a credential bound to the host so that
# every request goes through the brokers and every response through the scrubber.
cat > "$work/mitm.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443] } ],
  "credentials": { "bench": { "type": "bearer", "env": ["BENCH_TOKEN"],
                              "hosts": ["api.example.test"] } } }
JSON
start() { # name port policy extra-args...
  local name=$1 port=$2 policy=$3; shift 3
  "$broker" serve --listen 127.0.0.1:"$port" --policy "$policy" --log-dir "$work/logs" \
    --ca-dir "$work/ca" --connect-to api.example.test:8443:127.0.0.1:8443 --log-level warn "$@" \
    > "$work/$name.out" &
  for _ in $(seq 50); do grep -q listening "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
}
start tunnel 18443 "$work/tunnel.json"
BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop start mitm 18444 "$work/mitm.json" \
  --upstream-ca "$PEERS/upstream-ca.pem"
BENCH_EXTRA="broker-tunnel|-x http://127.0.0.1:18443|$PEERS/upstream-ca.pem;broker-mitm|-x http://127.0.0.1:18444|$work/ca/ca.pem" \
  "$shared/bench/peers-bench.sh"
