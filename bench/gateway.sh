#!/usr/bin/env bash
# The team gateway with shared budgets (issue 16, docs/gateway.md): keep-alive throughput of
# `broker serve --gateway` for one session with budgets (requests, bytes out, bytes in) kept
#   mem     in memory (no --redis),
#   redis   in Redis, one replica (--redis, --replica r1),
#   redis2  in Redis, two replicas on one Redis, the clients split between them,
#   mem2    in memory, two gateways (a session on each), the clients split between them: the
#           same two processes on the same cores without Redis, redis2's baseline (REPLICAS2=0
#           leaves both out),
# each under two workloads through the session's proxy credential (Proxy-Authorization):
#   plain   plain-HTTP GETs sent to the gateway (absolute form) for an nginx on loopback,
#   https   HTTPS GETs in CONNECT tunnels the gateway intercepts (its CA, the bench bearer
#           credential swapped in) for the same nginx over TLS.
# Rounds are interleaved (every configuration once per round, as in bench/interleaved.sh); the
# table gives median requests/s, the ratio to mem (redis2's to mem2; goal: >= 0.85), p50 latency,
# errors,
# and per request (totals over the rounds divided by the requests the loadgen saw answered):
#   gw cpu us     the gateways' CPU time (/proc/PID/stat),
#   rt/req        Redis round trips and commands (goal: <= 1), from each replica's /metrics
#   cmd/req       (broker_redis_round_trips_total, broker_redis_commands_total) before and after
#                 each run; "n/a" when a /metrics does not answer (its answer is printed),
#   reads/req     Redis's own count of socket reads (INFO total_reads_processed): the round
#                 trips as the server sees them, pipelined commands read together,
#   evalsha/req   EVALSHA calls (INFO commandstats), and "script us" the time Redis spent in them,
#   redis cpu us  redis-server's CPU time.
# Redis's counts include every replica's revocation poll (every 200 ms): the "idle" line.
# Redis runs here on loopback without persistence (--save "" --appendonly no). The session's
# proxy credential goes to the loadgen on its command line (a throwaway session, loopback only).
# Usage: bench/gateway.sh [path/to/broker] [rounds]
#        (env: CLIENTS="8 32": each count in turn DURATION=5 REPLICAS2=1 LOADGEN=path)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-5}
CLIENTS=${CLIENTS:-8 32} DURATION=${DURATION:-5} REPLICAS2=${REPLICAS2:-1}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
broker_pid=''
pids=() redis_pid=''
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  [[ -n $redis_pid ]] && kill "$redis_pid" 2> /dev/null
  stop_nginx
  wait 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
source "$root/bench/load-lib.sh"
command -v redis-server > /dev/null || die "redis-server not found (apt-get install redis-server)"
find_loadgen

start_redis() {
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --logfile "$work/redis.log" > /dev/null 2>&1 &
  redis_pid=$!
  local _
  for _ in $(seq 50); do
    [[ $(redis-cli -p "$redis_port" ping 2> /dev/null) == PONG ]] && return
    sleep 0.1
  done
  die "redis-server did not start ($work/redis.log)"
}

# The team policy (the host on both ports, the bench bearer credential bound to it) and the
# session's layer: budgets high enough never to run out, so every request is admitted after
# the check.
cat > "$work/team.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443, 8080] } ],
  "credentials": { "bench": { "type": "bearer", "env": ["BENCH_TOKEN"],
                              "hosts": ["api.example.test"] } } }
JSON
cat > "$work/budgets.json" <<JSON
{ "version": 1, "budgets": { "requests": 1000000000000, "bytes_out": 1000000000000000,
                             "bytes_in": 1000000000000000 } }
JSON

# start_gateway NAME [serve args...]: a gateway whose admin listener is on a free port; sets
# proxy_of[NAME], admin_of[NAME] and pid_of[NAME].
declare -A proxy_of admin_of pid_of
start_gateway() {
  local name=$1 admin
  shift
  admin=127.0.0.1:$(free_port)
  start_broker "$name" "$work/team.json" --gateway --session "bench-gw-$$-$name" --admin "$admin" \
    --connect-to "api.example.test:8080:127.0.0.1:$plain_port" "$@"
  pids+=("$broker_pid")
  proxy_of[$name]=$proxy admin_of[$name]=$admin pid_of[$name]=$broker_pid
}

# create_session GATEWAY: a session with budgets.json made through GATEWAY's control socket;
# sets auth (ID:TOKEN, the credential from its env file, which stays in $work).
create_session() {
  local env=$work/$1.env
  "$broker" session --gateway "bench-gw-$$-$1" create --policy "$work/budgets.json" --ttl 8h \
    --env-file "$env" > /dev/null || die "session create on $1 failed"
  auth=$(sed -n 's|^HTTPS_PROXY=http://\([^@]*\)@.*|\1|p' "$env")
  [[ -n $auth ]] || die "no proxy credential in $env"
}

# redis_counts NAME...: the sum over the gateways' /metrics of the requests' Redis round trips
# and commands (path="request"; the replica's own thread's are apart) ("- -" when a gateway's
# /metrics does not answer 200).
redis_counts() {
  local name
  for name in "$@"; do
    curl -sf "http://${admin_of[$name]}/metrics" || { echo "failed"; echo "/metrics of $name: $(
      curl -s "http://${admin_of[$name]}/metrics")" >> "$work/metrics-errors"; }
  done |
    awk '$1 == "failed" { failed = 1 }
         $1 == "broker_redis_round_trips_total{path=\"request\"}" { t += $2 }
         $1 == "broker_redis_commands_total{path=\"request\"}" { c += $2 }
         END { if (failed) print "- -"; else printf "%d %d\n", t, c }'
}
# Redis's own view: read events (one per socket read of any client; this query's own read
# excluded), EVALSHA calls and the microseconds Redis spent in them.
redis_server_counts() {
  redis-cli -p "$redis_port" info all |
    awk -F'[:,=]' '/^total_reads_processed:/ { r = $2 - 1 }
      /^cmdstat_evalsha:/ { c = $3; u = $5 }
      END { printf "%d %d %d\n", r, c, u }'
}

# cpu_ticks PID...: user + system CPU of the processes so far, in clock ticks.
cpu_ticks() {
  local pid sum=0
  for pid in "$@"; do
    sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
  done
  echo "$sum"
}

# measure CONFIG WORKLOAD SECONDS: one run of $clients clients; appends a result line to
# $work/results.
measure() {
  local config=$1 workload=$2 seconds=$3 names a=() i=0 n t0 c0 t1 c1 r0 e0 u0 r1 e1 u1 name out
  local runs=() p rt=- cmd=- gpids=() b0 b1 k0 k1
  case $config in
    mem) names=(mem) ;;
    redis) names=(r1) ;;
    redis2) names=(r2a r2b) ;;
    mem2) names=(m2a m2b) ;;
  esac
  case $workload in
    plain) a=(--plain --target api.example.test:8080 --get /small) ;;
    https) a=(--target api.example.test:8443 --get /small --ca "$work/ca/ca.pem") ;;
  esac
  n=${#names[@]}
  for name in "${names[@]}"; do gpids+=("${pid_of[$name]}"); done
  b0=$(cpu_ticks "${gpids[@]}") k0=$(cpu_ticks "$redis_pid")
  read -r t0 c0 <<< "$(redis_counts "${names[@]}")"
  read -r r0 e0 u0 <<< "$(redis_server_counts)"
  for name in "${names[@]}"; do
    i=$((i + 1))
    "$loadgen" active --proxy "${proxy_of[$name]}" --proxy-auth "${auth_of[$name]}" \
      --clients $((clients / n)) --duration "$seconds" "${a[@]}" > "$work/run.$i" &
    runs+=($!)
  done
  for p in "${runs[@]}"; do wait "$p" || die "loadgen failed ($config, $workload)"; done
  read -r t1 c1 <<< "$(redis_counts "${names[@]}")"
  read -r r1 e1 u1 <<< "$(redis_server_counts)"
  b1=$(cpu_ticks "${gpids[@]}") k1=$(cpu_ticks "$redis_pid")
  out=$(python3 - "$work" "$n" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
runs = [json.loads(open(f"{work}/run.{i}").read().splitlines()[-1]) for i in range(1, n + 1)]
print(sum(r["rps"] for r in runs), sum(r["requests"] for r in runs),
      max(r["p50_ms"] for r in runs), sum(r["errors"] for r in runs))
PY
  )
  [[ $t0 != - && $t1 != - ]] && rt=$((t1 - t0)) cmd=$((c1 - c0))
  echo "$workload/$clients $config $out $rt $cmd $((r1 - r0 - 1)) $((e1 - e0)) $((u1 - u0)) \
    $((b1 - b0)) $((k1 - k0))" >> "$work/results"
}

# One nginx: the peer's files over TLS on $nginx_port (api.example.test:8443), and in plain
# HTTP on its status port (api.example.test:8080).
start_nginx
plain_port=$status_port
start_redis
ulimit -n "$(ulimit -Hn)"
start_gateway mem
start_gateway r1 --redis "redis://127.0.0.1:$redis_port" --replica r1
configs=(mem redis)
if [[ $REPLICAS2 == 1 ]]; then
  # Their own database: the one-replica gateway's sessions are not theirs.
  start_gateway r2a --redis "redis://127.0.0.1:$redis_port/1" --replica r2a
  start_gateway r2b --redis "redis://127.0.0.1:$redis_port/1" --replica r2b
  start_gateway m2a
  start_gateway m2b
  configs+=(mem2 redis2)
fi
declare -A auth_of  # by gateway name
create_session mem
auth_of[mem]=$auth
create_session r1
auth_of[r1]=$auth
if [[ $REPLICAS2 == 1 ]]; then
  create_session r2a
  auth_of[r2a]=$auth auth_of[r2b]=$auth  # one session, spread over both replicas
  create_session m2a
  auth_of[m2a]=$auth
  create_session m2b
  auth_of[m2b]=$auth
fi

# The polls alone: Redis read events per second with every gateway idle (each replica asks for
# revocations every 200 ms).
read -r idle0 _ <<< "$(redis_server_counts)"
sleep 2
read -r idle1 _ <<< "$(redis_server_counts)"
idle_rate=$(((idle1 - idle0 - 1) / 2))

for clients in $CLIENTS; do
  for workload in plain https; do
    for config in "${configs[@]}"; do measure "$config" "$workload" 1; done  # warm-up
    : > "$work/results"
    for _ in $(seq "$rounds"); do
      for config in "${configs[@]}"; do measure "$config" "$workload" "$DURATION"; done
    done
    cat "$work/results" >> "$work/all"
  done
done

# PROFILE=DIR: a plain run on mem and on redis under `perf stat` (the gateway's CPU, context
# switches and system calls per request, printed) and then under `perf record`: the gateway's
# profile in DIR/CONFIG.txt (self time by symbol) and the whole machine's in DIR/CONFIG-all.txt.
if [[ -n ${PROFILE:-} ]]; then
  command -v perf > /dev/null || die "PROFILE needs perf"
  mkdir -p "$PROFILE"
  clients=${CLIENTS%% *}
  echo "per request (perf stat of the gateway over a plain run, $clients clients):"
  calls=(recvfrom sendto sendmsg epoll_wait epoll_ctl timerfd_settime futex write)
  events=task-clock,context-switches,raw_syscalls:sys_enter
  for call in "${calls[@]}"; do events+=,syscalls:sys_enter_$call; done
  for config in mem redis; do
    name=mem
    [[ $config == redis ]] && name=r1
    perf stat -x, -e "$events" -p "${pid_of[$name]}" -o "$PROFILE/$config.stat" &
    perf_pid=$!
    sleep 0.5
    : > "$work/results"
    measure "$config" plain "$DURATION"
    kill -INT "$perf_pid"
    wait "$perf_pid" 2> /dev/null || true
    awk -F, -v config="$config" -v reqs="$(cut -d' ' -f4 "$work/results")" '
      $3 == "task-clock" { cpu = $1 * 1000 / reqs }
      $3 == "context-switches" { cs = $1 / reqs }
      $3 == "raw_syscalls:sys_enter" { sc = $1 / reqs }
      $3 ~ /^syscalls:sys_enter_/ { sub("syscalls:sys_enter_", "", $3); by = by sprintf(" %s %.2f", $3, $1 / reqs) }
      END { printf "  %-6s %6.1f us CPU, %4.2f context switches, %5.2f system calls:%s\n",
            config, cpu, cs, sc, by }' "$PROFILE/$config.stat"
  done
  for config in mem redis; do
    name=mem
    [[ $config == redis ]] && name=r1
    perf record -q -F 1999 -g -o "$PROFILE/$config.data" -p "${pid_of[$name]}" 2> /dev/null &
    perf_pid=$!
    perf record -q -F 499 -a -o "$PROFILE/$config-all.data" 2> /dev/null &
    perf_all=$!
    sleep 0.5
    measure "$config" plain "$DURATION"
    kill -INT "$perf_pid" "$perf_all"
    wait "$perf_pid" "$perf_all" 2> /dev/null || true
    perf report -i "$PROFILE/$config.data" --no-children --sort symbol --percent-limit 0.7 \
      --stdio -g none 2> /dev/null > "$PROFILE/$config.txt"
    perf report -i "$PROFILE/$config-all.data" --sort comm,dso --percent-limit 1 --stdio \
      2> /dev/null > "$PROFILE/$config-all.txt"
  done
fi

echo "broker $broker, loadgen $loadgen"
echo "keep-alive clients (split across the replicas), $rounds interleaved rounds of $DURATION s;" \
  "goals: redis ratio >= 0.85, round trips per request <= 1"
echo "Redis idle: $idle_rate read events/s (the revocation polls of the Redis replicas)"
# What the runs left in Redis: each budgeted request that carried usage left its batch key
# (SET NX PX 1 h, so that a resent batch is applied once).
echo "Redis after $(awk '$2 !~ /^mem/ { n += $4 } END { print n }' "$work/all") requests:" \
  "$(redis-cli -p "$redis_port" info keyspace | awk -F'[=,]' '/^db/ { k += $2 } END { print k }')" \
  "keys, $(redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ { printf "%.1f", $2 / 1048576 }') MiB"
[[ -s $work/metrics-errors ]] && sort -u "$work/metrics-errors" | head -3
python3 - "$work/all" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
tick_us = 1e6 / int(sys.argv[2])
rows = [l.split() for l in open(sys.argv[1])]
configs = list(dict.fromkeys(r[1] for r in rows))
# Per request, over all rounds: the gateways' CPU; their Redis round trips and commands
# (/metrics); Redis's read events, EVALSHA calls, the microseconds it spent in them, and its CPU.
print(f"{'workload':<9}{'clients':>7} {'config':<8}{'req/s':>8}{'ratio':>7}{'p50 ms':>8}{'errors':>7}"
      f"{'gw cpu us':>10}{'rt/req':>8}{'cmd/req':>8}{'reads/req':>10}{'evalsha/req':>12}"
      f"{'script us':>10}{'redis cpu us':>13}")
def per(rs, i, reqs):
    if any(r[i] == "-" for r in rs):
        return f"{'n/a':>8}"
    return f"{sum(int(r[i]) for r in rs) / reqs:>8.3f}"
for w in dict.fromkeys(r[0] for r in rows):
    workload, clients = w.split("/")
    med = {}
    for c in configs:
        rs = [r for r in rows if r[0] == w and r[1] == c]
        med[c] = statistics.median(float(r[2]) for r in rs)
        reqs = sum(int(r[3]) for r in rs)
        p50 = statistics.median(float(r[4]) for r in rs)
        errors = sum(int(r[5]) for r in rs)
        cpu = sum(int(r[11]) for r in rs) * tick_us / reqs
        base = "mem2" if c == "redis2" else "mem"
        line = (f"{workload:<9}{clients:>7} {c:<8}{med[c]:>8.0f}{med[c] / med[base]:>7.2f}{p50:>8.2f}{errors:>7}"
                f"{cpu:>10.1f}")
        if c.startswith("mem"):
            print(line)
            continue
        reads = sum(int(r[8]) for r in rs) / reqs
        evalsha = sum(int(r[9]) for r in rs) / reqs
        usec = sum(int(r[10]) for r in rs) / reqs
        redis_cpu = sum(int(r[12]) for r in rs) * tick_us / reqs
        print(line + per(rs, 6, reqs) + per(rs, 7, reqs) +
              f"{reads:>10.3f}{evalsha:>12.3f}{usec:>10.1f}{redis_cpu:>13.1f}")
PY
