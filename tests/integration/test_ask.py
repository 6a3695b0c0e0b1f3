"""Ask and approve (docs/policy.md): a request only asking layers refuse is held while a person
decides with `broker pending` / `broker approve` / `broker deny` from another process; the
decision applies to the running session at once, releases every request held for the same rule,
and is audited. What is never approvable (an explicit deny rule, a layer's "never" list) is
refused at once; a held request that nobody decides gets 403 approval_denied when its ask times
out."""

import json
import shutil
import subprocess
import threading
import time

from conftest import (BROKER_BIN, allow_policy, assert_refusal, clean_env, connect_to_arg, curl)

ALLOWED = "api.example.test"
ASKED = "other.example.test"


def runtime_env(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    return {"XDG_RUNTIME_DIR": str(run)}


def cli(b, *args):
    """A broker subcommand run as the person beside the session (its runtime dir and HOME)."""
    return subprocess.run([BROKER_BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=30, env=clean_env(b.env))


def start(broker_factory, tmp_path, upstream, extra_layers=(), args=(), **policy_extra):
    layer = allow_policy(ALLOWED, ports=[upstream.port], on_deny="ask", **policy_extra)
    return broker_factory(policies=[layer, *extra_layers], args=args,
                          env=runtime_env(tmp_path),
                          connect_to=[connect_to_arg(h, upstream.port) for h in (ALLOWED, ASKED)])


def in_background(fn):
    """Runs fn on a thread; returns a callable that joins it and gives its result."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("result", fn()), daemon=True)
    t.start()

    def result(timeout=60):
        t.join(timeout)
        assert not t.is_alive(), "the held request did not end"
        return out["result"]
    return result


def wait_pending(b, count=1, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        p = cli(b, "pending", "--json")
        assert p.returncode == 0, p.stderr
        held = json.loads(p.stdout)
        if len(held) >= count or time.monotonic() > deadline:
            assert len(held) >= count, f"expected {count} held requests, have {held}"
            return held
        time.sleep(0.1)


def test_approve_while_the_request_waits(broker_factory, tmp_path, upstream):
    b = start(broker_factory, tmp_path, upstream)
    url = f"http://{ASKED}:{upstream.port}/docs/page?q=1"
    first = in_background(lambda: curl(url, proxy=b.proxy, timeout=60))
    second = in_background(lambda: curl(f"http://{ASKED}:{upstream.port}/other", proxy=b.proxy,
                                        timeout=60))
    held = wait_pending(b, 2)
    ask = next(a for a in held if a["url"].startswith(f"http://{ASKED}:{upstream.port}/docs/"))
    assert ask["method"] == "GET" and ask["session"] == b.session, ask
    assert ask["rule"] == "default_deny" and ask["timeout_s"] == 120, ask
    assert ask["id"].startswith(b.session + "-"), ask
    listed = cli(b, "pending")
    assert ask["id"] in listed.stdout and "refused by default_deny" in listed.stdout, listed.stdout
    assert upstream.requests == []  # nothing went up while it waits

    approved = cli(b, "approve", ask["id"])
    assert approved.returncode == 0, approved.stderr
    assert "approved (session), rule approved[0]; released 2 held requests" in approved.stdout
    # Both were held for the same rule (the host and port): both go now.
    for r in (first(), second()):
        assert r.status == 200, r.stderr
    assert len(upstream.requests) == 2
    # The session's policy grew at once: the next request is not asked about.
    r = curl(f"http://{ASKED}:{upstream.port}/again", proxy=b.proxy)
    assert r.status == 200
    assert json.loads(cli(b, "pending", "--json").stdout) == []

    records = b.wait_for_records(lambda x: x.get("event") == "request", count=3)
    assert {x["rule"] for x in records} == {"approved[0]"}, records
    assert all(x["decision"] == "allow" for x in records)
    asks = [x for x in b.records() if x["event"] == "ask"]
    assert len(asks) == 2 and {a["decision"] for a in asks} == {"ask"}
    assert any(a["path"] == "/docs/page?q=<redacted>" for a in asks), asks
    decision = [x for x in b.records() if x["event"] == "approval"]
    assert len(decision) == 1, decision
    d = decision[0]
    assert (d["decision"], d["scope"], d["rule"], d["host"]) == \
        ("approve", "session", "approved[0]", ASKED), d
    assert d["who"].startswith("uid ") and BROKER_BIN.split("/")[-1] in d["who"], d
    assert sorted(d["released"]) == sorted(a["id"] for a in asks)
    assert b.stop() == 0
    assert cli(b, "log", "--verify", "--log-dir", b.log_dir, b.session).returncode == 0


def test_deny_refuses_every_request_held_for_the_host(broker_factory, tmp_path, upstream):
    b = start(broker_factory, tmp_path, upstream)
    held = [in_background(lambda i=i: curl(f"http://{ASKED}:{upstream.port}/{i}", proxy=b.proxy,
                                           timeout=60)) for i in range(3)]
    ask = wait_pending(b, 3)[0]
    denied = cli(b, "deny", ask["id"])
    assert denied.returncode == 0, denied.stderr
    assert "denied; released 3 held requests" in denied.stdout, denied.stdout
    for result in held:
        r = result()
        doc = assert_refusal(r.status, r.headers, r.body, "approval_denied", 403, host=ASKED)
        assert "denied" in doc["message"] and doc["rule"] == "default_deny", doc
    assert upstream.requests == []
    # Decided: the id is no longer held, and deciding it again says so.
    again = cli(b, "approve", ask["id"])
    assert again.returncode == 1 and "is held" in again.stderr, again.stderr
    refused = b.wait_for_records(lambda x: x.get("error") == "approval_denied", count=3)
    assert len(refused) == 3 and all(x["decision"] == "deny" for x in refused)
    # A denial is not remembered: the next request is asked about again.
    later = in_background(lambda: curl(f"http://{ASKED}:{upstream.port}/x", proxy=b.proxy,
                                       timeout=60))
    again = wait_pending(b, 1)[0]
    assert cli(b, "approve", again["id"], "--once").returncode == 0
    assert later().status == 200


def test_a_held_request_nobody_decides_times_out(broker_factory, tmp_path, upstream):
    b = start(broker_factory, tmp_path, upstream, args=["--timeout", "ask=1s"])
    started = time.monotonic()
    r = curl(f"http://{ASKED}:{upstream.port}/", proxy=b.proxy, timeout=30)
    waited = time.monotonic() - started
    doc = assert_refusal(r.status, r.headers, r.body, "approval_denied", 403)
    assert "timed out" in doc["message"], doc
    assert 0.9 <= waited < 10, waited
    t = b.wait_for_records(lambda x: x.get("event") == "approval")[0]
    assert t["decision"] == "timeout" and t["who"].startswith("nobody"), t


def test_never_approvable_is_refused_at_once(broker_factory, tmp_path, upstream):
    team = {"version": 1, "on_deny": "deny", "allow": [{"host": "*.example.test",
                                                          "ports": [upstream.port]}],
            "approvals": {"never": ["secret.example.test"]}}
    b = start(broker_factory, tmp_path, upstream, extra_layers=[team],
              deny=[{"host": "blocked.example.test"}])
    for host, code in (("blocked.example.test", "policy_denied"),   # an explicit deny rule
                       ("secret.example.test", "policy_denied"),    # a layer's "never"
                       ("outside.test", "policy_denied")):          # the team ceiling refuses
        started = time.monotonic()
        r = curl(f"http://{host}:{upstream.port}/", proxy=b.proxy, timeout=30)
        assert_refusal(r.status, r.headers, r.body, code, 403)
        assert time.monotonic() - started < 5, host
    assert not [x for x in b.records() if x["event"] == "ask"]


def test_approve_with_a_path_prefix_and_once(broker_factory, tmp_path, upstream, pki):
    b = broker_factory(policy=allow_policy(ALLOWED, on_deny="ask"), env=runtime_env(tmp_path),
                       connect_to=[connect_to_arg(ASKED, 443, upstream.port)])
    # Plain HTTP on port 443 of the asked host is fine for the fake; what matters is the path.
    base = f"http://{ASKED}:443"
    docs = in_background(lambda: curl(f"{base}/docs/a", proxy=b.proxy, timeout=60))
    ask = wait_pending(b)[0]
    assert cli(b, "approve", ask["id"], "--path", "/docs").returncode == 0
    assert docs().status == 200
    assert curl(f"{base}/docs", proxy=b.proxy).status == 200
    # Outside the prefix: asked again; --once lets that one request go and adds no rule.
    other = in_background(lambda: curl(f"{base}/docsx", proxy=b.proxy, timeout=60))
    ask = wait_pending(b)[0]
    assert ask["url"] == f"{base}/docsx", ask
    once = cli(b, "approve", ask["id"], "--once")
    assert "approved (once), rule approved:once; released 1 held request" in once.stdout
    assert other().status == 200
    third = in_background(lambda: curl(f"{base}/docsx", proxy=b.proxy, timeout=60))
    ask = wait_pending(b)[0]
    assert cli(b, "deny", ask["id"]).returncode == 0
    assert third().status == 403


def test_always_is_kept_for_the_next_session(broker_factory, tmp_path, upstream, pki):
    b = start(broker_factory, tmp_path, upstream)
    held = in_background(lambda: curl(f"http://{ASKED}:{upstream.port}/", proxy=b.proxy,
                                      timeout=60))
    ask = wait_pending(b)[0]
    assert cli(b, "approve", ask["id"], "--always").returncode == 0
    assert held().status == 200
    approved = b.home / ".config" / "broker" / "approved.json"
    assert json.loads(approved.read_text()) == \
        {"allow": [{"host": ASKED, "ports": [upstream.port]}]}
    assert (approved.stat().st_mode & 0o777) == 0o600
    shown = cli(b, "policy", "check", b.policy_files[0])
    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)["approved"]
    assert listed["file"] == str(approved) and listed["allow"][0]["host"] == ASKED, listed
    assert b.stop() == 0

    # The next session (same HOME) allows it from the start, and policy check shows it.
    again = broker_factory(policies=[allow_policy(ALLOWED, ports=[upstream.port],
                                                  on_deny="ask")],
                           env={**runtime_env(tmp_path), "HOME": str(b.home)},
                           connect_to=[connect_to_arg(ASKED, upstream.port)])
    r = curl(f"http://{ASKED}:{upstream.port}/", proxy=again.proxy)
    assert r.status == 200
    rec = again.wait_for_records(lambda x: x.get("event") == "request")[0]
    assert rec["rule"] == "approved.json:allow[0]", rec
    # A layer that does not ask does not take approved.json's rules.
    strict = broker_factory(policies=[allow_policy(ALLOWED, ports=[upstream.port])],
                            env={**runtime_env(tmp_path), "HOME": str(b.home)},
                            connect_to=[connect_to_arg(ASKED, upstream.port)])
    r = curl(f"http://{ASKED}:{upstream.port}/", proxy=strict.proxy)
    assert_refusal(r.status, r.headers, r.body, "policy_denied", 403)


def test_an_intercepted_https_request_is_held_inside_tls(broker_factory, tmp_path, tls_upstream,
                                                         pki):
    b = broker_factory(policy=allow_policy(ALLOWED, ports=[tls_upstream.port], on_deny="ask"),
                       env=runtime_env(tmp_path), upstream_ca=pki.ca_cert,
                       connect_to=[connect_to_arg(ASKED, tls_upstream.port)])
    url = f"https://{ASKED}:{tls_upstream.port}/secure/page"
    held = in_background(lambda: curl(url, proxy=b.proxy, cacert=b.ca_cert, timeout=60))
    ask = wait_pending(b)[0]
    # Asked with its method and path: the CONNECT was intercepted, the request inside is held.
    assert ask["method"] == "GET" and ask["url"] == url, ask
    assert cli(b, "approve", ask["id"]).returncode == 0
    r = held()
    assert r.status == 200, r.stderr
    assert tls_upstream.requests[-1]["path"] == "/secure/page"


# --------------------------------------------------------------------------------------------
# wrap --ask: one stderr line per ask, --ask-notify, and a child that tries to approve itself
# --------------------------------------------------------------------------------------------


class AskingWrap:
    """`broker wrap --ask` around a shell script, its stderr read as it comes."""

    def __init__(self, tmp_path, pki, tls_upstream, script, extra=(), session="ask-wrap"):
        self.dir = tmp_path
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.runtime = tmp_path / "run"
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        policy = tmp_path / "policy.json"
        policy.write_text(json.dumps(allow_policy(ALLOWED)))
        self.env = clean_env({"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime)})
        self.err_path = tmp_path / "wrap.stderr"
        self.out_path = tmp_path / "wrap.stdout"
        argv = [BROKER_BIN, "wrap", "--ask", *extra, "--session", session, "--policy", str(policy),
                "--upstream-ca", str(pki.ca_cert), "--log-dir", str(tmp_path / "logs"),
                "--connect-to", f"{ASKED}:443:127.0.0.1:{tls_upstream.port}",
                "--", "sh", "-c", script]
        self.proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=open(self.out_path, "wb"),
                                     stderr=open(self.err_path, "wb"), cwd=tmp_path)

    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def wait_ask_line(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [l for l in self.stderr().splitlines() if l.startswith("broker: ask ")]
            if lines:
                return lines
            assert self.proc.poll() is None, self.stderr()
            time.sleep(0.1)
        raise AssertionError(f"no ask line; stderr={self.stderr()}")

    def cli(self, *args):
        return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                              env=self.env)

    def finish(self, timeout=60):
        self.proc.wait(timeout)
        return self.proc.returncode, self.out_path.read_text(errors="replace")


def test_wrap_ask_prints_one_line_and_runs_the_notify_command(tmp_path, pki, tls_upstream):
    notified = tmp_path / "notified.txt"
    w = AskingWrap(tmp_path, pki, tls_upstream,
                   f"curl -sS -o /dev/null -w 'STATUS %{{http_code}}\\n' https://{ASKED}/page",
                   extra=["--ask-notify", f'echo "$BROKER_ASK_ID $BROKER_ASK_URL" > {notified}'])
    lines = w.wait_ask_line()
    assert len(lines) == 1, lines
    line = lines[0]
    ask_id = line.split()[2].rstrip(":")
    assert ask_id == "ask-wrap-1", line
    assert f"GET https://{ASKED}/page (pid " in line and "curl" in line, line
    assert f"broker approve {ask_id}" in line and f"broker deny {ask_id}" in line, line
    deadline = time.monotonic() + 10
    while not notified.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert notified.read_text().strip() == f"{ask_id} https://{ASKED}/page"
    approved = w.cli("approve", ask_id)
    assert approved.returncode == 0, approved.stderr
    code, out = w.finish()
    assert code == 0 and "STATUS 200" in out, (out, w.stderr())
    assert tls_upstream.requests[-1]["path"] == "/page"


def test_the_child_cannot_approve_its_own_request(tmp_path, pki, tls_upstream):
    # The agent asks, then tries what a prompt-injected one would: approve itself through the
    # control socket (hidden from it), and write an approval for later sessions (masked).
    approved = tmp_path / "home" / ".config" / "broker" / "approved.json"
    # The broker's own client, where the child can run it (its working directory: a build under
    # /tmp is hidden from it with the rest of /tmp).
    client = tmp_path / "broker-client"
    shutil.copy(BROKER_BIN, client)
    script = f"""
curl -sS -o /dev/null -w 'STATUS %{{http_code}}\\n' https://{ASKED}/x &
sleep 1
{client} pending; echo "PENDING_EXIT $?"
{client} approve ask-hostile-1 --always; echo "APPROVE_EXIT $?"
mkdir -p "$HOME/.config/broker" 2>/dev/null
printf '{{"allow":[{{"host":"{ASKED}"}}]}}' > "$HOME/.config/broker/approved.json" 2>/dev/null
echo "WRITE_EXIT $?"
wait
"""
    w = AskingWrap(tmp_path, pki, tls_upstream, script, session="ask-hostile")
    line = w.wait_ask_line()[0]
    assert "ask-hostile-1" in line
    # Give the child time to try, then the person outside denies it.
    deadline = time.monotonic() + 20
    while "WRITE_EXIT" not in w.out_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    held = w.cli("pending", "--json")
    assert [a["id"] for a in json.loads(held.stdout)] == ["ask-hostile-1"], held
    assert w.cli("deny", "ask-hostile-1").returncode == 0
    code, out = w.finish()
    # Both ran: the child sees no session that asks, and its approval reaches none.
    assert "no requests waiting for approval" in out and "PENDING_EXIT 0" in out, out
    assert "APPROVE_EXIT 1" in out, out
    assert "STATUS 403" in out, out
    assert not approved.exists()
    records = [json.loads(l) for f in (tmp_path / "logs").glob("*.jsonl")
               for l in f.read_text().splitlines() if l.strip()]
    decision = [r for r in records if r["event"] == "approval"]
    assert len(decision) == 1 and decision[0]["decision"] == "deny", decision


def test_a_captured_connection_is_asked_about_too(tmp_path, pki, tls_upstream):
    # A program that ignores the proxy variables: its name resolves through the broker's DNS
    # (an askable name gets an address), its connection is captured, its request held.
    w = AskingWrap(tmp_path, pki, tls_upstream,
                   f"curl --noproxy '*' -sS -o /dev/null -w 'STATUS %{{http_code}}\\n' "
                   f"https://{ASKED}/captured", session="ask-captured")
    line = w.wait_ask_line()[0]
    assert f"GET https://{ASKED}/captured" in line, line
    assert w.cli("approve", "ask-captured-1", "--once").returncode == 0
    code, out = w.finish()
    assert "STATUS 200" in out, (out, w.stderr())
    records = [json.loads(l) for f in (tmp_path / "logs").glob("*.jsonl")
               for l in f.read_text().splitlines() if l.strip()]
    request = [r for r in records if r["event"] == "request"][0]
    assert request.get("captured") is True and request["rule"] == "approved:once", request


def test_a_connect_to_a_tunnel_host_is_asked_before_the_tunnel_opens(broker_factory, tmp_path,
                                                                       tls_upstream, pki):
    # The team tunnels ASKED (its certificate pinned, say); the user's asking layer does not list
    # it. The CONNECT is held before anything is read; approved, it is a tunnel: the client
    # talks TLS with the upstream itself (it trusts the upstream's CA, not the broker's).
    team = {"version": 1, "allow": [{"host": ASKED, "ports": [tls_upstream.port],
                                      "tunnel": True},
                                     {"host": ALLOWED, "ports": [tls_upstream.port]}]}
    user = allow_policy(ALLOWED, ports=[tls_upstream.port], on_deny="ask")
    b = broker_factory(policies=[team, user], env=runtime_env(tmp_path),
                       connect_to=[connect_to_arg(ASKED, tls_upstream.port)])
    url = f"https://{ASKED}:{tls_upstream.port}/pinned"
    held = in_background(lambda: curl(url, proxy=b.proxy, cacert=pki.ca_cert, timeout=60))
    ask = wait_pending(b)[0]
    assert ask["method"] == "CONNECT" and ask["url"] == f"{ASKED}:{tls_upstream.port}", ask
    # A tunnel is not inspected: an approval cannot name a path.
    bad = cli(b, "approve", ask["id"], "--path", "/x")
    assert bad.returncode == 1 and "cannot name a path" in bad.stderr, bad.stderr
    assert cli(b, "approve", ask["id"]).returncode == 0
    r = held()
    assert r.status == 200, r.stderr
    assert tls_upstream.requests[-1]["path"] == "/pinned"
    tunnel = b.wait_for_records(lambda x: x.get("event") == "tunnel")[0]
    assert tunnel["rule"].endswith("policy1.json#approved[0]"), tunnel
    assert tunnel["decision"] == "allow", tunnel
    # The next CONNECT tunnels at once.
    assert curl(url, proxy=b.proxy, cacert=pki.ca_cert).status == 200


def test_the_ask_line_carries_no_terminal_escape_the_child_chose(tmp_path, pki, tls_upstream):
    # The child names its program with escape sequences (retitle the window, clear the screen,
    # a fake line of its own): the user's terminal gets them as text.
    script = (f"cp \"$(command -v curl)\" \"$HOME/cu$(printf '\\033]0;owned\\007\\033[2J\\r')rl\"\n"
              f"\"$HOME/cu$(printf '\\033]0;owned\\007\\033[2J\\r')rl\" -sS -o /dev/null "
              f"-w 'STATUS %{{http_code}}\\n' https://{ASKED}/x")
    w = AskingWrap(tmp_path, pki, tls_upstream, script, session="ask-escape")
    line = w.wait_ask_line()[0]
    raw = w.err_path.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw, raw
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x0drl" in line, line
    listed = w.cli("pending")
    assert "\x1b" not in listed.stdout and "\\x1b[2J" in listed.stdout, listed.stdout
    assert w.cli("deny", "ask-escape-1").returncode == 0
    code, out = w.finish()
    assert "STATUS 403" in out, out


def test_an_approval_does_not_pass_the_address_guard(broker_factory, tmp_path, upstream):
    # "localhost" resolves to loopback: approving the host opens it to the policy, never to the
    # address guard (only a cidr rule reaches private ranges).
    b = start(broker_factory, tmp_path, upstream)
    url = f"http://localhost:{upstream.port}/"
    held = in_background(lambda: curl(url, proxy=b.proxy, timeout=60))
    ask = wait_pending(b)[0]
    assert ask["host"] == "localhost", ask
    assert cli(b, "approve", ask["id"]).returncode == 0
    r = held()
    assert_refusal(r.status, r.headers, r.body, "private_address_blocked", 403)
    assert upstream.requests == []
