"""Real HTTP/2 clients through the broker (docs/architecture.md): nghttp (nghttp2's client, which knows no
proxy) inside `broker wrap` with transparent capture, many streams on one connection; and
Node's http2 module through a CONNECT tunnel, concurrent streams of which one is refused. Each
stream is an exchange of its own: the dummy swapped for the real value, one audit record with
"http": "2", the real value in nothing the client or the logs hold."""
import hashlib
import json
import re
import shutil
import subprocess

from conftest import assert_refusal, clean_env
from test_http2 import session  # noqa: F401  (the fixture: a broker with the GitHub credential)
from test_mitm import GITHUB, REAL as SESSION_REAL, assert_nothing_written_contains
from test_wrap import API, REAL, assert_clean, ws  # noqa: F401

NODE = "/usr/bin/node"


def tool(path_or_name):
    found = shutil.which(path_or_name)
    assert found, f"{path_or_name} is not installed: this test needs it (apt-get install " \
                  f"{'nghttp2-client' if 'nghttp' in path_or_name else 'nodejs'})"
    return found


# --------------------------------------------------------------------------------------------
# nghttp inside `broker wrap`: captured, twenty streams on one connection
# --------------------------------------------------------------------------------------------

def test_nghttp_in_wrap_sends_twenty_concurrent_streams_with_the_real_token(ws, tls_upstream):
    tool("nghttp")
    paths = [f"/h2/nghttp/{i}" for i in range(20)]
    # nghttp has no proxy option: capture takes its connection to the broker. It trusts the
    # session CA through SSL_CERT_FILE (OpenSSL's default paths), which wrap sets; on a
    # certificate it cannot verify it only warns, so the warning's absence is checked below.
    r = ws.run("sh", "-c",
               'nghttp -v -n -H "Authorization: Bearer $GITHUB_TOKEN" "$@"; echo "nghttp-exit:$?"',
               "sh", *[f"https://{API}{p}" for p in paths], timeout=60)
    assert r.returncode == 0 and "nghttp-exit:0" in r.out, r.describe()
    assert "Certificate verification failed" not in r.err, r.describe()
    assert r.out.count("] Connected") == 1, r.describe()  # one connection ...
    assert "The negotiated protocol: h2" in r.out, r.describe()
    statuses = re.findall(r"recv \(stream_id=(\d+)\) :status: (\d+)", r.out)
    assert len({sid for sid, _ in statuses}) == 20, r.describe()  # ... twenty streams on it
    assert [code for _, code in statuses] == ["200"] * 20, statuses
    # The upstream got every request, each with the real token.
    seen = [q for q in tls_upstream.requests if q["path"].startswith("/h2/nghttp/")]
    assert sorted(q["path"] for q in seen) == sorted(paths), seen
    assert all(q["headers"].get("Authorization") == f"Bearer {REAL}" for q in seen), \
        [q["headers"].get("Authorization") for q in seen]
    # One record per stream: HTTP/2, captured, the credential swapped.
    recs = [x for x in ws.requests() if str(x.get("path", "")).startswith("/h2/nghttp/")]
    assert len(recs) == 20, ws.records()
    assert all(x["http"] == "2" and x["captured"] is True and x["status"] == 200 and
               x["credential"] == "github" for x in recs), recs
    assert_clean(r.stdout + r.stderr, "nghttp's output", REAL)
    ws.assert_logs_clean()


# --------------------------------------------------------------------------------------------
# Node's http2 through a CONNECT tunnel
# --------------------------------------------------------------------------------------------

# argv: broker port, upstream port, CA file, dummy token. Opens the tunnel, then one HTTP/2
# session with three streams at once; prints {alpn, results: [{status, headers, body}]}.
NODE_CLIENT = r"""
const fs = require('fs'), http = require('http'), http2 = require('http2'), tls = require('tls');
const [brokerPort, port, caFile, dummy] = process.argv.slice(2);
const authority = `api.github.com:${port}`;
const big = Buffer.alloc(200 * 1024);
for (let i = 0; i < big.length; i++) big[i] = i % 251;

const tunnel = http.request({host: '127.0.0.1', port: Number(brokerPort), method: 'CONNECT',
                             path: authority, headers: {host: authority}});
tunnel.on('error', (e) => { console.error('tunnel', e); process.exit(3); });
tunnel.on('connect', (res, socket) => {
  if (res.statusCode !== 200) { console.error('CONNECT', res.statusCode); process.exit(4); }
  let alpn = null;
  const session = http2.connect(`https://${authority}`, {
    createConnection: () => {
      const t = tls.connect({socket, ALPNProtocols: ['h2'], servername: 'api.github.com',
                             ca: fs.readFileSync(caFile)});
      t.on('secureConnect', () => { alpn = t.alpnProtocol; });
      return t;
    }});
  session.on('error', (e) => { console.error('session', e); process.exit(5); });
  const call = (headers, body) => new Promise((resolve, reject) => {
    const stream = session.request(headers);
    const chunks = [];
    let head = null;
    stream.on('response', (h) => { head = h; });
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => resolve({status: head && head[':status'], headers: head,
                                    body: Buffer.concat(chunks).toString('latin1')}));
    stream.on('error', reject);
    stream.end(body);
  });
  Promise.all([
    call({':method': 'GET', ':path': '/user', authorization: `token ${dummy}`}),
    call({':method': 'POST', ':path': '/repos/o/r/blob', 'content-type': 'application/octet-stream',
          'content-length': String(big.length)}, big),
    call({':method': 'GET', ':path': '/admin/keys'}),
  ]).then((results) => {
    console.log(JSON.stringify({alpn, results}));
    session.close();
  }, (e) => { console.error('stream', e); process.exit(6); });
});
tunnel.end();
"""


def test_node_http2_sends_concurrent_streams_through_a_connect_tunnel(session, tls_upstream,  # noqa: F811
                                                                      tmp_path):
    node = tool(NODE)
    script = tmp_path / "h2_client.js"
    script.write_text(NODE_CLIENT)
    p = subprocess.run([node, str(script), str(session.port), str(tls_upstream.port),
                        str(session.ca_cert), session.dummy],
                       capture_output=True, timeout=60, env=clean_env())
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, f"node exited {p.returncode}\nstdout={out}\nstderr={p.stderr!r}"
    doc = json.loads(out)
    assert doc["alpn"] == "h2", doc
    get, post, denied = doc["results"]
    assert [get["status"], post["status"], denied["status"]] == [200, 200, 403], out[:3000]
    # GET: the upstream got the real token; its echo came back as the dummy.
    assert json.loads(get["body"])["headers"]["authorization"] == f"token {session.dummy}"
    seen = {q["path"]: q for q in tls_upstream.requests}
    assert seen["/user"]["headers"]["authorization"] == f"token {SESSION_REAL}"
    # POST: the 200 KiB body went up whole, over many DATA frames and window updates.
    big = bytes(i % 251 for i in range(200 * 1024))
    echo = json.loads(post["body"])
    assert echo["body_length"] == len(big)
    assert echo["body_sha256"] == hashlib.sha256(big).hexdigest()
    # The denied stream: the broker's JSON refusal, and nothing sent up.
    headers = {k.lower(): str(v) for k, v in denied["headers"].items()}
    assert_refusal(denied["status"], headers, denied["body"].encode(), "policy_denied", 403,
                   session=session.session, host=GITHUB)
    assert "/admin/keys" not in seen
    records = session.wait_for_records(lambda x: x.get("http") == "2", count=3)
    assert sorted((x["path"], x["status"], x.get("error")) for x in records) == [
        ("/admin/keys", 403, "policy_denied"), ("/repos/o/r/blob", 200, None),
        ("/user", 200, None)], records
    assert SESSION_REAL not in out and SESSION_REAL not in p.stderr.decode(errors="replace")
    session.stop()
    assert_nothing_written_contains(session, SESSION_REAL)
