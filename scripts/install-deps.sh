#!/usr/bin/env bash
# Installs the Debian 12 packages broker needs (docs/architecture.md). Idempotent: runs apt-get only when
# something is missing.
#   --build  what building broker and `broker demo` need (the quick start's first command)
#   (none)   that, and what the tests and benchmarks run: clients, servers, sanitizers
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev libssl-dev node-llhttp nlohmann-json3-dev libspdlog-dev libfmt-dev
  libcli11-dev libseccomp-dev libnftnl-dev libmnl-dev libhiredis-dev
  zlib1g-dev libbrotli-dev libzstd-dev libnghttp2-dev libjs-chart.js libtomlplusplus-dev
  libgit2-dev
  curl
)
if [[ ${1:-} != --build ]]; then
  packages+=(
    catch2 clang-format
    openssl python3 python3-pytest python3-requests git gh iproute2 zstd brotli tmux
    python3-boto3 awscli python3-google-auth python3-pip python3-setuptools
    clang libclang-rt-14-dev llvm-14
    redis-server haproxy rsyslog openssh-client openssh-server
    nghttp2-client python3-grpcio python3-h2
    chromium chromium-driver python3-selenium
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
