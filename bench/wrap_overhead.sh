#!/usr/bin/env bash
# What `broker wrap` adds to a command's start and exit: `broker wrap -- true` against `true`,
# run in turn (A B A B ...) so drift on a noisy machine hits both, in netns mode (with transparent
# capture) and in env mode; prints the medians and the difference in milliseconds.
# Usage: bench/wrap_overhead.sh [path/to/broker] [runs]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
runs=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ms() { # command... -> wall milliseconds of one run
  local t0 t1
  t0=$(date +%s%N)
  "$@" > /dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
"$broker" wrap -- true 2> /dev/null  # warm the page cache
for _ in $(seq "$runs"); do
  echo "true $(ms true)"
  echo "netns $(ms "$broker" wrap -- true)"
  echo "env $(ms "$broker" wrap --isolate env -- true)"
done > "$work/times"
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {k: statistics.median(int(v) for n, v in rows if n == k) / 1000 for k in ("true", "netns", "env")}
print(f"{'wrap overhead (median of runs)':<34}{'ms':>8}{'goal':>8}")
for k, label in (("netns", "broker wrap -- true (netns)"), ("env", "broker wrap --isolate env -- true")):
    print(f"{label:<34}{med[k] - med['true']:>8.1f}{'<= 30':>8}")
PY
