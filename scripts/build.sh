#!/usr/bin/env bash
# Installs missing packages and builds broker into build/ (or build-asan/ with --sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."
"$PWD/scripts/install-deps.sh"
dir=build
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [[ ${1:-} == --sanitize ]]; then
  dir=build-asan
  args=(-DCMAKE_BUILD_TYPE=Debug -DBROKER_SANITIZE=ON)
fi
cmake -S . -B "$dir" -G Ninja "${args[@]}" >/dev/null
cmake --build "$dir" -j2
