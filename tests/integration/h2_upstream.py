"""An HTTP/2-only TLS upstream for the tests (python-h2 on 127.0.0.1:<ephemeral>, ALPN h2): each
connection is a thread; each stream's request is recorded and answered once it ends.

Any path: JSON {method, path, headers, body_length, body_sha256, connection}, with Content-Length.
/stream/N: N bytes of "x" in 16 KiB DATA frames, without Content-Length.
/reflect: the request's Authorization in a response field, the body and a trailer.
/interim: a 100 (Continue), then a 200 with a body of no stated length.
/reset: the head, then RST_STREAM INTERNAL_ERROR.
.connections: TLS connections accepted; .requests: what each stream asked, in order.
"""
import hashlib
import json
import socket
import ssl
import threading

import h2.config
import h2.connection
import h2.errors
import h2.exceptions
import h2.events
import h2.settings


class H2Upstream:
    def __init__(self, pki, max_concurrent_streams=100):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki.leaf_cert, pki.leaf_key)
        self.ctx.set_alpn_protocols(["h2"])
        self.max_streams = max_concurrent_streams
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = []
        self.resets = []  # stream ids the client reset, with their error codes
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept(self):
        while not self.closed:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        with self.lock:
            self.connections += 1
            number = self.connections
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        tls.sendall(conn.data_to_send())
        streams = {}   # id -> {"headers", "body"}
        pending = {}   # id -> bytes still to send, and whether trailers follow
        try:
            while True:
                data = tls.recv(65536)
                if not data:
                    return
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = {"headers": dict(event.headers), "body": b""}
                        if event.stream_ended:
                            self._answer(conn, event.stream_id, streams.pop(event.stream_id),
                                         number, pending)
                    elif isinstance(event, h2.events.DataReceived):
                        if event.stream_id in streams:
                            streams[event.stream_id]["body"] += event.data
                        conn.acknowledge_received_data(event.flow_controlled_length,
                                                       event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        if event.stream_id in streams:
                            self._answer(conn, event.stream_id, streams.pop(event.stream_id),
                                         number, pending)
                    elif isinstance(event, h2.events.StreamReset):
                        streams.pop(event.stream_id, None)
                        pending.pop(event.stream_id, None)
                        with self.lock:
                            self.resets.append((event.stream_id, event.error_code))
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        tls.sendall(conn.data_to_send())
                        return
                self._flush(conn, pending)
                tls.sendall(conn.data_to_send())
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            tls.close()

    def _answer(self, conn, sid, request, number, pending):
        headers = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                   for k, v in request["headers"].items()}
        body = request["body"]
        path = headers.get(":path", "")
        with self.lock:
            self.requests.append({"method": headers.get(":method"), "path": path,
                                  "headers": headers, "body": body, "connection": number})
        if path.startswith("/stream/"):
            n = int(path.split("/")[2])
            conn.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
            pending[sid] = [b"x" * n, None]
        elif path == "/reflect":
            seen = headers.get("authorization", "")
            conn.send_headers(sid, [(":status", "200"), ("x-seen-authorization", seen)])
            pending[sid] = [seen.encode(), [("x-trailer-authorization", seen)]]
        elif path == "/interim":
            conn.send_headers(sid, [(":status", "100")])
            conn.send_headers(sid, [(":status", "200")])
            pending[sid] = [b"after 100", None]
        elif path == "/reset":
            conn.send_headers(sid, [(":status", "200")])
            conn.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
        else:
            out = json.dumps({"method": headers.get(":method"), "path": path,
                              "headers": {k: v for k, v in headers.items() if not k.startswith(":")},
                              "body_length": len(body),
                              "body_sha256": hashlib.sha256(body).hexdigest(),
                              "connection": number}).encode()
            conn.send_headers(sid, [(":status", "200"), ("content-type", "application/json"),
                                    ("content-length", str(len(out)))])
            pending[sid] = [out, None]

    @staticmethod
    def _flush(conn, pending):
        for sid in list(pending):
            data, trailers = pending[sid]
            while data:
                window = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if window <= 0:
                    break
                conn.send_data(sid, data[:window])
                data = data[window:]
            pending[sid][0] = data
            if not data:
                if trailers:
                    conn.send_headers(sid, trailers, end_stream=True)
                else:
                    conn.end_stream(sid)
                del pending[sid]
