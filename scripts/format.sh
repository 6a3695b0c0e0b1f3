#!/usr/bin/env bash
# Lays out every C++ file of the repository by the committed .clang-format (clang-format 14,
# Debian's). --check changes nothing and fails, naming the files, when one is not laid out so.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
if [[ ${1:-} == --check ]]; then
  unformatted=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
  done
  if ((${#unformatted[@]})); then
    echo "format: not laid out by .clang-format (run scripts/format.sh): ${unformatted[*]}" >&2
    exit 1
  fi
else
  clang-format -i "${files[@]}"
fi
