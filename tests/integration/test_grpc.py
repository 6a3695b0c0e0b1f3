"""gRPC through interception (docs/architecture.md): a real grpcio client through the broker to a real
grpcio server on TLS (generic handlers on raw bytes: no generated code). Unary, server-, client-
and bidirectional streaming calls work; metadata `authorization` carries the dummy and arrives
real; a trailer echoing the real value arrives as the dummy; a deadline and a cancel reach the
server; a refusal is a gRPC status the client shows, with the JSON of docs/cli.md as its message."""
import json
import threading
import time
import urllib.parse
from concurrent import futures

import grpc
import pytest

from conftest import connect_to_arg
from test_mitm import GITHUB, REAL, assert_nothing_written_contains

SERVICE = "test.Echo"


class Echo:
    """What the server saw: each call's metadata, and whether a slow call was cancelled."""

    def __init__(self):
        self.metadata = []
        self.cancelled = threading.Event()

    def _seen(self, context):
        md = dict(context.invocation_metadata())
        self.metadata.append(md)
        return md.get("authorization", "")

    def unary(self, request, context):
        auth = self._seen(context)
        context.set_trailing_metadata((("x-seen-authorization", auth),))
        return request + b"|" + auth.encode()

    def server_stream(self, request, context):
        self._seen(context)
        for i in range(int(request)):
            yield f"part {i}".encode()

    def client_stream(self, requests, context):
        self._seen(context)
        return b"".join(requests)

    def bidi(self, requests, context):
        self._seen(context)
        for r in requests:
            yield r.upper()

    def slow(self, request, context):
        self._seen(context)
        for _ in range(100):
            if not context.is_active():
                self.cancelled.set()
                return b"late"
            time.sleep(0.05)
        return b"done"


@pytest.fixture
def grpc_server(pki):
    echo = Echo()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(echo.unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(echo.server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(echo.client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(echo.bidi),
        "Slow": grpc.unary_unary_rpc_method_handler(echo.slow),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    creds = grpc.ssl_server_credentials([(pki.leaf_key.read_bytes(), pki.leaf_cert.read_bytes())])
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    echo.port = port
    yield echo
    server.stop(0)


def make_session(broker_factory, pki, port, allow_paths=None, args=None):
    rule = {"host": GITHUB, "ports": [port]}
    if allow_paths:
        rule["paths"] = allow_paths
    policy = {
        "version": 1,
        "allow": [rule],
        "credentials": {"github": {"type": "github", "env": ["GITHUB_TOKEN"], "hosts": [GITHUB]}},
    }
    b = broker_factory(policy=policy, connect_to=[connect_to_arg(GITHUB, port)],
                       upstream_ca=pki.ca_cert, env={"GITHUB_TOKEN": REAL}, env_file=True,
                       **({"args": args} if args else {}))
    b.dummy = b.session_env()["GITHUB_TOKEN"]
    return b


def channel(session, port):
    creds = grpc.ssl_channel_credentials(root_certificates=session.ca_cert.read_bytes())
    return grpc.secure_channel(f"{GITHUB}:{port}", creds,
                               options=[("grpc.http_proxy", session.proxy),
                                        ("grpc.enable_retries", 0)])


def call(ch, kind, method):
    make = {"uu": ch.unary_unary, "us": ch.unary_stream, "su": ch.stream_unary,
            "ss": ch.stream_stream}[kind]
    return make(f"/{SERVICE}/{method}")


def test_every_kind_of_call_works_and_the_dummy_arrives_real(broker_factory, pki, grpc_server):
    session = make_session(broker_factory, pki, grpc_server.port)
    auth = (("authorization", f"Bearer {session.dummy}"),)
    with channel(session, grpc_server.port) as ch:
        reply, c = call(ch, "uu", "Unary").with_call(b"hello", metadata=auth, timeout=10)
        # The server saw the real value; its echo, in the body and in a trailer, came back as the
        # dummy.
        assert grpc_server.metadata[-1]["authorization"] == f"Bearer {REAL}"
        assert reply == f"hello|Bearer {session.dummy}".encode()
        assert dict(c.trailing_metadata())["x-seen-authorization"] == f"Bearer {session.dummy}"
        parts = list(call(ch, "us", "ServerStream")(b"5", metadata=auth, timeout=10))
        assert parts == [f"part {i}".encode() for i in range(5)]
        joined = call(ch, "su", "ClientStream")(iter([b"a", b"b", b"c"]), metadata=auth,
                                                timeout=10)
        assert joined == b"abc"
        echoed = list(call(ch, "ss", "Bidi")(iter([b"x", b"y"]), metadata=auth, timeout=10))
        assert echoed == [b"X", b"Y"]
    records = session.wait_for_records(lambda x: x.get("event") == "request", count=4)
    assert all(r["http"] == "2" and r["status"] == 200 for r in records)
    assert {r["path"] for r in records} == {f"/{SERVICE}/{m}" for m in
                                            ("Unary", "ServerStream", "ClientStream", "Bidi")}
    session.stop()
    assert_nothing_written_contains(session, REAL)


def test_a_deadline_and_a_cancel_reach_the_server(broker_factory, pki, grpc_server):
    session = make_session(broker_factory, pki, grpc_server.port)
    with channel(session, grpc_server.port) as ch:
        with pytest.raises(grpc.RpcError) as e:
            call(ch, "uu", "Slow")(b"", timeout=0.5)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert grpc_server.cancelled.wait(5)
        grpc_server.cancelled.clear()
        future = call(ch, "uu", "Slow").future(b"", timeout=30)
        time.sleep(0.5)
        future.cancel()
        assert grpc_server.cancelled.wait(5)
        # The channel goes on.
        assert call(ch, "uu", "Unary")(b"again", timeout=10) == b"again|"


def test_a_refused_call_is_a_grpc_status_with_the_json_of_design_6(broker_factory, pki,
                                                                   grpc_server):
    session = make_session(broker_factory, pki, grpc_server.port,
                           allow_paths=[f"/{SERVICE}/Unary"])
    with channel(session, grpc_server.port) as ch:
        assert call(ch, "uu", "Unary")(b"ok", timeout=10) == b"ok|"
        with pytest.raises(grpc.RpcError) as e:
            call(ch, "uu", "Slow")(b"", timeout=10)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        doc = json.loads(urllib.parse.unquote(e.value.details()))
        assert doc["error"] == "policy_denied" and doc["host"] == GITHUB
        assert dict(e.value.trailing_metadata())["x-broker-error"] == "policy_denied"


def test_a_call_refused_after_it_went_up_is_still_a_grpc_status(broker_factory, pki, grpc_server):
    # The request is wholly up (its fields let go of) when the upstream's silence runs out: the
    # refusal is still the gRPC status a client shows, with its credential swapped in.
    session = make_session(broker_factory, pki, grpc_server.port, args=["--timeout", "upstream=1s"])
    with channel(session, grpc_server.port) as ch:
        with pytest.raises(grpc.RpcError) as e:
            call(ch, "uu", "Slow")(b"", timeout=10,
                                    metadata=(("authorization", f"Bearer {session.dummy}"),))
    doc = json.loads(urllib.parse.unquote(e.value.details()))
    assert doc["error"] == "upstream_timeout" and doc["host"] == GITHUB
    assert dict(e.value.trailing_metadata())["x-broker-error"] == "upstream_timeout"
    assert grpc_server.metadata[-1]["authorization"] == f"Bearer {REAL}"
    assert_nothing_written_contains(session, REAL)


def test_grpc_to_an_upstream_without_http2_is_unavailable(broker_factory, pki, tls_upstream):
    session = make_session(broker_factory, pki, tls_upstream.port)
    with channel(session, tls_upstream.port) as ch:
        with pytest.raises(grpc.RpcError) as e:
            call(ch, "uu", "Unary")(b"x", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    doc = json.loads(urllib.parse.unquote(e.value.details()))
    assert doc["error"] == "upstream_protocol_error"
    assert tls_upstream.requests == []  # nothing went up over HTTP/1.1
