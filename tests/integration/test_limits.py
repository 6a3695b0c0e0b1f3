"""Connection limits: a broker whose descriptor limit is low serves fewer connections and refuses
the rest with the refusal JSON (503 overloaded) instead of stalling on EMFILE."""

import time

from conftest import Broker, RawClient, allow_policy, assert_refusal


def test_a_low_descriptor_limit_gives_overloaded_not_a_stall(tmp_path):
    b = Broker(tmp_path / "b", policy=allow_policy("api.example.test"), start=False)
    # 82 descriptors, hard and soft: (82 - 64 reserved) / 2 per connection = 9 connections.
    b.args = ["prlimit", "--nofile=82:82", "--"] + b.args
    b.start()
    try:
        held = [RawClient(b.port) for _ in range(9)]
        time.sleep(0.3)  # all accepted
        extra = RawClient(b.port)
        r = extra.read_response()
        assert_refusal(r.status, r.headers, r.body, "overloaded", 503, session=b.session)
        # The held ones are still served: a request on one is answered (refused by policy here,
        # which proves a live connection behind it).
        held[0].send(b"GET http://not-allowed.example/ HTTP/1.1\r\nHost: not-allowed.example\r\n\r\n")
        r = held[0].read_response()
        assert r.status == 403, r
        for c in held:
            c.sock.close()
        time.sleep(0.3)
        again = RawClient(b.port)  # room again once they are gone
        again.send(b"GET http://not-allowed.example/ HTTP/1.1\r\nHost: not-allowed.example\r\n\r\n")
        assert again.read_response().status == 403
    finally:
        assert b.stop() == 0
