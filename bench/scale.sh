#!/usr/bin/env bash
# The broker at scale (issue 15): one `broker serve`, intercepting with a credential bound to
# the host, holds IDLE idle intercepted connections (CONNECT, TLS with the broker's CA, one GET,
# then silent) while ACTIVE keep-alive clients send HTTPS GETs back to back through it for
# DURATION seconds. Reports the broker's RSS (before, with the idle set, peak and after the
# active run), requests/s, p50/p99 latency and errors (goal: 0).
# The broker serves at most proxy/limits.hpp max_connections (4096) at once and answers the rest
# 503: with the default IDLE=5000 the idle set alone passes it, and the table says how many
# were refused and what that left for the active clients.
# Usage: bench/scale.sh [path/to/broker]   (env: IDLE=5000 ACTIVE=200 DURATION=20 LOADGEN=path)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
IDLE=${IDLE:-5000} ACTIVE=${ACTIVE:-200} DURATION=${DURATION:-20}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
broker_pid='' idle_pid='' sampler=''
trap '[[ -n $sampler ]] && kill $sampler 2>/dev/null; [[ -n $idle_pid ]] && kill $idle_pid 2>/dev/null;
      [[ -n $broker_pid ]] && kill $broker_pid 2>/dev/null; stop_nginx; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/load-lib.sh"
find_loadgen
start_nginx
ulimit -n "$(ulimit -Hn)"  # the broker's fds: IDLE + ACTIVE clients and their upstreams

start_broker scale "$work/mitm.json"
ca=(--ca "$work/ca/ca.pem")
"$loadgen" burst --proxy "$proxy" --n 20 --get /small "${ca[@]}" > /dev/null
settle "$broker_pid"
rss0=$(rss_kib "$broker_pid")

hold_idle "$work/idle.out" --proxy "$proxy" --n "$IDLE" --get /small "${ca[@]}"
sleep 2
rss_idle=$(rss_kib "$broker_pid") fds_idle=$(fd_count "$broker_pid")

# The peak over the active run, sampled every 0.5 s.
(peak=0
  while kill -0 "$broker_pid" 2> /dev/null; do
    r=$(rss_kib "$broker_pid" 2> /dev/null || echo 0)
    ((r > peak)) && peak=$r && echo "$peak" > "$work/peak"
    sleep 0.5
  done) &
sampler=$!
accepts0=$(nginx_accepts)
"$loadgen" active --proxy "$proxy" --clients "$ACTIVE" --duration "$DURATION" --get /small \
  "${ca[@]}" > "$work/active.out"
kill "$sampler" 2> /dev/null || true
wait "$sampler" 2> /dev/null || true
sampler=
accepts1=$(nginx_accepts)
rss_active=$(rss_kib "$broker_pid") fds_active=$(fd_count "$broker_pid")
end_idle
stop_broker

a=$work/active.out i=$work/idle.out
echo "broker $broker, loadgen $loadgen; RSS in KiB (VmRSS)"
{
  echo "figure|value|goal"
  echo "idle connections asked|$IDLE|"
  echo "idle connections held|$(json "$i" established ready) (refused $(json "$i" refused ready), other errors $(($(json "$i" errors ready) - $(json "$i" refused ready))), dropped while held $(json "$i" dropped "done"))|all $IDLE"
  echo "idle set-up time|$(json "$i" setup_seconds ready) s|"
  echo "active clients x duration|$ACTIVE x $(json "$a" seconds) s|"
  echo "requests|$(json "$a" requests)|"
  echo "requests/s|$(json "$a" rps)|"
  echo "latency p50 / p99 / max|$(json "$a" p50_ms) / $(json "$a" p99_ms) / $(json "$a" max_ms) ms|"
  echo "errors|$(json "$a" errors) (refused $(json "$a" refused), at set-up $(json "$a" setup_errors))|0"
  echo "first error|$(json "$a" first_error)|"
  echo "upstream connections opened (nginx)|$((accepts1 - accepts0)) during the active run|"
  echo "loadgen CPU|$(json "$a" cpu_seconds) s (one thread)|"
  echo "broker RSS before|$rss0|"
  echo "broker RSS, idle set held|$rss_idle ($fds_idle fds)|"
  echo "broker RSS, peak during the active run|$(cat "$work/peak" 2> /dev/null || echo "?")|"
  echo "broker RSS, after the active run|$rss_active ($fds_active fds)|"
} | column -t -s '|'
