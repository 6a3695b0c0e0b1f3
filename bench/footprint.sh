#!/usr/bin/env bash
# The broker's memory per idle connection and after bursts (issue 15), each measured on a fresh
# `broker serve` (loopback, a temp log dir) warmed up by 20 connections of the same kind, with
# its VmRSS and fd count read from /proc:
#   idle tunnel       N tunnels ("tunnel": true): CONNECT + 200, TLS with nginx through the
#                     tunnel, then silent. (after - before) / N.           goal <= 32 KiB
#   idle intercepted  N intercepted connections (credential bound): CONNECT, TLS with the
#                     broker's CA, one GET, then silent. (after - before) / N. goal <= 64 KiB
#   burst CONNECT     B tunnels that close right after the 200 (no TLS), 100 at a time.
#   burst intercepted B full intercepted requests, one connection each, 100 at a time.
#                     RSS after the burst drains within 10% of before; a second identical burst
#                     tells retention (flat) from a leak (growing again).
# The upstream is a private nginx with the ../shared/bench peer's certificate (bench/load-lib.sh).
# Usage: bench/footprint.sh [path/to/broker]   (env: N=2000 B=1000 LOADGEN=path)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
N=${N:-2000} B=${B:-1000}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
broker_pid='' idle_pid=''
trap '[[ -n $idle_pid ]] && kill $idle_pid 2>/dev/null; [[ -n $broker_pid ]] && kill $broker_pid 2>/dev/null;
      stop_nginx; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/load-lib.sh"
find_loadgen
start_nginx

upstream=(--ca "$PEERS/upstream-ca.pem")
intercepted=(--get /small --ca "$work/ca/ca.pem")
rows=()

warm_up() { "$loadgen" burst --proxy "$proxy" --n 20 "$@" > /dev/null; settle "$broker_pid"; }

# measure_idle LABEL POLICY GOAL loadgen-args...
measure_idle() {
  local label=$1 policy=$2 goal=$3 before after fds0 fds1 ok errors dropped
  shift 3
  start_broker idle "$work/$policy.json"
  warm_up "$@"
  before=$(rss_kib "$broker_pid") fds0=$(fd_count "$broker_pid")
  hold_idle "$work/idle.out" --proxy "$proxy" --n "$N" "$@"
  sleep 2
  after=$(rss_kib "$broker_pid") fds1=$(fd_count "$broker_pid")
  end_idle
  ok=$(json "$work/idle.out" established ready) errors=$(json "$work/idle.out" errors ready)
  dropped=$(json "$work/idle.out" dropped "done")
  stop_broker
  ((ok > 0)) || die "$label: no connection set up ($(json "$work/idle.out" first_error ready))"
  rows+=("$label|$ok ok, $errors err, $dropped dropped|$before|$after|$(
    awk -v a="$after" -v b="$before" -v n="$ok" 'BEGIN { printf "%.1f KiB/conn", (a - b) / n }')|<= $goal KiB/conn|$fds0 -> $fds1")
}

# measure_burst LABEL POLICY loadgen-args...
measure_burst() {
  local label=$1 policy=$2 before after after2 fds0 fds1 fds2 run
  shift 2
  start_broker burst "$work/$policy.json"
  warm_up "$@"
  before=$(rss_kib "$broker_pid") fds0=$(fd_count "$broker_pid")
  for run in 1 2; do
    "$loadgen" burst --proxy "$proxy" --n "$B" --concurrency 100 "$@" > "$work/burst$run.out"
    settle "$broker_pid"
    if [[ $run == 1 ]]; then
      after=$(rss_kib "$broker_pid") fds1=$(fd_count "$broker_pid")
    else
      after2=$(rss_kib "$broker_pid") fds2=$(fd_count "$broker_pid")
    fi
  done
  stop_broker
  rows+=("$label|$(json "$work/burst1.out" ok) ok, $(json "$work/burst1.out" errors) err, $(
    json "$work/burst1.out" per_second)/s|$before|$after (2nd: $after2)|$(
    awk -v a="$after" -v b="$before" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }') (2nd: $(
    awk -v a="$after2" -v b="$before" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'))|within 10%|$fds0 -> $fds1 (2nd: $fds2)")
}

measure_idle "idle tunnel x$N" tunnel 32 --tls "${upstream[@]}"
measure_idle "idle intercepted x$N" mitm 64 "${intercepted[@]}"
measure_burst "burst CONNECT+close x$B" tunnel
measure_burst "burst intercepted x$B" mitm "${intercepted[@]}"

echo "broker $broker, loadgen $loadgen; RSS in KiB (VmRSS), fds from /proc/PID/fd"
{
  echo "measurement|connections|RSS before|RSS after|result|goal|fds"
  printf '%s\n' "${rows[@]}"
} | column -t -s '|'
