"""CLI behaviour: `policy check`/`policy default`, serve start-up errors, shutdown, --env-file."""

import json
import os
import re
import signal
import socket
import stat
import subprocess
import time

from conftest import (BROKER_BIN, RawClient, allow_policy, clean_env, connect_to_arg, curl,
                      run_broker_cli)

HOST = "api.example.test"


def strip_comments(text: str) -> str:
    """Removes // comments outside JSON strings."""
    out, i, in_string = [], 0, False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def layers_of(output: str):
    doc = json.loads(output)
    return doc["layers"] if isinstance(doc, dict) else doc


def test_policy_check_prints_normalized_layers(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({
        "version": 1,
        "allow": [{"host": "API.Example.TEST."}, {"host": "*.example.org", "ports": [8443]}],
        "deny": [{"host": "bad.example.test"}],
    }))
    (tmp_path / "b.json").write_text(
        '{\n  // the team layer\n  "version": 1,\n  "allow": [ { "cidr": "10.20.0.0/16", "ports": [8080] } ]\n}\n')
    r = run_broker_cli("policy", "check", "a.json", "b.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    layers = layers_of(r.stdout)
    assert len(layers) == 2
    a, b = layers
    text_a = json.dumps(a)
    assert "a.json" in text_a and "b.json" in json.dumps(b)
    assert a["allow"][0]["host"] == "api.example.test"  # case folded, trailing dot dropped
    assert a["allow"][0]["ports"] == [80, 443]          # default filled in
    assert a["allow"][1]["host"] == "*.example.org"
    assert a["allow"][1]["ports"] == [8443]
    assert a["deny"][0]["host"] == "bad.example.test"
    assert b["allow"][0]["cidr"] == "10.20.0.0/16"
    assert b["allow"][0]["ports"] == [8080]


def run_check_expect_error(tmp_path, name, content, pattern):
    (tmp_path / name).write_text(content)
    r = run_broker_cli("policy", "check", name, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert re.search(pattern, r.stderr), r.stderr
    assert r.stdout.strip() == "", r.stdout  # no policy printed for a broken file
    return r.stderr


def test_policy_check_wrong_type_names_file_line_key(tmp_path):
    content = ('{\n'
               '  "version": 1,\n'
               '  "allow": [\n'
               '    { "host": "a.example.test" },\n'
               '    { "host": "b.example.test", "ports": "443" }\n'
               '  ]\n'
               '}\n')
    run_check_expect_error(tmp_path, "p.json", content, r"p\.json:5: allow\[1\]\.ports: \S")


def test_policy_check_port_out_of_range(tmp_path):
    content = ('{\n'
               '  "version": 1,\n'
               '  "allow": [\n'
               '    { "host": "a.example.test",\n'
               '      "ports": [443, 70000] }\n'
               '  ]\n'
               '}\n')
    run_check_expect_error(tmp_path, "range.json", content, r"range\.json:5: allow\[0\]\.ports")


def test_policy_check_unknown_key(tmp_path):
    content = ('{\n'
               '  "version": 1,\n'
               '  "alow": [ { "host": "a.example.test" } ]\n'
               '}\n')
    run_check_expect_error(tmp_path, "unknown.json", content, r"unknown\.json:3: \S*alow")


def test_policy_check_unknown_rule_key(tmp_path):
    content = ('{\n'
               '  "version": 1,\n'
               '  "allow": [\n'
               '    { "host": "a.example.test", "port": [443] }\n'
               '  ]\n'
               '}\n')
    run_check_expect_error(tmp_path, "rule.json", content, r"rule\.json:4: allow\[0\]\S*port")


def test_policy_check_malformed_json(tmp_path):
    content = ('{\n'
               '  "version": 1,,\n'
               '  "allow": []\n'
               '}\n')
    run_check_expect_error(tmp_path, "malformed.json", content, r"malformed\.json:2:")


def test_policy_check_ip_literal_host(tmp_path):
    content = '{\n  "version": 1,\n  "allow": [ { "host": "127.0.0.1" } ]\n}\n'
    run_check_expect_error(tmp_path, "ip.json", content, r"ip\.json:3: allow\[0\]\.host")


def test_policy_check_names_every_programs_glob_the_session_could_satisfy(tmp_path):
    """docs/policy.md: a "programs" glob that could match a file the session can write (anywhere, or
    in its /tmp or home) is refused, each one named by file, line and key; absolute paths pass."""
    home = tmp_path / "home"
    home.mkdir()
    content = ('{\n'
               '  "version": 1,\n'
               '  "allow": [\n'
               '    { "host": "a.example.test", "programs": ["/usr/bin/git", "*/gh"] },\n'
               f'    {{ "host": "b.example.test", "programs": ["{home}/bin/*"] }}\n'
               '  ],\n'
               '  "credentials": { "gh": { "type": "bearer", "env": ["GH_TOKEN"],\n'
               '    "hosts": ["a.example.test"], "programs": ["/tmp/x/g?"] } }\n'
               '}\n')
    (tmp_path / "globs.json").write_text(content)

    def check_with_home(name):
        return subprocess.run([BROKER_BIN, "policy", "check", name], capture_output=True,
                              text=True, timeout=30, cwd=tmp_path,
                              env=clean_env({"HOME": str(home)}))

    r = check_with_home("globs.json")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.strip() == "", r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith('broker: globs.json:4: allow[0].programs[1]: "*/gh" could match '
                               'a file the session can write'), lines
    assert lines[1].startswith(f'broker: globs.json:5: allow[1].programs[0]: "{home}/bin/*" '
                               f'could match a file the session can write: it lies in '), lines  # /tmp or the home
    assert lines[2].startswith('broker: globs.json:8: credentials.gh.programs[0]: "/tmp/x/g?" '
                               'could match a file the session can write: it lies in /tmp'), lines
    # Paths the session cannot change pass (a glob in /usr would not for root: its own layer).
    (tmp_path / "paths.json").write_text(
        content.replace('"*/gh"', '"/usr/bin/gh"').replace(f'"{home}/bin/*"', '"/usr/bin/git"')
        .replace('"/tmp/x/g?"', '"/usr/bin/curl"'))
    r = check_with_home("paths.json")
    assert r.returncode == 0, r.stderr
    layer = json.loads(r.stdout)["layers"][0]
    assert layer["allow"][0]["programs"] == ["/usr/bin/git", "/usr/bin/gh"]
    assert "every holder" in layer["allow"][0]["programs_note"]


def test_policy_check_missing_file(tmp_path):
    r = run_broker_cli("policy", "check", "nope.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "nope.json" in r.stderr


def test_policy_default_parses_and_passes_check(tmp_path):
    r = run_broker_cli("policy", "default")
    assert r.returncode == 0, r.stderr
    assert "//" in r.stdout  # it is documented with comments
    doc = json.loads(strip_comments(r.stdout))
    assert doc["version"] == 1
    hosts = [rule.get("host") for rule in doc["allow"]]
    assert "api.github.com" in hosts
    assert "api.openai.com" in hosts
    (tmp_path / "default.json").write_text(r.stdout)
    check = run_broker_cli("policy", "check", "default.json", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    layer = layers_of(check.stdout)[0]
    assert [rule["host"] for rule in layer["allow"]] == hosts


def test_serve_with_bad_policy_exits_2_and_says_why(tmp_path):
    (tmp_path / "bad.json").write_text('{\n  "version": 1,\n  "allow": [ { "host": 42 } ]\n}\n')
    p = subprocess.run([BROKER_BIN, "serve", "--listen", "127.0.0.1:0", "--log-dir",
                        str(tmp_path / "logs"), "--policy", "bad.json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=15, env=clean_env())
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "listening" not in p.stdout
    assert re.search(r"bad\.json:3: allow\[0\]\.host", p.stderr), p.stderr


def test_serve_that_cannot_listen_says_why_and_leaves_no_log_behind(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        p = subprocess.run([BROKER_BIN, "serve", "--listen", f"127.0.0.1:{port}", "--log-dir",
                            str(tmp_path / "logs")], cwd=tmp_path, capture_output=True, text=True,
                           timeout=15, env=clean_env({"HOME": str(tmp_path)}))
    finally:
        taken.close()
    assert p.returncode != 0 and "listening" not in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert "in use" in p.stderr, p.stderr
    assert list((tmp_path / "logs").glob("*.jsonl")) == [], "a session that never ran left a log"


def test_sigterm_with_idle_keepalive_connection_exits_promptly(broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    with RawClient(b.port) as c:
        c.send(f"GET http://{HOST}:{upstream.port}/ HTTP/1.1\r\nHost: {HOST}:{upstream.port}\r\n\r\n"
               .encode())
        assert c.read_response().status == 200
        # the connection is now idle and kept alive
        started = time.monotonic()
        rc = b.stop(timeout=5)
        elapsed = time.monotonic() - started
        assert rc == 0, b.stderr
        assert elapsed < 5
        assert c.is_closed_by_peer(wait=1)
    records = b.records()
    assert records[-1]["event"] == "session_end", records[-1]
    assert any(r.get("event") == "request" and r.get("status") == 200 for r in records)


def test_sigint_also_ends_the_session_cleanly(broker_factory):
    b = broker_factory(policy=allow_policy(HOST))
    assert b.stop(sig=signal.SIGINT) == 0
    assert b.records()[-1]["event"] == "session_end"


def test_named_session_and_ready_line(broker_factory):
    b = broker_factory(policy=allow_policy(HOST), session="my-session.1")
    assert b.session == "my-session.1"
    assert b.log_path.name == "my-session.1.jsonl"
    # the listener is up as soon as the ready line is printed
    socket.create_connection(("127.0.0.1", b.port), timeout=2).close()
    assert b.records()[0]["event"] == "session_start"


def test_env_file_has_proxy_variables_and_mode_0600(broker_factory, upstream, tmp_path):
    env_file = tmp_path / "session.env"
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       args=["--env-file", env_file])
    assert env_file.exists(), "env file must exist once the ready line is printed"
    assert stat.S_IMODE(os.stat(env_file).st_mode) == 0o600
    values = {}
    for line in env_file.read_text().splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            assert sep == "=", f"not KEY=VALUE: {line!r}"
            values[key] = value
    proxy_url = f"http://127.0.0.1:{b.port}"
    assert values.get("HTTP_PROXY") == proxy_url
    assert values.get("HTTPS_PROXY") == proxy_url

    # `env $(cat FILE) curl URL` runs inside the session
    r = curl(f"http://{HOST}:{upstream.port}/via-env", env=values)
    assert r.status == 200, r.stderr
    assert r.json()["path"] == "/via-env"
    assert b.wait_for_records(lambda rec: rec.get("path") == "/via-env")


def test_sigterm_cuts_an_open_tunnel_after_the_drain_time_and_audits_it(broker_factory, upstream):
    import time
    from conftest import RawClient, connect_to_arg, run_broker_cli
    b = broker_factory(policy={"version": 1,
                               "allow": [{"host": "api.example.test", "ports": [upstream.port],
                                          "tunnel": True}]},
                       connect_to=[connect_to_arg("api.example.test", upstream.port)],
                       args=["--timeout", "drain=1s"])
    with RawClient(b.port) as c:
        c.send(f"CONNECT api.example.test:{upstream.port} HTTP/1.1\r\n"
               f"Host: api.example.test:{upstream.port}\r\n\r\n".encode())
        assert c.read_response(head_only=True).status == 200
        t0 = time.monotonic()
        assert b.stop() == 0
        assert time.monotonic() - t0 < 5
        assert c.is_closed_by_peer(wait=2.0)
    events = [(r["event"], r.get("error")) for r in b.records()]
    assert events[-2:] == [("tunnel", "shutdown"), ("session_end", None)], events
    r = run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--verify",
                       "--key", b.home / ".config" / "broker" / "audit-key")
    assert r.returncode == 0, r.stdout
