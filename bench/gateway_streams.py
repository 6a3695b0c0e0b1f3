#!/usr/bin/python3
"""A team gateway holding thousands of agents' streamed model answers open (issue 55).

`broker serve --gateway` on Redis, SESSIONS sessions (each with budgets on requests, bytes, LLM
tokens and cost), PER_SESSION streams each: a CONNECT tunnel with the session's proxy credential,
TLS the gateway intercepts, and POSTs to a fake api.openai.com whose answers are SSE streams of
EVENTS events, one every INTERVAL s (the last with usage, which the meter reads and the budgets
count), one answer after another for DURATION s. The OpenAI key is bound to the host and swapped
for each session's dummy; every answer is scrubbed, metered and one durable audit record
(`--audit-sync batch`). Both ends are bench/streams (one thread each); everything is on loopback.

Measured over the window (from WARM s after every stream is set up to 3 s before the end):
  KiB/stream    the gateways' RSS (median of samples) less their RSS with the sessions made and
                no stream open, over the streams open (goal <= 32 KiB),
  CPU us/event  the gateways' CPU (every thread) over the events the clients read,
  Redis rt/event  round trips the gateways made (/metrics, request and background paths), and
                Redis's own socket reads (INFO), over the events; and the round trips per answer,
  errors        streams that failed to set up, answers that were not 200 or broke off (goal 0),
  console       the operators' console during the run: its sessions JSON (first page, with
                counters and budgets) and the sessions page's HTML, answer times (goal <= 200 ms),
  delay         each event's delay from the upstream's write to the client's read (p50/p99/max).
The upstream offers HTTP/2, as api.openai.com does: the gateway multiplexes the answers over a
few upstream connections (100 streams each). Each CLIENTS entry runs every level: h1, each stream
its own client connection; h2, a session's streams on one HTTP/2 connection. Each LEVELS entry is a run with one replica; REPLICAS2=1 adds STREAMS2 streams with two replicas
on the same Redis behind haproxy (TCP, round robin; two haproxy processes on one port,
SO_REUSEPORT), the sessions shared. On a machine whose descriptors are capped at 20,000 a
process (a container's hard limit root cannot raise), one replica holds at most 9,968 client
connections (two descriptors each, kept for a tunnel or an HTTP/1.1 upstream): hence 9,900.

Usage: bench/gateway_streams.py [path/to/broker]
  env: LEVELS="1000 5000 9900" (streams) STREAMS2=10000 PER_SESSION=10 DURATION=300 WARM=10
       EVENTS=60 INTERVAL=1 REPLICAS2=1 CLIENTS="h1 h2" STREAMS=path/to/bench/streams
"""
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sse_stream import HOST, REAL_KEY, make_pki  # noqa: E402  (the same fake host and PKI)
from console_scale import control as console_control, free_port, rss_kib  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BROKER = str(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "broker").resolve())
LEVELS = [int(x) for x in os.environ.get("LEVELS", "1000 5000 9900").split()]
STREAMS2 = int(os.environ.get("STREAMS2", 10000))
PER_SESSION = int(os.environ.get("PER_SESSION", 10))
DURATION = float(os.environ.get("DURATION", 300))
WARM = float(os.environ.get("WARM", 10))
EVENTS = int(os.environ.get("EVENTS", 60))
INTERVAL = float(os.environ.get("INTERVAL", 1))
REPLICAS2 = os.environ.get("REPLICAS2", "1") == "1"
CLIENTS = os.environ.get("CLIENTS", "h1 h2").split()


def control(sock, line):
    answer = console_control(sock, line)
    if "error" in answer:
        sys.exit(f"control {line.split()[0]}: {answer['error']}")
    return answer


def cpu_ns(pid):
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass  # a thread that ended meanwhile
    return total


def redis_round_trips(admins):
    total = 0
    for admin in admins:
        with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("broker_redis_round_trips_total{"):
                    total += int(float(line.split()[-1]))
    return total


def redis_reads(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "stats"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("total_reads_processed:"):
            return int(line.split(":")[1]) - 1  # this query's own read
    return 0


def raise_fd_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def timed_get(url, headers):
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
        r.read()
        status = r.status
    return (time.perf_counter() - started) * 1000, status


class Run:
    """One level: Redis, the upstream, the gateways (and haproxy), the sessions, the streams."""

    def __init__(self, streams_bin, pki, work, streams, replicas, client="h1"):
        self.streams_bin, self.pki, self.work = streams_bin, pki, work
        self.streams, self.replicas, self.client = streams, replicas, client
        self.sessions = max(1, streams // PER_SESSION)
        self.procs = []

    def spawn(self, args, **kw):
        p = subprocess.Popen(args, preexec_fn=raise_fd_limit, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    def start(self):
        w = self.work
        self.redis_port = free_port()
        self.spawn(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--maxclients", "1000"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        up = self.spawn([self.streams_bin, "serve", "--cert", str(self.pki / "leaf.pem"),
                         "--key", str(self.pki / "leaf.key"), "--events", str(EVENTS),
                         "--interval", str(INTERVAL)], stdout=subprocess.PIPE, text=True)
        up_port = json.loads(up.stdout.readline())["port"]
        (w / "team.json").write_text(json.dumps(
            {"version": 1, "allow": [{"host": HOST, "ports": [443]}],
             "credentials": {"openai": {"type": "bearer", "env": ["OPENAI_API_KEY"],
                                        "hosts": [HOST]}}}))
        big = 10 ** 15
        self.budgets = json.dumps({"version": 1, "budgets": {
            "requests": big, "bytes_out": big, "bytes_in": big, "llm_tokens": big,
            "cost_usd": 10 ** 9}})
        run_dir = w / "run"
        run_dir.mkdir(mode=0o700)
        env = {"PATH": os.environ["PATH"], "HOME": str(w), "XDG_RUNTIME_DIR": str(run_dir),
               "OPENAI_API_KEY": REAL_KEY}
        self.gateways = []  # (proc, listen, admin, control socket)
        for i in range(self.replicas):
            admin = f"127.0.0.1:{free_port()}"
            name = f"streams-{os.getpid()}-{i}"
            g = self.spawn(
                [BROKER, "serve", "--gateway", "--listen", "127.0.0.1:0", "--policy",
                 str(w / "team.json"), "--log-dir", str(w / "logs"), "--ca-dir", str(w / "ca"),
                 "--admin", admin, "--redis", f"redis://127.0.0.1:{self.redis_port}",
                 "--replica", f"r{i + 1}", "--session", name, "--upstream-ca",
                 str(self.pki / "ca.pem"), "--connect-to", f"{HOST}:443:127.0.0.1:{up_port}",
                 "--audit-sync", "batch", "--log-level", "warn"],
                stdout=subprocess.PIPE, stderr=open(w / f"gateway{i}.err", "wb"), env=env,
                text=True)
            line = g.stdout.readline()
            if "listening on http://" not in line:
                sys.exit(f"gateway {i} did not start: {line!r} "
                         f"{(w / f'gateway{i}.err').read_text()[-800:]}")
            listen = line.split("listening on http://")[1].split()[0].rstrip("/")
            sock = next(p for p in run_dir.rglob("control.sock") if name in str(p))
            self.gateways.append((g, listen, admin, sock))
        self.proxy = self.gateways[0][1]
        if self.replicas > 1:
            port = free_port()
            servers = "\n".join(f"  server g{i} {g[1]}" for i, g in enumerate(self.gateways))
            (w / "haproxy.cfg").write_text(
                f"global\n  maxconn 9000\ndefaults\n  mode tcp\n  timeout connect 5s\n"
                f"  timeout client 600s\n  timeout server 600s\n"
                f"frontend f\n  bind 127.0.0.1:{port}\n  default_backend b\n"
                f"backend b\n  balance roundrobin\n{servers}\n")
            for i in range(2):  # each holds half the connections: two descriptors each
                self.spawn(["haproxy", "-f", str(w / "haproxy.cfg"), "-db"],
                           stdout=subprocess.DEVNULL, stderr=open(w / f"haproxy{i}.err", "wb"))
            self.proxy = f"127.0.0.1:{port}"
            time.sleep(0.5)
        sock = self.gateways[0][3]
        self.admin_headers = {
            "Authorization": f"Bearer {control(sock, 'admin-token-create bench')['token']}"}
        started = time.perf_counter()
        lines = []
        for i in range(self.sessions):
            made = control(sock, "session-create " + json.dumps(
                {"policies": [{"source": "budgets.json", "text": self.budgets}],
                 "ttl_s": 86400, "user": f"user{i % 50}", "labels": {"team": f"t{i % 7}"}}))
            auth = made["proxy_url"].split("//")[1].rsplit("@", 1)[0]
            dummy = dict(made["env"])["OPENAI_API_KEY"]
            lines.append(f"{auth} {dummy}\n")
        (w / "sessions").write_text("".join(lines))
        self.made_s = time.perf_counter() - started

    def pids(self):
        return [g[0].pid for g in self.gateways]

    def sample(self, last_tick):
        return {"t": time.monotonic(), "cpu": sum(cpu_ns(p) for p in self.pids()),
                "rt": redis_round_trips([g[2] for g in self.gateways]),
                "reads": redis_reads(self.redis_port), "events": last_tick["events"],
                "answers": last_tick["answers"], "open": last_tick["open"]}

    def measure(self):
        time.sleep(1)  # the gateways settle after the sessions are made
        rss0 = sum(rss_kib(p) for p in self.pids())
        client = self.spawn(
            [self.streams_bin, "run", "--proxy", self.proxy, "--target", f"{HOST}:443", "--ca",
             str(self.work / "ca" / "ca.pem"), "--sessions", str(self.work / "sessions"),
             "--per-session", str(PER_SESSION), "--duration", str(DURATION)]
            + (["--h2"] if self.client == "h2" else []),
            stdout=subprocess.PIPE, stderr=open(self.work / "client.err", "wb"), text=True)
        state = {"tick": None, "ready": None, "done": None}
        got = threading.Event()

        def read():
            for line in client.stdout:
                msg = json.loads(line)
                state[msg["event"]] = msg
                if msg["event"] == "ready":
                    got.set()
            got.set()
        threading.Thread(target=read, daemon=True).start()
        got.wait()
        if state["ready"] is None:
            sys.exit(f"streams run ended early: {(self.work / 'client.err').read_text()[-800:]}")
        ready_at = time.monotonic()
        while state["tick"] is None:
            time.sleep(0.1)
        time.sleep(WARM)
        a = self.sample(state["tick"])
        rss, json_ms, page_ms, statuses = [], [], [], set()
        base = f"http://{self.gateways[0][2]}"
        end_at = ready_at + DURATION - 3
        while time.monotonic() < end_at - 5:
            rss.append(sum(rss_kib(p) for p in self.pids()))
            ms, status = timed_get(base + "/api/console/sessions", self.admin_headers)
            json_ms.append(ms)
            statuses.add(status)
            ms, status = timed_get(base + "/console/sessions", self.admin_headers)
            page_ms.append(ms)
            statuses.add(status)
            time.sleep(max(0.0, min(5.0, end_at - 5 - time.monotonic())))
        time.sleep(max(0.0, end_at - time.monotonic()))
        b = self.sample(state["tick"])
        client.wait(timeout=DURATION + 120)
        done = state["done"] or {}
        events = b["events"] - a["events"]
        return {
            "streams": self.streams, "sessions": self.sessions, "replicas": self.replicas,
            "client": self.client,
            "made_s": self.made_s, "setup_s": state["ready"]["setup_seconds"],
            "open": b["open"], "seconds": b["t"] - a["t"], "events": events,
            "answers": b["answers"] - a["answers"],
            "errors": done.get("errors", -1), "first_error": done.get("first_error", "(no done)"),
            "rss0_mib": rss0 / 1024, "rss_mib": statistics.median(rss) / 1024,
            "kib_per_stream": (statistics.median(rss) - rss0) / max(1, b["open"]),
            "cpu_us_event": (b["cpu"] - a["cpu"]) / 1000 / max(1, events),
            "cpu_share": (b["cpu"] - a["cpu"]) / 1e9 / (b["t"] - a["t"]),
            "rt_event": (b["rt"] - a["rt"]) / max(1, events),
            "rt_answer": (b["rt"] - a["rt"]) / max(1, b["answers"] - a["answers"]),
            "reads_event": (b["reads"] - a["reads"]) / max(1, events),
            "json_ms": json_ms, "page_ms": page_ms, "statuses": sorted(statuses),
            "delay": (done.get("delay_p50_ms", 0), done.get("delay_p99_ms", 0),
                      done.get("delay_max_ms", 0))}


def find_streams():
    """$STREAMS, else a bench build dir's (brought up to date), else a new build-bench/."""
    if os.environ.get("STREAMS"):
        return os.environ["STREAMS"]
    for d in (ROOT / "build-bench", ROOT / "build"):
        cache = d / "CMakeCache.txt"
        if cache.exists() and "BROKER_BENCH:BOOL=ON" in cache.read_text(errors="replace"):
            break
    else:
        d = ROOT / "build-bench"
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(d), "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DBROKER_BENCH=ON",
                        "-DBROKER_TESTS=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(d), "--target", "streams"], check=True,
                   stdout=subprocess.DEVNULL)
    return str(d / "bench" / "streams")


def main():
    for tool in ("redis-server", "redis-cli") + (("haproxy",) if REPLICAS2 else ()):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")
    raise_fd_limit()
    streams_bin = find_streams()
    top = Path(tempfile.mkdtemp(prefix="gateway-streams-"))
    pki = top / "pki"
    pki.mkdir()
    make_pki(pki)
    plan = [(n, 1, c) for c in CLIENTS for n in LEVELS] + \
        ([(STREAMS2, 2, c) for c in CLIENTS] if REPLICAS2 else [])
    print(f"broker {BROKER}; {PER_SESSION} streams a session, an answer of {EVENTS} events one "
          f"every {INTERVAL:g} s, {DURATION:g} s a run (window from {WARM:g} s after set-up)")
    print("goals: <= 32 KiB a stream, 0 errors, console <= 200 ms")
    rows = []
    try:
        for streams, replicas, client in plan:
            work = top / f"{streams}-{replicas}-{client}"
            work.mkdir()
            run = Run(streams_bin, pki, work, streams, replicas, client)
            try:
                run.start()
                rows.append(run.measure())
            finally:
                run.stop()
            r = rows[-1]
            print(f"  {streams} streams over {client}, {replicas} replica(s): {r['sessions']} sessions made in "
                  f"{r['made_s']:.1f} s, streams set up in {r['setup_s']:.1f} s, "
                  f"{r['events'] / r['seconds']:.0f} events/s, console {r['statuses']}"
                  + (f", first error: {r['first_error']}" if r["errors"] else ""), flush=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print()
    print("| client | streams | sessions | replicas | open | errors | RSS MiB (none open) | KiB/stream "
          "| CPU µs/event | gateway CPU | Redis rt/event | rt/answer | Redis reads/event "
          "| console JSON p50/max ms | page p50/max ms | delay p50/p99/max ms |")
    print("|" + "---|" * 16)
    for r in rows:
        j, p = r["json_ms"], r["page_ms"]
        print(f"| {r['client']} | {r['streams']:,} | {r['sessions']:,} | {r['replicas']} | {r['open']:,} "
              f"| {r['errors']} | {r['rss_mib']:.0f} ({r['rss0_mib']:.0f}) "
              f"| {r['kib_per_stream']:.1f} | {r['cpu_us_event']:.0f} "
              f"| {r['cpu_share'] * 100:.0f}% | {r['rt_event']:.3f} | {r['rt_answer']:.2f} "
              f"| {r['reads_event']:.3f} | {statistics.median(j):.0f} / {max(j):.0f} "
              f"| {statistics.median(p):.0f} / {max(p):.0f} "
              f"| {r['delay'][0]:.2f} / {r['delay'][1]:.2f} / {r['delay'][2]:.0f} |")


if __name__ == "__main__":
    main()
