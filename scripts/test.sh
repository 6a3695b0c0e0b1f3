#!/usr/bin/env bash
# Builds broker and runs the whole test suite (unit + integration) with ctest.
# --sanitize: the same suite on an ASan+UBSan build (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
"$PWD/scripts/build.sh" "$@"
dir=build
[[ ${1:-} == --sanitize ]] && dir=build-asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$dir" -j2 --output-on-failure --timeout 600
[[ ${1:-} == --sanitize ]] || "$PWD/scripts/fuzz.sh" --smoke
