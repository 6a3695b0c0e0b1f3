#!/usr/bin/env bash
# New client processes inside `broker wrap` against the same outside (issue 55, item 2): 30
# `curl` processes in a row, and 30 `git ls-remote` processes in a row, to an HTTPS host (the
# ../shared/bench peers' nginx on 127.0.0.1:8443 as api.example.test; git over its dumb HTTP
# protocol, a bare repository's files). Inside, each one is intercepted (its TLS ends at the
# broker, a credential is bound to the host, the request is judged and recorded); outside it
# dials nginx directly. Runs alternate inside and outside; the figure is the median of each
# batch's wall time and their ratio (guard: inside <= 1.1x outside).
# Usage: bench/wrap_clients.sh [path/to/broker] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
rounds=${2:-5}
PEERS=${PEERS:-/tmp/peers}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$root/bench/load-lib.sh"  # die, and the peers set up
nginx_port=8443
# A bare repository nginx serves as static files (git's dumb HTTP protocol).
git init -q --bare "$work/repo.git"
git -C "$work" clone -q "$work/repo.git" src 2> /dev/null
git -C "$work/src" -c user.email=b@e -c user.name=b commit -q --allow-empty -m one
git -C "$work/src" push -q origin HEAD:main 2> /dev/null
git -C "$work/repo.git" update-server-info
mkdir -p "$PEERS/www/bench-git"
rm -rf "$PEERS/www/bench-git/repo.git"
cp -r "$work/repo.git" "$PEERS/www/bench-git/repo.git"

export BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop
cat > "$work/policy.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443] } ],
  "credentials": { "bench": { "type": "bearer", "env": ["BENCH_TOKEN"],
                              "hosts": ["api.example.test"] } } }
JSON
U=https://api.example.test:8443
# Outside, the clients trust the system's roots and the bench CA, as inside they trust the
# system's roots and the session's CA: loading ~150 roots is ~20 ms of each curl's start, the
# same on both sides.
cat /etc/ssl/certs/ca-certificates.crt "$PEERS/upstream-ca.pem" > "$work/bundle.pem"
cat > "$work/clients.sh" <<SH
#!/bin/sh
# 30 new processes of one client in a row: curl, or git ls-remote.
i=0
while [ \$i -lt 30 ]; do
  if [ "\$1" = curl ]; then
    curl -sf -o /dev/null \${OUTSIDE:+--cacert $work/bundle.pem} $U/small || exit 1
  else
    \${OUTSIDE:+env GIT_SSL_CAINFO=$work/bundle.pem} git ls-remote $U/bench-git/repo.git > /dev/null || exit 1
  fi
  i=\$((i + 1))
done
SH
chmod +x "$work/clients.sh"
ms() { # command... -> wall milliseconds, or "nan" when it failed
  local t0 t1
  t0=$(date +%s%N)
  "$@" > /dev/null 2> "$work/last.err" || { echo nan; return; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
inside() {
  "$broker" wrap --policy "$work/policy.json" --upstream-ca "$PEERS/upstream-ca.pem" \
    --connect-to "api.example.test:8443:127.0.0.1:$nginx_port" --log-dir "$work/logs" \
    -- "$work/clients.sh" "$1"
}
for client in curl git; do
  in=() out=()
  for _ in $(seq "$rounds"); do
    in+=("$(ms inside "$client")")
    out+=("$(OUTSIDE=1 ms "$work/clients.sh" "$client")")
  done
  python3 - "$client" "${in[*]}" "${out[*]}" <<'PY'
import statistics, sys
client, inside, outside = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
if "nan" in inside or "nan" in outside:
    print(f"30 {client}: a run failed (inside {inside}, outside {outside})")
    sys.exit(0)
i, o = statistics.median(map(float, inside)), statistics.median(map(float, outside))
print(f"30 {client} processes: inside wrap {i:.0f} ms, outside {o:.0f} ms, ratio {i / o:.2f} "
      f"(guard <= 1.10)")
PY
done
