# Sourced by bench/yardstick.sh and bench/interleaved.sh: starts the two broker contenders on
# loopback, both mapping api.example.test:8443 onto the peers' nginx.
#   :18443  a tunnel ("tunnel": true)
#   :18444  the default intercepting path, with a credential bound to the host, so that every
#           request goes through the brokers and every response through the scrubber
# Needs: $broker, $work (a scratch dir), $PEERS.
source "$root/bench/policies.sh"
start_contender() { # name port policy extra-args...
  local name=$1 port=$2 policy=$3; shift 3
  "$broker" serve --listen 127.0.0.1:"$port" --policy "$policy" --log-dir "$work/logs" \
    --ca-dir "$work/ca" --connect-to api.example.test:8443:127.0.0.1:8443 --log-level warn "$@" \
    > "$work/$name.out" &
  echo $! > "$work/broker-$name.pid"
  for _ in $(seq 50); do grep -q listening "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
}
start_contender tunnel 18443 "$work/tunnel.json"
BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop start_contender mitm 18444 "$work/mitm.json" \
  --upstream-ca "$PEERS/upstream-ca.pem"
