#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan+UBSan) in build-fuzz/ and runs each
# for a while on a scratch copy of its seed corpus (tests/fuzz/corpus/TARGET/), so generated
# inputs never land in the repo.
#   scripts/fuzz.sh [--smoke] [--seconds N] [TARGET...]
# --smoke: 15 s per target (what scripts/test.sh runs); otherwise N seconds, default 300.
# No TARGET: all of them. Prints one line per target with libFuzzer's run count; exits 1 when a
# target finds a crash, leak or timeout, leaving the reproducer in build-fuzz/findings/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '5,8s/^# \{0,1\}//p' "$0"; }

seconds=300
targets=()
while (($#)); do
  case $1 in
    --smoke) seconds=15 ;;
    --seconds)
      [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds needs a number" >&2; exit 2; }
      seconds=$2
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done

all=()
for source in tests/fuzz/*_fuzz.cpp; do
  name=${source##*/}
  all+=("${name%_fuzz.cpp}")
done
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ -f tests/fuzz/${t}_fuzz.cpp ]] || { echo "fuzz.sh: no target $t (have: ${all[*]})" >&2; exit 2; }
done

"$PWD/scripts/install-deps.sh"
build="build-fuzz"
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ nice -n 10 cmake -S tests/fuzz -B "$build" -G Ninja >/dev/null
fi
nice -n 10 cmake --build "$build" -j2

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$symbolizer}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
  corpus=$scratch/$t
  findings=$build/findings/$t
  log=$build/logs/$t.log
  mkdir -p "$corpus" "$findings" "${log%/*}"
  cp -R "tests/fuzz/corpus/$t/." "$corpus/"
  dict=()
  [[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")
  rc=0
  nice -n 10 "$build/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)
  if ((rc == 0)); then
    echo "fuzz: $t: ${done_line:-no run count in $log}"
  else
    failed=1
    reproducer=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: $t: FAILED (exit $rc) reproducer: ${reproducer:-none written} log: $log" >&2
    [[ -n $reproducer ]] && echo "fuzz: reproduce with $build/${t}_fuzz $reproducer" >&2
    grep -E 'ERROR: |SUMMARY: |property violated' "$log" | head -n 5 >&2 || true
  fi
done
exit "$failed"
