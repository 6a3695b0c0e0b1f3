#!/usr/bin/env bash
# Every tracked performance figure of broker in one run (issue 15); the README's performance
# section is its output. In order:
#   1. the interleaved yardstick: direct, squid ssl-bump, broker tunnel and broker MITM, haproxy
#      and nghttpx (TLS-terminating, the practical limit for TLS-in/TLS-out work), and srt
#      (Anthropic's sandbox-runtime) tunnelling and terminating TLS with credential injection
#      (keep-alive on 1 and 8 connections, new connection per request, bulk), ratios to direct;
#   2. transparent capture beside the explicit proxy inside one `broker wrap` (docs/architecture.md);
#   3. `broker wrap -- true` over `true`;
#   4. memory: idle RSS per tunnel and per intercepted connection, RSS after bursts;
#   5. scale: 5,000 idle connections held while 200 clients run keep-alive requests (`serve`);
#   6. micro-benchmarks: parser, scrubber, swap, leaf mint on a cache miss, SigV4 verify +
#      re-sign, attribution (sock_diag and /proc), a policy evaluation over 1,000 rules;
#   7. the team gateway (issue 16): keep-alive requests/s with a session's budgets in memory
#      beside in Redis (one replica, two), plain HTTP and intercepted HTTPS, and the Redis round
#      trips per request;
#   8. held requests (issue 29): 1,000 requests held at once while a session asks: memory,
#      threads, listing and releasing them;
#   9. HTTP/2 (issue 30): h2load and gRPC unary through the broker beside direct, and the broker
#      RSS per idle intercepted HTTP/2 connection;
#  10. the operators' console (issue 31): its JSON at 10,000 sessions and 1,000,000 audit
#      records, the index's first scan and memory, and one session of 1,000,000 records;
#  11. the MCP reader (issue 53): tools/call requests/s through an "mcp" rule beside the same
#      host without it;
#  12. new client processes inside `broker wrap` against the same outside (issue 55): 30 curl
#      and 30 git ls-remote in a row;
#  13. a model's streamed answer (issue 55): 200 SSE events through the broker beside direct,
#      HTTP/1.1 and HTTP/2: added TTFB, added delay per event, CPU per event;
#  14. a team gateway holding thousands of streamed answers open for minutes (issue 55): RSS per
#      stream, CPU per event, Redis round trips per event, errors, the console's answer times.
#  15. where an HTTP/2 request's CPU goes at h2load -c 8 (issue 55): the broker beside haproxy,
#      each part of the work in microseconds a request, from a perf profile of each.
# It installs what it needs (Debian packages: the ../shared/bench peers, libbenchmark-dev), sets
# the peers up on loopback, and builds build/ and build-bench/. Figures are medians of rounds
# where a script takes rounds; on a 2-core machine run it with nothing else running.
# Usage: bench/all.sh [rounds]      (env: SKIP="scale micro" leaves sections out)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
shared=${SHARED:-$root/../shared}
export PEERS=${PEERS:-/tmp/peers}
skip=" ${SKIP:-} "

need=(nginx-light tinyproxy squid-openssl mitmproxy haproxy nghttp2-proxy curl libbenchmark-dev nghttp2-client python3-grpcio
  python3-h2 bubblewrap socat ripgrep nodejs npm redis-server linux-perf)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "all: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$root/scripts/build.sh" > /dev/null
broker=$root/build/broker
"$shared/bench/setup-peers.sh" > /dev/null

section() { printf '\n== %s\n' "$*"; }
run() { # name command...: runs unless SKIP names it
  if [[ $skip == *" $1 "* ]]; then echo "(skipped)"; return; fi
  shift
  "$@"
}

echo "broker $(git -C "$root" rev-parse --short HEAD) on $(nproc) CPUs, $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
section "1. yardstick, interleaved, $rounds rounds: requests/s (ratio to direct); bulk MiB/s"
echo "goals (tunnel / MITM): ka1 >= 0.90 / 0.65, ka8 >= 0.95 / 0.80, newc >= 0.85 / 1.10, bulk >= 0.95 / 0.60"
echo "(issue 32: MITM at least level with haproxy's ratio in the same run)"
run yardstick "$root/bench/interleaved.sh" "$broker" "$rounds"
section "2. transparent capture, $rounds rounds (goal: captured within 10% of explicit)"
run capture "$root/bench/capture.sh" "$broker" "$rounds"
section "3. wrap start-up and exit"
run wrap "$root/bench/wrap_overhead.sh" "$broker" 30
section "4. memory"
run footprint "$root/bench/footprint.sh" "$broker"
section "5. scale (serve, intercepted, credential bound)"
run scale "$root/bench/scale.sh" "$broker"
section "6. micro-benchmarks (CPU time per operation)"
run micro "$root/bench/micro.sh" "$root/build-bench" --benchmark_min_time=0.5 --benchmark_repetitions=3
section "7. team gateway, $rounds rounds: budgets in memory beside Redis (goal: Redis within 15%" \
  "on keep-alive, <= 1 Redis round trip per request)"
run gateway "$root/bench/gateway.sh" "$broker" "$rounds"
section "8. held requests (a session that asks): memory, threads, pending, deny"
run asks "$root/bench/asks.sh" "$broker"
section "9. HTTP/2, $rounds rounds: h2load and gRPC unary beside direct; idle h2 connection"
run h2 "$root/bench/h2.sh" "$broker" "$rounds"
section "10. operators' console: 10,000 sessions and 1,000,000 records; one session of 1,000,000"
run console "$root/bench/console_scale.py" "$broker"
run console env SESSIONS=1 RECORDS=1000000 RUNS=5 "$root/bench/console_scale.py" "$broker"
section "11. MCP reader, $rounds rounds: tools/call keep-alive requests/s through an \"mcp\" rule" \
  "beside the same host without (goal: ratio >= 0.90)"
run mcp "$root/bench/mcp.sh" "$broker" "$rounds"
section "12. new client processes inside wrap, $rounds rounds: 30 in a row against outside" \
  "(guard: inside <= 1.10x)"
run clients "$root/bench/wrap_clients.sh" "$broker" "$rounds"
section "13. a model's streamed answer (issue 55), $rounds rounds: 200 SSE events 20 ms apart," \
  "direct and through the broker (intercepted, key swapped, scrubbed, metered, --audit-sync" \
  "batch) over HTTP/1.1 and HTTP/2 (goals: TTFB within 1 ms, p99 per event within 0.3 ms)"
run sse /usr/bin/python3 "$root/bench/sse_stream.py" --rounds "$rounds" --h2 --tunnel "$broker"
section "14. a gateway holding agents' streamed answers (issue 55): 10 streams a session, an SSE" \
  "event a second each, budgets and metering on, 5 minutes at 1,000 / 5,000 / 9,900 streams" \
  "on one replica and 10,000 on two behind haproxy (goals: <= 32 KiB a stream, 0 errors," \
  "console <= 200 ms)"
run streams /usr/bin/python3 "$root/bench/gateway_streams.py" "$broker"
section "15. where an HTTP/2 request's CPU goes at h2load -c 8 -m 10, $rounds rounds: the broker" \
  "beside haproxy, by part of the work (goal: level with haproxy, or each microsecond named)"
run profile "$root/bench/h2_profile.sh" "$broker" "$rounds"
