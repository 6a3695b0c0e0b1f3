#!/usr/bin/env bash
# Where an HTTP/2 request's CPU goes through the broker beside haproxy (issue 55, item 5), at
# `h2load -c 8 -m 10` (the h2.sh c8 column): the same nginx speaking h2, haproxy 2.6 terminating
# TLS with h2 on both sides (bench/h2_peers.sh), and the broker intercepting inside
# `broker wrap` with a credential bound (bench/policies.sh).
#   CPU a request: each proxy's CPU time (every thread, /proc/PID/stat) over a 3 s window from
#                  1 s into the run, over the requests h2load's rate puts in it; median of
#                  rounds, interleaved.
#   where it goes: one `perf record --call-graph dwarf` (2 kHz, 2 s) of each, each sample named
#                  by bench/profile_classify.py (the first frame from the leaf that names a part
#                  of the work), scaled to the median CPU a request. The parts both do come
#                  first; the broker's audit record, policy and credential swap, and scrub and
#                  meter are work haproxy does not do here.
# Needs: nginx-light (http_v2), nghttp2-client (h2load), haproxy, linux-perf.
# Usage: bench/h2_profile.sh [path/to/broker] [rounds]   (env: N=300000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-3}
N=${N:-300000}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
load=
trap '[[ -n $load ]] && kill "$load" 2>/dev/null
      for f in nginx haproxy; do [[ -f $work/$f.pid ]] && kill "$(cat "$work/$f.pid")" 2>/dev/null
      done; wait 2>/dev/null; rm -rf "$work"' EXIT
die() { echo "$(basename "$0"): $*" >&2; exit 1; }
for tool in h2load haproxy perf; do command -v $tool > /dev/null || die "$tool not found"; done
[[ -f $PEERS/leaf.pem ]] || "${SHARED:-$root/../shared}/bench/setup-peers.sh"
source "$root/bench/policies.sh"
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
source "$root/bench/h2_peers.sh"
[[ -n $hport ]] || die "haproxy did not start"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# One run of `who` (broker|haproxy); prints its CPU us a request over the window, or nan when a
# request failed or the run ended inside the window (raise N). With a second argument, the
# window is profiled into $work/WHO.data instead of slept through.
measure() {
  local who=$1 profile=${2:-} pid
  if [[ $who == haproxy ]]; then
    h2load -n "$N" -c 8 -m 10 "https://127.0.0.1:$hport/small" > "$work/h2load.out" 2>&1 &
    load=$!
    pid=$(cat "$work/haproxy.pid")
  else
    "$broker" wrap --policy "$work/mitm.json" --log-dir "$work/wrap-logs" \
      --connect-to "api.example.test:8443:127.0.0.1:$port" --upstream-ca "$PEERS/upstream-ca.pem" \
      --log-level warn -- h2load -n "$N" -c 8 -m 10 https://api.example.test:8443/small \
      > "$work/h2load.out" 2>&1 &
    load=$!
    pid=$load
  fi
  sleep 1
  local c0 t0 c1 t1
  c0=$(cpu_ticks "$pid") t0=$(date +%s.%N)
  if [[ -n $profile ]]; then
    perf record -q -F 2000 --call-graph dwarf,16384 -o "$work/$who.data" -p "$pid" -- sleep 2 \
      > /dev/null 2> "$work/perf.err" || die "perf record failed: $(tail -1 "$work/perf.err")"
  else
    sleep 3
  fi
  local running=1
  kill -0 "$load" 2> /dev/null || running=0
  c1=$(cpu_ticks "$pid" 2> /dev/null || true) t1=$(date +%s.%N)
  wait "$load" || true
  load=
  [[ $running == 1 && -n $c1 ]] || { echo nan; return; }
  grep -q "$N succeeded, 0 failed" "$work/h2load.out" || { echo nan; return; }
  local rate
  rate=$(grep -o 'finished in [0-9.]*[a-z]*, [0-9.]* req/s' "$work/h2load.out" | awk '{print $4}')
  python3 -c "import os, sys; c0, c1, t0, t1, r = map(float, sys.argv[1:])
print(f'{(c1 - c0) / os.sysconf(\"SC_CLK_TCK\") / (r * (t1 - t0)) * 1e6:.2f}')" \
    "$c0" "$c1" "$t0" "$t1" "$rate"
}

for round in $(seq "$rounds"); do
  echo "haproxy $(measure haproxy)" >> "$work/cpu"
  echo "broker $(measure broker)" >> "$work/cpu"
done
for who in haproxy broker; do
  measure "$who" profile > /dev/null
  perf script -i "$work/$who.data" -F tid,period,ip,sym,dso 2> /dev/null > "$work/$who.script"
done

python3 - "$work" "$root/bench/profile_classify.py" <<'PY'
import json, math, statistics, subprocess, sys
work, classify = sys.argv[1], sys.argv[2]
rows = [line.split() for line in open(f"{work}/cpu")]
def med(who):
    xs = [float(r[1]) for r in rows if r[0] == who and r[1] != "nan"]
    return statistics.median(xs) if xs else math.nan
cpu = {who: med(who) for who in ("broker", "haproxy")}
profile = {who: json.loads(subprocess.check_output(
    [sys.executable, classify, who, f"{work}/{who}.script", str(cpu[who])])) for who in cpu}
print(f"CPU a request (median of {len(rows) // 2} rounds): broker {cpu['broker']:.1f} us, "
      f"haproxy {cpu['haproxy']:.1f} us; profiled samples: broker "
      f"{profile['broker']['samples']}, haproxy {profile['haproxy']['samples']}")
print(f"{'us a request, by part of the work':40} {'broker':>7} {'haproxy':>8} {'broker - haproxy':>17}")
both = ["TLS records and socket I/O", "HTTP/2 framing, both sides", "request and response relay",
        "event loop"]
own = ["audit record", "policy and credential swap", "response scrub and meter"]
for part in both + own + ["other"]:
    b = profile["broker"]["parts"].get(part, 0.0)
    h = profile["haproxy"]["parts"].get(part, 0.0)
    print(f"{part:40} {b:7.1f} {h:8.1f} {b - h:+17.1f}")
print(f"{'total':40} {cpu['broker']:7.1f} {cpu['haproxy']:8.1f} {cpu['broker'] - cpu['haproxy']:+17.1f}")
print(f"\n{'us a request, by what runs':40} {'broker':>7} {'haproxy':>8}")
for k in ("kernel", "own code", "OpenSSL", "nghttp2", "malloc and free", "libstdc++", "libc other"):
    print(f"{k:40} {profile['broker']['runs'].get(k, 0.0):7.1f} "
          f"{profile['haproxy']['runs'].get(k, 0.0):8.1f}")
PY
