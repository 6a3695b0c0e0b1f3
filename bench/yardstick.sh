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
source "$root/bench/contenders.sh"
BENCH_EXTRA="broker-tunnel|-x http://127.0.0.1:18443|$PEERS/upstream-ca.pem;broker-mitm|-x http://127.0.0.1:18444|$work/ca/ca.pem" \
  "$shared/bench/peers-bench.sh"
