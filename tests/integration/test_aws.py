"""The aws-sigv4 credential family under `broker wrap` (docs/architecture.md, docs/policy.md, docs/cli.md, docs/security-model.md).

The wrapped child gets a dummy AWS key id / secret (and session token when the real one has
one); it signs with them; the broker verifies each signature with the DUMMY secret and signs the
request again with the REAL credentials. Upstream is `fake_aws.FakeAws`: S3 and STS over TLS on
loopback, reached with `--connect-to` for every AWS host name the clients use, verifying every
signature (header and presigned forms, aws-chunked chunk signatures) with the REAL credentials by
its own implementation of SigV4. Clients are the real ones: boto3 / botocore 1.29 and requests
under /usr/bin/python3, and the AWS CLI v2 (/usr/bin/aws).

To keep the run short, one wrapped script makes many calls and prints one JSON line
("RESULT {...}"); module-scoped fixtures run each session once and the tests read their parts.

The first tests need no broker: they show that the fake is strict (the AWS documented chunked
example, boto3 with a wrong secret or token, and the very scripts the wrapped tests run, through a
plain CONNECT proxy with the real credentials, including every negative case, which the fake
itself must refuse).
"""

import base64
import datetime
import hashlib
import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from urllib.parse import quote

import pytest

import fake_aws
import wrapped_session
from conftest import assert_refusal, make_pki
from fake_aws import BUCKET, AwsCredentials, FakeAws, SigV4Error
from wrapped_session import (CHILD_HELPERS, OTHER, WrappedRun, Wrapper, broker_env, forms_of,
                             parse_result)

PY = "/usr/bin/python3"  # Debian's, with python3-boto3 and python3-requests
AWS_CLI = "/usr/bin/aws"  # Debian's awscli v2 (not whatever `aws` is first on PATH)
MiB = 1024 * 1024
ODD_KEY_TAIL = "dir/some key \u00fc+=.txt"  # S3 canonical URI: the path as sent, not re-encoded


def _key_id(seed: str, prefix="AKIA") -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    digest = hashlib.sha256(seed.encode()).digest()
    return prefix + "".join(alphabet[b % 32] for b in digest[:16])


def _secret(seed: str) -> str:
    raw = base64.b64encode(hashlib.sha512(seed.encode()).digest()).decode()[:38]
    return raw[:10] + "/" + raw[10:25] + "+" + raw[25:]  # 40 chars, '/' and '+' included


def _token(seed: str) -> str:
    body = base64.b64encode(b"".join(hashlib.sha512(f"{seed}{i}".encode()).digest()
                                     for i in range(5))[:300]).decode()
    return "IQoJb3JpZ2luX2VjE" + body[:380] + "+/A="  # '+', '/' and '=' like real ones


def _creds(seed, user, token=False) -> AwsCredentials:
    return AwsCredentials(_key_id(seed, "ASIA" if token else "AKIA"), _secret(seed),
                          _token(seed) if token else None, user)


# The REAL credentials of each session (the fake knows them all; each session has its own, so
# what the fake saw can be told apart).
MAIN = _creds("main", "broker-main")
TOKEN = _creds("token", "broker-token", token=True)
CLI = _creds("cli", "broker-cli")
REGION = _creds("regions", "broker-regions")
FILE = _creds("file", "broker-file")
CMD = _creds("cmd", "broker-cmd", token=True)
FILE_DECOY = _creds("file-decoy", "broker-decoy")  # [default] in the file: must not be used
# Temporary credentials a credential_process issues one after the other.
ROTATE_1 = _creds("rotate-1", "broker-rotate-1", token=True)
ROTATE_2 = _creds("rotate-2", "broker-rotate-2", token=True)
# Used without the broker only, to validate the fake and the scripts.
VALID = _creds("validate", "broker-validate")
LEAST = _creds("least", "broker-least")
ROLE_BASE = _creds("role-base", "broker-role-base")  # the long-lived key that assumes the role
ROLE_ARN = "arn:aws:iam::123456789012:role/broker-test-role"
ROLE_POLICY = {"Version": "2012-10-17",
               "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
                              "Resource": "arn:aws:s3:::broker-test-bucket/role/*"}]}
VALID_TOKEN = _creds("validate-token", "broker-validate-token", token=True)
VALID_CLI = _creds("validate-cli", "broker-validate-cli")
for _c in (MAIN, TOKEN, CLI, REGION, FILE, CMD, VALID, VALID_TOKEN, LEAST, ROLE_BASE):
    assert len(_c.access_key_id) == 20 and len(_c.secret_access_key) == 40, _c
    assert "/" in _c.secret_access_key and "+" in _c.secret_access_key

AWS_HOSTS = fake_aws.endpoint_hosts()  # the concrete names --connect-to maps to the fake
AWS_ENV_PREFIXES = ("AWS_",)  # what the broker's environment is cleared of


def aws_policy(**credential_extra):
    return {
        "version": 1,
        "allow": [{"host": "*.amazonaws.com", "ports": [443]}, {"host": OTHER, "ports": [443]}],
        "credentials": {
            "aws": {"type": "aws-sigv4", "hosts": ["*.amazonaws.com"], **credential_extra},
        },
    }


# ==============================================================================================
# What runs inside the session (python3 -c SCRIPT CONF_JSON); prints "RESULT {json}"
# ==============================================================================================

CHILD_COMMON = r'''
import base64, datetime, hashlib, hmac, io, json, os, sys, traceback, zlib
from urllib.parse import urlsplit, urlunsplit
CONF = json.loads(sys.argv[1])
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_CONFIG_FILE"] = os.path.join(os.environ.get("HOME", "/nonexistent"), "no-aws-config")
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(os.environ.get("HOME", "/nonexistent"),
                                                         "no-aws-credentials")
import boto3, requests
from boto3.s3.transfer import TransferConfig
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

CA = os.environ.get("AWS_CA_BUNDLE")
AKID = os.environ.get("AWS_ACCESS_KEY_ID")
SECRET = os.environ.get("AWS_SECRET_ACCESS_KEY")
TOKEN = os.environ.get("AWS_SESSION_TOKEN")
BUCKET = CONF["bucket"]
PREFIX = CONF.get("prefix", "")
RETRIES = {"total_max_attempts": 1, "mode": "standard"}
EMPTY = hashlib.sha256(b"").hexdigest()
MIB = 1024 * 1024
OUT = {"env": {k: os.environ.get(k) for k in (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CA_BUNDLE",
    "SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy", "AWS_PROFILE", "AWS_DEFAULT_PROFILE")}}


def sha(data):
    return hashlib.sha256(data).hexdigest()


def s3(region="us-east-1", **s3cfg):
    return boto3.client("s3", region_name=region, config=Config(
        signature_version="s3v4", retries=RETRIES, s3=s3cfg or None))


def sts(region="us-east-1"):
    return boto3.client("sts", region_name=region, config=Config(retries=RETRIES))


def step(name, fn):
    try:
        OUT[name] = {"ok": True, "value": fn()}
    except ClientError as e:
        md = e.response.get("ResponseMetadata", {})
        OUT[name] = {"ok": False, "error": e.response.get("Error", {}).get("Code"),
                     "status": md.get("HTTPStatusCode"), "headers": md.get("HTTPHeaders", {}),
                     "message": str(e)[:1000]}
    except Exception as e:
        OUT[name] = {"ok": False, "error": type(e).__name__, "message": repr(e)[:1000],
                     "trace": traceback.format_exc()[-3000:]}


# The AWS CLI v2 (CONF["aws"]), one call: its exit status and output.
def aws(*args, stdin=None):
    import subprocess
    p = subprocess.run([CONF["aws"], *args], capture_output=True, text=True, timeout=60,
                       input=stdin, env={**os.environ, "AWS_PAGER": "", "AWS_MAX_ATTEMPTS": "1"})
    return {"rc": p.returncode, "stdout": p.stdout[-4000:], "stderr": p.stderr[-4000:]}


def send(method, url, headers, body=b""):
    return response(requests.request(method, url, headers=headers, data=body, verify=CA,
                                     timeout=60))


def botocore_signed(method, url, service, region, secret=None, headers=None, body=b"",
                    mutate=None, send_body=None):
    """Signs with botocore's SigV4Auth (the child's dummies unless told otherwise), lets
    `mutate` change the headers after signing, sends with requests through the proxy."""
    if not AKID:
        raise RuntimeError("no AWS_ACCESS_KEY_ID in the environment")
    h = dict(headers or {})
    if service == "s3":
        h.setdefault("x-amz-content-sha256", sha(body))
    req = AWSRequest(method=method, url=url, headers=h, data=body)
    SigV4Auth(Credentials(AKID, secret or SECRET, TOKEN), service, region).add_auth(req)
    sent = dict(req.headers.items())
    if mutate:
        mutate(sent)
    return send(method, url, sent, body if send_body is None else send_body)


def _key(secret, date, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def chunked_put(host, key, data, chunk=64 * 1024, tamper_chunk=None, region="us-east-1"):
    """PUT with Content-Encoding: aws-chunked and STREAMING-AWS4-HMAC-SHA256-PAYLOAD: the seed
    and every chunk signature computed here with the child's own (dummy) credentials."""
    if not AKID:
        raise RuntimeError("no AWS_ACCESS_KEY_ID in the environment")
    amz = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    scope = f"{amz[:8]}/{region}/s3/aws4_request"
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    encoded_len = sum(len(f"{len(p):x};chunk-signature=") + 64 + 2 + len(p) + 2 for p in pieces)
    path = "/" + key
    headers = {"host": host, "x-amz-date": amz,
               "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
               "content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
               "content-length": str(encoded_len), "content-type": "application/octet-stream"}
    if TOKEN:
        headers["x-amz-security-token"] = TOKEN
    names = sorted(headers)
    canonical = "\n".join(["PUT", path, "", "".join(f"{n}:{headers[n]}\n" for n in names),
                           ";".join(names), "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"])
    k = _key(SECRET, amz[:8], region, "s3")
    seed = hmac.new(k, "\n".join(["AWS4-HMAC-SHA256", amz, scope,
                                  sha(canonical.encode())]).encode(), hashlib.sha256).hexdigest()
    body, prev = bytearray(), seed
    for i, p in enumerate(pieces):
        sig = hmac.new(k, "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev, EMPTY,
                                     sha(p)]).encode(), hashlib.sha256).hexdigest()
        if i == tamper_chunk:
            p = bytes([p[0] ^ 0x01]) + p[1:]  # one bit, after signing
        body += f"{len(p):x};chunk-signature={sig}\r\n".encode() + p + b"\r\n"
        prev = sig
    assert len(body) == encoded_len
    sent = {n: v for n, v in headers.items() if n != "host"}
    sent["authorization"] = (f"AWS4-HMAC-SHA256 Credential={AKID}/{scope}, "
                             f"SignedHeaders={';'.join(names)}, Signature={seed}")
    r = send("PUT", f"https://{host}{path}", sent, bytes(body))
    r["chunks"] = len(pieces)
    return r


def trailer_put(host, key, data, chunk=40 * 1024, region="us-east-1"):
    """PUT with STREAMING-UNSIGNED-PAYLOAD-TRAILER: aws-chunked without chunk signatures and an
    x-amz-checksum-crc32 trailer; only the headers are signed (botocore's SigV4Auth)."""
    body = bytearray()
    for i in range(0, len(data), chunk):
        p = data[i:i + chunk]
        body += f"{len(p):x}\r\n".encode() + p + b"\r\n"
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    body += b"0\r\n" + f"x-amz-checksum-crc32:{crc}\r\n".encode() + b"\r\n"
    headers = {"x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
               "content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data)),
               "x-amz-trailer": "x-amz-checksum-crc32", "content-length": str(len(body))}
    return botocore_signed("PUT", f"https://{host}/{key}", "s3", region, headers=headers,
                           body=bytes(body))


def put_get(key, data, client=None):
    c = client or s3()
    r = c.put_object(Bucket=BUCKET, Key=key, Body=data)
    got = s3().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return {"etag": r["ETag"], "sent_sha256": sha(data), "got_sha256": sha(got), "len": len(got)}


def presigned_get(key):
    url = s3().generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key},
                                      ExpiresIn=600)
    r = requests.get(url, verify=CA, timeout=60)
    return {"url": url, "status": r.status_code, "sha256": sha(r.content),
            "headers": {k.lower(): v for k, v in r.headers.items()}}
''' + CHILD_HELPERS

MAIN_SCRIPT = CHILD_COMMON + r'''
VHOST = f"{BUCKET}.s3.amazonaws.com"
OTHER = CONF["other"]
step("identity", lambda: {k: sts().get_caller_identity()[k] for k in ("Arn", "UserId", "Account")})
step("buckets", lambda: [b["Name"] for b in s3().list_buckets()["Buckets"]])
step("put_hello", lambda: put_get(PREFIX + "hello.txt", b"hello from inside the session\n"))
step("put_odd_key", lambda: put_get(PREFIX + CONF["odd_tail"], b"odd key body"))
step("put_signed_payload", lambda: put_get(PREFIX + "signed-payload.bin", os.urandom(MIB),
                                           client=s3(payload_signing_enabled=True)))
step("presigned", lambda: presigned_get(PREFIX + "hello.txt"))


def big():
    return put_get(PREFIX + "big.bin", os.urandom(CONF["big"]))


def multipart():
    data = os.urandom(CONF["multi"])
    s3().upload_fileobj(io.BytesIO(data), BUCKET, PREFIX + "multi.bin", Config=TransferConfig(
        multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB, max_concurrency=2))
    got = s3().get_object(Bucket=BUCKET, Key=PREFIX + "multi.bin")["Body"].read()
    return {"sent_sha256": sha(data), "got_sha256": sha(got), "len": len(got)}


step("big", big)
step("multipart", multipart)
CHUNKED = os.urandom(200 * 1024)
OUT["chunked_sha256"] = sha(CHUNKED)
step("chunked", lambda: chunked_put(VHOST, PREFIX + "chunked.bin", CHUNKED))
step("chunked_get", lambda: sha(s3().get_object(Bucket=BUCKET, Key=PREFIX + "chunked.bin")["Body"].read()))
step("chunked_tampered", lambda: chunked_put(VHOST, PREFIX + "chunked-tampered.bin", CHUNKED,
                                             tamper_chunk=1))
TRAILER = os.urandom(100 * 1024)
OUT["trailer_sha256"] = sha(TRAILER)
step("trailer", lambda: trailer_put(VHOST, PREFIX + "trailer.bin", TRAILER))
step("trailer_get", lambda: sha(s3().get_object(Bucket=BUCKET, Key=PREFIX + "trailer.bin")["Body"].read()))
# Forged and tampered requests.
WRONG = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
step("forged", lambda: botocore_signed("GET", f"https://{VHOST}/{PREFIX}forged.txt", "s3",
                                       "us-east-1", secret=WRONG))
step("tampered_header", lambda: botocore_signed(
    "PUT", f"https://{VHOST}/{PREFIX}tampered-header.txt", "s3", "us-east-1",
    headers={"x-amz-meta-note": "as signed"}, body=b"tampered header body",
    mutate=lambda h: h.__setitem__("x-amz-meta-note", "changed after signing")))
step("tampered_body", lambda: botocore_signed(
    "PUT", f"https://{VHOST}/{PREFIX}tampered-body.txt", "s3", "us-east-1",
    body=b"the body that was signed", send_body=b"the body that was sent!!"))


def presigned_tampered():
    url = s3().generate_presigned_url("get_object", Params={"Bucket": BUCKET,
                                      "Key": PREFIX + "hello.txt"}, ExpiresIn=600)
    bad = url.replace(f"/{PREFIX}hello.txt?", f"/{PREFIX}not-signed-for.txt?")
    assert bad != url
    return send("GET", bad, {})


step("presigned_tampered", presigned_tampered)


def presigned_v2():
    # botocore 1.29's default for S3 presigned URLs: Signature Version 2 (AWSAccessKeyId=...).
    client = boto3.client("s3", region_name="us-east-1",
                          config=Config(signature_version="s3", retries=RETRIES))
    url = client.generate_presigned_url("get_object", Params={"Bucket": BUCKET,
                                        "Key": PREFIX + "hello.txt"}, ExpiresIn=600)
    assert "AWSAccessKeyId=" in url, url
    return send("GET", url, {})


step("presigned_v2", presigned_v2)
# The dummy sent to a host the credential is not bound to.
step("unbound_header", lambda: botocore_signed("GET", f"https://{OTHER}/{PREFIX}aws-exfil",
                                               "s3", "us-east-1"))


def unbound_presigned():
    url = s3().generate_presigned_url("get_object", Params={"Bucket": BUCKET,
                                      "Key": PREFIX + "hello.txt"}, ExpiresIn=600)
    return send("GET", urlunsplit(("https", OTHER, f"/{PREFIX}presigned-exfil",
                                   urlsplit(url).query, "")), {})


step("unbound_presigned", unbound_presigned)
# STS calls that would hand the session new real credentials.
step("get_session_token", lambda: sts().get_session_token(DurationSeconds=900)["Credentials"])
step("assume_role", lambda: botocore_signed(
    "POST", "https://sts.amazonaws.com/", "sts", "us-east-1",
    headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    body=b"Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole"
         b"%2Fx&RoleSessionName=agent"))
finish()
'''

TOKEN_SCRIPT = CHILD_COMMON + r'''
step("identity", lambda: {k: sts().get_caller_identity()[k] for k in ("Arn", "UserId", "Account")})
step("buckets", lambda: [b["Name"] for b in s3().list_buckets()["Buckets"]])
step("put", lambda: put_get(PREFIX + "token.txt", b"written with a session token\n"))
step("presigned", lambda: presigned_get(PREFIX + "token.txt"))
CHUNKED = os.urandom(70 * 1024)
OUT["chunked_sha256"] = sha(CHUNKED)
step("chunked", lambda: chunked_put(f"{BUCKET}.s3.amazonaws.com", PREFIX + "token-chunked.bin",
                                    CHUNKED))
finish()
'''

ROTATE_SCRIPT = CHILD_COMMON + r'''
import time


def identities():
    arns, deadline = [], time.monotonic() + 6
    while time.monotonic() < deadline:
        arns.append(sts().get_caller_identity()["Arn"])
        time.sleep(0.4)
    return arns


step("identities", identities)
finish()
'''

IDENTITY_SCRIPT = CHILD_COMMON + r'''
step("identity", lambda: {k: sts().get_caller_identity()[k] for k in ("Arn", "UserId", "Account")})
finish()
'''

SCOPE_SCRIPT = CHILD_COMMON + r'''
step("allowed", lambda: [b["Name"] for b in s3().list_buckets()["Buckets"]])
step("region_boto3", lambda: s3("eu-west-1").list_buckets()["Buckets"])
step("region_raw", lambda: botocore_signed("GET", "https://s3.eu-west-1.amazonaws.com/", "s3",
                                           "eu-west-1"))
step("service_boto3", lambda: sts().get_caller_identity()["Arn"])
step("service_raw", lambda: botocore_signed(
    "POST", "https://sts.amazonaws.com/", "sts", "us-east-1",
    headers={"content-type": "application/x-www-form-urlencoded; charset=utf-8"},
    body=b"Action=GetCallerIdentity&Version=2011-06-15"))
finish()
'''

# A credential scoped to objects under PREFIX and three S3 actions (docs/policy.md, "Least
# privilege"): boto3, a presigned URL and the AWS CLI, inside and outside the scope.
LEAST_SCRIPT = CHILD_COMMON + r'''


def presigned(key):
    url = s3().generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key})
    r = requests.get(url, verify=CA, timeout=30)
    return {"status": r.status_code, "headers": {k.lower(): v for k, v in r.headers.items()},
            "body": r.text[:2000]}


step("put", lambda: s3().put_object(Bucket=BUCKET, Key=PREFIX + "a.txt", Body=b"inside")["ETag"])
step("get", lambda: s3().get_object(Bucket=BUCKET, Key=PREFIX + "a.txt")["Body"].read().decode())
step("list", lambda: [o["Key"] for o in s3().list_objects_v2(Bucket=BUCKET, Prefix=PREFIX)
                      .get("Contents", [])])
step("presigned_inside", lambda: presigned(PREFIX + "a.txt"))
step("put_outside", lambda: s3().put_object(Bucket=BUCKET, Key="elsewhere/a.txt", Body=b"x"))
step("list_all", lambda: s3().list_objects_v2(Bucket=BUCKET))
step("delete_object", lambda: s3().delete_object(Bucket=BUCKET, Key=PREFIX + "a.txt"))
step("delete_bucket", lambda: s3().delete_bucket(Bucket=BUCKET))
step("copy_in", lambda: s3().copy_object(Bucket=BUCKET, Key=PREFIX + "copy.txt",
                                         CopySource={"Bucket": BUCKET, "Key": "main/secret"}))
step("presigned_outside", lambda: presigned("main/secret"))
step("sts", lambda: sts().get_caller_identity()["Arn"])
step("cli_cp", lambda: aws("s3", "cp", "-", f"s3://{BUCKET}/{PREFIX}cli.txt", stdin="from cli"))
step("cli_rb", lambda: aws("s3", "rb", f"s3://{BUCKET}"))
finish()
'''

# Under "assume_role": boto3 and the AWS CLI sign with the session's dummies; AWS sees the
# temporary credentials.
ROLE_SCRIPT = CHILD_COMMON + r'''


step("put", lambda: s3().put_object(Bucket=BUCKET, Key=PREFIX + "r.txt", Body=b"via role")["ETag"])
step("get", lambda: s3().get_object(Bucket=BUCKET, Key=PREFIX + "r.txt")["Body"].read().decode())
step("cli_cp", lambda: aws("s3", "cp", "-", f"s3://{BUCKET}/{PREFIX}cli.txt", stdin="from cli"))
step("delete_bucket", lambda: s3().delete_bucket(Bucket=BUCKET))
finish()
'''

CLI_SCRIPT = CHILD_COMMON + r'''


step("sts", lambda: aws("sts", "get-caller-identity", "--output", "json"))
step("s3_ls", lambda: aws("s3", "ls"))
finish()
'''


def child_conf(prefix, **extra):
    return json.dumps({"bucket": BUCKET, "prefix": prefix, "other": OTHER,
                       "odd_tail": ODD_KEY_TAIL, "big": 5 * MiB, "multi": 9 * MiB,
                       "aws": AWS_CLI, **extra})


# ==============================================================================================
# Running a session
# ==============================================================================================


@dataclass
class AwsRun(WrappedRun):
    reals: list = field(default_factory=list)  # every AwsCredentials the session may know


def creds_env(c: AwsCredentials) -> dict:
    e = {"AWS_ACCESS_KEY_ID": c.access_key_id, "AWS_SECRET_ACCESS_KEY": c.secret_access_key}
    if c.session_token:
        e["AWS_SESSION_TOKEN"] = c.session_token
    return e


class AwsWrapper(Wrapper):
    hosts = AWS_HOSTS
    drop_prefixes = AWS_ENV_PREFIXES

    def run(self, name, cmd, policy, env, reals, log_level=None, timeout=180) -> AwsRun:
        return self.wrap(AwsRun, name, cmd, policy, env=env, log_level=log_level,
                         timeout=timeout, reals=reals)


# ==============================================================================================
# Fixtures (module scope: one PKI, one fake, each session run once)
# ==============================================================================================


@pytest.fixture(scope="module")
def upstream_pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("aws-pki"), fake_aws.CERT_NAMES)


@pytest.fixture(scope="module")
def fake(upstream_pki):
    f = FakeAws(upstream_pki, [MAIN, TOKEN, CLI, REGION, FILE, CMD, VALID, VALID_TOKEN, LEAST, ROLE_BASE,
                               VALID_CLI, ROTATE_1, ROTATE_2])
    yield f
    f.close()


# The echo upstream posing as OTHER, and a plain CONNECT proxy (no broker) to the fake and it.
echo, proxy = wrapped_session.echo, wrapped_session.proxy


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory, upstream_pki, fake, echo):
    return AwsWrapper(tmp_path_factory.mktemp("aws-wrap"), upstream_pki, fake, echo)


@pytest.fixture(scope="module")
def main_run(wrapper):
    return wrapper.run("main", [PY, "-c", MAIN_SCRIPT, child_conf("main/")], aws_policy(),
                       creds_env(MAIN), [MAIN], log_level="debug")


@pytest.fixture(scope="module")
def token_run(wrapper):
    return wrapper.run("token", [PY, "-c", TOKEN_SCRIPT, child_conf("token/")], aws_policy(),
                       creds_env(TOKEN), [TOKEN], log_level="debug")


@pytest.fixture(scope="module")
def cli_run(wrapper):
    return wrapper.run("cli", [PY, "-c", CLI_SCRIPT, child_conf("cli/")], aws_policy(),
                       creds_env(CLI), [CLI])


@pytest.fixture(scope="module")
def scope_run(wrapper):
    return wrapper.run("scope", [PY, "-c", SCOPE_SCRIPT, child_conf("scope/")],
                       aws_policy(regions=["us-east-1"], services=["s3"]), creds_env(REGION),
                       [REGION])


@pytest.fixture(scope="module")
def least_run(wrapper):
    scope = {"s3": [{"bucket": BUCKET, "prefix": "least/"}],
             "actions": ["s3:GetObject", "s3:PutObject", "s3:ListBucket"]}
    return wrapper.run("least", [PY, "-c", LEAST_SCRIPT, child_conf("least/")],
                       aws_policy(scope=scope), creds_env(LEAST), [LEAST])


@pytest.fixture(scope="module")
def role_run(wrapper):
    policy = aws_policy(assume_role={"arn": ROLE_ARN, "policy": ROLE_POLICY, "duration": "1h"},
                        scope={"actions": ["s3:GetObject", "s3:PutObject", "s3:ListBucket"]})
    return wrapper.run("role", [PY, "-c", ROLE_SCRIPT, child_conf("role/")], policy,
                       creds_env(ROLE_BASE), [ROLE_BASE])


@pytest.fixture(scope="module")
def file_run(wrapper):
    path = wrapper.base / "shared-credentials"
    path.write_text(
        "[default]\n"
        f"aws_access_key_id = {FILE_DECOY.access_key_id}\n"
        f"aws_secret_access_key = {FILE_DECOY.secret_access_key}\n\n"
        "[broker-test]\n"
        f"aws_access_key_id = {FILE.access_key_id}\n"
        f"aws_secret_access_key = {FILE.secret_access_key}\n")
    path.chmod(0o600)
    return wrapper.run("file", [PY, "-c", IDENTITY_SCRIPT, child_conf("file/")],
                       aws_policy(source=f"file:{path}#broker-test"), {}, [FILE, FILE_DECOY])


@pytest.fixture(scope="module")
def cmd_run(wrapper):
    path = wrapper.base / "process-credentials.json"
    path.write_text(json.dumps({"Version": 1, "AccessKeyId": CMD.access_key_id,
                                "SecretAccessKey": CMD.secret_access_key,
                                "SessionToken": CMD.session_token,
                                "Expiration": "2099-01-01T00:00:00Z"}))
    path.chmod(0o600)
    # A profile the user works with outside the session: the child must not be sent to it.
    profile = {"AWS_PROFILE": "broker-elsewhere", "AWS_DEFAULT_PROFILE": "broker-elsewhere"}
    return wrapper.run("cmd", [PY, "-c", IDENTITY_SCRIPT, child_conf("cmd/")],
                       aws_policy(source=f"cmd:/bin/cat {path}"), profile, [CMD])


@pytest.fixture(scope="module")
def rotate_run(wrapper):
    # A credential_process whose first answer expires in 4 s: the broker asks again after 2.
    first, later = wrapper.base / "rotate-1.json", wrapper.base / "rotate-2.json"
    for path, c in ((first, ROTATE_1), (later, ROTATE_2)):
        path.write_text(json.dumps({"Version": 1, "AccessKeyId": c.access_key_id,
                                    "SecretAccessKey": c.secret_access_key,
                                    "SessionToken": c.session_token, "Expiration": "EXPIRES"}))
    runs = wrapper.base / "rotate-runs"
    command = wrapper.base / "rotate-process"
    command.write_text(f'''#!/bin/sh
echo run >> {runs}
if [ "$(wc -l < {runs})" -eq 1 ]; then file={first}; expires=$(date -u -d '+4 seconds' +%Y-%m-%dT%H:%M:%SZ)
else file={later}; expires=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ); fi
sed "s/EXPIRES/$expires/" "$file"
''')
    command.chmod(0o700)
    run = wrapper.run("rotate", [PY, "-c", ROTATE_SCRIPT, child_conf("rotate/")],
                      aws_policy(source=f"cmd:{command}"), {}, [ROTATE_1, ROTATE_2])
    run.process_runs = len(runs.read_text().splitlines())
    return run


# ==============================================================================================
# Shared checks (used on the broker's sessions and, with the real keys, on the validation runs)
# ==============================================================================================


def assert_dummies(env: dict, real: AwsCredentials):
    akid, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    assert akid, f"no dummy AWS_ACCESS_KEY_ID in the child: {env}"
    assert secret, f"no dummy AWS_SECRET_ACCESS_KEY in the child: {env}"
    assert akid != real.access_key_id and secret != real.secret_access_key
    assert len(akid) == len(real.access_key_id) and akid[:4] == real.access_key_id[:4], akid
    assert re.fullmatch(r"[A-Z0-9]+", akid), akid
    assert len(secret) == len(real.secret_access_key), secret
    assert re.fullmatch(r"[A-Za-z0-9/+=]+", secret), secret
    token = env.get("AWS_SESSION_TOKEN")
    if real.session_token:
        assert token, f"no dummy AWS_SESSION_TOKEN in the child: {env}"
        assert token != real.session_token and len(token) == len(real.session_token), token
    else:
        assert token is None, f"the child got a session token although there is none: {token!r}"
    assert env.get("HTTPS_PROXY"), env
    # botocore's trust comes from the session bundle, like every other client's
    assert env.get("AWS_CA_BUNDLE") and env["AWS_CA_BUNDLE"] == env.get("SSL_CERT_FILE"), env


def path_of(key: str) -> str:
    return "/" + quote(key, safe="/~")


def verified_at(fake, real, path, method=None):
    return [v for v in fake.verified_for(real.access_key_id)
            if v["path"].split("?")[0] == path and (method is None or v["method"] == method)]


def check_identity(run: AwsRun, fake, real, host="sts.amazonaws.com"):
    ident = run.ok("identity")
    assert ident["Arn"] == real.arn and ident["Account"] == fake_aws.ACCOUNT, ident
    assert ident["UserId"] == real.user_id, ident
    seen = [v for v in fake.verified_for(real.access_key_id)
            if v["host"] == host and v["operation"] == "GetCallerIdentity"]
    assert seen and seen[0]["method"] == "POST" and seen[0]["service"] == "sts", \
        fake.verified_for(real.access_key_id)
    assert seen[0]["token"] == real.session_token, seen[0]


def check_buckets(run: AwsRun, fake, real, host="s3.amazonaws.com"):
    assert BUCKET in run.ok("buckets")
    assert [v for v in fake.verified_for(real.access_key_id)
            if v["host"] == host and v["operation"] == "ListBuckets" and v["path"] == "/"], \
        fake.verified_for(real.access_key_id)


def check_session(run: AwsRun, fake, real) -> dict:
    """The session ran, its child got dummies in place of `real`, and STS and S3 saw `real`'s
    signatures; returns the child's environment."""
    assert run.returncode == 0, run.describe()
    env = run.out()["env"]
    assert_dummies(env, real)
    check_identity(run, fake, real)
    check_buckets(run, fake, real)
    return env


def check_put_get(run: AwsRun, fake, name, key, size=None):
    v = run.ok(name)
    assert v["sent_sha256"] == v["got_sha256"], v
    if size is not None:
        assert v["len"] == size, v
    stored = fake.object(BUCKET, key)
    assert stored is not None, f"the fake has no object {key!r}"
    assert hashlib.sha256(stored).hexdigest() == v["sent_sha256"]


def check_presigned(run: AwsRun, fake, real, step, key, dummy_key_id):
    v = run.ok(step)
    assert v["status"] == 200, v
    stored = fake.object(BUCKET, key)
    assert stored is not None and v["sha256"] == hashlib.sha256(stored).hexdigest(), v
    assert f"X-Amz-Credential={dummy_key_id}%2F" in v["url"], v["url"]
    assert real.access_key_id not in v["url"] or dummy_key_id == real.access_key_id
    rec = [r for r in verified_at(fake, real, path_of(key), "GET") if r["form"] == "presigned"]
    assert rec, f"the fake verified no presigned GET of {key}: {fake.verified_for(real.access_key_id)}"
    assert rec[-1]["token"] == real.session_token, rec[-1]


def check_chunked(run: AwsRun, fake, real, step, key, size, chunks):
    v = run.ok(step)
    assert v["status"] == 200, v
    stored = fake.object(BUCKET, key)
    assert stored is not None and len(stored) == size, f"the fake stored {key}: {stored is not None}"
    assert hashlib.sha256(stored).hexdigest() == run.out()[f"{step}_sha256"]
    rec = verified_at(fake, real, path_of(key), "PUT")
    assert rec, fake.verified_for(real.access_key_id)
    assert rec[-1]["content_sha256"] == fake_aws.STREAMING_SIGNED and rec[-1]["chunks"] == chunks
    assert rec[-1]["payload_length"] == size, rec[-1]


# ==============================================================================================
# 0. The fake is strict (no broker)
# ==============================================================================================

_DOC_HEADERS = [
    ("Host", "s3.amazonaws.com"), ("x-amz-date", "20130524T000000Z"),
    ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
    ("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                      "aws4_request,SignedHeaders=content-encoding;content-length;host;"
                      "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
                      "x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4"
                      "adea153f7db9fa80a0a9"),
    ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
    ("Content-Encoding", "aws-chunked"), ("x-amz-decoded-content-length", "66560"),
    ("Content-Length", "66824"),
]
_DOC_SIGS = ["ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
             "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
             "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"]


def _doc_body(sigs=_DOC_SIGS, sizes=(65536, 1024, 0), flip=None):
    body = b""
    for i, (size, sig) in enumerate(zip(sizes, sigs)):
        data = b"a" * size
        if flip == i:
            data = b"b" + data[1:]
        body += f"{size:x};chunk-signature={sig}\r\n".encode() + data + b"\r\n"
    return body


def test_fake_verifies_the_aws_documented_chunked_upload_example():
    """AWS's published example (sigv4-streaming): seed and chunk signatures, exact values."""
    doc_creds = {"AKIAIOSFODNN7EXAMPLE": AwsCredentials(
        "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")}
    when = datetime.datetime(2013, 5, 24, 0, 0, 5, tzinfo=datetime.timezone.utc)
    body = _doc_body()
    assert len(body) == 66824
    v = fake_aws.verify_request("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS, body,
                                doc_creds, now=when)
    assert v.payload == b"a" * 66560 and v.chunks == 3 and v.key_id == "AKIAIOSFODNN7EXAMPLE"
    # One byte changed in the second chunk, a chunk signature swapped, the final chunk missing,
    # a signed header changed, the wrong secret, the clock far away: all refused.
    bad = [
        ("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS, _doc_body(flip=1), doc_creds, when),
        ("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS,
         _doc_body(sigs=[_DOC_SIGS[1], _DOC_SIGS[0], _DOC_SIGS[2]]), doc_creds, when),
        ("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS, body[:-len(
            f"0;chunk-signature={_DOC_SIGS[2]}\r\n\r\n")], doc_creds, when),
        ("PUT", "/examplebucket/chunkObject.txt",
         [(k, "STANDARD" if k == "x-amz-storage-class" else v) for k, v in _DOC_HEADERS], body,
         doc_creds, when),
        ("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS, body,
         {"AKIAIOSFODNN7EXAMPLE": AwsCredentials("AKIAIOSFODNN7EXAMPLE", "x" * 40)}, when),
        ("PUT", "/examplebucket/chunkObject.txt", _DOC_HEADERS, body, doc_creds,
         when + datetime.timedelta(hours=1)),
    ]
    for i, args in enumerate(bad):
        with pytest.raises(SigV4Error):
            fake_aws.verify_request(*args[:5], now=args[5])
            pytest.fail(f"bad case {i} verified")


def test_fake_accepts_boto3_with_the_real_keys_and_refuses_a_wrong_secret_or_token(fake,
                                                                                   upstream_pki):
    import boto3
    import requests
    from botocore.config import Config
    from botocore.exceptions import ClientError

    endpoint = f"https://localhost:{fake.port}"
    cfg = Config(retries={"total_max_attempts": 1, "mode": "standard"}, proxies={},
                 signature_version="s3v4", s3={"addressing_style": "path"})

    def client(service, c: AwsCredentials, secret=None, token="same"):
        return boto3.session.Session().client(
            service, region_name="us-east-1", endpoint_url=endpoint,
            verify=str(upstream_pki.ca_cert),
            aws_access_key_id=c.access_key_id,
            aws_secret_access_key=secret or c.secret_access_key,
            aws_session_token=c.session_token if token == "same" else token,
            config=cfg if service == "s3" else Config(retries=cfg.retries, proxies={}))

    assert client("sts", VALID).get_caller_identity()["Arn"] == VALID.arn
    s3 = client("s3", VALID)
    s3.put_object(Bucket=BUCKET, Key="direct/x.txt", Body=b"direct")
    assert s3.get_object(Bucket=BUCKET, Key="direct/x.txt")["Body"].read() == b"direct"
    url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "direct/x.txt"})
    session = requests.Session()
    session.trust_env = False
    r = session.get(url, verify=str(upstream_pki.ca_cert), timeout=30)
    assert r.status_code == 200 and r.content == b"direct", r.text
    assert session.get(url.replace("X-Amz-Signature=", "X-Amz-Signature=0"),
                       verify=str(upstream_pki.ca_cert), timeout=30).status_code == 403
    assert client("sts", VALID_TOKEN).get_caller_identity()["Arn"] == VALID_TOKEN.arn

    def refused(call, code):
        with pytest.raises(ClientError) as e:
            call()
        assert e.value.response["Error"]["Code"] == code, e.value.response
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)

    wrong = VALID.secret_access_key[::-1]
    refused(lambda: client("sts", VALID, secret=wrong).get_caller_identity(), "SignatureDoesNotMatch")
    refused(lambda: client("s3", VALID, secret=wrong).list_buckets(), "SignatureDoesNotMatch")
    refused(lambda: client("s3", VALID, secret=wrong).put_object(
        Bucket=BUCKET, Key="direct/wrong.txt", Body=b"no"), "SignatureDoesNotMatch")
    assert fake.object(BUCKET, "direct/wrong.txt") is None
    unknown = AwsCredentials(_key_id("unknown"), VALID.secret_access_key)
    refused(lambda: client("s3", unknown).list_buckets(), "InvalidAccessKeyId")
    refused(lambda: client("sts", VALID_TOKEN, token=None).get_caller_identity(), "InvalidToken")
    refused(lambda: client("sts", VALID_TOKEN, token=VALID_TOKEN.session_token[:-4] + "AAA=")
            .get_caller_identity(), "InvalidToken")
    refused(lambda: client("sts", VALID, token=VALID_TOKEN.session_token).get_caller_identity(),
            "InvalidToken")
    codes = {f["code"] for f in fake.failures}
    assert {"SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken"} <= codes, codes


def _direct_run(tmp_path, proxy, upstream_pki, script, conf, real) -> AwsRun:
    """A wrapped script run WITHOUT the broker: real keys, a plain CONNECT proxy, the test CA."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = broker_env({**creds_env(real), "HTTPS_PROXY": proxy.url, "https_proxy": proxy.url,
                      "AWS_CA_BUNDLE": str(upstream_pki.ca_cert)}, home,
                     drop_prefixes=AWS_ENV_PREFIXES)
    t0 = time.monotonic()
    p = subprocess.run([PY, "-c", script, conf], capture_output=True, timeout=180, env=env,
                       cwd=tmp_path, stdin=subprocess.DEVNULL)
    return AwsRun(name="direct", dir=tmp_path, returncode=p.returncode, stdout=p.stdout,
                  stderr=p.stderr, elapsed=time.monotonic() - t0, logs=tmp_path / "none",
                  runtime=tmp_path / "none", home=home, result=parse_result(p.stdout),
                  reals=[real])


def test_the_session_scripts_pass_against_the_fake_without_the_broker(tmp_path, proxy,
                                                                      upstream_pki, fake, echo):
    """The MAIN script with the real keys through a plain CONNECT proxy: every positive step
    works against the fake, and the fake itself refuses every forged or tampered request (which
    the broker must refuse before it gets there)."""
    r = _direct_run(tmp_path, proxy, upstream_pki, MAIN_SCRIPT, child_conf("validate/"), VALID)
    assert r.returncode == 0, r.describe()
    p = "validate/"
    check_identity(r, fake, VALID)
    check_buckets(r, fake, VALID)
    check_put_get(r, fake, "put_hello", p + "hello.txt")
    check_put_get(r, fake, "put_odd_key", p + ODD_KEY_TAIL)
    assert verified_at(fake, VALID, path_of(p + ODD_KEY_TAIL), "PUT")
    check_put_get(r, fake, "put_signed_payload", p + "signed-payload.bin", MiB)
    signed = verified_at(fake, VALID, path_of(p + "signed-payload.bin"), "PUT")
    assert signed and re.fullmatch(r"[0-9a-f]{64}", signed[-1]["content_sha256"]), signed
    unsigned = verified_at(fake, VALID, path_of(p + "hello.txt"), "PUT")
    assert unsigned and unsigned[-1]["content_sha256"] == "UNSIGNED-PAYLOAD", unsigned
    check_presigned(r, fake, VALID, "presigned", p + "hello.txt", VALID.access_key_id)
    check_put_get(r, fake, "big", p + "big.bin", 5 * MiB)
    check_put_get(r, fake, "multipart", p + "multi.bin", 9 * MiB)
    ops = [v["operation"] for v in fake.verified_for(VALID.access_key_id)]
    assert ops.count("UploadPart") == 2 and "CompleteMultipartUpload" in ops, ops
    check_chunked(r, fake, VALID, "chunked", p + "chunked.bin", 200 * 1024, 5)
    assert r.ok("chunked_get") == r.out()["chunked_sha256"]
    assert r.ok("trailer")["status"] == 200
    assert r.ok("trailer_get") == r.out()["trailer_sha256"]
    trailer = verified_at(fake, VALID, path_of(p + "trailer.bin"), "PUT")
    assert trailer[-1]["content_sha256"] == fake_aws.STREAMING_UNSIGNED_TRAILER, trailer
    # The negative cases reach the fake here, and it refuses each of them.
    failures = {f["path"].split("?")[0]: f for f in fake.failures
                if f["key_id"] == VALID.access_key_id}
    expect = {"chunked-tampered.bin": "SignatureDoesNotMatch", "forged.txt": "SignatureDoesNotMatch",
              "tampered-header.txt": "SignatureDoesNotMatch",
              "tampered-body.txt": "XAmzContentSHA256Mismatch",
              "not-signed-for.txt": "SignatureDoesNotMatch"}
    for name, code in expect.items():
        f = failures.get(path_of(p + name))
        assert f and f["code"] == code, (name, f, r.out().get(name))
        assert fake.object(BUCKET, p + name) is None
    assert "chunk 1 " in failures[path_of(p + "chunked-tampered.bin")]["message"]
    for name in ("chunked_tampered", "forged", "tampered_header", "presigned_tampered"):
        assert r.ok(name)["status"] == 403, (name, r.out()[name])
    assert r.ok("tampered_body")["status"] == 400
    # Without a broker nothing stops the key id from reaching another host.
    assert r.ok("unbound_header")["status"] == 200
    assert {q["path"].split("?")[0] for q in echo.requests} >= {f"/{p}aws-exfil",
                                                                f"/{p}presigned-exfil"}


def test_the_token_and_cli_scripts_pass_against_the_fake_without_the_broker(tmp_path, proxy,
                                                                            upstream_pki, fake):
    (tmp_path / "t").mkdir()
    r = _direct_run(tmp_path / "t", proxy, upstream_pki, TOKEN_SCRIPT,
                    child_conf("validate-token/"), VALID_TOKEN)
    assert r.returncode == 0, r.describe()
    check_identity(r, fake, VALID_TOKEN)
    check_buckets(r, fake, VALID_TOKEN)
    check_put_get(r, fake, "put", "validate-token/token.txt")
    check_presigned(r, fake, VALID_TOKEN, "presigned", "validate-token/token.txt",
                    VALID_TOKEN.access_key_id)
    check_chunked(r, fake, VALID_TOKEN, "chunked", "validate-token/token-chunked.bin", 70 * 1024, 3)

    (tmp_path / "c").mkdir()
    c = _direct_run(tmp_path / "c", proxy, upstream_pki, CLI_SCRIPT, child_conf("validate-cli/"),
                    VALID_CLI)
    assert c.returncode == 0, c.describe()
    check_cli(c, fake, VALID_CLI)


def check_cli(run: AwsRun, fake, real):
    sts = run.ok("sts")
    assert sts["rc"] == 0, sts
    assert json.loads(sts["stdout"])["Arn"] == real.arn, sts
    ls = run.ok("s3_ls")
    assert ls["rc"] == 0 and BUCKET in ls["stdout"], ls
    hosts = {(v["host"], v["operation"]) for v in fake.verified_for(real.access_key_id)}
    assert ("sts.us-east-1.amazonaws.com", "GetCallerIdentity") in hosts, hosts
    assert ("s3.us-east-1.amazonaws.com", "ListBuckets") in hosts, hosts


# ==============================================================================================
# a. boto3 under wrap: STS and S3 with the real keys upstream, dummies in the child
# ==============================================================================================


def test_boto3_sts_and_s3_under_wrap_reach_aws_signed_with_the_real_keys(main_run, fake):
    r = main_run
    env = check_session(r, fake, MAIN)
    dummy = env["AWS_ACCESS_KEY_ID"]
    assert not [s for s in fake.seen if s["key_id"] == dummy], \
        "a request signed with the dummy key reached AWS"
    negative = {"/main/tampered-body.txt", "/main/chunked-tampered.bin"}
    bad = [f for f in fake.failures if f["key_id"] in (MAIN.access_key_id, dummy)
           and f["path"].split("?")[0] not in negative]
    assert not bad, f"AWS refused requests of this session: {bad}"
    reqs = r.requests()
    sts = [q for q in reqs if q.get("host") == "sts.amazonaws.com" and q.get("method") == "POST"]
    assert sts and sts[0]["status"] == 200 and sts[0].get("credential") == "aws", reqs
    s3 = [q for q in reqs if q.get("host") == "s3.amazonaws.com" and q.get("path") == "/"]
    assert s3 and s3[0]["status"] == 200 and s3[0].get("credential") == "aws", reqs


def test_the_broker_announces_the_aws_credential_as_brokered(main_run):
    lines = main_run.session_lines()
    assert lines, main_run.describe()
    brokered = lines[0].partition("; removed ")[0]
    assert "AWS_ACCESS_KEY_ID (aws)" in brokered, lines[0]
    assert "AWS_SECRET_ACCESS_KEY (aws)" in brokered, lines[0]
    assert "AWS_SESSION_TOKEN" not in brokered, lines[0]  # there is no real one in this session
    for real in (MAIN.access_key_id, MAIN.secret_access_key):
        assert real not in lines[0]


# ==============================================================================================
# b. presigned URLs
# ==============================================================================================


def test_a_presigned_url_from_the_child_fetches_the_object_re_signed_with_the_real_keys(main_run,
                                                                                        fake):
    dummy = main_run.out()["env"]["AWS_ACCESS_KEY_ID"]
    assert dummy, main_run.describe()
    check_put_get(main_run, fake, "put_hello", "main/hello.txt")
    check_presigned(main_run, fake, MAIN, "presigned", "main/hello.txt", dummy)
    recs = [q for q in main_run.requests() if (q.get("path") or "").startswith("/main/hello.txt?")]
    assert recs and recs[0]["status"] == 200 and recs[0].get("credential") == "aws", \
        main_run.requests()
    assert dummy not in recs[0]["path"] and MAIN.access_key_id not in recs[0]["path"], recs[0]


# ==============================================================================================
# c. uploads: several MiB, multipart, signed payload hash, a key that needs encoding
# ==============================================================================================


def test_large_uploads_arrive_intact_and_read_back(main_run, fake):
    check_put_get(main_run, fake, "big", "main/big.bin", 5 * MiB)
    check_put_get(main_run, fake, "multipart", "main/multi.bin", 9 * MiB)
    ops = [v["operation"] for v in fake.verified_for(MAIN.access_key_id)]
    assert ops.count("UploadPart") == 2 and "CompleteMultipartUpload" in ops, ops
    big = verified_at(fake, MAIN, "/main/big.bin", "PUT")
    assert big and big[-1]["payload_length"] == 5 * MiB, big


def test_a_hex_payload_hash_and_an_encoded_key_survive_re_signing(main_run, fake):
    check_put_get(main_run, fake, "put_signed_payload", "main/signed-payload.bin", MiB)
    rec = verified_at(fake, MAIN, "/main/signed-payload.bin", "PUT")
    assert rec and re.fullmatch(r"[0-9a-f]{64}", rec[-1]["content_sha256"]), rec
    check_put_get(main_run, fake, "put_odd_key", "main/" + ODD_KEY_TAIL)
    assert verified_at(fake, MAIN, path_of("main/" + ODD_KEY_TAIL), "PUT")


# ==============================================================================================
# d. the AWS CLI
# ==============================================================================================


def test_aws_cli_sts_and_s3_ls_under_wrap(cli_run, fake):
    assert cli_run.returncode == 0, cli_run.describe()
    assert_dummies(cli_run.out()["env"], CLI)
    check_cli(cli_run, fake, CLI)


# ==============================================================================================
# e. a session token
# ==============================================================================================


def test_a_session_token_is_brokered_too(token_run, fake):
    r = token_run
    env = check_session(r, fake, TOKEN)
    check_put_get(r, fake, "put", "token/token.txt")
    check_presigned(r, fake, TOKEN, "presigned", "token/token.txt", env["AWS_ACCESS_KEY_ID"])
    check_chunked(r, fake, TOKEN, "chunked", "token/token-chunked.bin", 70 * 1024, 3)
    mine = fake.verified_for(TOKEN.access_key_id)
    assert mine and all(v["token"] == TOKEN.session_token for v in mine), mine
    assert not [s for s in fake.seen if s["key_id"] == env["AWS_ACCESS_KEY_ID"]]
    assert not [f for f in fake.failures if f["key_id"] == TOKEN.access_key_id], fake.failures


# ==============================================================================================
# f. aws-chunked uploads signed by the child
# ==============================================================================================


def test_an_aws_chunked_upload_is_verified_chunk_by_chunk_and_re_signed(main_run, fake):
    check_chunked(main_run, fake, MAIN, "chunked", "main/chunked.bin", 200 * 1024, 5)
    assert main_run.ok("chunked_get") == main_run.out()["chunked_sha256"]
    assert main_run.ok("trailer")["status"] == 200, main_run.out()["trailer"]
    assert main_run.ok("trailer_get") == main_run.out()["trailer_sha256"]
    rec = verified_at(fake, MAIN, "/main/trailer.bin", "PUT")
    assert rec and rec[-1]["content_sha256"] == fake_aws.STREAMING_UNSIGNED_TRAILER, rec


def test_an_aws_chunked_upload_with_a_chunk_changed_after_signing_stores_nothing(main_run, fake):
    s = main_run.step("chunked_tampered")
    if s["ok"]:
        v = s["value"]
        assert_refusal(v["status"], v["headers"], v["body"].encode(), "signature_invalid", 403)
    else:  # the broker may also cut the connection mid-body
        assert s["error"] in ("ConnectionError", "ChunkedEncodingError", "SSLError"), s
    assert main_run.ok("chunked")["status"] == 200, "the untampered upload must work"
    assert fake.object(BUCKET, "main/chunked-tampered.bin") is None
    assert not verified_at(fake, MAIN, "/main/chunked-tampered.bin")
    assert not [f for f in fake.failures if f["path"] == "/main/chunked-tampered.bin"], \
        "a tampered chunk reached AWS"


# ==============================================================================================
# g. forged and tampered requests
# ==============================================================================================


def test_forged_and_tampered_requests_are_refused_before_aws(main_run, fake):
    for name in ("forged", "tampered_header", "presigned_tampered"):
        v = main_run.ok(name)
        assert_refusal(v["status"], v["headers"], v["body"].encode(), "signature_invalid", 403)
    for path in ("/main/forged.txt", "/main/tampered-header.txt", "/main/not-signed-for.txt"):
        assert not [s for s in fake.seen if s["path"].split("?")[0] == path], \
            f"{path} reached AWS"
    # A body changed after its hash was signed never lands, whoever refuses it.
    v = main_run.ok("tampered_body")
    assert 400 <= v["status"] < 500, v
    assert fake.object(BUCKET, "main/tampered-body.txt") is None
    refused = [q for q in main_run.records() if q.get("error") == "signature_invalid"]
    assert len(refused) >= 3, main_run.records()


def test_a_signature_version_2_presigned_url_is_refused_with_the_way_out(main_run, fake):
    v = main_run.ok("presigned_v2")
    assert_refusal(v["status"], v["headers"], v["body"].encode(), "signature_invalid", 403)
    assert "Signature Version 2" in v["body"] and "s3v4" in v["body"], v["body"]
    assert not [s for s in fake.seen
                if "AWSAccessKeyId" in s["path"] and s["path"].startswith("/main/")], \
        "a SigV2 URL from the session reached AWS"


# ==============================================================================================
# h. the dummy key sent to a host the credential is not bound to
# ==============================================================================================


def test_the_dummy_key_to_an_unbound_host_is_refused(main_run, echo):
    for name in ("unbound_header", "unbound_presigned"):
        v = main_run.ok(name)
        assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_not_bound", 403,
                       host=OTHER)
    paths = {q["path"].split("?")[0] for q in echo.requests}
    assert "/main/aws-exfil" not in paths and "/main/presigned-exfil" not in paths, paths
    recs = [q for q in main_run.records() if q.get("event") == "exfiltration_blocked"]
    assert len(recs) >= 2, main_run.records()
    assert all(q.get("credential") == "aws" and q.get("host") == OTHER and
               q.get("decision") == "deny" for q in recs), recs


# ==============================================================================================
# i. regions and services allowlists
# ==============================================================================================


def _refused_by_boto3(step: dict, code: str):
    """boto3 saw the broker's refusal: as a 403 ClientError (S3 reads any error body), or, for
    a protocol whose client insists on its own XML (STS), as a parse error quoting the JSON."""
    assert not step["ok"], step
    if step.get("error") == "ResponseParserError":
        assert f'"error":"{code}"' in step["message"], step
        return
    assert step.get("status") == 403, step
    assert step.get("headers", {}).get("x-broker-error") == code, step


def test_a_region_outside_the_allowlist_is_refused(scope_run, fake):
    r = scope_run
    assert r.returncode == 0, r.describe()
    assert BUCKET in r.ok("allowed"), "the allowed region and service must work"
    _refused_by_boto3(r.step("region_boto3"), "credential_not_bound")
    v = r.ok("region_raw")
    assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_not_bound", 403)
    assert not [s for s in fake.seen if "eu-west-1" in s["host"]], "a eu-west-1 request reached AWS"


def test_a_service_outside_the_allowlist_is_refused(scope_run, fake):
    r = scope_run
    assert BUCKET in r.ok("allowed"), r.describe()
    _refused_by_boto3(r.step("service_boto3"), "credential_not_bound")
    v = r.ok("service_raw")
    assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_not_bound", 403)
    assert not [v for v in fake.verified_for(REGION.access_key_id) if v["service"] == "sts"]
    assert not [s for s in fake.seen if s["host"].startswith("sts.")
                and s["key_id"] in (REGION.access_key_id, r.out()["env"]["AWS_ACCESS_KEY_ID"])]


def test_a_scoped_credential_works_inside_its_scope_only(least_run, fake):
    r = least_run
    assert r.returncode == 0, r.describe()
    assert r.ok("get") == "inside", r.describe()
    assert "least/a.txt" in r.ok("list")
    assert r.ok("presigned_inside")["status"] == 200, r.step("presigned_inside")
    cp = r.ok("cli_cp")
    assert cp["rc"] == 0, cp
    for name in ("put_outside", "list_all", "delete_object", "delete_bucket", "copy_in", "sts"):
        _refused_by_boto3(r.step(name), "credential_out_of_scope")
    v = r.ok("presigned_outside")
    assert_refusal(v["status"], v["headers"], v["body"].encode(), "credential_out_of_scope", 403)
    rb = r.ok("cli_rb")
    # (The CLI shows the status, not the body; the record below names the refusal.)
    assert rb["rc"] != 0 and "(403)" in rb["stderr"] and "DeleteBucket" in rb["stderr"], rb
    # None of them reached AWS.
    ops = [v.get("operation") for v in fake.verified_for(LEAST.access_key_id)]
    assert "DeleteBucket" not in ops and "DeleteObject" not in ops, ops
    assert not [s for s in fake.seen if s.get("key_id") == LEAST.access_key_id
                and ("elsewhere/" in s.get("path", "") or "main/secret" in s.get("path", ""))]
    assert not [v for v in fake.verified_for(LEAST.access_key_id) if v["service"] == "sts"]
    # Each refusal names the credential and the scope key that refused it.
    refused = [q for q in r.records() if q.get("error") == "credential_out_of_scope"]
    assert len(refused) >= 7, refused
    assert {q["rule"] for q in refused} <= {"credentials.aws.scope.s3",
                                            "credentials.aws.scope.actions"}
    assert all(q["credential"] == "aws" for q in refused), refused


def test_assume_role_signs_the_sessions_requests_with_temporary_credentials(role_run, fake):
    r = role_run
    assert r.returncode == 0, r.describe()
    env = r.out()["env"]
    # The child holds dummies shaped like temporary credentials, a session token among them.
    assert env["AWS_ACCESS_KEY_ID"].startswith("ASIA") and len(env["AWS_ACCESS_KEY_ID"]) == 20
    assert env["AWS_SESSION_TOKEN"] and env["AWS_ACCESS_KEY_ID"] != ROLE_BASE.access_key_id
    # One AssumeRole, signed with the long-lived key, with the session policy.
    assumed = [a for a in fake.assumed if a["key_id"] == ROLE_BASE.access_key_id]
    assert len(assumed) == 1, fake.assumed
    assert assumed[0]["role_arn"] == ROLE_ARN and assumed[0]["duration"] == 3600
    assert json.loads(assumed[0]["policy"]) == ROLE_POLICY
    temp = fake.credentials()[assumed[0]["issued"]]
    assert r.ok("get") == "via role", r.describe()
    assert r.ok("cli_cp")["rc"] == 0, r.step("cli_cp")
    # S3 saw the temporary key (and its token); the long-lived key signed nothing but STS.
    s3_seen = [v for v in fake.verified if v["service"] == "s3" and "/role/" in v["path"]]
    assert len(s3_seen) >= 3, s3_seen
    assert all(v["key_id"] == temp.access_key_id and v["token"] == temp.session_token
               for v in s3_seen), s3_seen
    assert not [v for v in fake.verified_for(ROLE_BASE.access_key_id) if v["service"] != "sts"]
    # An action outside the scope is refused by the broker.
    _refused_by_boto3(r.step("delete_bucket"), "credential_out_of_scope")
    assert "DeleteBucket" not in [v.get("operation") for v in fake.verified_for(temp.access_key_id)]
    # Neither the long-lived nor the temporary values are in anything the broker wrote.
    records = [q for q in r.requests() if q.get("credential") == "aws" and q.get("status") == 200]
    assert records and all(q.get("credential_expires", 0) > time.time() for q in records)
    for what, data in r.written():
        for real in (ROLE_BASE, temp):
            for form in forbidden_forms(real):
                assert form not in data, f"{what} holds a real value of {real.user}"


# ==============================================================================================
# j. file: and cmd: sources
# ==============================================================================================


def test_a_shared_credentials_file_profile_as_the_source(file_run, fake):
    assert file_run.returncode == 0, file_run.describe()
    assert_dummies(file_run.out()["env"], FILE)
    check_identity(file_run, fake, FILE)
    assert not [s for s in fake.seen if s["key_id"] == FILE_DECOY.access_key_id]


def test_a_credential_process_command_as_the_source(cmd_run, fake):
    assert cmd_run.returncode == 0, cmd_run.describe()
    # The broker's AWS_PROFILE would name a profile the child cannot read; it is removed.
    assert cmd_run.out()["env"]["AWS_PROFILE"] is None, cmd_run.out()["env"]
    assert cmd_run.out()["env"]["AWS_DEFAULT_PROFILE"] is None, cmd_run.out()["env"]
    assert_dummies(cmd_run.out()["env"], CMD)
    check_identity(cmd_run, fake, CMD)


# ==============================================================================================
# k. the real values appear nowhere the broker writes
# ==============================================================================================


def forbidden_forms(creds: AwsCredentials):
    values = [creds.access_key_id, creds.secret_access_key]
    if creds.session_token:
        values.append(creds.session_token)
    out = set()
    for v in values:
        out |= forms_of(v)
    return out


@pytest.mark.parametrize("run_name", ["main_run", "token_run", "cli_run", "scope_run", "file_run",
                                      "cmd_run", "rotate_run"])
def test_no_real_value_in_anything_the_broker_wrote(request, run_name):
    run = request.getfixturevalue(run_name)
    assert run.result is not None, run.describe()  # the session did run
    assert list(run.logs.glob("*.jsonl")), f"no audit log\n{run.describe()}"
    # The session did use the credential (else there would be nothing to leak).
    assert [q for q in run.requests() if q.get("credential") == "aws" and q.get("status") == 200], \
        f"no brokered AWS request succeeded\n{run.describe()}"
    for what, data in run.written():
        for real in run.reals:
            for form in forbidden_forms(real):
                assert form not in data, \
                    f"{what} holds a real value of {real.user} ({form[:8]!r}...)"


def test_temporary_credentials_are_fetched_again_before_they_expire(rotate_run, fake):
    r = rotate_run
    assert r.returncode == 0, r.describe()
    assert_dummies(r.out()["env"], ROTATE_1)
    arns = r.ok("identities")
    assert len(arns) >= 10, arns
    # The first issue, then (from about 2 s on) the next one; every call succeeded.
    assert arns[0] == ROTATE_1.arn, arns
    assert arns[-1] == ROTATE_2.arn, arns
    assert set(arns) == {ROTATE_1.arn, ROTATE_2.arn}, arns
    assert r.process_runs == 2, r.process_runs
    for c in (ROTATE_1, ROTATE_2):
        seen = fake.verified_for(c.access_key_id)
        assert seen and all(v["token"] == c.session_token for v in seen), seen


def test_sts_calls_that_vend_credentials_are_refused(main_run, fake):
    """GetSessionToken / AssumeRole answered by AWS would put new real credentials in the
    child's hands; the broker does not sign them."""
    _refused_by_boto3(main_run.step("get_session_token"), "policy_denied")
    v = main_run.ok("assume_role")
    doc = assert_refusal(v["status"], v["headers"], v["body"].encode(), "policy_denied", 403)
    assert "sts:AssumeRole" in doc["message"] and doc["rule"] == "credentials.aws", doc
    # Every STS call of the session that reached AWS is a GetCallerIdentity (its form body,
    # "Action=GetCallerIdentity&Version=2011-06-15", is 43 bytes).
    sts_calls = [q for q in fake.seen
                 if q["host"].startswith("sts.") and q["key_id"] == MAIN.access_key_id]
    assert sts_calls and all(q["body_length"] == 43 for q in sts_calls), sts_calls
