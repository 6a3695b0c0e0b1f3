"""The offline upstreams of examples/gateway/run.sh --demo: fake_apis.py's fakes of GitHub's and
the model APIs as a process of their own, on 127.0.0.1, behind a test CA made here.

    python3 demo_upstreams.py --dir DIR [--port PORT]

- Makes DIR/pki (openssl): ca.pem, the CA the gateways trust with `--upstream-ca`, and a leaf
  naming every host of fake_apis.HOSTS (the gateways' `--connect-to HOST:443:127.0.0.1:PORT`
  send those hosts here).
- Accepts ONLY the real values it finds in its environment (GITHUB_TOKEN, ANTHROPIC_API_KEY,
  OPENAI_API_KEY, CODEX_API_KEY): anything else, a dummy included, gets a 401.
- Writes DIR/requests.jsonl, one line per answered request: host, method, path, status, and
  `credential`: "real" (a header carried one of the real values), "not real" (it carried
  something else) or null (no credential header). Values themselves are never written.
- Prints `demo upstreams: listening on 127.0.0.1:PORT` once it serves; runs until SIGTERM or
  SIGINT, then writes what is left and exits 0.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import fake_apis

# The realms of fake_apis.FakeApis.accept() each variable's real value is accepted in.
REALMS = {"GITHUB_TOKEN": ["github"], "ANTHROPIC_API_KEY": ["anthropic_key", "anthropic_bearer"],
          "OPENAI_API_KEY": ["openai"], "CODEX_API_KEY": ["openai"]}
# The request headers a credential travels in, to these APIs.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
FLUSH_INTERVAL_S = 0.05


def make_pki(directory: Path, names):
    """A CA and a leaf for `names` (EC P-256, two days), as tests/integration/conftest.py does."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True,
                       timeout=60)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=broker demo CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", f"/CN={names[0]}")
    (directory / "leaf.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={','.join('DNS:' + n for n in names)}\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "leaf.ext")
    return directory / "leaf.pem", directory / "leaf.key"


def credential_seen(headers, real_values) -> str | None:
    """"real", "not real" or None: what the request's credential headers carried."""
    carried = []
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name)
        if value:
            scheme, _, rest = value.partition(" ")
            carried.append(rest.strip() if name == "authorization" and rest else value.strip())
    if not carried:
        return None
    return "real" if any(v in real_values for v in carried) else "not real"


class RequestLog:
    """Appends each answered request of `fake` to `path` (a record is complete once it has a
    status); flush() writes the ones not written yet."""

    def __init__(self, fake, path: Path, real_values):
        self.fake, self.path, self.real_values = fake, path, real_values
        self.written = 0
        self.lock = threading.Lock()
        path.write_text("")

    def flush(self, everything=False):
        with self.lock:
            records = self.fake.requests()
            lines = []
            while self.written < len(records):
                r = records[self.written]
                if r["status"] is None and not everything:
                    break  # still being answered; the order of the file is the order of arrival
                lines.append(json.dumps({
                    "host": r["host"], "method": r["method"], "path": r["path"],
                    "status": r["status"],
                    "credential": credential_seen(r["headers"], self.real_values)}))
                self.written += 1
            if lines:
                with self.path.open("a") as out:
                    out.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, type=Path, help="where the PKI and requests.jsonl go")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    args = ap.parse_args()

    leaf_cert, leaf_key = make_pki(args.dir / "pki", fake_apis.HOSTS)
    fake = fake_apis.FakeApis(leaf_cert, leaf_key, port=args.port)
    real_values = set()
    for variable, realms in REALMS.items():
        value = os.environ.get(variable)
        if value:
            real_values.add(value)
            for realm in realms:
                fake.accept(realm, value)
    log = RequestLog(fake, args.dir / "requests.jsonl", real_values)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"demo upstreams: listening on 127.0.0.1:{fake.port}", flush=True)
    while not stop.wait(FLUSH_INTERVAL_S):
        log.flush()
    fake.close()
    log.flush(everything=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
