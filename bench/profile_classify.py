#!/usr/bin/python3
"""Names what a proxy's CPU a request goes to, from `perf script -F tid,period,ip,sym,dso` of a
`perf record --call-graph dwarf` (bench/h2_profile.sh). Each sample, weighed by its period, goes
to the first frame, from the leaf up, that names a part of the work (broker's and haproxy's own
function names), so the OpenSSL, kernel, malloc or nghttp2 time under a part is that part's; a
sample under none is "other". The shares are scaled to the CPU a request measured beside the
profile.

Usage: profile_classify.py broker|haproxy SCRIPT_OUTPUT US_PER_REQUEST
Prints one JSON object: {"samples": n, "parts": {part: us a request}, "runs": {what runs: us}}.
"""
import collections
import json
import re
import sys

# The parts both proxies do, then the broker's own. Patterns are searched in function names.
PARTS = {
    "broker": [
        ("audit record", r"live_session::record|exchange_record|audit_log::|append_json_string|"
                         r"text_scrubber|audit_entry"),
        ("response scrub and meter", r"scrub_head|stream_scrubber|scrub_value|llm_usage|"
                                     r"usage_meter"),
        ("policy and credential swap", r"config::|brokers::credential_set|brokers::request|"
                                       r"check_and_swap|http_exchange::decide|http_exchange::admit|"
                                       r"request_text|request_plan|admission|budget"),
        ("TLS records and socket I/O", r"tls_socket::|SSL_read|SSL_write"),
        ("HTTP/2 framing, both sides", r"h2_server_session::|h2_client_session::|"
                                       r"h2_connection::reader|h2_upstream::reader|nghttp2_"),
        ("request and response relay", r"h2_connection::|h2_upstream::|http_exchange::|"
                                       r"response_relay::|request_relay::|h2_stream|header_block|"
                                       r"h2_fields|message_head"),
        ("event loop", r"epoll|scheduler::|do_run_one|io_context::run"),
    ],
    "haproxy": [
        ("TLS records and socket I/O", r"ssl_sock_|SSL_read|SSL_write|raw_sock_"),
        ("HTTP/2 framing, both sides", r"^h2_|^h2c_|^h2s_|hpack"),
        ("request and response relay", r"^htx|^http_|^stream_|process_stream|^sc_|^cs_|"
                                       r"^channel_|^si_|^conn_"),
        ("event loop", r"epoll|run_tasks|process_runnable|_do_poll|run_poll_loop|^task|^fd_"),
    ],
}


def what_runs(sym, dso):
    if "kernel" in dso:
        return "kernel"
    if "libcrypto" in dso or "libssl" in dso:
        return "OpenSSL"
    if "nghttp2" in dso:
        return "nghttp2"
    if "libc.so" in dso:
        if re.search(r"malloc|free|_int_|unlink_chunk|consolidate|tcache|realloc|calloc", sym):
            return "malloc and free"
        return "libc other"
    if "libstdc++" in dso:
        return "libstdc++"
    return "own code"


def samples(path):
    """Each sample's period and frames (symbol, object), leaf first."""
    period, frames = 0, None
    for line in open(path, errors="replace"):
        if not line.startswith("\t"):
            if line.strip():
                if frames:
                    yield period, frames
                fields = line.split()
                period = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 1
                frames = []
            continue
        m = re.match(r"\t\s*[0-9a-f]+ (.*?)(?: \((.*)\))?\s*$", line)
        if m and frames is not None:
            frames.append((m.group(1), m.group(2) or ""))
    if frames:
        yield period, frames


def main():
    who, path, us = sys.argv[1], sys.argv[2], float(sys.argv[3])
    parts, runs = collections.Counter(), collections.Counter()
    n = total = 0
    for period, frames in samples(path):
        n += 1
        total += period
        # Inlined frames carry no object: what runs is the first frame that has one.
        real = next(((s, d) for s, d in frames if d and d != "inlined"), frames[0])
        runs[what_runs(*real)] += period
        part = "other"
        for sym, _ in frames:
            hit = next((name for name, rx in PARTS[who] if re.search(rx, sym)), None)
            if hit:
                part = hit
                break
        parts[part] += period
    scale = us / max(total, 1)
    print(json.dumps({"samples": n,
                      "parts": {k: round(c * scale, 2) for k, c in parts.items()},
                      "runs": {k: round(c * scale, 2) for k, c in runs.items()}}))


if __name__ == "__main__":
    main()
