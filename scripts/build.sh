#!/usr/bin/env bash
# Installs missing packages and builds broker into build/ (or build-asan/ with --sanitize).
#   --tests     also the unit tests and fuzz targets (scripts/test.sh passes it)
#   --sanitize  a Debug build with ASan+UBSan into build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
tests=OFF
for arg in "$@"; do
  case $arg in
    --tests) tests=ON ;;
    --sanitize)
      dir=build-asan
      args=(-DCMAKE_BUILD_TYPE=Debug -DBROKER_SANITIZE=ON)
      ;;
    *) echo "build.sh: unknown option $arg (--tests, --sanitize)" >&2; exit 2 ;;
  esac
done
if [[ $tests == ON ]]; then
  "$PWD/scripts/install-deps.sh"
else
  "$PWD/scripts/install-deps.sh" --build
fi
# A build directory keeps the tests it was configured with unless --tests asks for them.
[[ $tests == ON || ! -f $dir/CMakeCache.txt ]] && args+=(-DBROKER_TESTS=$tests)
cmake -S . -B "$dir" -G Ninja "${args[@]}" >/dev/null
if [[ $tests == ON ]]; then
  cmake --build "$dir" -j2
else
  cmake --build "$dir" -j2 --target broker
fi
