"""`broker session create` against a running gateway (a conftest.Broker started with --gateway),
for the gateway test files."""
from conftest import run_broker_cli


def create_session(gw, *args, name="s"):
    """Creates a session through `gw`; returns (id, env dict, env file)."""
    env_file = gw.dir / f"{name}.env"
    r = run_broker_cli("session", "--gateway", gw.session, "create", "--env-file", env_file, *args)
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if line)
    session_id = env["HTTPS_PROXY"].split("//", 1)[1].split(":", 1)[0]
    assert session_id in r.stdout
    return session_id, env, env_file
