# Sourced by the bench scripts: the two broker configurations every figure is taken with, written
# into $work: tunnel.json ("tunnel": true) and mitm.json (the default intercepting path with a
# bearer credential bound to the host, so every request goes through the brokers and every
# response through the scrubber). BENCH_TOKEN is that credential's (fake) real value.
export BENCH_TOKEN=sk-bench-0123456789abcdefghijklmnop
cat > "$work/tunnel.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443], "tunnel": true } ] }
JSON
cat > "$work/mitm.json" <<JSON
{ "version": 1, "allow": [ { "host": "api.example.test", "ports": [8443] } ],
  "credentials": { "bench": { "type": "bearer", "env": ["BENCH_TOKEN"],
                              "hosts": ["api.example.test"] } } }
JSON
