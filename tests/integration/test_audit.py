"""The audit log: hash chain, tamper detection, redaction, `broker log`/`sessions`, fail-closed."""

import hashlib
import json
import os
import re

import pytest

from conftest import (Broker, allow_policy, assert_refusal, connect_to_arg, curl,
                      run_broker_cli)

HOST = "api.example.test"
SECRET = "s3cr3t-QzXyW"  # not hex: cannot show up inside a hash by chance


@pytest.fixture
def finished_session(broker_factory, upstream):
    """A session with 2 allowed requests and 1 denied one, stopped cleanly."""
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    assert curl(f"http://{HOST}:{upstream.port}/a", proxy=b.proxy).status == 200
    assert curl(f"http://{HOST}:{upstream.port}/b", proxy=b.proxy).status == 200
    assert curl("http://denied.example.test/", proxy=b.proxy).status == 403
    assert b.stop() == 0
    return b


def verify(b, target=None, key=None):
    """`broker log --verify` with the key of the broker's user (its own HOME)."""
    return run_broker_cli("log", target or b.session, "--log-dir", b.log_dir, "--verify",
                          "--key", key or audit_key(b))


def audit_key(b):
    return b.home / ".config" / "broker" / "audit-key"


def test_records_chain_and_verify(finished_session):
    b = finished_session
    lines = b.log_path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["event"] == "session_start"
    assert records[-1]["event"] == "session_end"
    assert [r["event"] for r in records[1:-1]] == ["request", "request", "refused"]
    assert all(r["session"] == b.session for r in records)
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(seqs[0], seqs[0] + len(records)))
    for prev, rec in zip(records, records[1:]):
        assert rec["prev"] == prev["hash"]
    assert len({r["hash"] for r in records}) == len(records)
    for r in records:
        assert r["ts"].endswith("Z")

    by_id = verify(b)
    assert by_id.returncode == 0, by_id.stdout + by_id.stderr
    by_path = verify(b, target=b.log_path)
    assert by_path.returncode == 0, by_path.stdout + by_path.stderr


def test_editing_one_byte_breaks_verify(finished_session):
    b = finished_session
    lines = b.log_path.read_text().splitlines(keepends=True)
    idx = next(i for i, line in enumerate(lines) if '"status":200' in line)
    lines[idx] = lines[idx].replace('"status":200', '"status":201', 1)  # one byte
    b.log_path.write_text("".join(lines))
    r = verify(b)
    assert r.returncode == 1, r.stdout + r.stderr


def test_editing_one_byte_of_the_host_breaks_verify(finished_session):
    b = finished_session
    text = b.log_path.read_text()
    assert "denied.example.test" in text
    b.log_path.write_text(text.replace("denied.example.test", "denieD.example.test", 1))
    r = verify(b)
    assert r.returncode == 1, r.stdout + r.stderr


def test_deleting_a_line_breaks_verify(finished_session):
    b = finished_session
    lines = b.log_path.read_text().splitlines(keepends=True)
    del lines[2]
    b.log_path.write_text("".join(lines))
    r = verify(b)
    assert r.returncode == 1, r.stdout + r.stderr


def test_query_values_are_redacted(broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    r = curl(f"http://{HOST}:{upstream.port}/search?token={SECRET}&q=x{SECRET}", proxy=b.proxy)
    assert r.status == 200
    # the upstream got the real query: redaction is for the log only
    assert r.json()["path"] == f"/search?token={SECRET}&q=x{SECRET}"
    denied = curl(f"http://denied.example.test/p?key={SECRET}", proxy=b.proxy)
    assert denied.status == 403
    assert b.stop() == 0

    text = b.log_path.read_text()
    assert SECRET not in text
    rec = [json.loads(line) for line in text.splitlines()]
    paths = [x["path"] for x in rec if x.get("event") in ("request", "refused")]
    assert "/search?token=<redacted>&q=<redacted>" in paths, paths
    assert "/p?key=<redacted>" in paths, paths
    shown = run_broker_cli("log", b.session, "--log-dir", b.log_dir)
    assert shown.returncode == 0
    assert SECRET not in shown.stdout


def test_log_json_prints_the_records(finished_session):
    b = finished_session
    r = run_broker_cli("log", b.session, "--log-dir", b.log_dir, "--json")
    assert r.returncode == 0, r.stderr
    printed = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    on_disk = [json.loads(line) for line in b.log_path.read_text().splitlines()]
    assert printed == on_disk

    human = run_broker_cli("log", b.session, "--log-dir", b.log_dir)
    assert human.returncode == 0, human.stderr
    assert HOST in human.stdout and "denied.example.test" in human.stdout


def test_log_without_session_shows_the_newest(finished_session):
    b = finished_session
    r = run_broker_cli("log", "--log-dir", b.log_dir, "--json")
    assert r.returncode == 0, r.stderr
    assert all(json.loads(line)["session"] == b.session for line in r.stdout.splitlines())


def test_sessions_lists_the_session_with_counts(finished_session):
    b = finished_session
    r = run_broker_cli("sessions", "--log-dir", b.log_dir)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if b.session in line]
    assert len(rows) == 1, r.stdout
    header = r.stdout.splitlines()[0].split()
    row = dict(zip(header, rows[0]))
    assert row["SESSION"] == b.session
    assert (row["REQUESTS"], row["DENIED"]) == ("3", "1"), r.stdout
    assert int(row["BYTES"]) > 0 and row["TOKENS"] == "0", r.stdout  # spend


def test_unwritable_log_dir_fails_closed(broker_factory, upstream, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file")
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       log_dir=blocker / "logs")
    for _ in range(2):
        r = curl(f"http://{HOST}:{upstream.port}/", proxy=b.proxy)
        assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503, session=b.session)
    # Through CONNECT the refusal comes inside TLS, where the client shows it (docs/cli.md).
    r = curl(f"https://{HOST}:{upstream.port}/", proxy=b.proxy, cacert=b.ca_cert)
    assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503, session=b.session)
    assert upstream.requests == []  # nothing unaudited went out


def test_full_disk_fails_closed_after_first_failed_write(broker_factory, upstream, tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    os.symlink("/dev/full", log_dir / "full-session.jsonl")
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)],
                       log_dir=log_dir, session="full-session")
    assert b.session == "full-session"
    curl(f"http://{HOST}:{upstream.port}/first", proxy=b.proxy)  # may fail either way
    seen_before = len(upstream.requests)
    for i in range(3):
        r = curl(f"http://{HOST}:{upstream.port}/next{i}", proxy=b.proxy)
        assert_refusal(r.status, r.headers, r.body, "audit_unavailable", 503, session=b.session)
    assert len(upstream.requests) == seen_before


def test_log_follow_prints_records_as_they_come_and_stops_at_session_end(broker_factory,
                                                                          upstream):
    import subprocess
    from conftest import BROKER_BIN, clean_env
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    follower = subprocess.Popen([BROKER_BIN, "log", b.session, "--log-dir", str(b.log_dir),
                                 "--json", "--follow"], stdout=subprocess.PIPE, text=True,
                                env=clean_env())
    try:
        assert curl(f"http://{HOST}:{upstream.port}/followed", proxy=b.proxy).status == 200
        assert b.stop() == 0
        out, _ = follower.communicate(timeout=10)  # ends by itself after session_end
    finally:
        if follower.poll() is None:
            follower.kill()
    events = [json.loads(line)["event"] for line in out.splitlines() if line.strip()]
    assert events == ["session_start", "request", "session_end"], out
    assert follower.returncode == 0


# --------------------------------------------------------------------------------------------
# The signed chain head (docs/audit-log.md): an editor without the key cannot re-chain a log.
# --------------------------------------------------------------------------------------------


def rechain(lines):
    """What an editor without the key can do: renumber and rewrite every prev and hash."""
    prev, out = "0" * 64, []
    for seq, line in enumerate(lines, start=1):
        record = json.loads(line)
        line = re.sub(r'"seq":\d+', f'"seq":{seq}', line, count=1)
        line = re.sub(r'"prev":"[0-9a-f]{64}"', f'"prev":"{prev}"', line, count=1)
        body = line[:line.rindex(',"hash":"')] + "}"
        prev = hashlib.sha256((prev + body).encode()).hexdigest()
        out.append(body[:-1] + f',"hash":"{prev}"}}\n')
        assert record["event"]
    return "".join(out)


def test_a_finished_session_verifies_ok_and_signed(finished_session):
    b = finished_session
    key = audit_key(b)
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    end = json.loads(b.log_path.read_text().splitlines()[-1])
    assert end["event"] == "session_end" and end["signature"]["alg"] == "ed25519", end
    r = verify(b)
    assert r.returncode == 0 and ": ok, 5 record(s)" in r.stdout, r.stdout + r.stderr


def test_a_log_rechained_without_its_refusal_is_tampered(finished_session):
    b = finished_session
    lines = [x for x in b.log_path.read_text().splitlines() if '"event":"refused"' not in x]
    b.log_path.write_text(rechain(lines))
    r = verify(b)
    assert r.returncode == 1, r.stdout
    assert ": tampered at seq 4" in r.stdout and "signature" in r.stdout, r.stdout


def test_a_log_rechained_without_its_signature_is_unsigned(finished_session):
    b = finished_session
    lines = [re.sub(r',"signature":\{[^}]*\}', "", x) for x in b.log_path.read_text().splitlines()
             if '"event":"refused"' not in x]
    b.log_path.write_text(rechain(lines))
    r = verify(b)
    assert r.returncode == 1 and ": unsigned: 4 record(s)" in r.stdout, r.stdout


def test_a_log_signed_with_another_key_is_tampered(finished_session, tmp_path):
    b = finished_session
    other = Broker(tmp_path / "other", policy=allow_policy(HOST))
    assert other.stop() == 0
    r = verify(b, key=audit_key(other))
    assert r.returncode == 1 and "signed with a key that is not" in r.stdout, r.stdout
    # Without any key to check with, it is not called ok either.
    r = verify(b, key=tmp_path / "missing-key")
    assert r.returncode == 1 and ": unverified" in r.stdout, r.stdout


def test_a_killed_broker_leaves_an_incomplete_log(broker_factory, upstream):
    b = broker_factory(policy=allow_policy(HOST, ports=[upstream.port]),
                       connect_to=[connect_to_arg(HOST, upstream.port)])
    assert curl(f"http://{HOST}:{upstream.port}/a", proxy=b.proxy).status == 200
    b.proc.kill()
    b.proc.wait()
    b.returncode = 0  # killed on purpose
    r = verify(b)
    assert r.returncode == 1 and ": incomplete: 2 record(s)" in r.stdout, r.stdout


def test_a_log_cut_mid_record_reads_truncated_not_tampered(finished_session):
    b = finished_session
    text = b.log_path.read_bytes()
    lines = text.count(b"\n")
    b.log_path.write_bytes(text[:-30])  # its last record's write was cut short
    r = verify(b)
    assert r.returncode == 1, r.stdout
    assert (f": truncated at seq {lines} (line {lines}): the last record is partial" in r.stdout
            and f"{lines - 1} record(s) before it verified, hash chain intact up to the cut"
            in r.stdout), r.stdout
    assert "tampered" not in r.stdout
