"""Test support for the S3 API: a hots3 server with known credentials, and hand-made SigV4
requests (raw HTTP) for the cases SDKs never send (bad signatures, skewed clocks, aws-chunked
over plain HTTP, truncated bodies). Standard library only."""

import base64
import datetime
import hashlib
import hmac
import os
import socket
import subprocess
import tempfile
import unittest
import urllib.parse

import harness

ACCESS_KEY = "HOTS3TESTACCESSKEY01"
SECRET_KEY = "hots3-test-secret-key-0123456789abcdefghij"
REGION = "us-east-1"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

SERVER_CONFIG = """
[http]
threads = 2
{http}
[storage]
device_size = "{device_size}"
cache_size = "{cache_size}"
io_buffers = 16
[log]
access_log = ""
[[users]]
name = "admin"
access_key = "{access}"
secret_key = "{secret}"
admin = true
[[users]]
name = "reader"
access_key = "HOTS3READERACCESSKEY"
secret_key = "reader-secret-key-0123456789"
grants = [{{ bucket = "shared-*", access = "read" }}]
create_buckets = ["readers-*"]
[[users]]
name = "writer"
access_key = "HOTS3WRITERACCESSKEY"
secret_key = "writer-secret-key-0123456789"
grants = [{{ bucket = "shared-*", access = "readwrite" }}]
create_buckets = ["lifecycle-*"]
"""


def hots3_server(extra_config="", device_size="4GiB", cache_size="64MiB", args=(), workdir=None,
                 http_config="", **server_args):
    """A hots3 with the test users. With `workdir`, data lives (and stays) in workdir/data, so
    a later server can start on the same store. `http_config`: more keys of the [http] table
    (one per line); `server_args` go to harness.ServerProcess."""
    binary = harness.find_binary("HOTS3_BIN", "hots3")
    owned = workdir is None
    if owned:
        workdir = tempfile.mkdtemp(prefix="hots3-s3-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
    config = SERVER_CONFIG.format(device_size=device_size, cache_size=cache_size, access=ACCESS_KEY,
                                  secret=SECRET_KEY, http=http_config) + extra_config
    server = harness.ServerProcess(binary, ["serve", "--data", os.path.join(workdir, "data"), *args],
                                   config=config, workdir=workdir, **server_args)
    server.owned_dir = owned
    return server


class ServerTestCase(unittest.TestCase):
    """Tests that share one hots3 (started before the first, stopped after the last, which must
    exit 0). `server_config`: more configuration (TOML, after the test users); `server_options`:
    keyword arguments of hots3_server."""

    server_config = ""
    server_options = {}

    @classmethod
    def setUpClass(cls):
        cls.server = hots3_server(cls.server_config, **cls.server_options).start()
        cls.port = cls.server.port

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()

    @classmethod
    def signed(cls, method, path, query=(), headers=None, body=b"", **keys):
        """A hand-signed request on a fresh connection (`keys`: SignedRequest's, e.g. access and
        secret); returns the harness Response."""
        return send(cls.port, SignedRequest(method, path, query, headers, body=body, port=cls.port, **keys).wire())


def _hmac(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def signing_key(secret, date, region=REGION, service="s3"):
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def uri_encode(s, keep_slash):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def canonical_query(query):
    pairs = []
    for k, v in query:
        pairs.append((uri_encode(k, False), uri_encode(v, False)))
    pairs.sort()
    return "&".join("%s=%s" % kv for kv in pairs)


class SignedRequest:
    """A SigV4-signed request built by hand. `path` is the decoded path ("/bucket/key")."""

    def __init__(self, method, path, query=(), headers=None, payload_hash=None, body=b"",
                 access=ACCESS_KEY, secret=SECRET_KEY, when=None, port=None, region=REGION, unsigned=(),
                 amz_date=None, service="s3"):
        """`unsigned`: names of headers sent but left out of SignedHeaders. `amz_date`: the
        x-amz-date to send and sign instead of `when`'s (malformed ones, say). `service`: the
        scope's (s3express for directory buckets)."""
        when = when or datetime.datetime.now(datetime.timezone.utc)
        self.amz_date = amz_date or when.strftime("%Y%m%dT%H%M%SZ")
        self.date = when.strftime("%Y%m%d")
        self.scope = "%s/%s/%s/aws4_request" % (self.date, region, service)
        self.method = method
        self.path = path
        self.query = list(query)
        self.body = body
        self.headers = {"host": "127.0.0.1:%d" % port}
        self.headers.update({k.lower(): v for k, v in (headers or {}).items()})
        if payload_hash is None:
            payload_hash = hashlib.sha256(body).hexdigest()
        self.headers["x-amz-content-sha256"] = payload_hash
        self.headers["x-amz-date"] = self.amz_date
        signed = sorted(h for h in self.headers if h not in unsigned)
        canonical = "\n".join([
            method,
            uri_encode(path, True),
            canonical_query(self.query),
            "".join("%s:%s\n" % (h, " ".join(str(self.headers[h]).split())) for h in signed),
            ";".join(signed),
            payload_hash,
        ])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", self.amz_date, self.scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        self.key = signing_key(secret, self.date, region, service)
        self.signature = hmac.new(self.key, to_sign.encode(), hashlib.sha256).hexdigest()
        self.headers["authorization"] = (
            "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
            % (access, self.scope, ";".join(signed), self.signature))

    def target(self):
        t = uri_encode(self.path, True)
        if self.query:
            t += "?" + "&".join("%s=%s" % (uri_encode(k, False), uri_encode(v, False)) for k, v in self.query)
        return t

    def wire(self, body=None):
        body = self.body if body is None else body
        head = "%s %s HTTP/1.1\r\n" % (self.method, self.target())
        headers = dict(self.headers)
        if "content-length" not in headers and "transfer-encoding" not in headers:
            headers["content-length"] = str(len(body))
        head += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
        return head.encode() + body

    def chunk_signature(self, previous, data):
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", self.amz_date, self.scope, previous, EMPTY_SHA256,
                             hashlib.sha256(data).hexdigest()])
        return hmac.new(self.key, to_sign.encode(), hashlib.sha256).hexdigest()

    def trailer_signature(self, previous, trailer_text):
        to_sign = "\n".join(["AWS4-HMAC-SHA256-TRAILER", self.amz_date, self.scope, previous,
                             hashlib.sha256(trailer_text.encode()).hexdigest()])
        return hmac.new(self.key, to_sign.encode(), hashlib.sha256).hexdigest()


def presign_v4(method, path, port, expires_s=60, when=None, region=REGION, signed=("host",),
               headers=None, secret=SECRET_KEY, access=ACCESS_KEY, service="s3", content_sha256=None):
    """A SigV4 presigned target ("/path?X-Amz-..."), signed at `when` for the headers in
    `signed` (their values from `headers`, host from `port`). `content_sha256` goes into the
    query as X-Amz-Content-Sha256 (js-v3 puts it there); else UNSIGNED-PAYLOAD is signed."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/%s/%s/aws4_request" % (when.strftime("%Y%m%d"), region, service)
    values = {"host": "127.0.0.1:%d" % port}
    values.update({k.lower(): v for k, v in (headers or {}).items()})
    query = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", "%s/%s" % (access, scope)),
             ("X-Amz-Date", amz_date), ("X-Amz-Expires", str(expires_s)),
             ("X-Amz-SignedHeaders", ";".join(sorted(signed)))]
    if content_sha256 is not None:
        query.append(("X-Amz-Content-Sha256", content_sha256))
    canonical = "\n".join([method, uri_encode(path, True), canonical_query(query),
                           "".join("%s:%s\n" % (h, values[h]) for h in sorted(signed)),
                           ";".join(sorted(signed)), content_sha256 or "UNSIGNED-PAYLOAD"])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signature = hmac.new(signing_key(secret, when.strftime("%Y%m%d"), region, service), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    query.append(("X-Amz-Signature", signature))
    return uri_encode(path, True) + "?" + "&".join("%s=%s" % (uri_encode(k, False), uri_encode(v, False))
                                                     for k, v in query)


def presign_v2(method, path, expires_at_s, secret=SECRET_KEY, access=ACCESS_KEY):
    """A SigV2 presigned target ("/bucket/key?AWSAccessKeyId=...&Expires=...&Signature=...")."""
    to_sign = "%s\n\n\n%d\n%s" % (method, expires_at_s, uri_encode(path, True))
    signature = base64.b64encode(hmac.new(secret.encode(), to_sign.encode(), hashlib.sha1).digest()).decode()
    return "%s?AWSAccessKeyId=%s&Expires=%d&Signature=%s" % (uri_encode(path, True), access, expires_at_s,
                                                              uri_encode(signature, False))


def aws_chunked_signed(req, payload, chunk=65536, trailer=None, corrupt_chunk=None):
    """The aws-chunked body of `req` (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER])."""
    out = b""
    previous = req.signature
    pieces = [payload[i:i + chunk] for i in range(0, len(payload), chunk)] + [b""]
    for n, data in enumerate(pieces):
        sig = req.chunk_signature(previous, data)
        previous = sig
        if corrupt_chunk == n:
            data = bytes([data[0] ^ 1]) + data[1:]
        out += b"%x;chunk-signature=%s\r\n%s" % (len(data), sig.encode(), data)
        if data:
            out += b"\r\n"
    if trailer is not None:
        name, value = trailer
        text = "%s:%s\n" % (name, value)
        out += ("%s:%s\r\n" % (name, value)).encode()
        out += ("x-amz-trailer-signature:%s\r\n" % req.trailer_signature(previous, text)).encode()
    out += b"\r\n"
    return out


def aws_chunked_unsigned(payload, chunk=65536, trailer=None):
    out = b""
    for i in range(0, len(payload), chunk):
        data = payload[i:i + chunk]
        out += b"%x\r\n%s\r\n" % (len(data), data)
    out += b"0\r\n"
    if trailer is not None:
        out += ("%s:%s\r\n" % trailer).encode()
    out += b"\r\n"
    return out


def send(port, wire, timeout_s=30):
    """Sends raw request bytes on a fresh connection; returns the harness Response."""
    with harness.connect(port, timeout_s) as s:
        s.sendall(wire)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        return harness.Reader(s).read_response(head_request=wire.startswith(b"HEAD "))


def self_signed_certificate(directory):
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key
