#!/usr/bin/env bash
# What `broker wrap` adds to a command's start and exit: `broker wrap -- true` against `true`,
# run in turn (A B A B ...) so drift on a noisy machine hits both, in netns mode (with transparent
# capture) and in env mode; prints the medians and the difference in milliseconds.
# Usage: bench/wrap_overhead.sh [path/to/broker] [runs]
# HOME_FILES=N (default 100000): the runs use a home of N files (40 top-level dotfiles, the rest
# in 40 directories, as a developer's home looks), so that what wrap does per home (its layer,
# and what the end looks at) is measured at that size; HOME_FILES=0 keeps the caller's HOME.
# A third pair writes one file in the home and one in the working directory, inside and
# without wrap: the end of a session that kept something out (set aside, named, recorded).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broker=$(realpath "${1:-$root/build/broker}")
runs=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
home_files=${HOME_FILES:-100000}
if ((home_files > 0)); then
  export HOME="$work/home"
  mkdir -p "$HOME/.config" "$HOME/.local/bin"
  for i in $(seq 40); do echo "setting $i" > "$HOME/.dotfile$i"; done
  echo '# bashrc' > "$HOME/.bashrc"
  python3 - "$HOME" "$home_files" <<'PY'
import os, sys
home, n = sys.argv[1], int(sys.argv[2])
for d in range(40):
    path = os.path.join(home, f"dir{d}")
    os.makedirs(path, exist_ok=True)
    for f in range((n - 40) // 40):
        open(os.path.join(path, f"f{f}"), "w").close()
PY
  mkdir -p "$work/project" && cd "$work/project"
fi
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
  echo "write $(ms sh -c 'echo x > "$HOME/.bench-new"; echo x > out; rm -f "$HOME/.bench-new"')"
  echo "netns-write $(ms "$broker" wrap -- sh -c 'echo x > "$HOME/.bench-new"; echo x > out')"
done > "$work/times"
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {k: statistics.median(int(v) for n, v in rows if n == k) / 1000
       for k in ("true", "netns", "env", "write", "netns-write")}
import os
print(f"home: {os.environ['HOME']} ({os.environ.get('HOME_FILES', '100000')} files)")
print(f"{'wrap overhead (median of runs)':<34}{'ms':>8}{'goal':>8}")
for k, base, label, goal in (("netns", "true", "broker wrap -- true (netns)", "<= 20"),
                             ("env", "true", "broker wrap --isolate env -- true", "<= 30"),
                             ("netns-write", "write", "a write kept out (netns)", "")):
    print(f"{label:<34}{med[k] - med[base]:>8.1f}{goal:>8}")
PY
