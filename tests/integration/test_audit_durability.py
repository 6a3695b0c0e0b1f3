"""A durable audit log (docs/audit-log.md): a full disk fails closed (503 audit_unavailable), loses no
record and lets nothing upstream unrecorded, and the session serves again by itself once there
is room, in `serve` and in a gateway whose sinks are away."""
import base64
import errno
import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from conftest import (Broker, RawClient, allow_policy, assert_refusal, connect_to_arg,
                      run_broker_cli)

HOST = "api.example.test"


def plain_get(port, path, upstream_port, auth=None, timeout=5.0):
    """One GET of http://HOST:upstream_port{path} through the proxy on a connection of its own;
    the RawResponse, or None when the connection broke before a whole response."""
    head = (f"GET http://{HOST}:{upstream_port}{path} HTTP/1.1\r\nHost: {HOST}:{upstream_port}\r\n"
            "Connection: close\r\n")
    if auth:
        head += f"Proxy-Authorization: Basic {base64.b64encode(auth.encode()).decode()}\r\n"
    try:
        with RawClient(port, timeout=timeout) as c:
            c.send((head + "\r\n").encode())
            return c.read_response()
    except (OSError, ConnectionError):
        return None


def log_lines(path):
    """The whole lines of a log file, and whether it ends in a partial one."""
    data = path.read_bytes() if path.exists() else b""
    whole, _, rest = data.rpartition(b"\n")
    lines = [json.loads(line) for line in whole.split(b"\n") if line] if whole else []
    return lines, bool(rest)


def verify(log, home):
    return run_broker_cli("log", log, "--verify", "--key", home / ".config/broker/audit-key")


# --------------------------------------------------------------------------------------------
# A full disk
# --------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs of the test's own, unmounted whatever happens (request it before
    broker_factory: it is torn down after the brokers writing to it)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory):
    """Writes a filler file until the file system has no byte left; returns its path."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 4096, 256, 16, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    return filler


def refused_until_room(port, upstream_port, tag, auth=None):
    """Requests after the disk filled: a few may still fit in the log's last page. The one whose
    record meets the full disk gets a 503, or, when its response head had gone out before its
    record was due (a body that came after the head), a cut connection. Every request after it is
    refused 503 audit_unavailable. Returns the paths sent."""
    sent = []
    for i in range(100):
        sent.append(f"/k/{tag}-{i}")
        r = plain_get(port, sent[-1], upstream_port, auth)
        if r is None:
            break
        if r.status != 200:
            assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503)
            break
    else:
        raise AssertionError("100 requests answered on a full disk")
    assert i < 30, f"{i} requests answered after the disk filled"
    for j in range(10):
        sent.append(f"/k/{tag}-refused-{j}")
        r = plain_get(port, sent[-1], upstream_port, auth)
        assert r is not None
        assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503)
        time.sleep(0.05)
    return sent


def recovers(port, upstream_port, tag, auth=None, limit=2.0):
    """Polls with requests until one is answered; returns the seconds it took and the paths."""
    started = time.monotonic()
    sent = []
    while True:
        sent.append(f"/k/{tag}-{len(sent)}")
        r = plain_get(port, sent[-1], upstream_port, auth)
        if r is not None and r.status == 200:
            return time.monotonic() - started, sent
        assert time.monotonic() - started < limit, f"still refused: {r and r.body[:300]!r}"
        time.sleep(0.05)


def request_paths(records):
    return sorted(x["path"] for x in records
                  if x.get("event") == "request" and x.get("decision") == "allow")


def test_a_full_disk_fails_closed_and_the_session_recovers_when_room_returns(
        small_disk, broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]), log_dir=small_disk / "logs",
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    for i in range(20):
        assert plain_get(b.port, f"/k/before-{i}", upstream.port).status == 200
    before = b.log_path.read_bytes()

    filler = fill(small_disk)
    refused_until_room(b.port, upstream.port, "full")
    # A CONNECT gets its 200 and the refusal comes inside (docs/cli.md), request by request:
    # nothing is dialed, and the connection serves again once there is room.
    with RawClient(b.port) as c:
        c.send(f"CONNECT {HOST}:{upstream.port} HTTP/1.1\r\nHost: {HOST}:{upstream.port}\r\n\r\n"
               .encode())
        assert c.read_response(head_only=True).status == 200
        c.send(f"GET /k/inside HTTP/1.1\r\nHost: {HOST}:{upstream.port}\r\n\r\n".encode())
        r = c.read_response()
        assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503, session=b.session)
    # Nothing written is lost, and no torn record sits at the end of the chain.
    during = b.log_path.read_bytes()
    assert during.startswith(before) and during.endswith(b"\n")
    out = verify(b.log_path, b.home).stdout
    assert ": incomplete:" in out, out

    os.remove(filler)
    took, _ = recovers(b.port, upstream.port, "after")
    for i in range(5):
        assert plain_get(b.port, f"/k/later-{i}", upstream.port).status == 200
    assert b.stop() == 0
    print(f"\nserved again {took * 1000:.0f} ms after the filler was removed")

    after = b.log_path.read_bytes()
    assert after.startswith(before)
    out = verify(b.log_path, b.home).stdout
    assert ": ok, " in out, out
    records, partial = log_lines(b.log_path)
    assert not partial
    # Every request the upstream saw is recorded, once (the one whose record met the full disk
    # got a 503 and its record once there was room), and nothing recorded went nowhere.
    assert request_paths(records) == sorted(x["path"] for x in upstream.requests)
    assert "audit log written again after" in b.stderr


# --------------------------------------------------------------------------------------------
# A full disk in a gateway, its Redis and syslog sinks away at the same time
# --------------------------------------------------------------------------------------------


def test_a_full_disk_in_a_gateway_with_its_sinks_away(small_disk, broker_factory, upstream,
                                                      tmp_path):
    from gateway_session import create_session
    from redis_server import RedisServer, free_port
    from test_audit_syslog import RSYSLOGD, Rsyslog

    if not os.path.exists(RSYSLOGD):
        pytest.skip("rsyslog is not installed (scripts/install-deps.sh)")
    redis = RedisServer(tmp_path / "redis")
    syslog_dir = tmp_path / "syslog"
    syslog_dir.mkdir()
    rsyslog = Rsyslog(syslog_dir, free_port())
    rsyslog.start()
    try:
        gw = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]), session="gw-full",
                            log_dir=small_disk / "logs",
                            connect_to=[connect_to_arg(HOST, upstream.port)],
                            args=["--gateway", "--redis", redis.url, "--replica", "r1",
                                  "--audit-sink", "redis",
                                  "--audit-sink", f"syslog:127.0.0.1:{rsyslog.port}"])
        sid, env, _ = create_session(gw)
        auth = env["HTTP_PROXY"].split("//", 1)[1].rsplit("@", 1)[0]
        for i in range(10):
            assert plain_get(gw.port, f"/k/before-{i}", upstream.port, auth).status == 200
        [log] = (small_disk / "logs" / sid).glob("r1.*.jsonl")
        before = log.read_bytes()

        redis.stop()
        rsyslog.stop()
        filler = fill(small_disk)
        refused_until_room(gw.port, upstream.port, "full", auth)
        during = log.read_bytes()
        assert during.startswith(before) and during.endswith(b"\n")

        os.remove(filler)
        took, _ = recovers(gw.port, upstream.port, "after", auth)
        print(f"\ngateway session served again {took * 1000:.0f} ms after the filler was removed "
              "(Redis and syslog still away)")
        redis.start()
        rsyslog.start()
        for i in range(3):
            assert plain_get(gw.port, f"/k/back-{i}", upstream.port, auth).status == 200

        v = run_broker_cli("log", sid, "--verify", "--log-dir", small_disk / "logs")
        assert ": incomplete:" in v.stdout and "tampered" not in v.stdout, v.stdout
        records, partial = log_lines(log)
        assert not partial and log.read_bytes().startswith(before)
        assert request_paths(records) == sorted(x["path"] for x in upstream.requests)

        # Both sinks get every record once they are back (at least once: keyed by seq).
        written = {(x["session"], x["seq"]) for x in records}
        deadline = time.monotonic() + 30
        while True:
            raw = subprocess.run(["redis-cli", "-p", str(redis.port), "--raw", "XRANGE",
                                  "broker:audit", "-", "+"], capture_output=True, text=True,
                                 check=True).stdout
            streamed = set()
            for line in raw.splitlines():
                if line.startswith("{"):
                    rec = json.loads(line)
                    streamed.add((rec["session"], rec["seq"]))
            syslogged = {(m[3]["session"], m[3]["seq"]) for m in rsyslog.messages()}
            if written <= streamed and written <= syslogged:
                break
            assert time.monotonic() < deadline, (
                f"not streamed: {sorted(written - streamed)[:5]}, "
                f"not syslogged: {sorted(written - syslogged)[:5]}")
            time.sleep(0.2)
        assert gw.stop() == 0
    finally:
        if rsyslog.proc.poll() is None:
            rsyslog.stop()
        redis.stop()


# --------------------------------------------------------------------------------------------
# A broker killed at a random instant
# --------------------------------------------------------------------------------------------

KILL_RUNS = int(os.environ.get("BROKER_KILL_RUNS", "200"))


def load(port, upstream_port, tag, answered, stop):
    """GETs on keep-alive connections until `stop` or the broker dies; the paths answered 200."""
    n = 0
    while not stop.is_set():
        try:
            with RawClient(port, timeout=2.0) as c:
                for _ in range(20):
                    path = f"/k/{tag}-{n}"
                    n += 1
                    c.send(f"GET http://{HOST}:{upstream_port}{path} HTTP/1.1\r\n"
                           f"Host: {HOST}:{upstream_port}\r\n\r\n".encode())
                    r = c.read_response()
                    if r.status == 200:
                        answered.append(path)
                    if stop.is_set():
                        return
        except (OSError, ConnectionError, AssertionError, ValueError):
            return


def test_a_broker_killed_at_any_instant_leaves_a_log_intact_to_its_last_record(upstream,
                                                                                tmp_path):
    """KILL_RUNS sessions under load, each SIGKILLed 50-300 ms after it is ready: each log reads
    intact up to its last whole record (incomplete, or truncated at a partial one; never
    tampered), and every request a client saw answered is in it."""
    rng = random.Random(int(os.environ.get("BROKER_KILL_SEED", "50")))
    ca_dir, home = tmp_path / "ca", tmp_path / "home"
    verdicts = {"incomplete": 0, "truncated": 0}
    counts = {"records": 0, "answered": 0}
    started = time.monotonic()
    for run in range(KILL_RUNS):
        b = Broker(tmp_path / f"run{run}", policy=allow_policy(HOST, ports=[upstream.port]),
                   connect_to=[connect_to_arg(HOST, upstream.port)], ca_dir=ca_dir,
                   env={"HOME": str(home)},
                   args=["--log-level", "warn", "--audit-sync", rng.choice(["batch", "every"])])
        answered, stop = [], threading.Event()
        workers = [threading.Thread(target=load, args=(b.port, upstream.port, f"r{run}w{w}",
                                                       answered, stop)) for w in range(3)]
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.05, 0.3))
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        stop.set()
        for w in workers:
            w.join(timeout=10)
        b.stop()

        out = verify(b.log_path, home).stdout
        assert "tampered" not in out, f"run {run}: {out}"
        if ": incomplete:" in out:
            verdicts["incomplete"] += 1
        else:
            assert ": truncated at seq" in out, f"run {run}: {out}"
            verdicts["truncated"] += 1
        records, _ = log_lines(b.log_path)
        recorded = {x.get("path") for x in records if x.get("event") == "request"}
        missing = [p for p in answered if p not in recorded]
        assert not missing, f"run {run}: answered but not recorded: {missing[:5]}"
        assert records and records[0]["event"] == "session_start"
        counts["records"] += len(records)
        counts["answered"] += len(answered)
    print(f"\n{KILL_RUNS} runs killed in {time.monotonic() - started:.0f} s: {verdicts}; "
          f"{counts['records']} records, {counts['answered']} requests answered, all recorded")
