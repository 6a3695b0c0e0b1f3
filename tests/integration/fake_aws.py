"""A fake AWS upstream (S3 and STS) for the aws-sigv4 integration tests.

HTTPS on 127.0.0.1:<ephemeral> with a leaf from the test CA that names the S3 and STS endpoints
(see CERT_NAMES); the broker reaches it through `--connect-to HOST:443:127.0.0.1:PORT`.

Every request's AWS Signature Version 4 is verified with the REAL credentials the fake is given,
by an implementation of its own (nothing here comes from botocore or from the broker):
- header form (Authorization: AWS4-HMAC-SHA256 ...) and presigned-query form (X-Amz-*);
- canonical URI as S3 wants it (the path as sent) and as every other service wants it (dot
  segments removed, encoded twice); canonical query; canonical headers; signing key;
- the payload hash: `UNSIGNED-PAYLOAD`, a hex x-amz-content-sha256 (checked against the body),
  the body's own hash when the header is absent, `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` (aws-chunked:
  every chunk signature verified in its chain, the payload reassembled) and
  `STREAMING-UNSIGNED-PAYLOAD-TRAILER` (aws-chunked without chunk signatures, trailer checksum
  checked);
- x-amz-security-token must equal the real session token when the real credentials have one and
  must be absent when they have none; the scope must match the endpoint's service and region;
  the date must be fresh (presigned: not expired).
A request that fails gets 403 (or 400) with an S3- or STS-style XML error and is recorded in
`.failures`; one that passes is recorded in `.verified` and served.

Served: STS GetCallerIdentity; S3 ListBuckets, PutObject, GetObject, HeadObject, DeleteObject,
CreateBucket, a minimal ListObjectsV2 and multipart upload (initiate, part, complete), path-style
and virtual-host-style.
"""

import base64
import binascii
import datetime
import hashlib
import hmac
import re
import select
import socket
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, unquote
from xml.sax.saxutils import escape

from conftest import LoopbackHttpServer, read_request_body, tls_server_context

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_SKEW = datetime.timedelta(minutes=15)

BUCKET = "broker-test-bucket"  # DNS-compatible, no dots: the wildcard names cover it
ACCOUNT = "123456789012"
OWNER_ID = "75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a"
REGIONS = ("us-east-1", "eu-west-1")


def endpoint_hosts(bucket=BUCKET, regions=REGIONS):
    """The concrete host names a client may dial for `bucket` (what --connect-to must map)."""
    hosts = ["s3.amazonaws.com", "sts.amazonaws.com", f"{bucket}.s3.amazonaws.com"]
    for r in regions:
        hosts += [f"s3.{r}.amazonaws.com", f"sts.{r}.amazonaws.com", f"{bucket}.s3.{r}.amazonaws.com"]
    return hosts


# The leaf's DNS names (make_pki takes them as they are; OpenSSL and Python accept the wildcards).
CERT_NAMES = (["s3.amazonaws.com", "*.s3.amazonaws.com", "sts.amazonaws.com"]
              + [n for r in REGIONS for n in (f"s3.{r}.amazonaws.com", f"*.s3.{r}.amazonaws.com",
                                               f"sts.{r}.amazonaws.com")]
              + ["api.example.test", "localhost"])


@dataclass
class AwsCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str = None
    user: str = "broker-test"

    @property
    def arn(self) -> str:
        if self.session_token:
            return f"arn:aws:sts::{ACCOUNT}:assumed-role/broker-test-role/{self.user}"
        return f"arn:aws:iam::{ACCOUNT}:user/{self.user}"

    @property
    def user_id(self) -> str:
        h = hashlib.sha256(self.user.encode()).hexdigest().upper()
        suffix = "".join(c for c in h if c.isalnum())[:17]
        if self.session_token:
            return f"AROA{suffix}:{self.user}"
        return f"AIDA{suffix}"


class SigV4Error(Exception):
    def __init__(self, code: str, message: str, status: int = 403):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


# --------------------------------------------------------------------------------------------
# Signature Version 4, from the specification
# --------------------------------------------------------------------------------------------

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def uri_encode(text, keep_slash=False) -> str:
    """RFC 3986 percent-encoding of every byte but the unreserved ones (and '/' when asked)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    out = []
    for b in data:
        if b in _UNRESERVED or (keep_slash and b == 0x2F):
            out.append(chr(b))
        else:
            out.append("%%%02X" % b)
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, keeping empty segments (duplicate slashes)."""
    out = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
            continue
        if seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result


def canonical_uri(raw_path: str, service: str) -> str:
    if not raw_path:
        return "/"
    if service == "s3":
        return raw_path  # S3: the path exactly as sent (encoded once by the client)
    return uri_encode(_remove_dot_segments(raw_path), keep_slash=True)


def canonical_query(raw_query: str, presigned: bool) -> str:
    pairs = []
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        name, value = unquote(name), unquote(value)
        if presigned and name == "X-Amz-Signature":
            continue
        pairs.append((uri_encode(name), uri_encode(value)))
    pairs.sort()
    return "&".join(f"{n}={v}" for n, v in pairs)


def canonical_headers(headers, signed) -> str:
    lines = []
    for name in signed:
        values = [v for k, v in headers if k.lower() == name]
        if not values:
            raise SigV4Error("SignatureDoesNotMatch", f"signed header {name!r} is not in the request")
        lines.append(f"{name}:{','.join(' '.join(v.split()) for v in values)}\n")
    return "".join(lines)


def canonical_request(method, raw_path, raw_query, headers, signed, payload_hash, service,
                      presigned) -> str:
    return "\n".join([method, canonical_uri(raw_path, service),
                      canonical_query(raw_query, presigned), canonical_headers(headers, signed),
                      ";".join(signed), payload_hash])


def sha256_hex(data) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    k = hmac.new(k, region.encode(), hashlib.sha256).digest()
    k = hmac.new(k, service.encode(), hashlib.sha256).digest()
    return hmac.new(k, b"aws4_request", hashlib.sha256).digest()


def hmac_hex(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return "\n".join([ALGORITHM, amz_date, scope, sha256_hex(canonical)])


def chunk_string_to_sign(amz_date: str, scope: str, previous: str, data: bytes) -> str:
    return "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, EMPTY_SHA256,
                      sha256_hex(data)])


_HOST_RE = re.compile(r"^(?:(?P<bucket>[a-z0-9][a-z0-9.-]*)\.)?(?P<service>s3|sts)"
                      r"(?:\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+))?\.amazonaws\.com$")


def endpoint_of(host: str):
    """(service, region, bucket) for an AWS host name this fake serves, else None."""
    m = _HOST_RE.match(host.lower().rstrip("."))
    if not m:
        return None
    if m.group("bucket") and m.group("service") != "s3":
        return None
    return m.group("service"), m.group("region") or "us-east-1", m.group("bucket")


def host_without_port(host: str) -> str:
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _parse_amz_date(text: str) -> datetime.datetime:
    try:
        return datetime.datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        raise SigV4Error("AccessDenied", f"bad X-Amz-Date {text!r}") from None


def _parse_credential(text: str):
    parts = text.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not re.fullmatch(r"\d{8}", parts[1]) \
            or not all(parts):
        raise SigV4Error("AuthorizationHeaderMalformed", f"bad credential {text!r}", 400)
    return parts[0], parts[1], parts[2], parts[3]


def _parse_signed_headers(text: str):
    names = text.split(";")
    if not text or any(not n or n != n.lower() for n in names) or names != sorted(names):
        raise SigV4Error("AuthorizationHeaderMalformed", f"bad SignedHeaders {text!r}", 400)
    return names


def parse_authorization(value: str) -> dict:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SigV4Error("AuthorizationHeaderMalformed", f"unsupported algorithm {algorithm!r}", 400)
    fields = {}
    for item in rest.split(","):
        k, sep, v = item.strip().partition("=")
        if not sep:
            raise SigV4Error("AuthorizationHeaderMalformed", f"bad component {item!r}", 400)
        fields[k] = v
    for k in ("Credential", "SignedHeaders", "Signature"):
        if k not in fields:
            raise SigV4Error("AuthorizationHeaderMalformed", f"missing {k}", 400)
    if not re.fullmatch(r"[0-9a-f]{64}", fields["Signature"]):
        raise SigV4Error("AuthorizationHeaderMalformed", "bad Signature", 400)
    return fields


@dataclass
class Verified:
    key_id: str
    service: str
    region: str
    form: str            # "header" | "presigned"
    content_sha256: str  # what the payload hash in the canonical request was
    payload: bytes       # the decoded payload (aws-chunked reassembled)
    token: str = None
    chunks: int = 0      # chunk signatures verified (aws-chunked), the final one included
    signed_headers: list = field(default_factory=list)


def decode_signed_chunks(body: bytes, key: bytes, amz_date: str, scope: str, seed: str):
    """aws-chunked with chunk signatures: returns (payload, chunks verified); raises SigV4Error."""
    pos, previous, pieces, count = 0, seed, [], 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            raise SigV4Error("IncompleteBody", f"chunk {count}: no header line", 400)
        header = body[pos:eol].decode("latin-1")
        size_hex, sep, ext = header.partition(";")
        if not sep or not ext.startswith("chunk-signature=") \
                or not re.fullmatch(r"[0-9a-fA-F]{1,16}", size_hex):
            raise SigV4Error("InvalidChunkSizeError", f"chunk {count}: bad header {header!r}", 400)
        signature = ext[len("chunk-signature="):]
        size = int(size_hex, 16)
        start = eol + 2
        data = body[start:start + size]
        if len(data) != size or body[start + size:start + size + 2] != b"\r\n":
            raise SigV4Error("IncompleteBody", f"chunk {count}: truncated", 400)
        expected = hmac_hex(key, chunk_string_to_sign(amz_date, scope, previous, data))
        if not hmac.compare_digest(expected, signature):
            raise SigV4Error("SignatureDoesNotMatch",
                             f"chunk {count} ({size} bytes): chunk signature does not match")
        previous = signature
        pieces.append(data)
        count += 1
        pos = start + size + 2
        if size == 0:
            break
    if pos != len(body):
        raise SigV4Error("InvalidRequest", "bytes after the final chunk", 400)
    return b"".join(pieces), count


def _trailer_checksum_ok(name: str, value: str, payload: bytes) -> bool:
    try:
        got = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    if name == "x-amz-checksum-crc32":
        return got == zlib.crc32(payload).to_bytes(4, "big")
    if name == "x-amz-checksum-sha256":
        return got == hashlib.sha256(payload).digest()
    return True  # others (crc32c, sha1) are not checked here


def decode_unsigned_trailer(body: bytes, trailer_names):
    """aws-chunked without chunk signatures, then trailer lines: returns the payload."""
    pos, pieces = 0, []
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            raise SigV4Error("IncompleteBody", "no chunk header line", 400)
        size_hex = body[pos:eol].decode("latin-1").split(";")[0]
        if not re.fullmatch(r"[0-9a-fA-F]{1,16}", size_hex):
            raise SigV4Error("InvalidChunkSizeError", f"bad chunk header {size_hex!r}", 400)
        size = int(size_hex, 16)
        pos = eol + 2
        if size == 0:
            break
        data = body[pos:pos + size]
        if len(data) != size or body[pos + size:pos + size + 2] != b"\r\n":
            raise SigV4Error("IncompleteBody", "truncated chunk", 400)
        pieces.append(data)
        pos += size + 2
    payload = b"".join(pieces)
    trailers = {}
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            raise SigV4Error("IncompleteBody", "unterminated trailer", 400)
        line = body[pos:eol].decode("latin-1")
        pos = eol + 2
        if line == "":
            break
        name, sep, value = line.partition(":")
        if not sep:
            raise SigV4Error("MalformedTrailerError", f"bad trailer line {line!r}", 400)
        trailers[name.strip().lower()] = value.strip()
    if pos != len(body):
        raise SigV4Error("InvalidRequest", "bytes after the trailer", 400)
    if set(trailers) != set(trailer_names):
        raise SigV4Error("MalformedTrailerError",
                         f"trailers {sorted(trailers)} != x-amz-trailer {sorted(trailer_names)}", 400)
    for name, value in trailers.items():
        if not _trailer_checksum_ok(name, value, payload):
            raise SigV4Error("BadDigest", f"trailer {name} does not match the payload", 400)
    return payload


def verify_request(method: str, target: str, headers, body: bytes, credentials: dict,
                   now: datetime.datetime = None) -> Verified:
    """Verifies one request. headers: [(name, value)] as received; credentials: access key id ->
    AwsCredentials (the REAL ones). Returns what was verified; raises SigV4Error."""
    now = now or datetime.datetime.now(datetime.timezone.utc)

    def values(name):
        return [v for k, v in headers if k.lower() == name]

    def one(name):
        v = values(name)
        if len(v) > 1:
            raise SigV4Error("InvalidRequest", f"several {name} headers", 400)
        return v[0] if v else None

    raw_path, _, raw_query = target.partition("?")
    params = {}
    for part in raw_query.split("&"):
        if part:
            k, _, v = part.partition("=")
            params.setdefault(unquote(k), unquote(v))
    auth = one("authorization")
    presigned = "X-Amz-Algorithm" in params
    if auth is not None and presigned:
        raise SigV4Error("InvalidArgument", "only one auth mechanism allowed", 400)
    if auth is None and not presigned:
        raise SigV4Error("AccessDenied", "anonymous request")

    if presigned:
        if params["X-Amz-Algorithm"] != ALGORITHM:
            raise SigV4Error("AuthorizationQueryParametersError", "bad X-Amz-Algorithm", 400)
        for k in ("X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature",
                  "X-Amz-Expires"):
            if k not in params:
                raise SigV4Error("AuthorizationQueryParametersError", f"missing {k}", 400)
        key_id, date, region, service = _parse_credential(params["X-Amz-Credential"])
        amz_date = params["X-Amz-Date"]
        signed = _parse_signed_headers(params["X-Amz-SignedHeaders"])
        signature = params["X-Amz-Signature"]
        token = params.get("X-Amz-Security-Token")
    else:
        fields = parse_authorization(auth)
        key_id, date, region, service = _parse_credential(fields["Credential"])
        signed = _parse_signed_headers(fields["SignedHeaders"])
        signature = fields["Signature"]
        amz_date = one("x-amz-date")
        if amz_date is None:
            raise SigV4Error("AccessDenied", "no X-Amz-Date header")
        token = one("x-amz-security-token")

    creds = credentials.get(key_id)
    if creds is None:
        raise SigV4Error("InvalidAccessKeyId",
                         "The AWS Access Key Id you provided does not exist in our records.")
    if "host" not in signed:
        raise SigV4Error("AccessDenied", "host is not a signed header")
    when = _parse_amz_date(amz_date)
    if date != amz_date[:8]:
        raise SigV4Error("SignatureDoesNotMatch", "credential date differs from X-Amz-Date")
    if presigned:
        try:
            expires = int(params["X-Amz-Expires"])
        except ValueError:
            raise SigV4Error("AuthorizationQueryParametersError", "bad X-Amz-Expires", 400) from None
        if not 1 <= expires <= 604800:
            raise SigV4Error("AuthorizationQueryParametersError", "bad X-Amz-Expires", 400)
        if now > when + datetime.timedelta(seconds=expires):
            raise SigV4Error("AccessDenied", "Request has expired")
        if when > now + MAX_SKEW:
            raise SigV4Error("AccessDenied", "Request is not yet valid")
    elif abs(now - when) > MAX_SKEW:
        raise SigV4Error("RequestTimeTooSkewed",
                         "The difference between the request time and the current time is too large.")
    host = host_without_port(one("host") or "")
    ep = endpoint_of(host)
    if ep is not None and (ep[0], ep[1]) != (service, region):
        raise SigV4Error("SignatureDoesNotMatch",
                         f"credential scope {region}/{service} does not match the endpoint "
                         f"{ep[1]}/{ep[0]}")
    if creds.session_token:
        if token != creds.session_token:
            raise SigV4Error("InvalidToken", "The provided token is malformed or otherwise invalid.",
                             400 if service == "s3" else 403)
    elif token is not None:
        raise SigV4Error("InvalidToken", "a security token was sent for long-term credentials",
                         400 if service == "s3" else 403)

    content_sha = one("x-amz-content-sha256")
    if content_sha is None:
        payload_hash = UNSIGNED_PAYLOAD if (presigned and service == "s3") else sha256_hex(body)
    elif re.fullmatch(r"[0-9a-f]{64}", content_sha):
        if content_sha != sha256_hex(body):
            raise SigV4Error("XAmzContentSHA256Mismatch",
                             "The provided 'x-amz-content-sha256' header does not match what was "
                             "computed.", 400)
        payload_hash = content_sha
    elif content_sha in (UNSIGNED_PAYLOAD, STREAMING_SIGNED, STREAMING_UNSIGNED_TRAILER):
        payload_hash = content_sha
    else:
        raise SigV4Error("InvalidArgument", f"x-amz-content-sha256 {content_sha!r} not supported", 400)

    scope = f"{date}/{region}/{service}/aws4_request"
    canonical = canonical_request(method, raw_path, raw_query, headers, signed, payload_hash,
                                  service, presigned)
    key = signing_key(creds.secret_access_key, date, region, service)
    expected = hmac_hex(key, string_to_sign(amz_date, scope, canonical))
    if not hmac.compare_digest(expected, signature):
        raise SigV4Error("SignatureDoesNotMatch",
                         "The request signature we calculated does not match the signature you "
                         "provided. Check your key and signing method.")

    payload, chunks = body, 0
    if payload_hash in (STREAMING_SIGNED, STREAMING_UNSIGNED_TRAILER):
        if "aws-chunked" not in [e.strip().lower() for v in values("content-encoding")
                                 for e in v.split(",")]:
            raise SigV4Error("InvalidRequest", "streaming payload without Content-Encoding: "
                             "aws-chunked", 400)
        if payload_hash == STREAMING_SIGNED:
            payload, chunks = decode_signed_chunks(body, key, amz_date, scope, signature)
        else:
            names = [n.strip().lower() for v in values("x-amz-trailer") for n in v.split(",")
                     if n.strip()]
            payload = decode_unsigned_trailer(body, names)
        decoded = one("x-amz-decoded-content-length")
        if decoded is None or not decoded.isdigit() or int(decoded) != len(payload):
            raise SigV4Error("IncompleteBody", f"x-amz-decoded-content-length {decoded!r} != "
                             f"{len(payload)}", 400)
    md5 = one("content-md5")
    if md5 is not None and md5 != base64.b64encode(hashlib.md5(payload).digest()).decode():
        raise SigV4Error("BadDigest", "The Content-MD5 you specified did not match what we received.",
                         400)
    return Verified(key_id, service, region, "presigned" if presigned else "header", payload_hash,
                    payload, token, chunks, signed)


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def _request_id() -> str:
    return uuid.uuid4().hex[:16].upper()


def _http_date(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%a, %d %b %Y %H:%M:%S GMT")


def _iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")


def _loose_credential(target: str, headers):
    """(key id, service) a request claims, before any verification (for the record and the
    error style); (None, None) when it claims none."""
    text = None
    for k, v in headers:
        if k.lower() == "authorization":
            m = re.search(r"Credential=([^,\s]+)", v)
            if m:
                text = m.group(1)
    if text is None:
        m = re.search(r"[?&]X-Amz-Credential=([^&]+)", target)
        text = unquote(m.group(1)) if m else None
    if text is None:
        return None, None
    parts = text.split("/")
    return parts[0], (parts[3] if len(parts) == 5 else None)


class _AwsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *args):
        pass

    def _send(self, status, body: bytes = b"", content_type="application/xml", headers=()):
        self.send_response(status)
        self.send_header("x-amz-request-id", _request_id())
        if body or self.command != "HEAD":
            self.send_header("Content-Type", content_type)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, status, code, message, sts=False, key_id=None):
        rid = _request_id()
        if sts:
            body = (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                    f"<Error><Type>Sender</Type><Code>{escape(code)}</Code>"
                    f"<Message>{escape(message)}</Message></Error>"
                    f"<RequestId>{rid}</RequestId></ErrorResponse>")
            ctype = "text/xml"
        else:
            extra = ""
            if code == "SignatureDoesNotMatch" and key_id:
                extra = f"<AWSAccessKeyId>{escape(key_id)}</AWSAccessKeyId>"  # as S3 does
            body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{escape(code)}</Code>'
                    f"<Message>{escape(message)}</Message>{extra}<RequestId>{rid}</RequestId>"
                    f"</Error>")
            ctype = "application/xml"
        self._send(status, body.encode(), ctype)

    def _handle(self):
        fake = self.server.fake
        header_list = list(self.headers.items())
        host = host_without_port(self.headers.get("Host") or "")
        claimed_key, claimed_service = _loose_credential(self.path, header_list)
        seen = {"method": self.command, "host": host, "path": self.path, "key_id": claimed_key,
                "headers": {k.lower(): v for k, v in header_list}, "complete": False}
        fake._append("seen", seen)
        try:
            body = read_request_body(self)
        except (ConnectionError, ValueError, OSError) as e:
            seen["error"] = str(e)
            self.close_connection = True
            return
        seen["complete"] = True
        seen["body_length"] = len(body)
        ep = endpoint_of(host)
        is_sts = (ep[0] if ep is not None else claimed_service) == "sts"
        try:
            v = verify_request(self.command, self.path, header_list, body, fake.credentials(),
                               fake.now())
        except SigV4Error as e:
            fake._append("failures", {"method": self.command, "host": host, "path": self.path,
                                      "code": e.code, "message": e.message,
                                      "key_id": seen["key_id"]})
            self._error(e.status, e.code, e.message, sts=is_sts, key_id=seen["key_id"])
            return
        record = {"method": self.command, "host": host, "path": self.path, "key_id": v.key_id,
                  "service": v.service, "region": v.region, "form": v.form,
                  "content_sha256": v.content_sha256, "payload_sha256": sha256_hex(v.payload),
                  "payload_length": len(v.payload), "token": v.token, "chunks": v.chunks,
                  "signed_headers": v.signed_headers, "operation": None}
        fake._append("verified", record)
        if v.service == "sts":
            self._sts(v, body, record)
        elif v.service == "s3":
            self._s3(v, host, record)
        else:
            self._error(400, "InvalidAction", f"service {v.service} is not served here")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    # --- STS ---

    def _sts(self, v: Verified, body: bytes, record):
        raw_query = self.path.partition("?")[2]
        params = dict(parse_qsl(raw_query, keep_blank_values=True))
        if self.command == "POST":
            params.update(parse_qsl(v.payload.decode("utf-8", "replace"), keep_blank_values=True))
        action = params.get("Action")
        record["operation"] = action
        if action == "AssumeRole" and params.get("Version") == "2011-06-15":
            self._assume_role(v, params)
            return
        if action != "GetCallerIdentity" or params.get("Version") != "2011-06-15":
            self._error(400, "InvalidAction", f"action {action!r} is not served here", sts=True)
            return
        creds = self.server.fake.credentials()[v.key_id]
        xml = (f'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n'
               f"  <GetCallerIdentityResult>\n"
               f"    <Arn>{escape(creds.arn)}</Arn>\n"
               f"    <UserId>{escape(creds.user_id)}</UserId>\n"
               f"    <Account>{ACCOUNT}</Account>\n"
               f"  </GetCallerIdentityResult>\n"
               f"  <ResponseMetadata>\n    <RequestId>{uuid.uuid4()}</RequestId>\n"
               f"  </ResponseMetadata>\n</GetCallerIdentityResponse>\n")
        self._send(200, xml.encode(), "text/xml")

    def _assume_role(self, v: Verified, params):
        """AssumeRole: new temporary credentials (which the fake then verifies S3 requests
        with), the request's parameters recorded."""
        fake = self.server.fake
        arn = params.get("RoleArn", "")
        if not arn.startswith("arn:aws:iam::") or ":role/" not in arn:
            self._error(400, "ValidationError", "RoleArn is not a role ARN", sts=True)
            return
        duration = int(params.get("DurationSeconds", "3600"))
        seed = uuid.uuid4().hex
        temp = AwsCredentials("ASIA" + hashlib.sha256(seed.encode()).hexdigest()[:16].upper(),
                              base64.b64encode(hashlib.sha256(b"s" + seed.encode()).digest())
                              .decode()[:40],
                              "IQoJb3JpZ2luX2Vj" + base64.b64encode(
                                  hashlib.sha512(seed.encode()).digest() * 4).decode(),
                              params.get("RoleSessionName", "session"))
        fake.add_credentials(temp)
        fake._append("assumed", {"key_id": v.key_id, "role_arn": arn,
                                 "session_name": params.get("RoleSessionName"),
                                 "duration": duration, "policy": params.get("Policy"),
                                 "issued": temp.access_key_id})
        expires = fake.now() + datetime.timedelta(seconds=duration)
        xml = (f'<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n'
               f"  <AssumeRoleResult>\n    <Credentials>\n"
               f"      <AccessKeyId>{temp.access_key_id}</AccessKeyId>\n"
               f"      <SecretAccessKey>{escape(temp.secret_access_key)}</SecretAccessKey>\n"
               f"      <SessionToken>{escape(temp.session_token)}</SessionToken>\n"
               f"      <Expiration>{expires.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration>\n"
               f"    </Credentials>\n    <AssumedRoleUser>\n"
               f"      <Arn>{escape(temp.arn)}</Arn>\n"
               f"      <AssumedRoleId>AROA3XFRBF535PLBIFPI4:{escape(temp.user)}</AssumedRoleId>\n"
               f"    </AssumedRoleUser>\n  </AssumeRoleResult>\n"
               f"  <ResponseMetadata>\n    <RequestId>{uuid.uuid4()}</RequestId>\n"
               f"  </ResponseMetadata>\n</AssumeRoleResponse>\n")
        self._send(200, xml.encode(), "text/xml")

    # --- S3 ---

    def _s3(self, v: Verified, host: str, record):
        fake = self.server.fake
        raw_path, _, raw_query = self.path.partition("?")
        query = dict(parse_qsl(raw_query, keep_blank_values=True))
        ep = endpoint_of(host)
        if ep is not None and ep[2]:
            bucket, key = ep[2], raw_path[1:]
        else:
            bucket, _, key = raw_path.lstrip("/").partition("/")
        bucket, key = unquote(bucket), unquote(key)
        m = self.command
        ns = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'

        def op(name):
            record["operation"] = name

        if not bucket:
            if m != "GET":
                self._error(405, "MethodNotAllowed", "only GET on the service")
                return
            op("ListBuckets")
            with fake.lock:
                names = sorted(fake.buckets)
            items = "".join(f"<Bucket><Name>{escape(n)}</Name><CreationDate>2024-01-02T03:04:05.000Z"
                            f"</CreationDate></Bucket>" for n in names)
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListAllMyBucketsResult {ns}>'
                   f"<Owner><ID>{OWNER_ID}</ID><DisplayName>broker-test</DisplayName></Owner>"
                   f"<Buckets>{items}</Buckets></ListAllMyBucketsResult>")
            self._send(200, xml.encode())
            return
        if not key:
            if m == "PUT":
                op("CreateBucket")
                with fake.lock:
                    fake.buckets.add(bucket)
                self._send(200, headers=[("Location", f"/{bucket}")])
            elif m == "HEAD":
                op("HeadBucket")
                self._send(200 if bucket in fake.buckets else 404)
            elif m == "GET":
                op("ListObjectsV2")
                prefix = query.get("prefix", "")
                with fake.lock:
                    objs = sorted((k, o) for (b, k), o in fake.objects.items()
                                  if b == bucket and k.startswith(prefix))
                items = "".join(f"<Contents><Key>{escape(k)}</Key><LastModified>{_iso(o['mtime'])}"
                                f"</LastModified><ETag>{escape(o['etag'])}</ETag><Size>"
                                f"{len(o['data'])}</Size><StorageClass>STANDARD</StorageClass>"
                                f"</Contents>" for k, o in objs)
                xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult {ns}>'
                       f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>"
                       f"<KeyCount>{len(objs)}</KeyCount><MaxKeys>1000</MaxKeys>"
                       f"<IsTruncated>false</IsTruncated>{items}</ListBucketResult>")
                self._send(200, xml.encode())
            else:
                self._error(405, "MethodNotAllowed", f"{m} on a bucket")
            return
        if m == "PUT" and "partNumber" in query and "uploadId" in query:
            op("UploadPart")
            with fake.lock:
                up = fake.uploads.get(query["uploadId"])
                if up is not None:
                    up["parts"][int(query["partNumber"])] = v.payload
            if up is None:
                self._error(404, "NoSuchUpload", "unknown upload id")
                return
            self._send(200, headers=[("ETag", f'"{hashlib.md5(v.payload).hexdigest()}"')])
        elif m == "PUT":
            op("PutObject")
            etag = fake._store(bucket, key, v.payload, self.headers.get("Content-Type"))
            self._send(200, headers=[("ETag", etag)])
        elif m == "POST" and "uploads" in query:
            op("CreateMultipartUpload")
            upload_id = uuid.uuid4().hex
            with fake.lock:
                fake.uploads[upload_id] = {"bucket": bucket, "key": key, "parts": {},
                                           "content_type": self.headers.get("Content-Type")}
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult {ns}>'
                   f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                   f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>")
            self._send(200, xml.encode())
        elif m == "POST" and "uploadId" in query:
            op("CompleteMultipartUpload")
            with fake.lock:
                up = fake.uploads.pop(query["uploadId"], None)
            if up is None:
                self._error(404, "NoSuchUpload", "unknown upload id")
                return
            numbers = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", v.payload)]
            if not numbers or numbers != sorted(numbers) or any(n not in up["parts"] for n in numbers):
                self._error(400, "InvalidPart", "parts missing or out of order")
                return
            data = b"".join(up["parts"][n] for n in numbers)
            md5s = b"".join(hashlib.md5(up["parts"][n]).digest() for n in numbers)
            etag = f'"{hashlib.md5(md5s).hexdigest()}-{len(numbers)}"'
            fake._store(bucket, key, data, up["content_type"], etag=etag)
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult {ns}>'
                   f"<Location>https://{escape(host)}/{escape(key)}</Location>"
                   f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                   f"<ETag>{escape(etag)}</ETag></CompleteMultipartUploadResult>")
            self._send(200, xml.encode())
        elif m in ("GET", "HEAD"):
            op("GetObject" if m == "GET" else "HeadObject")
            obj = fake.object(bucket, key, full=True)
            if obj is None:
                if m == "HEAD":
                    self._send(404)
                else:
                    self._error(404, "NoSuchKey", "The specified key does not exist.")
                return
            hdrs = [("ETag", obj["etag"]), ("Last-Modified", _http_date(obj["mtime"])),
                    ("Accept-Ranges", "bytes"), ("Content-Length", str(len(obj["data"])))]
            self.send_response(200)
            self.send_header("x-amz-request-id", _request_id())
            self.send_header("Content-Type", obj["content_type"] or "binary/octet-stream")
            for k, val in hdrs:
                self.send_header(k, val)
            self.end_headers()
            if m == "GET":
                self.wfile.write(obj["data"])
        elif m == "DELETE":
            op("DeleteObject")
            with fake.lock:
                fake.objects.pop((bucket, key), None)
            self._send(204)
        else:
            self._error(405, "MethodNotAllowed", f"{m} on an object")


class _AwsServer(LoopbackHttpServer):
    def __init__(self, fake, ssl_context):
        self.fake = fake
        super().__init__(_AwsHandler, ssl_context)


class FakeAws:
    """The fake AWS upstream. `credentials` are the REAL ones it accepts (more can be added).

    .seen: every request that arrived (method, host, path, key_id claimed, headers, complete)
    .verified: every request whose signature verified (method, host, path, key_id, service,
               region, form, content_sha256, payload_sha256, payload_length, token, chunks,
               operation)
    .failures: every request refused (method, host, path, code, message, key_id claimed)
    .object(bucket, key): the stored bytes or None
    """

    def __init__(self, pki, credentials=(), clock=None):
        self.lock = threading.Lock()
        self._credentials = {}
        for c in credentials:
            self.add_credentials(c)
        self._clock = clock
        self._records = {"seen": [], "verified": [], "failures": [], "assumed": []}
        self.objects = {}
        self.uploads = {}
        self.buckets = {BUCKET}
        self.server = _AwsServer(self, tls_server_context(pki)).start()
        self.port = self.server.port

    def add_credentials(self, creds: AwsCredentials):
        with self.lock:
            self._credentials[creds.access_key_id] = creds

    def credentials(self) -> dict:
        with self.lock:
            return dict(self._credentials)

    def now(self):
        return self._clock() if self._clock else datetime.datetime.now(datetime.timezone.utc)

    def _append(self, kind, record):
        with self.lock:
            self._records[kind].append(record)

    def _store(self, bucket, key, data, content_type, etag=None):
        etag = etag or f'"{hashlib.md5(data).hexdigest()}"'
        with self.lock:
            self.buckets.add(bucket)
            self.objects[(bucket, key)] = {"data": bytes(data), "etag": etag, "mtime": time.time(),
                                           "content_type": content_type}
        return etag

    def object(self, bucket, key, full=False):
        with self.lock:
            o = self.objects.get((bucket, key))
        if o is None:
            return None
        return o if full else o["data"]

    @property
    def seen(self):
        with self.lock:
            return [dict(r) for r in self._records["seen"]]

    @property
    def verified(self):
        with self.lock:
            return [dict(r) for r in self._records["verified"]]

    @property
    def assumed(self):
        with self.lock:
            return [dict(r) for r in self._records["assumed"]]

    @property
    def failures(self):
        with self.lock:
            return [dict(r) for r in self._records["failures"]]

    def verified_for(self, key_id):
        return [r for r in self.verified if r["key_id"] == key_id]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------------------------
# A minimal CONNECT proxy, to validate the fake (and the test clients) without the broker
# --------------------------------------------------------------------------------------------


class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1:<ephemeral>: every CONNECT HOST:PORT is dialed at
    route(HOST, PORT) -> (addr, port) and relayed byte for byte. Lets a client that uses the
    default AWS host names (HTTPS_PROXY) reach the fake exactly as it will through the broker."""

    def __init__(self, route):
        self.route = route
        self.targets = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            buf = b""
            while b"\r\n\r\n" not in buf:
                d = c.recv(4096)
                if not d:
                    return
                buf += d
            head, rest = buf.split(b"\r\n\r\n", 1)
            parts = head.split(b"\r\n")[0].decode("latin-1").split(" ")
            if len(parts) != 3 or parts[0] != "CONNECT":
                c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
                return
            host, _, port = parts[1].rpartition(":")
            with self.lock:
                self.targets.append(parts[1])
            try:
                u = socket.create_connection(self.route(host, int(port)), timeout=10)
            except OSError:
                c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            with u:
                u.settimeout(None)
                c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    u.sendall(rest)
                peers = {c: u, u: c}
                while True:
                    r, _, _ = select.select(list(peers), [], [], 120)
                    if not r:
                        return
                    for s in r:
                        try:
                            d = s.recv(65536)
                        except OSError:
                            d = b""
                        if not d:
                            return
                        try:
                            peers[s].sendall(d)
                        except OSError:
                            return

    def close(self):
        self.sock.close()
