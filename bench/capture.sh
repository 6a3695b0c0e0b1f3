#!/usr/bin/env bash
# Transparent capture (docs/architecture.md) beside the explicit proxy, in one `broker wrap` session each
# for the intercepting path (a credential bound to the host) and a tunnel rule: inside the
# session, curl measures keep-alive (2,000 requests on one connection) and new connections
# (200 requests, one connection each), round-robin between `-x http://127.0.0.1:3128` and
# `--noproxy '*'` (captured: the broker's DNS and the nft redirect), and reports medians and the
# captured/explicit ratio. Needs the nginx peer of ../shared/bench (bench/yardstick.sh or
# ../shared/bench/setup-peers.sh starts it) and a kernel that allows netns mode.
# Usage: bench/capture.sh [path/to/broker] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-5}
PEERS=${PEERS:-/tmp/peers}
[[ -f $PEERS/upstream-ca.pem ]] || { echo "capture.sh: no peers in $PEERS (run ../shared/bench/setup-peers.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'cat "$work"/*.err 2>/dev/null >&2; rm -rf "$work"' EXIT

source "$root/bench/policies.sh"

N=2000 NC=200
U=https://api.example.test:8443
for i in $(seq $N); do printf 'url = "%s/small?i=%d"\noutput = "/dev/null"\n' "$U" "$i"; done > "$work/ka.cfg"
head -n $((NC * 2)) "$work/ka.cfg" > "$work/newc.cfg"

# Runs inside the session: "<metric> <path> <rate>" lines.
cat > "$work/inner.sh" <<'SH'
set -euo pipefail
work=$1 rounds=$2 ca=$3 N=$4 NC=$5
[[ $ca == session ]] && ca=$SSL_CERT_FILE
now() { date +%s.%N; }
for metric in ka newc; do
  for round in $(seq "$rounds"); do
    for path in explicit captured; do
      if [[ $path == explicit ]]; then p=(-x http://127.0.0.1:3128); else p=(--noproxy '*'); fi
      close=(); n=$N cfg=$work/ka.cfg
      if [[ $metric == newc ]]; then close=(-H 'Connection: close'); n=$NC cfg=$work/newc.cfg; fi
      t0=$(now)
      curl -s "${p[@]}" "${close[@]}" --cacert "$ca" -K "$cfg"
      t1=$(now)
      echo "$metric $path $(python3 -c "print($n/($t1-$t0))")"
    done
  done
done
SH

# The working directory is bound through the child's private /tmp, so the scripts stay visible.
cd "$work"
for mode in mitm tunnel; do
  # Intercepted, the client trusts the session CA (the child's $SSL_CERT_FILE); tunnelled, nginx's.
  ca=session
  if [[ $mode == tunnel ]]; then
    cp "$PEERS/upstream-ca.pem" "$work/upstream-ca.pem"  # the child's /tmp is its own
    ca=$work/upstream-ca.pem
  fi
  BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop "$broker" wrap --isolate netns \
    --policy "$work/$mode.json" --log-dir "$work/logs" --upstream-ca "$PEERS/upstream-ca.pem" \
    --connect-to api.example.test:8443:127.0.0.1:8443 -- \
    bash "$work/inner.sh" "$work" "$rounds" "$ca" "$N" "$NC" 2>"$work/$mode.err" |
    sed "s/^/$mode /" >> "$work/results"
done

python3 - "$work/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print(f"{'requests/s (median)':<22}{'explicit proxy':>16}{'captured':>12}{'ratio':>8}")
for mode in ("mitm", "tunnel"):
    for metric, label in (("ka", "keep-alive"), ("newc", "new connection")):
        med = {p: statistics.median(float(r[3]) for r in rows
                                    if r[0] == mode and r[1] == metric and r[2] == p)
               for p in ("explicit", "captured")}
        print(f"{mode + ' ' + label:<22}{med['explicit']:>16.0f}{med['captured']:>12.0f}"
              f"{med['captured'] / med['explicit']:>8.2f}")
PY
