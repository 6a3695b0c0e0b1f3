"""Audit rotation (docs/gateway.md): `--audit-rotate-size/-age`, the chain continuing across files,
`broker log SESSION` reading every file, `--verify` naming a tampered or missing file."""

import json
import subprocess

from conftest import (BROKER_BIN, allow_policy, clean_env, connect_to_arg, curl, run_broker_cli)

HOST = "api.example.test"
REQUESTS = 300


def rotated_files(b):
    """The session's files in the rotated layout, oldest generation first."""
    files = sorted((b.log_dir / b.session).glob("local.*.jsonl"))
    assert files, list(b.log_dir.iterdir())
    return files


def records_on_disk(b):
    return [json.loads(line) for f in rotated_files(b) for line in f.read_text().splitlines()]


def verify(b):
    key = b.home / ".config" / "broker" / "audit-key"
    return run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--verify", "--key", key)


def busy_session(broker_factory, upstream, *extra):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       args=["--audit-rotate-size", "4KB", *extra])
    urls = [f"http://{HOST}:{upstream.port}/r/{i}" for i in range(REQUESTS)]
    for start in range(0, REQUESTS, 100):  # one curl per 100 URLs, connections kept alive
        r = curl(*urls[start:start + 100], proxy=b.proxy, timeout=60)
        assert r.statuses == [200] * 100, r.stderr
    return b


def test_a_busy_session_rotates_and_verifies_across_its_files(broker_factory, upstream):
    b = busy_session(broker_factory, upstream)
    assert b.stop() == 0
    assert not b.log_path.exists()  # no single <session>.jsonl in the rotated layout
    files = rotated_files(b)
    assert len(files) >= 10, files
    assert [f.name for f in files] == [f"local.{n:06d}.jsonl" for n in range(1, len(files) + 1)]
    assert all(f.stat().st_size <= 4000 for f in files)
    assert all((f.stat().st_mode & 0o777) == 0o600 for f in files)

    records = records_on_disk(b)
    assert len(records) == REQUESTS + 2
    assert [r["seq"] for r in records] == list(range(1, REQUESTS + 3))
    for prev, rec in zip(records, records[1:]):
        assert rec["prev"] == prev["hash"]

    r = verify(b)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"replica local: ok, {REQUESTS + 2} record(s) in {len(files)} file(s)" in r.stdout

    shown = run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--json")
    assert shown.returncode == 0, shown.stderr
    printed = [json.loads(line) for line in shown.stdout.splitlines()]
    assert printed == records  # every record once, in order

    human = run_broker_cli("log", b.session, "--log-dir", b.log_dir)
    assert human.returncode == 0 and len(human.stdout.splitlines()) == REQUESTS + 2

    listed = run_broker_cli("sessions", "--log-dir", b.log_dir)
    rows = [line.split() for line in listed.stdout.splitlines() if b.session in line]
    assert len(rows) == 1, listed.stdout
    row = dict(zip(listed.stdout.splitlines()[0].split(), rows[0]))
    assert row["REQUESTS"] == str(REQUESTS) and row["EXIT"] == "-", listed.stdout


def test_tampering_a_middle_file_fails_verify_naming_it(broker_factory, upstream):
    b = busy_session(broker_factory, upstream)
    assert b.stop() == 0
    files = rotated_files(b)
    middle = files[len(files) // 2]
    lines = middle.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"status":200', '"status":201', 1)
    middle.write_text("".join(lines))
    r = verify(b)
    assert r.returncode == 1, r.stdout
    assert "replica local: tampered at seq" in r.stdout, r.stdout
    assert f"({middle} line 2): hash mismatch" in r.stdout, r.stdout


def test_deleting_a_middle_file_fails_verify_naming_it(broker_factory, upstream):
    b = busy_session(broker_factory, upstream)
    assert b.stop() == 0
    files = rotated_files(b)
    files[3].unlink()
    r = verify(b)
    assert r.returncode == 1, r.stdout
    assert str(files[3]) in r.stdout and "file missing" in r.stdout, r.stdout


def test_a_restarted_session_continues_the_newest_file(broker_factory, upstream):
    b = busy_session(broker_factory, upstream)
    assert b.stop() == 0
    before = rotated_files(b)
    again = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                           connect_to=[connect_to_arg(HOST, upstream.port)],
                           args=["--audit-rotate-size", "4KB"], session=b.session,
                           log_dir=b.log_dir)
    assert curl(f"http://{HOST}:{upstream.port}/again", proxy=again.proxy).status == 200
    assert again.stop() == 0
    after = rotated_files(b)
    assert after[:len(before)] == before
    records = records_on_disk(b)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert records[-1]["event"] == "session_end"
    # Two brokers signed (each with its own HOME's key): the chain holds, the last signer counts.
    key = again.dir / "home" / ".config" / "broker" / "audit-key"
    r = run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--verify", "--key", key)
    assert r.returncode == 0, r.stdout


def test_follow_crosses_into_new_generations(broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       args=["--audit-rotate-size", "2KB"])
    follower = subprocess.Popen([BROKER_BIN, "log", b.session, "--log-dir", str(b.log_dir),
                                 "--json", "--follow"], stdout=subprocess.PIPE, text=True,
                                env=clean_env())
    try:
        urls = [f"http://{HOST}:{upstream.port}/f/{i}" for i in range(30)]
        assert curl(*urls, proxy=b.proxy).statuses == [200] * 30
        assert b.stop() == 0
        out, _ = follower.communicate(timeout=10)  # ends by itself after session_end
    finally:
        if follower.poll() is None:
            follower.kill()
    assert len(rotated_files(b)) >= 3
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed == records_on_disk(b), out
    assert follower.returncode == 0


def test_rotation_by_age_option_is_accepted(broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       args=["--audit-rotate-age", "1h"])
    assert curl(f"http://{HOST}:{upstream.port}/x", proxy=b.proxy).status == 200
    assert b.stop() == 0
    assert [f.name for f in rotated_files(b)] == ["local.000001.jsonl"]
    assert verify(b).returncode == 0


def test_bad_rotation_values_are_usage_errors(tmp_path):
    for option, value in [("--audit-rotate-size", "lots"), ("--audit-rotate-size", "12QB"),
                          ("--audit-rotate-age", "soon"), ("--audit-rotate-age", "1x")]:
        r = subprocess.run([BROKER_BIN, "serve", "--listen", "127.0.0.1:0", "--log-dir",
                            str(tmp_path / "logs"), option, value], capture_output=True,
                           text=True, timeout=30, env=clean_env({"HOME": str(tmp_path)}))
        assert r.returncode == 2, (option, value, r.stdout, r.stderr)
        assert option in r.stderr and value in r.stderr, r.stderr
        assert not (tmp_path / "logs").exists()
