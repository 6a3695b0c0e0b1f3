"""Learn and suggest (docs/policy.md): `broker wrap --learn` lets through what the policy refuses
for want of an allow rule (recorded as `learned`; explicit deny rules still hold), `broker
policy suggest` prints a layer that `policy check` accepts, and the same scripted session (curl,
git, pip against local fakes) run again with that layer enforcing is refused nothing."""

import json
import subprocess

from conftest import BROKER_BIN, clean_env

HOSTS = ["api.example.test", "github.com", "other.example.test"]
SCRIPT = """
curl -sS -o /dev/null -w 'CURL %{http_code}\\n' https://api.example.test/v1/items?page=2
curl -sS -o /dev/null -X POST -d x=1 -w 'POST %{http_code}\\n' https://api.example.test/v1/items
git ls-remote https://github.com/o/r.git >/dev/null 2>&1; echo "GIT $?"
python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q -d dl \\
    --index-url https://other.example.test/simple/ sample >/dev/null 2>&1; echo "PIP $?"
curl -sS -o /dev/null -w 'BLOCKED %{http_code}\\n' https://api.github.com/
"""


class Sessions:
    def __init__(self, tmp_path, pki, upstream):
        self.tmp, self.pki, self.upstream = tmp_path, pki, upstream
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.runtime = tmp_path / "run"
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        self.logs = tmp_path / "logs"
        self.env = clean_env({"HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime)})

    def wrap(self, name, policy, *extra):
        policy_file = self.tmp / f"{name}.json"
        policy_file.write_text(policy if isinstance(policy, str) else json.dumps(policy))
        argv = [BROKER_BIN, "wrap", "--session", name, "--policy", str(policy_file),
                "--upstream-ca", str(self.pki.ca_cert), "--log-dir", str(self.logs), *extra]
        for h in HOSTS + ["api.github.com"]:
            argv += ["--connect-to", f"{h}:443:127.0.0.1:{self.upstream.port}"]
        work = self.tmp / name
        work.mkdir()
        p = subprocess.run([*argv, "--", "sh", "-c", SCRIPT], env=self.env, capture_output=True,
                           timeout=120, cwd=work)
        return p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def records(self, name):
        return [json.loads(l) for l in (self.logs / f"{name}.jsonl").read_text().splitlines()
                if l.strip()]

    def cli(self, *args):
        return subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=30,
                              env=self.env)


def test_learn_then_suggest_then_enforce(tmp_path, pki, tls_upstream):
    s = Sessions(tmp_path, pki, tls_upstream)
    # What the session runs under: nothing it needs, and a hard deny it must keep meeting.
    base = {"version": 1, "allow": [{"host": "unused.test"}],
            "deny": [{"host": "api.github.com"}]}
    out, err = s.wrap("learning", base, "--learn")
    assert "CURL 200" in out and "POST 200" in out and "BLOCKED 403" in out, (out, err)
    records = s.records("learning")
    learned = [r for r in records if r.get("decision") == "learned"]
    assert f"broker: learned {len(learned)} requests" in err, err
    assert "broker policy suggest learning" in err, err
    hosts = {r["host"] for r in learned}
    assert hosts == set(HOSTS), (hosts, [(r["event"], r["host"]) for r in records])
    assert all(r["rule"] == "default_deny" and r["status"] for r in learned), learned
    # The explicit deny rule held.
    blocked = [r for r in records if r.get("host") == "api.github.com"]
    assert blocked and all(r["decision"] == "deny" for r in blocked), blocked
    pip_paths = {r["path"] for r in learned if r["host"] == "other.example.test"}
    assert any(p.startswith("/simple/sample") for p in pip_paths), pip_paths

    # The suggestion: a valid layer with counts as comments.
    suggested = s.cli("policy", "suggest", "--log-dir", str(s.logs), "learning")
    assert suggested.returncode == 0, suggested.stderr
    text = suggested.stdout
    assert text.startswith("// broker policy suggest: what learning did"), text
    assert "learned" in text and '"host":"api.example.test"' in text, text
    assert "api.github.com" not in text, text  # refused requests are not suggested
    layer = tmp_path / "suggested.json"
    layer.write_text(text)
    check = s.cli("policy", "check", str(layer))
    assert check.returncode == 0, check.stderr
    rules = json.loads(check.stdout)["layers"][0]["allow"]
    api = [r for r in rules if r.get("host") == "api.example.test"][0]
    assert api["methods"] == ["GET", "POST"] and api["paths"] == ["/v1/items"], api

    # The same session under the suggested layer (and the deny): refused nothing it needs.
    out, err = s.wrap("enforcing", text.replace('"allow": [',
                                                '"deny": [{"host": "api.github.com"}],\n'
                                                '  "allow": ['))
    assert "CURL 200" in out and "POST 200" in out and "GIT " in out and "PIP " in out, (out, err)
    again = s.records("enforcing")
    denied = [(r["host"], r.get("path")) for r in again
              if r.get("decision") == "deny" and r.get("host") != "api.github.com"]
    assert denied == [], denied
    went = {r["host"] for r in again if r.get("decision") == "allow"}
    assert went == set(HOSTS), went


def test_a_host_the_other_layers_tunnel_is_learned_as_a_tunnel(tmp_path, pki, tls_upstream):
    # The team tunnels api.example.test; the user's layer does not list it. Learned, it stays a
    # tunnel (the client talks TLS with the upstream itself), and the suggestion says so.
    s = Sessions(tmp_path, pki, tls_upstream)
    team = tmp_path / "team.json"
    team.write_text(json.dumps({"version": 1, "allow": [
        {"host": "api.example.test", "ports": [443], "tunnel": True}]}))
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"version": 1, "allow": [{"host": "unused.test"}]}))
    ca = tmp_path / "upstream-ca.pem"  # in the working directory, which the child sees
    ca.write_bytes(pki.ca_cert.read_bytes())
    argv = [BROKER_BIN, "wrap", "--learn", "--session", "tunnelled", "--policy", str(team),
            "--policy", str(user), "--log-dir", str(s.logs), "--connect-to",
            f"api.example.test:443:127.0.0.1:{tls_upstream.port}", "--", "curl", "-sS",
            "--cacert", str(ca), "-o", "/dev/null", "-w", "STATUS %{http_code}",
            "https://api.example.test/t"]
    p = subprocess.run(argv, env=s.env, capture_output=True, timeout=60, cwd=tmp_path)
    assert b"STATUS 200" in p.stdout, (p.stdout, p.stderr)
    [tunnel] = [r for r in s.records("tunnelled") if r.get("event") == "tunnel"]
    assert tunnel["decision"] == "learned" and tunnel["status"] == 200, tunnel
    text = s.cli("policy", "suggest", "--log-dir", str(s.logs), "tunnelled").stdout
    assert '{"host":"api.example.test","ports":[443],"tunnel":true}' in text, text
