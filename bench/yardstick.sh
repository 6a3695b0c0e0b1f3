#!/usr/bin/env bash
# Runs ../shared/bench (direct, tinyproxy, squid ssl-bump, mitmproxy) with broker serve added as a
# tunnel contender, all on loopback. Needs: nginx-light tinyproxy squid-openssl mitmproxy curl.
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
"$broker" serve --listen 127.0.0.1:18443 --policy "$work/tunnel.json" --log-dir "$work/logs" \
  --connect-to api.example.test:8443:127.0.0.1:8443 --log-level warn > "$work/tunnel.out" &
for _ in $(seq 50); do grep -q listening "$work/tunnel.out" 2>/dev/null && break; sleep 0.1; done
BENCH_EXTRA="broker-tunnel|-x http://127.0.0.1:18443|$PEERS/upstream-ca.pem" \
  "$shared/bench/peers-bench.sh"
