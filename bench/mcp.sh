#!/usr/bin/env bash
# The MCP reader's cost (issue 53): keep-alive requests/s through a host whose allow rule says
# "mcp" (each POST read whole, parsed as JSON-RPC and judged by tool rules, each answer read for
# tools/list results) beside the same host without it, both intercepted with a bearer credential
# bound. The requests are tools/call POSTs (an allowed tool, ~200-byte arguments) to a private
# nginx answering a JSON-RPC result (bench/load-lib.sh). Rounds alternate the two brokers; the
# figure is the median ratio (goal >= 0.90).
# Usage: bench/mcp.sh [path/to/broker] [rounds]   (env: N=2000 requests per measurement)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-5}
N=${N:-2000}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
plain_pid= mcp_pid=
trap '[[ -n $plain_pid ]] && kill $plain_pid 2>/dev/null; [[ -n $mcp_pid ]] && kill $mcp_pid 2>/dev/null;
      stop_nginx; wait 2>/dev/null; rm -rf "$work"' EXIT
source "$root/bench/load-lib.sh"
start_nginx

export BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop
credentials='"credentials": { "bench": { "type": "bearer", "env": ["BENCH_TOKEN"], "hosts": ["api.example.test"] } }'
cat > "$work/plain.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443] } ], $credentials }
JSON
cat > "$work/mcp.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443],
    "mcp": { "tools": { "allow": ["get_*", "search_*", "create_issue"], "deny": ["delete_*"],
                        "arguments": { "create_issue": { "/owner": "acme" } } } } } ],
  $credentials }
JSON
start_broker plain "$work/plain.json" --env-file "$work/plain.env"
plain_pid=$broker_pid plain_proxy=$proxy
start_broker mcp "$work/mcp.json" --env-file "$work/mcp.env"
mcp_pid=$broker_pid mcp_proxy=$proxy
# The client sends its session's dummy (the same CA and seed-less dummies differ per session).
dummy_of() { grep '^BENCH_TOKEN=' "$1" | cut -d= -f2-; }

# One curl config per broker: the headers and body once, then N URLs (each sent as a POST).
body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_issue","arguments":{"owner":"acme","repo":"web","number":42,"fields":["title","state","labels","assignees","comments"],"note":"a few hundred bytes of arguments, as a real call carries"}}}'
printf '%s' "$body" > "$work/body.json"
for name in plain mcp; do
  {
    printf 'header = "Authorization: Bearer %s"\n' "$(dummy_of "$work/$name.env")"
    printf 'header = "Content-Type: application/json"\n'
    printf 'header = "Accept: application/json, text/event-stream"\n'
    printf 'data-binary = "@%s"\n' "$work/body.json"
    for i in $(seq "$N"); do
      printf 'url = "https://api.example.test:8443/mcp?i=%d"\noutput = "/dev/null"\n' "$i"
    done
  } > "$work/$name.cfg"
done
# A wrong answer (a refusal) must not pass as fast.
check=$(curl -s -x "http://$mcp_proxy" --cacert "$work/ca/ca.pem" \
  -H "Authorization: Bearer $(dummy_of "$work/mcp.env")" -H 'Content-Type: application/json' \
  -d "$body" https://api.example.test:8443/mcp)
[[ $check == *'"text":"ok"'* ]] || die "the MCP rule refused the benchmark's call: $check"

now() { date +%s.%N; }
rate() { # name proxy parallel -> requests/s
  local t0 t1 par=()
  [[ $3 -gt 1 ]] && par=(-Z --parallel-max "$3")
  t0=$(now)
  curl -sf "${par[@]}" -x "http://$2" --cacert "$work/ca/ca.pem" -K "$work/$1.cfg" 2> /dev/null ||
    { echo nan; return; }
  t1=$(now)
  python3 -c "print($N/($t1-$t0))"
}
for par in 1 8; do
  plain=() mcp=()
  for _ in $(seq "$rounds"); do
    plain+=("$(rate plain "$plain_proxy" "$par")")
    mcp+=("$(rate mcp "$mcp_proxy" "$par")")
  done
  python3 - "$par" "${plain[*]}" "${mcp[*]}" <<'PY'
import statistics, sys
par, plain, mcp = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ratios = [m / p for m, p in zip(mcp, plain)]
print(f"ka{par}: plain {statistics.median(plain):7.0f} req/s, mcp rule {statistics.median(mcp):7.0f} req/s,"
      f" ratio {statistics.median(ratios):.2f} (rounds: {' '.join(f'{r:.2f}' for r in ratios)}; goal >= 0.90)")
PY
done
