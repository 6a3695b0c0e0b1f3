#!/usr/bin/env bash
# A team gateway on one machine, no containers (docs/gateway.md): one Redis, two `broker serve
# --gateway` replicas sharing it, and haproxy in front of them. It issues one session, sends a
# wrapped curl and a real coding agent (Claude Code or Codex, when installed) through haproxy,
# stops everything, prints the session's audit log merged across both replicas and verifies it.
#
#   examples/gateway/run.sh [--demo] [--keep]
#
#   --demo   offline: local fakes of api.github.com and the model APIs (tests/agents/
#            demo_upstreams.py) stand in for the real hosts, with made-up real credentials.
#            Without it the gateways reach the real hosts with the caller's GITHUB_TOKEN,
#            ANTHROPIC_API_KEY and CODEX_API_KEY (whichever are set).
#   --keep   keep the work dir (logs, audit files, CA, env file) instead of removing it.
#
# Environment (all optional):
#   BROKER            the broker binary (default: `broker` on PATH, else the repo's build/broker)
#   WORK_DIR          where everything goes (default: a new /tmp/broker-gateway.XXXXXX)
#   FRONT_PORT        haproxy, what clients dial (18080)
#   GATEWAY1_PORT, GATEWAY2_PORT   the replicas r1, r2 (18081, 18082)
#   ADMIN1_PORT, ADMIN2_PORT       their admin listeners, /metrics and /healthz (18091, 18092)
#   REDIS_PORT        redis-server (16399)
#   DEMO_PORT         the fakes with --demo (18443)
#   AGENT             claude, codex, none or auto (default: the first of claude, codex installed)
#   BROKER_AGENTS_DIR where scripts/install-agents.sh put the agents (/var/cache/broker-agents)
#   DEMO_GITHUB_TOKEN, DEMO_ANTHROPIC_API_KEY, DEMO_CODEX_API_KEY
#                     with --demo: the "real" values (default: random); the fakes accept only them
#   PYTHON            python3 for the fakes (default: python3)
#
# Needs: redis-server, haproxy, curl, openssl, python3 (--demo).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

demo=0
keep=0
for arg in "$@"; do
  case $arg in
    --demo) demo=1 ;;
    --keep) keep=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "run.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

BROKER=${BROKER:-$(command -v broker || echo "$repo/build/broker")}
FRONT_PORT=${FRONT_PORT:-18080}
GATEWAY1_PORT=${GATEWAY1_PORT:-18081}
GATEWAY2_PORT=${GATEWAY2_PORT:-18082}
ADMIN1_PORT=${ADMIN1_PORT:-18091}
ADMIN2_PORT=${ADMIN2_PORT:-18092}
REDIS_PORT=${REDIS_PORT:-16399}
DEMO_PORT=${DEMO_PORT:-18443}
AGENT=${AGENT:-auto}
AGENTS_BIN=${BROKER_AGENTS_DIR:-/var/cache/broker-agents}/node_modules/.bin
PYTHON=${PYTHON:-python3}
READY_TIMEOUT_S=15
AGENT_TIMEOUT_S=90
export FRONT_PORT GATEWAY1_PORT GATEWAY2_PORT ADMIN1_PORT ADMIN2_PORT  # haproxy.cfg reads them

step() { printf '\n==> %s\n' "$*"; }
say() { printf '    %s\n' "$*"; }
die() {
  echo "run.sh: $*" >&2
  exit 1
}

[[ -x $BROKER ]] || die "no broker binary at $BROKER (build it, or set BROKER)"
for tool in redis-server haproxy curl; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh)"
done

# Nothing of the caller's proxy settings reaches the processes started here.
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy

# The real credentials: the gateways hold them, no client ever does. They stay in this script's
# variables and go into the environment of the gateways (and the fakes) only.
if ((demo)); then
  github_token=${DEMO_GITHUB_TOKEN:-ghp_$(openssl rand -hex 18)}
  anthropic_key=${DEMO_ANTHROPIC_API_KEY:-sk-ant-api03-$(openssl rand -hex 40)}
  codex_key=${DEMO_CODEX_API_KEY:-sk-proj-$(openssl rand -hex 32)}
else
  github_token=${GITHUB_TOKEN:-}
  anthropic_key=${ANTHROPIC_API_KEY:-}
  codex_key=${CODEX_API_KEY:-}
fi
unset GITHUB_TOKEN ANTHROPIC_API_KEY CODEX_API_KEY DEMO_GITHUB_TOKEN DEMO_ANTHROPIC_API_KEY \
  DEMO_CODEX_API_KEY

# Runs "$@" with the real credentials that are set in its environment.
with_credentials() {
  [[ -n $github_token ]] && export GITHUB_TOKEN=$github_token
  [[ -n $anthropic_key ]] && export ANTHROPIC_API_KEY=$anthropic_key
  [[ -n $codex_key ]] && export CODEX_API_KEY=$codex_key
  exec "$@"
}

# Removed on exit (without --keep): a WORK_DIR given must be new or empty.
if [[ -n ${WORK_DIR:-} ]]; then
  [[ ! -e $WORK_DIR || -z $(ls -A "$WORK_DIR") ]] || die "WORK_DIR=$WORK_DIR is not empty"
else
  WORK_DIR=$(mktemp -d /tmp/broker-gateway.XXXXXX)
fi
mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
# The gateways' control sockets: a short private directory (a unix socket path has at most 107
# bytes), removed on exit whatever --keep says.
runtime_dir=$(mktemp -d /tmp/broker-gw-run.XXXXXX)

declare -A pids=()

# Stops the process started as $1 (SIGTERM, then SIGKILL after 15 s) and waits for it.
stop() {
  local name=$1 pid=${pids[$1]:-}
  [[ -n $pid ]] || return 0
  unset "pids[$name]"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  # Front first (no new connections), then the gateways (each ends its sessions' audit files),
  # then what they use.
  for name in haproxy r1 r2 redis demo; do stop "$name"; done
  rm -rf "$runtime_dir"
  if ((keep)); then
    echo "run.sh: kept $WORK_DIR"
  else
    rm -rf "$WORK_DIR"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# broker with this example's own HOME (its audit key, ~/.config/broker/audit-key, lives there)
# and runtime dir (the control sockets `broker session` talks to).
broker() {
  HOME="$WORK_DIR/broker-home" XDG_RUNTIME_DIR="$runtime_dir" "$BROKER" "$@"
}

# Waits until $2 (a file) has a line matching $3, while the process $1 runs.
wait_for_line() {
  local name=$1 file=$2 pattern=$3 deadline=$((SECONDS + READY_TIMEOUT_S))
  until grep -Eq "$pattern" "$file" 2>/dev/null; do
    if ! kill -0 "${pids[$name]}" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "run.sh: $name did not start; its output:" >&2
      sed 's/^/    /' "$file" >&2 || true
      exit 1
    fi
    sleep 0.05
  done
}

# Waits until something accepts connections on 127.0.0.1:$2, while the process $1 runs.
wait_for_port() {
  local name=$1 port=$2 deadline=$((SECONDS + READY_TIMEOUT_S))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "${pids[$name]}" 2>/dev/null || die "$name exited (see $WORK_DIR)"
    ((SECONDS < deadline)) || die "nothing listens on 127.0.0.1:$port after ${READY_TIMEOUT_S}s"
    sleep 0.05
  done
}

echo "A team gateway: redis-server, two broker replicas and haproxy, in $WORK_DIR"
((demo)) && echo "(--demo: local fakes stand in for api.github.com and the model APIs)"

# ------------------------------------------------------------------------------------------
step "1. Redis: the replicas' shared state (sessions, budgets, revocations)"
mkdir -p "$WORK_DIR/redis"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK_DIR/redis" --appendonly yes \
  --save "" --daemonize no --logfile "$WORK_DIR/redis/redis.log" >/dev/null 2>&1 </dev/null &
pids[redis]=$!
deadline=$((SECONDS + READY_TIMEOUT_S))
until [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; do
  if ! kill -0 "${pids[redis]}" 2>/dev/null || ((SECONDS >= deadline)); then
    die "redis-server did not start (see $WORK_DIR/redis/redis.log)"
  fi
  sleep 0.05
done
say "redis-server on 127.0.0.1:$REDIS_PORT, append-only, data in redis/"

# ------------------------------------------------------------------------------------------
upstream_args=()
if ((demo)); then
  step "1b. The fakes (--demo): one local TLS server answering for every upstream host"
  mkdir -p "$WORK_DIR/demo"
  (with_credentials "$PYTHON" "$repo/tests/agents/demo_upstreams.py" --dir "$WORK_DIR/demo" \
    --port "$DEMO_PORT") >"$WORK_DIR/demo/upstreams.log" 2>&1 </dev/null &
  pids[demo]=$!
  wait_for_line demo "$WORK_DIR/demo/upstreams.log" "^demo upstreams: listening"
  for host in api.github.com api.anthropic.com api.openai.com; do
    upstream_args+=(--connect-to "$host:443:127.0.0.1:$DEMO_PORT")
  done
  upstream_args+=(--upstream-ca "$WORK_DIR/demo/pki/ca.pem")
  say "127.0.0.1:$DEMO_PORT; they accept only the real values, 401 for anything else"
  say "the gateways dial it for api.github.com, api.anthropic.com and api.openai.com"
  say "(--connect-to HOST:443:127.0.0.1:$DEMO_PORT) and trust its CA (--upstream-ca)"
fi

# ------------------------------------------------------------------------------------------
step "2. One CA for both replicas (clients trust it once, whichever replica they reach)"
say "\$ broker ca init --ca-dir ca"
broker ca init --ca-dir "$WORK_DIR/ca" >/dev/null
broker ca show --ca-dir "$WORK_DIR/ca" | grep -E '^(subject|fingerprint):' | sed 's/^/    /'
say "both replicas get --ca-dir ca; each writes ca/bundle.pem, which session env files name"

# ------------------------------------------------------------------------------------------
step "3. Two gateway replicas, r1 and r2, on the same Redis, CA, log dir and team policy"
start_replica() {
  local name=$1 port=$2 admin=$3
  (export HOME="$WORK_DIR/broker-home" XDG_RUNTIME_DIR="$runtime_dir"
    with_credentials "$BROKER" serve --gateway --session "example-$name" --replica "$name" \
    --redis "redis://127.0.0.1:$REDIS_PORT" --listen "127.0.0.1:$port" \
    --admin "127.0.0.1:$admin" --proxy-authority "127.0.0.1:$FRONT_PORT" \
    --policy "$here/team-policy.json" --ca-dir "$WORK_DIR/ca" --log-dir "$WORK_DIR/logs" \
    ${upstream_args[@]+"${upstream_args[@]}"}) \
    >"$WORK_DIR/$name.log" 2>&1 </dev/null &
  pids[$name]=$!
  wait_for_line "$name" "$WORK_DIR/$name.log" "^broker: listening on "
  say "$name: proxy on 127.0.0.1:$port, /metrics and /healthz on 127.0.0.1:$admin (log: $name.log)"
}
start_replica r1 "$GATEWAY1_PORT" "$ADMIN1_PORT"
start_replica r2 "$GATEWAY2_PORT" "$ADMIN2_PORT"
say "the real credentials are in the replicas' environment only: $(
  names=()
  [[ -n $github_token ]] && names+=(GITHUB_TOKEN)
  [[ -n $anthropic_key ]] && names+=(ANTHROPIC_API_KEY)
  [[ -n $codex_key ]] && names+=(CODEX_API_KEY)
  echo "${names[*]:-none}")"

# ------------------------------------------------------------------------------------------
step "4. haproxy in front: TCP, round robin, health from each replica's /healthz"
haproxy -db -f "$here/haproxy.cfg" >"$WORK_DIR/haproxy.log" 2>&1 </dev/null &
pids[haproxy]=$!
wait_for_port haproxy "$FRONT_PORT"
say "clients dial 127.0.0.1:$FRONT_PORT (the replicas' --proxy-authority); config: $here/haproxy.cfg"

# ------------------------------------------------------------------------------------------
step "5. A session: its proxy credential, its own dummies, in an env file (0600)"
env_file=$WORK_DIR/session.env
say "\$ broker session --gateway example-r1 create --user demo --label example=gateway --env-file session.env"
broker session --gateway example-r1 create --user demo --label example=gateway --ttl 1h \
  --env-file "$env_file" | sed 's/^/    /'
session=$(sed -n 's|^HTTPS_PROXY=http://\([^:]*\):.*|\1|p' "$env_file")
[[ -n $session ]] || die "no session id in $env_file"
say "made through r1's control socket, stored in Redis: r2 knows it too:"
broker session --gateway example-r2 list | sed 's/^/      r2: /'
say "what its clients get (the proxy token masked here; dummies shortened):"
grep -E '^(HTTPS_PROXY|SSL_CERT_FILE|GITHUB_TOKEN|ANTHROPIC_API_KEY|CODEX_API_KEY)=' "$env_file" |
  sed -E 's|//([^:]*):[^@]*@|//\1:<token>@|; s/^((GITHUB_TOKEN|ANTHROPIC_API_KEY|CODEX_API_KEY)=.{12}).*/\1.../' |
  sed 's/^/      /'

# Runs "$@" as a client of the session: a clean environment plus the session's env file.
client() {
  mkdir -p "$WORK_DIR/client-home"
  # shellcheck disable=SC2046 # one KEY=VALUE word per line of the env file
  env -i PATH="$PATH" HOME="$WORK_DIR/client-home" TERM=dumb $(cat "$env_file") "$@"
}

# ------------------------------------------------------------------------------------------
step "6. curl through haproxy, with the session's dummy GitHub token"
if grep -q '^GITHUB_TOKEN=' "$env_file"; then
  say "\$ env \$(cat session.env) sh -c 'curl -sS -H \"Authorization: Bearer \$GITHUB_TOKEN\" https://api.github.com/user'"
  # shellcheck disable=SC2016 # $GITHUB_TOKEN is the client's (the dummy), expanded by its sh
  request='curl -sS --fail-with-body -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user'
else
  say "(no GITHUB_TOKEN to broker: an unauthenticated request)"
  say "\$ env \$(cat session.env) curl -sS https://api.github.com/zen"
  request='curl -sS --fail-with-body https://api.github.com/zen'
fi
# Two requests, two connections: haproxy gives one to each replica.
for i in 1 2; do
  out=$(client sh -c "$request") || die "curl #$i failed: $out"
  printf '%s\n' "$out" >"$WORK_DIR/curl-$i.out"
  say "curl #$i: $out"
done
if ((demo)); then
  sleep 0.2  # the fake writes its record once it has answered
  say "what the fake received (credential: \"real\" = the gateway put the real value in):"
  grep '"api.github.com"' "$WORK_DIR/demo/requests.jsonl" | sed 's/^/      /'
fi

# ------------------------------------------------------------------------------------------
agent=$AGENT
if [[ $agent == auto ]]; then
  agent=none
  for a in claude codex; do
    if [[ -x $AGENTS_BIN/$a ]]; then
      agent=$a
      break
    fi
  done
fi
case $agent in
  claude) agent_cmd=(claude -p "Say the magic word.") key_var=ANTHROPIC_API_KEY key=$anthropic_key ;;
  codex) agent_cmd=(codex exec --skip-git-repo-check --color never "Say the magic word.")
    key_var=CODEX_API_KEY key=$codex_key ;;
  none) ;;
  *) die "AGENT=$agent: expected claude, codex, none or auto" ;;
esac
step "7. A real agent through the gateway"
if [[ $agent == none ]]; then
  say "skipped: no agent in $AGENTS_BIN (scripts/install-agents.sh installs Claude Code and Codex)"
elif [[ ! -x $AGENTS_BIN/$agent ]]; then
  die "AGENT=$agent: not installed in $AGENTS_BIN (scripts/install-agents.sh)"
elif [[ -z $key ]]; then
  say "skipped: $agent needs $key_var set for the gateways (the real key)"
else
  say "\$ env \$(cat session.env) ${agent_cmd[*]:0:${#agent_cmd[@]}-1} \"${agent_cmd[-1]}\""
  say "($agent gets the session's dummy $key_var; the gateway swaps the real one in)"
  mkdir -p "$WORK_DIR/agent-home" "$WORK_DIR/agent-work"
  status=0
  (cd "$WORK_DIR/agent-work" &&
    PATH="$AGENTS_BIN:$PATH" client env HOME="$WORK_DIR/agent-home" CI=1 NO_COLOR=1 \
      timeout "$AGENT_TIMEOUT_S" "${agent_cmd[@]}") \
    >"$WORK_DIR/agent.out" 2>"$WORK_DIR/agent.err" </dev/null || status=$?
  sed 's/^/      /' "$WORK_DIR/agent.out"
  if ((status != 0)); then
    echo "run.sh: $agent exited $status; its stderr:" >&2
    tail -n 40 "$WORK_DIR/agent.err" | sed 's/^/    /' >&2
    exit 1
  fi
  say "$agent finished its turn (exit 0)"
fi

# ------------------------------------------------------------------------------------------
step "8. Each replica's /metrics for this session"
for i in 1 2; do
  port_var=ADMIN${i}_PORT
  if metrics=$(curl -sS --fail "http://127.0.0.1:${!port_var}/metrics" 2>&1); then
    grep "^broker_requests_total{session=\"$session\"" <<<"$metrics" | sed "s/^/    r$i: /" ||
      say "r$i: no request of this session"
  else
    say "r$i: /metrics failed: $metrics"
  fi
done

# ------------------------------------------------------------------------------------------
step "9. Stopping haproxy, then the replicas (each ends and signs its audit files)"
stop haproxy
stop r1
stop r2
say "haproxy gave each client connection to (haproxy.log):"
grep -oE 'gateway_replicas/r[12]' "$WORK_DIR/haproxy.log" | sort | uniq -c | sed 's/^/     /' || true
say "audit files of $session:"
(cd "$WORK_DIR/logs" && ls "$session") | sed 's/^/      logs\/'"$session"'\//'

# ------------------------------------------------------------------------------------------
step "10. The session's audit log, both replicas merged"
say "\$ broker log $session --log-dir logs"
broker log "$session" --log-dir "$WORK_DIR/logs" | sed 's/^/    /'
step "11. Verifying it: each replica's hash chain and signed session_end"
say "\$ broker log $session --log-dir logs --verify"
broker log "$session" --log-dir "$WORK_DIR/logs" --verify | sed 's/^/    /'

echo
echo "Done: one session, two replicas, one Redis, haproxy in front; the clients only ever held dummies."
