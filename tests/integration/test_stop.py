"""A stop always ends (README, serve): SIGTERM ends `serve --gateway` and `serve` within the
drain deadline and the end's own bounded steps, whatever their threads are doing at that moment:
requests and tunnels in flight, the Redis poller taking revocations, the ask relay publishing,
the audit sink shipping, the console's index scanning, the admin API answering. Each gateway
is stopped at a random moment under that load, many times over (BROKER_STOP_ROUNDS, 100 by
default). The hang this caught: a revocation polled while the gateway ended its sessions stopped
the store's thread on the gateway's lock, and the end waited for that thread for ever."""
import base64
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest
import requests

from conftest import Broker, run_broker_cli
from gateway_session import create_session
from redis_server import RedisServer, free_port
from test_budgets import OTHER, llm, llm_pki  # noqa: F401 (fixtures)

ROUNDS = int(os.environ.get("BROKER_STOP_ROUNDS", "100"))
ASKED = "asked.example.test"
DRAIN = 0.5  # --timeout drain=500ms
# After the drain: what is still open is cut (2 s at most), the admin listener's handlers end,
# the audit sink settles (2 s at most) and the shared store closes. A stop past this hangs.
STOP_BOUND = DRAIN + 8.0


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path / "redis")
    yield r
    r.stop()


class Load:
    """Threads that keep a broker busy; `port`/`admin` name the one running now (None: none)."""

    def __init__(self):
        self.port = None
        self.admin = None
        self.done = threading.Event()
        self.threads = []
        self.counts = {}

    def add(self, name, fn):
        def loop():
            n = 0
            while not self.done.is_set():
                port = self.port
                if port is None:
                    time.sleep(0.01)
                    continue
                n += 1
                try:
                    fn(port)
                except (requests.RequestException, OSError):
                    time.sleep(0.01)  # the broker between rounds, or cut by its stop
            self.counts[name] = n

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(timeout=30)


def proxy_of(env, port):
    userinfo = env["HTTPS_PROXY"].split("//", 1)[1].rsplit("@", 1)[0]
    return f"http://{userinfo}@127.0.0.1:{port}"


def hold_tunnel(port, userinfo=None, hold=0.0):
    """CONNECT through the broker and keep the tunnel open for `hold` seconds."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        auth = ""
        if userinfo:
            auth = f"Proxy-Authorization: Basic {base64.b64encode(userinfo.encode()).decode()}\r\n"
        s.sendall(f"CONNECT {OTHER}:443 HTTP/1.1\r\nHost: {OTHER}:443\r\n{auth}\r\n".encode())
        s.recv(4096)
        time.sleep(hold)


def stop_within(b, bound):
    """SIGTERM; the seconds the broker took to exit (it is killed past `bound` and that fails)."""
    started = time.monotonic()
    b.proc.send_signal(signal.SIGTERM)
    try:
        rc = b.proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        b.proc.kill()
        b.proc.wait()
        pytest.fail(f"{b.session} did not exit within {bound} s of SIGTERM; stderr tail: "
                    f"{b.stderr[-3000:]}")
    took = time.monotonic() - started
    b.proc.stdout.close()
    b._stderr_file.close()
    assert rc == 0, f"{b.session} exited with {rc}; stderr tail: {b.stderr[-3000:]}"
    return took


def rounds(start, load, count):
    """Starts a broker `count` times, lets the load run on it a random while, stops it."""
    took = []
    for i in range(count):
        b = start(i)
        load.port, load.admin = b.port, getattr(b, "admin", None)
        time.sleep(random.uniform(0.0, 0.4))
        took.append(stop_within(b, STOP_BOUND))  # the load goes on while it stops
        load.port = None  # the next round's broker, once it runs
    return took


def test_a_gateway_stops_within_its_deadline_at_any_moment_under_load(
        redis, llm, llm_pki, tmp_path):  # noqa: F811
    home, logs, ca = tmp_path / "home", tmp_path / "logs", tmp_path / "ca"
    policy = {"version": 1, "allow": [{"host": OTHER}], "on_deny": "ask"}
    connect_to = [f"{OTHER}:80:127.0.0.1:{llm.plain_port}", f"{OTHER}:443:127.0.0.1:{llm.port}",
                  f"{ASKED}:80:127.0.0.1:{llm.plain_port}"]
    suffix = uuid.uuid4().hex[:8]

    def gateway(name, admin):
        return Broker(tmp_path / name, policy=policy, ca_dir=ca, log_dir=logs,
                      session=f"gw-{name}-{suffix}", upstream_ca=llm_pki.ca_cert,
                      env={"HOME": str(home)}, connect_to=connect_to,
                      args=["--gateway", "--redis", redis.url, "--replica", name,
                            "--admin", f"127.0.0.1:{admin}", "--audit-sink", "redis",
                            "--timeout", f"drain={int(DRAIN * 1000)}ms"])

    # The replica that makes the sessions and the admin token; each round's replica serves them
    # from the shared state.
    keeper = gateway("keeper", free_port())
    try:
        budget = tmp_path / "budget.json"
        budget.write_text(json.dumps({"version": 1, "budgets": {"requests": 10**9}}))
        _, plain_env, _ = create_session(keeper, name="plain")
        _, budget_env, _ = create_session(keeper, "--policy", budget, name="budgeted")
        made = run_broker_cli("admin-token", "--gateway", keeper.session, "create", "--name", "op")
        assert made.returncode == 0, made.stderr
        bearer = {"Authorization": f"Bearer {made.stdout.strip()}"}

        load = Load()
        load.add("plain", lambda port: requests.get(
            f"http://{OTHER}/x", proxies={"http": proxy_of(plain_env, port)}, timeout=10))
        load.add("budgeted", lambda port: requests.get(
            f"http://{OTHER}/x", proxies={"http": proxy_of(budget_env, port)}, timeout=10))
        # Held for an operator until the client gives up (or the stop cuts it): the relay
        # publishes it meanwhile.
        load.add("asked", lambda port: requests.get(
            f"http://{ASKED}/held", proxies={"http": proxy_of(plain_env, port)}, timeout=0.5))
        userinfo = plain_env["HTTPS_PROXY"].split("//", 1)[1].rsplit("@", 1)[0]
        load.add("tunnel", lambda port: hold_tunnel(port, userinfo, random.uniform(0, 1.5)))

        def admin(port):
            base = f"http://127.0.0.1:{load.admin}"
            for path in ("/metrics", "/api/sessions", "/api/asks", "/api/console/sessions",
                         "/api/console/refusals"):
                requests.get(base + path, headers=bearer, timeout=10)
        load.add("admin", admin)

        # What a revoke on another replica publishes (redis_store::revoke), a new one for every
        # poll: each poll takes one into the gateway, whenever the stop comes.
        revoker = socket.create_connection(("127.0.0.1", redis.port), timeout=5)
        revoked = [0]

        def revoke(port):
            revoked[0] += 1
            gone = f"g-gone{revoked[0]}"
            revoker.sendall(f"*3\r\n$4\r\nSADD\r\n$14\r\nbroker:revoked\r\n${len(gone)}\r\n"
                            f"{gone}\r\n*2\r\n$4\r\nINCR\r\n$18\r\nbroker:revocations\r\n"
                            .encode())
            revoker.recv(256)
            time.sleep(0.01)
        load.add("revoke", revoke)

        def start(i):
            b = gateway(f"r{i}", free_port())
            b.admin = b.args[b.args.index("--admin") + 1].rsplit(":", 1)[1]
            return b
        try:
            took = rounds(start, load, ROUNDS)
        finally:
            load.stop()
            revoker.close()
        print(f"gateway stops: {len(took)}, slowest {max(took):.2f} s, "
              f"mean {sum(took) / len(took):.2f} s; load {load.counts}")
        assert all(load.counts.get(k, 0) > 0 for k in ("plain", "budgeted", "admin", "revoke"))
    finally:
        stop_within(keeper, STOP_BOUND)


def test_serve_stops_within_its_deadline_at_any_moment_under_load(llm, tmp_path):  # noqa: F811
    policy = {"version": 1, "allow": [{"host": OTHER}]}
    connect_to = [f"{OTHER}:80:127.0.0.1:{llm.plain_port}", f"{OTHER}:443:127.0.0.1:{llm.port}"]
    load = Load()
    load.add("plain", lambda port: requests.get(
        f"http://{OTHER}/x", proxies={"http": f"http://127.0.0.1:{port}"}, timeout=10))

    def keep_alive(port):
        with requests.Session() as s:  # five requests on one connection
            s.trust_env = False
            s.proxies = {"http": f"http://127.0.0.1:{port}"}
            for _ in range(5):
                s.get(f"http://{OTHER}/x", timeout=10)
    load.add("keep-alive", keep_alive)
    load.add("tunnel", lambda port: hold_tunnel(port, None, random.uniform(0, 1.5)))

    def start(i):
        return Broker(tmp_path / f"s{i}", policy=policy, connect_to=connect_to,
                      ca_dir=tmp_path / "ca", log_dir=tmp_path / "logs",
                      args=["--timeout", f"drain={int(DRAIN * 1000)}ms"])
    try:
        took = rounds(start, load, max(1, ROUNDS // 4))
    finally:
        load.stop()
    print(f"serve stops: {len(took)}, slowest {max(took):.2f} s; load {load.counts}")
    assert load.counts.get("plain", 0) > 0
