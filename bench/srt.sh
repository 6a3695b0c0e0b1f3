# shellcheck shell=bash disable=SC2154
# Sourced by bench/interleaved.sh: starts Anthropic's sandbox-runtime (srt, Claude Code's sandbox)
# twice, each around a child that writes its environment to a file and sleeps, and adds its proxy
# to srt_contenders, for curl to use from outside the sandbox like any other contender:
#   srt-tunnel  CONNECT tunnelled to api.example.test, no interception
#   srt-mitm    network.tlsTerminate with a CA of ours, and BENCH_TOKEN masked: the child sees a
#               sentinel in its place, sends it as its bearer token, and srt puts the real value
#               in the request on its way to api.example.test (credentials.envVars, mode "mask")
# srt's proxy listens on a host loopback port and answers 407 without its per-session token. The
# child's environment has both: HTTPS_PROXY (http://USER:TOKEN@localhost:3128, a port inside the
# sandbox's network namespace) and CLAUDE_CODE_HOST_HTTP_PROXY_PORT (the port on the host).
# srt resolves api.example.test through the system (no override): setup-peers.sh's /etc/hosts line.
# Loopback is refused after resolution unless the literal 127.0.0.1:8443 is allowed too.
# srt is installed, pinned, under $SRT_DIR (outside the repository). When it cannot be installed or
# started, one line says why and the benchmark goes on without it.
# Needs: $work, $PEERS, BENCH_TOKEN (bench/policies.sh); node, npm, bwrap, socat, rg. (srt asks for
# node >= 22.12 but runs on Debian 12's node 20.)
SRT_VERSION=0.0.83
SRT_DIR=${SRT_DIR:-/var/cache/broker-bench/srt}
srt_contenders=()

srt_skip() { echo "srt: skipped: $*" >&2; }

srt_install() {
  local have
  have=$(node -p "require('$SRT_DIR/node_modules/@anthropic-ai/sandbox-runtime/package.json').version" \
    2>/dev/null) || true
  [[ $have == "$SRT_VERSION" ]] && return 0
  mkdir -p "$SRT_DIR" 2> /dev/null || return 1
  # A package.json of our own, so that npm installs into $SRT_DIR and nowhere above it.
  [[ -f $SRT_DIR/package.json ]] || echo '{ "name": "broker-bench-srt", "private": true }' \
    > "$SRT_DIR/package.json"
  npm install --prefix "$SRT_DIR" --no-audit --no-fund --loglevel=error --save-exact \
    "@anthropic-ai/sandbox-runtime@$SRT_VERSION" < /dev/null > /dev/null
}

start_srt() { # name settings-json -> srt_url: its proxy's URL, with the token; its files in $work/name
  local name=$1 dir=$work/$1 proxy port pid
  srt_url=
  mkdir -p "$dir"
  printf '%s\n' "$2" > "$dir/settings.json"
  # srt would take a proxy in its own environment as its parent proxy: it must dial nginx itself.
  env -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u http_proxy -u https_proxy -u all_proxy \
    NODE_EXTRA_CA_CERTS="$PEERS/upstream-ca.pem" \
    "$SRT_DIR/node_modules/.bin/srt" --settings "$dir/settings.json" \
    -c "env > $dir/env.tmp && mv $dir/env.tmp $dir/env && exec sleep infinity" > "$dir/srt.log" 2>&1 &
  pid=$!
  echo "$pid" > "$work/$name.pid"
  for _ in $(seq 100); do [[ -f $dir/env ]] || ! kill -0 "$pid" 2> /dev/null && break; sleep 0.1; done
  proxy=$(sed -n 's/^HTTPS_PROXY=//p' "$dir/env" 2> /dev/null)
  port=$(sed -n 's/^CLAUDE_CODE_HOST_HTTP_PROXY_PORT=//p' "$dir/env" 2> /dev/null)
  [[ $proxy == http://*@* && -n $port ]] || return 1
  srt_url=${proxy%@*}@127.0.0.1:$port
}

srt_setup() {
  local tool dir
  for tool in node npm bwrap socat rg; do
    command -v "$tool" > /dev/null ||
      { srt_skip "$tool not found (apt-get install nodejs npm bubblewrap socat ripgrep)"; return; }
  done
  getent hosts api.example.test | grep -q '^127\.0\.0\.1 ' ||
    { srt_skip "api.example.test does not resolve to 127.0.0.1 (setup-peers.sh adds it)"; return; }
  srt_install || { srt_skip "could not npm install $SRT_VERSION into $SRT_DIR"; return; }
  local net='"allowedDomains": ["api.example.test", "127.0.0.1:8443"], "deniedDomains": []'
  start_srt srt-tunnel "{ \"network\": { $net },
    \"filesystem\": { \"denyRead\": [], \"allowWrite\": [\"$work/srt-tunnel\"], \"denyWrite\": [] } }" ||
    { srt_skip "srt did not start (srt-tunnel: $(tail -n1 "$work/srt-tunnel/srt.log" 2>/dev/null))"; return; }
  srt_contenders+=("srt-tunnel|-x $srt_url|$PEERS/upstream-ca.pem")
  # srt's CA must be RSA (it signs with node-forge); its leaves are minted per host from it.
  dir=$work/srt-mitm
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 \
    -subj "/CN=srt bench CA" 2> /dev/null || { srt_skip "openssl could not make srt's CA"; return; }
  start_srt srt-mitm "{ \"network\": { $net,
      \"tlsTerminate\": { \"caCertPath\": \"$dir/ca.pem\", \"caKeyPath\": \"$dir/ca.key\" } },
    \"filesystem\": { \"denyRead\": [], \"allowWrite\": [\"$dir\"], \"denyWrite\": [] },
    \"credentials\": { \"envVars\": [ { \"name\": \"BENCH_TOKEN\", \"mode\": \"mask\",
                                      \"injectHosts\": [\"api.example.test\"] } ] } }" ||
    { srt_skip "srt did not start (srt-mitm: $(tail -n1 "$dir/srt.log" 2>/dev/null))"; return; }
  # The sentinel the child sees, sent as the child would send it (-H @file: pargs are split on spaces).
  echo "Authorization: Bearer $(sed -n 's/^BENCH_TOKEN=//p' "$dir/env")" > "$dir/auth"
  srt_contenders+=("srt-mitm|-x $srt_url -H @$dir/auth|$dir/ca.pem")
}
srt_setup
