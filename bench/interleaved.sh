#!/usr/bin/env bash
# The yardstick's four measurements, taken round-robin over the contenders for several rounds and
# reported as medians and ratios to direct, and broker MITM's ratio to haproxy's (issue 32). On this noisy 2-core machine one sequential pass
# (bench/yardstick.sh) can move a ratio by ±0.3; interleaving spreads the noise over everyone. It
# also reports the CPU each proxy spent per request (on this VM it moves between runs about as
# much as a rate does).
# Every contender speaks HTTP/1.1 (curl --http1.1; issue 55): curl would otherwise negotiate h2
# with the broker's MITM and with nghttpx, whose "new connection" column would then reuse one
# connection and whose keep-alive columns would run over h2 while the rest run HTTP/1.1. The
# HTTP/2 table is bench/h2.sh's.
# SYNC_MODES="none every" adds a MITM contender for each --audit-sync mode named (broker-mitm is
# the default, batch): what making the log durable costs on each column (issue 50).
# Needs the peers of ../shared/bench up (bench/yardstick.sh starts them) and curl.
# Usage: [SYNC_MODES=...] bench/interleaved.sh [path/to/broker] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=${1:-$root/build/broker}
rounds=${2:-5}
PEERS=${PEERS:-/tmp/peers}
U=https://api.example.test:8443
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

source "$root/bench/contenders.sh"
port=18450
for mode in ${SYNC_MODES:-}; do
  port=$((port + 1))
  start_contender "mitm-$mode" "$port" "$work/mitm.json" --upstream-ca "$PEERS/upstream-ca.pem" \
    --audit-sync "$mode"
done
# Anthropic's sandbox-runtime (Claude Code's sandbox) tunnelling and terminating TLS: srt_contenders.
source "$root/bench/srt.sh"

N=2000 NC=200
urls() { for i in $(seq "$1"); do printf 'url = "%s/small?i=%d"\noutput = "/dev/null"\n' "$U" "$i"; done; }
urls $N > "$work/ka.cfg"
urls $NC > "$work/newc.cfg"
contenders=(
  "direct||$PEERS/upstream-ca.pem"
  "squid|-x http://127.0.0.1:13128|$PEERS/squid-ca.pem"
  "broker-tunnel|-x http://127.0.0.1:18443|$PEERS/upstream-ca.pem"
  "broker-mitm|-x http://127.0.0.1:18444|$work/ca/ca.pem"
  # TLS-terminating proxies in front of the same nginx (../shared/bench/setup-peers.sh): they
  # decrypt, re-encrypt and forward with no policy, swap, scrubbing or audit, the practical limit
  # of TLS-in/TLS-out work here. Clients dial them in place of the origin.
  "haproxy|--connect-to api.example.test:8443:127.0.0.1:19443|$PEERS/upstream-ca.pem"
  "nghttpx|--connect-to api.example.test:8443:127.0.0.1:19444|$PEERS/upstream-ca.pem"
)
port=18450
for mode in ${SYNC_MODES:-}; do
  port=$((port + 1))
  contenders+=("broker-mitm-$mode|-x http://127.0.0.1:$port|$work/ca/ca.pem")
done
contenders+=("${srt_contenders[@]}")
now() { date +%s.%N; }
# CPU a proxy spent (µs, user and system, every thread of its processes and their children).
pids_of() {
  local file
  case $1 in
    broker-* | srt-*) file=$work/$1.pid ;;
    haproxy) file=$PEERS/haproxy-tls.pid ;;
    nghttpx) file=$PEERS/nghttpx.pid ;;
    squid) file=$PEERS/squid.pid ;;
    *) return 0 ;;
  esac
  [[ -f $file ]] || return 0
  local pid
  pid=$(cat "$file")
  kill -0 "$pid" 2>/dev/null || return 0  # not running: its CPU is unknown, not zero
  # shellcheck disable=SC2046
  echo "$pid" $(pgrep -P "$pid" || true)
}
cpu_us() { # pids... -> total on-CPU µs (schedstat's first field is ns)
  local pid total=0 ns
  for pid in "$@"; do
    while read -r ns _; do
      total=$((total + ns / 1000))
    done < <(cat /proc/"$pid"/task/*/schedstat 2>/dev/null)
  done
  echo $total
}
measure() { # metric pargs ca -> prints a rate
  local metric=$1 pargs=$2 ca=$3 t0 t1
  t0=$(now)
  # A contender that fails (a peer not running) must not show up as fast: its figures are void.
  # shellcheck disable=SC2086
  if ! case $metric in
    ka1) curl -sf --http1.1 $pargs --cacert "$ca" -K "$work/ka.cfg" ;;
    ka8) curl -sf --http1.1 -Z --parallel-max 8 $pargs --cacert "$ca" -K "$work/ka.cfg" 2>/dev/null ;;
    newc) curl -sf --http1.1 -H 'Connection: close' $pargs --cacert "$ca" -K "$work/newc.cfg" ;;
    bulk) curl -sf --http1.1 $pargs --cacert "$ca" -o /dev/null "$U/big" ;;
  esac; then
    echo nan
    return
  fi
  t1=$(now)
  case $metric in
    ka1 | ka8) python3 -c "print($N/($t1-$t0))" ;;
    newc) python3 -c "print($NC/($t1-$t0))" ;;
    bulk) python3 -c "print(256/($t1-$t0))" ;;
  esac
}
for metric in ka1 ka8 newc bulk; do
  for round in $(seq "$rounds"); do
    for c in "${contenders[@]}"; do
      IFS='|' read -r name pargs ca <<< "$c"
      pids=$(pids_of "$name")
      # shellcheck disable=SC2086
      c0=$(cpu_us $pids)
      rate=$(measure "$metric" "$pargs" "$ca")
      # shellcheck disable=SC2086
      c1=$(cpu_us $pids)
      spent=nan
      [[ -n $pids ]] && spent=$((c1 - c0))
      echo "$metric $name $rate $spent" >> "$work/results"
    done
  done
done
python3 - "$work/results" "$N" "$NC" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
requests, new_connections = int(sys.argv[2]), int(sys.argv[3])
names = list(dict.fromkeys(r[1] for r in rows))
metrics = ["ka1", "ka8", "newc", "bulk"]
med = {(m, n): statistics.median(float(r[2]) for r in rows if r[0] == m and r[1] == n)
       for m in metrics for n in names}
print(f"{'median (ratio to direct)':<16}" + "".join(f"{m:>18}" for m in metrics))
for n in names:
    cells = "".join(f"{med[m, n]:>10.0f} ({med[m, n] / med[m, 'direct']:.2f})" for m in metrics)
    print(f"{n:<16}{cells}")
if "haproxy" in names:
    cells = "".join(f"{med[m, 'broker-mitm'] / med[m, 'haproxy']:>18.2f}" for m in metrics)
    print(f"{'mitm / haproxy':<16}{cells}")
# The proxy's own CPU for each request (each new connection's request; each MiB of the bulk
# transfer): the same work measured without the rate's dependence on the other processes.
units = {"ka1": requests, "ka8": requests, "newc": new_connections, "bulk": 256}
cpu = {(m, n): statistics.median(float(r[3]) / units[m] for r in rows if r[0] == m and r[1] == n)
       for m in metrics for n in names if all(r[3] != "nan" for r in rows if r[1] == n)}
if cpu:
    print()
    print(f"{'CPU µs (bulk: /MiB)':<16}" + "".join(f"{m:>18}" for m in metrics))
    for n in names:
        if (metrics[0], n) in cpu:
            print(f"{n:<16}" + "".join(f"{cpu[m, n]:>18.1f}" for m in metrics))
    if ("ka1", "haproxy") in cpu and ("ka1", "broker-mitm") in cpu:
        cells = "".join(f"{cpu[m, 'broker-mitm'] / cpu[m, 'haproxy']:>18.2f}" for m in metrics)
        print(f"{'mitm / haproxy':<16}{cells}")
PY
