#!/usr/bin/env bash
# Builds and runs the micro-benchmarks (Google Benchmark): broker_micro_bench (HTTP parsing,
# response scrubbing, the credential swap, leaf minting, SigV4 verify and re-sign) and
# websocket_inspect_bench and attribution_bench, then prints one table: name, CPU time per operation, throughput.
# Exits non-zero when the build fails, a binary fails, or a benchmark reports an error.
# Usage: bench/micro.sh [build-dir] [benchmark flags...]
#   e.g. bench/micro.sh build-bench --benchmark_filter=scrub --benchmark_min_time=0.2
# JOBS (default 2) bounds the build; MICRO_JSON=dir keeps each binary's JSON output there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-bench
if (($#)) && [[ $1 != -* ]]; then
  build=$1
  shift
fi

if ! dpkg-query -W -f='${Status}' libbenchmark-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "micro: installing libbenchmark-dev" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    libbenchmark-dev
fi

export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBROKER_BENCH=ON \
  -DBROKER_TESTS=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target broker_micro_bench websocket_inspect_bench attribution_bench

out=${MICRO_JSON:-}
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
binaries=(broker_micro_bench websocket_inspect_bench attribution_bench)
for bin in "${binaries[@]}"; do
  echo "micro: running $bin" >&2
  "$build/bench/$bin" --benchmark_format=json "$@" >"$out/$bin.json"
done

python3 - "$out" "${binaries[@]}" <<'EOF'
import json, sys

out, binaries = sys.argv[1], sys.argv[2:]

def rate(value, unit, base=1000, prefixes=("k", "M", "G")):
    for power in (3, 2, 1):
        if value >= base**power:
            return f"{value / base**power:.2f} {prefixes[power - 1]}{unit}"
    return f"{value:.1f} {unit}"

def per_op_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
    us = b["cpu_time"] * scale
    return f"{us:.3f}" if us < 10 else f"{us:.1f}"

rows, failed, context = [], [], None
for bin in binaries:
    with open(f"{out}/{bin}.json") as f:
        text = f.read()
    if not text.strip():
        continue  # a --benchmark_filter that matches none of this binary's benchmarks
    doc = json.loads(text)
    context = context or doc.get("context", {})
    runs = doc.get("benchmarks", [])
    # With --benchmark_repetitions, each benchmark's median stands for it.
    repeated = {b["run_name"] for b in runs if b.get("run_type") == "aggregate"}
    for b in runs:
        if b.get("run_name") in repeated and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"]).removeprefix("BM_")
        if b.get("error_occurred"):
            failed.append(name)
            rows.append((name, "ERROR", b.get("error_message", "")))
            continue
        if "bytes_per_second" in b:
            throughput = rate(b["bytes_per_second"], "B/s", 1024, ("Ki", "Mi", "Gi"))
        elif "items_per_second" in b:
            throughput = rate(b["items_per_second"], "op/s")
        else:
            throughput = ""
        rows.append((name, per_op_us(b), throughput))

if context:
    load = ", ".join(f"{x:.2f}" for x in context.get("load_avg", []))
    print(f"micro: {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')} MHz, "
          f"load average {load or 'unknown'}; CPU time per operation")
width = max([len("benchmark")] + [len(r[0]) for r in rows])
print(f"{'benchmark':<{width}}  {'us/op':>10}  throughput")
for name, us, throughput in rows:
    print(f"{name:<{width}}  {us:>10}  {throughput}")
if failed:
    print(f"micro: {len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
    sys.exit(1)
EOF
