#!/usr/bin/env bash
# Builds broker and its tests, checks the layout (scripts/format.sh --check), runs a short smoke
# of each fuzz target (scripts/fuzz.sh) and the whole test suite (unit + integration) with ctest.
# --sanitize: the same suite on an ASan+UBSan build (build-asan/), without the fuzz smoke.
set -euo pipefail
cd "$(dirname "$0")/.."
"$PWD/scripts/build.sh" --tests "$@"
"$PWD/scripts/format.sh" --check
dir=build
[[ ${1:-} == --sanitize ]] && dir=build-asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The real agents (Codex, Claude Code, Gemini CLI) that tests/integration/test_real_agents.py
# runs inside `broker wrap`: pinned, into ${BROKER_AGENTS_DIR:-/var/cache/broker-agents}.
"$PWD/scripts/install-agents.sh"
# The fuzz smoke first, so that ctest's summary is the run's closing line.
[[ ${1:-} == --sanitize ]] || "$PWD/scripts/fuzz.sh" --smoke
ctest --test-dir "$dir" -j2 --output-on-failure --timeout 600
