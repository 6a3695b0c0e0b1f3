#!/usr/bin/python3
"""The operators' console at scale (issue 31, docs/gateway.md): a gateway on Redis with SESSIONS
sessions in its registry and RECORDS audit records in its log directory (RECORDS / SESSIONS per
session, 10% refusals, 20% LLM responses with tokens and cost, spread over the last 30 days), and
how long the console's JSON takes to answer:
  index      the first scan of every file (the background reader; pages answer meanwhile),
  sessions   a page of 50 sessions (newest first, with counters and budgets), a filtered one, the
             last page,
  refusals   the newest 50 across sessions, and filtered by code and host,
  timeline   one session's records (its last page) with its chain verified,
  spend      30 days per user and session,
  page       a page's HTML,
and the broker's RSS before and after the index.
Usage: bench/console_scale.py [path/to/broker]   (env: SESSIONS=10000 RECORDS=1000000 RUNS=10)
"""
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROKER = str(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "broker").resolve())
SESSIONS = int(os.environ.get("SESSIONS", 10000))
RECORDS = int(os.environ.get("RECORDS", 1000000))
RUNS = int(os.environ.get("RUNS", 10))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def control(sock, line):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock))
        s.sendall(line.encode() + b"\n")
        out = b""
        while not out.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    return json.loads(out)


def records_of(session, count, user, now):
    """`count` chained records of one session, as a gateway replica writes them."""
    prev = "0" * 64
    out = []
    start = now - random.uniform(0, 30 * 86400)
    for seq in range(1, count + 1):
        t = start + seq * 7
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (seq % 1000)
        r = {"ts": ts, "session": session, "seq": seq}
        if seq == 1:
            r.update({"event": "session_start", "version": "0.1.0", "mode": "serve",
                      "gateway": "gw", "user": user})
        else:
            deny = random.random() < 0.1
            llm = not deny and random.random() < 0.2
            r.update({"event": "refused" if deny else "request", "pid": None, "exe": None,
                      "method": "POST" if llm else "GET", "scheme": "https",
                      "host": "api.openai.com" if llm else random.choice(
                          ["api.github.com", "registry.npmjs.org", "pypi.org", "evil.example"]),
                      "port": 443, "path": "/v1/chat/completions" if llm else "/repos/o/r",
                      "status": 403 if deny else 200, "bytes_out": 512, "bytes_in": 20311,
                      "ms": 41.2, "decision": "deny" if deny else "allow",
                      "rule": "default_deny" if deny else "allow[0]",
                      "credential": "openai" if llm else None,
                      "llm_tokens": 1500 if llm else None})
            if llm:
                r["cost_usd"] = 0.0009
            if deny:
                r["error"] = random.choice(["policy_denied", "exfiltration_blocked",
                                            "budget_exhausted"])
        r["prev"] = prev
        body = json.dumps(r, separators=(",", ":"))
        prev = hashlib.sha256((prev + body).encode()).hexdigest()
        r["hash"] = prev
        out.append(json.dumps(r, separators=(",", ":")))
    return "\n".join(out) + "\n"


def timed(url, headers, runs=RUNS):
    times = []
    size = 0
    for _ in range(runs):
        started = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as r:
            size = len(r.read())
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times), size


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    assert shutil.which("redis-server"), "redis-server is needed"
    work = Path(tempfile.mkdtemp(prefix="console-scale-"))
    procs = []
    try:
        redis_port = free_port()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.3)
        (work / "policy.json").write_text(json.dumps(
            {"version": 1, "allow": [{"host": "api.github.com"}],
             "budgets": {"requests": 1000, "llm_tokens": 1000000, "cost_usd": 10}}))
        run = work / "run"
        run.mkdir(mode=0o700)
        admin = free_port()
        env = {**os.environ, "XDG_RUNTIME_DIR": str(run), "HOME": str(work / "home")}
        gw = subprocess.Popen(
            [BROKER, "serve", "--gateway", "--listen", "127.0.0.1:0", "--policy",
             str(work / "policy.json"), "--log-dir", str(work / "logs"), "--ca-dir",
             str(work / "ca"), "--admin", f"127.0.0.1:{admin}", "--redis",
             f"redis://127.0.0.1:{redis_port}", "--replica", "r1", "--session", "gw"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        procs.append(gw)
        gw.stdout.readline()
        sock = next(run.rglob("control.sock"))
        token = control(sock, "admin-token-create bench")["token"]
        headers = {"Authorization": f"Bearer {token}"}
        base = f"http://127.0.0.1:{admin}"

        started = time.perf_counter()
        ids = []
        for i in range(SESSIONS):
            made = control(sock, "session-create " + json.dumps(
                {"user": f"user{i % 50}", "labels": {"team": f"t{i % 7}"}, "ttl_s": 86400}))
            ids.append(made["session"]["id"])
        made_s = time.perf_counter() - started
        started = time.perf_counter()
        per = max(2, RECORDS // SESSIONS)
        now = time.time()
        random.seed(1)
        for i, sid in enumerate(ids):
            d = work / "logs" / sid
            d.mkdir(parents=True, exist_ok=True)
            (d / "r0.000001.jsonl").write_text(records_of(sid, per, f"user{i % 50}", now))
        written_s = time.perf_counter() - started
        size = sum(p.stat().st_size for p in (work / "logs").rglob("*.jsonl"))
        print(f"{SESSIONS} sessions made in {made_s:.1f} s; {SESSIONS * per} records "
              f"({size / 2**20:.0f} MiB) written in {written_s:.1f} s")

        rss_before = rss_kib(gw.pid)
        started = time.perf_counter()
        while True:
            with urllib.request.urlopen(urllib.request.Request(
                    base + "/api/console/sessions?per_page=1", headers=headers), timeout=60) as r:
                index = json.load(r)["index"]
            if index["ready"] and index["records"] >= SESSIONS * per:
                break
            time.sleep(0.2)
        index_s = time.perf_counter() - started
        rss_after = rss_kib(gw.pid)
        print(f"index: first scan {index_s:.1f} s ({index['records']} records, "
              f"{index['files']} files)")
        print(f"broker RSS: {rss_before / 1024:.0f} MiB before the index, "
              f"{rss_after / 1024:.0f} MiB after")
        # Let a rescan run before timing (they run every second while someone looks).
        time.sleep(1.5)
        victim = ids[len(ids) // 2]
        rows = [
            ("sessions, first page", "/api/console/sessions"),
            ("sessions, filtered (q=user7)", "/api/console/sessions?q=user7"),
            ("sessions, last page", f"/api/console/sessions?page={(SESSIONS - 1) // 50}"),
            ("refusals, newest 50", "/api/console/refusals"),
            ("refusals, code + host", "/api/console/refusals?code=policy_denied&host=evil"),
            ("timeline, last page (+ verdict)", f"/api/console/sessions/{victim}/timeline"),
            ("spend, 30 days", "/api/console/spend?days=30"),
            ("page HTML", "/console/sessions"),
        ]
        print(f"\n| console request ({SESSIONS} sessions, {SESSIONS * per} records) | median ms | max ms | bytes |")
        print("|---|---|---|---|")
        for name, path in rows:
            median, worst, nbytes = timed(base + path, headers)
            print(f"| {name} | {median:.1f} | {worst:.1f} | {nbytes} |")
        # A long session's verdict comes after its records (the page asks again): its time.
        started = time.perf_counter()
        while True:
            with urllib.request.urlopen(urllib.request.Request(
                    base + f"/api/console/sessions/{victim}/timeline", headers=headers),
                    timeout=120) as r:
                if "ok" in json.load(r)["verify"]:
                    break
            time.sleep(0.5)
        median, worst, nbytes = timed(base + f"/api/console/sessions/{victim}/timeline", headers)
        print(f"| timeline, verdict kept (verified {time.perf_counter() - started:.1f} s after) "
              f"| {median:.1f} | {worst:.1f} | {nbytes} |")
        with urllib.request.urlopen(urllib.request.Request(
                base + "/api/console/sessions?per_page=1", headers=headers), timeout=60) as r:
            index = json.load(r)["index"]
        print(f"\nrescan while watched: {index['scan_ms']:.0f} ms a second")
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
