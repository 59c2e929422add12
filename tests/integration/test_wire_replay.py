"""Replays what real S3 clients put on the wire (tests/data/wire/captures) against a real hots3,
and pins points 8 and 17-26 of the compatibility checklist in tests/data/wire/README.md.

Each captured request (captures/<scheme>/<client>/NNN-<Op>.http, parsed view in NNN-<Op>.json) is
sent again as the client sent it: same method, path, query, header names, values, order and case,
the same SignedHeaders list and x-amz-content-sha256 mode, and the same framing (HTTP chunked,
aws-chunked, chunk sizes, trailers with their quirks, Expect: 100-continue). What cannot be kept
is made again:
  - the signing time: captured x-amz-date values are older than the server's clock-skew window,
    so every request is re-signed now (the Authorization keeps the client's ", " or bare ","),
    and STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] chunk and trailer signatures are re-chained
    from the new seed signature;
  - Host (the test server's port); upload ids (the server's, from CreateMultipartUpload); the
    ETags and checksums in CompleteMultipartUpload (the server's UploadPart answers, in the
    capture's XML form) and minio-go's composite CRC32C header; the owner ID in s3cmd's
    PutObjectAcl (the server's GetObjectAcl answer);
  - bodies the capture truncated (> 64 KiB): regenerated with the recipe of README section 5,
    laid out in the capture's framing. The rebuilt bytes are checked against the capture's
    sha256 of the wire body, so the replay is byte-faithful where the protocol allows it.
Presigned URLs (NNN-PresignedGetObject) are NOT replayed: their signatures and expiry are pinned
by the known-answer tests in tests/unit/s3/wire_captures_test.cc, and re-signing a presigned URL
would replace exactly what those captures are about.

Every (scheme, client) run gets its own fresh hots3 with the bucket `wire-test` seeded as the
capture server had it. The https captures are replayed over plain http: they are the same
request bytes (the clients pick other payload modes over https, which is why they are worth it).
Standard library only: runs under any python3."""

import base64
import datetime
import glob
import hashlib
import hmac
import json
import os
import re
import socket
import sys
import unittest
import urllib.parse
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "data", "wire"))
import verify as wire_verify  # noqa: E402

CAPTURES = os.path.join(HERE, "..", "data", "wire", "captures")
ACCESS = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
BUCKET = "wire-test"
CLIENTS = ("awscli", "boto3-1.26", "boto3-1.43", "js-v3", "minio-js", "minio-go", "s3cmd", "rclone")
SCHEMES = ("http", "https")
MiB = 1024 * 1024
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
# The captures' key pair, as an admin user of the test server.
WIRE_USER = '\n[[users]]\nname = "wire"\naccess_key = "%s"\nsecret_key = "%s"\nadmin = true\n' % (ACCESS, SECRET)
# What tools/capserver.py had in the bucket before each client run.
SEED = {k: ("content of %s\n" % k).encode() for k in (
    "list/a.txt", "list/b.txt", "list/sub1/c.txt", "list/sub2/d.txt", "other.txt", "src/hello.txt",
    "del/one.txt", "del/two.txt")}
SEED["range/hello.txt"] = b"hello world"


# ---- checksums: the captures' own verifier's (tests/data/wire/verify.py) ----------------------

ALGOS = wire_verify.ALGOS
XML_NAME = {"crc32": "CRC32", "crc32c": "CRC32C", "crc64nvme": "CRC64NVME", "sha1": "SHA1", "sha256": "SHA256"}


def b64(raw):
    return base64.b64encode(raw).decode()


def checksum(algo, payload, known=None):
    """base64 checksum of payload; `known` are the capture's digests when payload is its payload
    (pure-Python CRC32C of 5 MiB parts would take seconds)."""
    if known and algo + "_b64" in known:
        return known[algo + "_b64"]
    return b64(ALGOS[algo](payload))


# ---- captured payloads ------------------------------------------------------------------------

_DATASETS = {}


def dataset(seed, size):
    """README section 5: the first `size` bytes of sha256(seed + i.to_bytes(8, 'big')), i = 0, 1, ..."""
    have = _DATASETS.get(seed, b"")
    if len(have) < size:
        have = b"".join(hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range((size + 31) // 32))
        _DATASETS[seed] = have
    return have[:size]


def regenerate_payload(meta):
    """The payload of a truncated capture: 70k.bin, or a 5 MiB part of 10m.bin, found by its MD5.
    -> (bytes, True), or deterministic bytes of the same length and False if none matches."""
    size, md5 = meta["payload_length"], meta["payload_digests"]["md5_hex"]
    for seed, total in ((b"70k", 71680), (b"10m", 10 * MiB)):
        for offset in range(0, total - size + 1, 5 * MiB):
            data = dataset(seed, total)[offset:offset + size]
            if hashlib.md5(data).hexdigest() == md5:
                return data, True
    return dataset(b"wire-replay", size), False


# ---- SigV4 canonical forms (the rules README checklist points 2-4 describe) ------------------

_UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def uri_encode(raw, keep_slash):
    return "".join(chr(c) if c in _UNRESERVED or (keep_slash and c == 0x2F) else "%%%02X" % c for c in raw)


def canonical_uri(raw_path):
    return uri_encode(urllib.parse.unquote_to_bytes(raw_path), True) or "/"


def canonical_query(raw_query):
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if part:
            k, _, v = part.partition("=")
            pairs.append((uri_encode(urllib.parse.unquote_to_bytes(k), False),
                          uri_encode(urllib.parse.unquote_to_bytes(v), False)))
    return "&".join("%s=%s" % kv for kv in sorted(pairs))


def canonical_headers(headers, signed):
    values = {}
    for name, _, value in headers:
        values.setdefault(name.lower(), []).append(re.sub(r"\s+", " ", value.strip()))
    return "".join("%s:%s\n" % (n, ",".join(values.get(n, []))) for n in signed)


AUTH_RE = re.compile(r"^(AWS4-HMAC-SHA256\s+Credential=)([^,\s]+)(,\s*)(SignedHeaders=)([^,\s]+)(,\s*)(Signature=)([0-9a-f]{64})$")


def hmac_hex(key, text):
    return hmac.new(key, text.encode("latin-1"), hashlib.sha256).hexdigest()


# ---- XML --------------------------------------------------------------------------------------

def local(tag):
    return tag.rsplit("}", 1)[-1]


def xml_root(body):
    try:
        return ET.fromstring(body)
    except ET.ParseError:
        return None


def xml_texts(body, name):
    root = xml_root(body)
    return [] if root is None else [e.text or "" for e in root.iter() if local(e.tag) == name]


def xml_text(body, name):
    texts = xml_texts(body, name)
    return texts[0] if texts else None


def error_code(body):
    root = xml_root(body)
    if root is None or local(root.tag) != "Error":
        return None
    return xml_text(body, "Code")


# ---- one capture ------------------------------------------------------------------------------

class Capture:
    def __init__(self, json_path):
        with open(json_path) as f:
            self.meta = json.load(f)
        self.name = os.path.basename(json_path)[:-5]          # "006-UploadPart"
        self.scheme = os.path.basename(os.path.dirname(os.path.dirname(json_path)))
        self.client = os.path.basename(os.path.dirname(json_path))
        self.op = self.meta["operation"]
        with open(os.path.join(os.path.dirname(json_path), self.meta["file"]), "rb") as f:
            raw = f.read()
        cut = raw.index(b"\r\n\r\n")
        lines = raw[:cut].decode("latin-1").split("\r\n")
        self.method, self.target, self.version = lines[0].split(" ")
        self.headers = []  # [name, separator after the colon, value]: rebuilt exactly as captured
        for line in lines[1:]:
            name, _, rest = line.partition(":")
            value = rest.lstrip(" \t")
            self.headers.append((name, rest[:len(rest) - len(value)], value))
        self.body = raw[cut + 4:]  # the whole body, or its first 2 KiB if truncated
        self.truncated = self.meta["body_truncated"]
        last = json_path[:-5] + ".last2k"
        self.last2k = None
        if os.path.exists(last):
            with open(last, "rb") as f:
                self.last2k = f.read()
        self.raw_path, _, self.raw_query = self.target.partition("?")

    def header(self, name, default=None):
        for n, _, v in self.headers:
            if n.lower() == name:
                return v
        return default

    @property
    def key(self):
        parts = urllib.parse.unquote(self.raw_path).split("/", 2)
        return parts[2] if len(parts) > 2 else ""

    @property
    def streaming(self):
        return ((self.header("x-amz-content-sha256") or "").startswith("STREAMING-")
                or "aws-chunked" in (self.header("content-encoding") or "").lower())

    @property
    def http_chunked(self):
        return "chunked" in (self.header("transfer-encoding") or "").lower()

    def __repr__(self):
        return "%s/%s/%s" % (self.scheme, self.client, self.name)


def load_captures(scheme, client):
    caps = [Capture(p) for p in sorted(glob.glob(os.path.join(CAPTURES, scheme, client, "[0-9][0-9][0-9]-*.json")))]
    # Presigned GETs are skipped (see the module docstring).
    return [c for c in caps if c.op != "PresignedGetObject"]


def load_capture(scheme, client, name):
    return Capture(os.path.join(CAPTURES, scheme, client, name + ".json"))


# ---- framing: how a payload is laid out on the wire --------------------------------------------

class Framing:
    """aws-chunked chunks [(size text, extension)] and trailer bytes (None: plain body), inside
    HTTP chunks of the given sizes (None: Content-Length body)."""

    def __init__(self, aws_chunks=None, aws_trailer=b"", http_chunks=None, http_trailer=b"\r\n"):
        self.aws_chunks, self.aws_trailer = aws_chunks, aws_trailer
        self.http_chunks, self.http_trailer = http_chunks, http_trailer


def split_http_chunks(wire):
    sizes, out, pos = [], [], 0
    while True:
        eol = wire.index(b"\r\n", pos)
        size = int(wire[pos:eol], 16)
        sizes.append(size)
        pos = eol + 2
        if size == 0:
            return sizes, b"".join(out), wire[pos:]
        out.append(wire[pos:pos + size])
        pos += size + 2


def split_aws_chunks(stream):
    chunks, out, pos = [], [], 0
    while True:
        eol = stream.index(b"\r\n", pos)
        size_text, _, ext = stream[pos:eol].decode("latin-1").partition(";")
        chunks.append((size_text, ext))
        size = int(size_text, 16)
        pos = eol + 2
        if size == 0:
            return chunks, b"".join(out), stream[pos:]
        out.append(stream[pos:pos + size])
        pos += size + 2


def framing_and_payload(cap):
    """-> (Framing, payload, payload_is_the_captured_one)"""
    meta = cap.meta
    if not cap.truncated:
        stream, framing = cap.body, Framing()
        if cap.http_chunked:
            framing.http_chunks, stream, framing.http_trailer = split_http_chunks(stream)
        payload = stream
        if cap.streaming:
            framing.aws_chunks, payload, framing.aws_trailer = split_aws_chunks(stream)
        return framing, payload, True
    payload, same = regenerate_payload(meta)
    framing = Framing()
    if cap.http_chunked:
        framing.http_chunks = meta["http_chunked"]["chunk_sizes"]
        framing.http_trailer = "".join(t + "\r\n" for t in meta["http_chunked"]["trailers"]).encode() + b"\r\n"
    if cap.streaming:
        chunks = meta["aws_chunked"]["chunks"]
        framing.aws_chunks = [(c["header_line"].split(";")[0], c["ext"]) for c in chunks]
        framing.aws_trailer = "".join(t + "\r\n" for t in meta["aws_chunked"]["trailers"]).encode("latin-1") + b"\r\n"
    return framing, payload, same


def aws_stream(framing, payload, trailer=None, sign_chunk=None):
    """The aws-chunked stream (or the plain payload). sign_chunk(data) -> a fresh chunk
    signature; without it the captured chunk extension is kept."""
    if framing.aws_chunks is None:
        return payload
    out, pos = [], 0
    for size_text, ext in framing.aws_chunks:
        size = int(size_text, 16)
        data = payload[pos:pos + size]
        pos += size
        if sign_chunk is not None:
            ext = "chunk-signature=" + sign_chunk(data)
        out.append((size_text + (";" + ext if ext else "") + "\r\n").encode())
        out.append(data)
        if size:
            out.append(b"\r\n")
    assert pos == len(payload), "aws-chunk sizes do not add up to the payload"
    return b"".join(out) + (framing.aws_trailer if trailer is None else trailer)


def http_frame(framing, stream):
    """The wire body: the stream inside the captured HTTP chunks, or as it is."""
    if framing.http_chunks is None:
        return stream
    out, pos = [], 0
    for size in framing.http_chunks[:-1]:
        out += [b"%x\r\n" % size, stream[pos:pos + size], b"\r\n"]
        pos += size
    assert pos == len(stream), "HTTP chunk sizes do not add up to the aws-chunked stream"
    return b"".join(out) + b"0\r\n" + framing.http_trailer


def frame(framing, payload):
    """The captured wire body of payload, captured chunk signatures included."""
    return http_frame(framing, aws_stream(framing, payload))


def rewrite_trailer(trailer, payload, known, sign_trailer=None):
    """Recomputes x-amz-checksum-* trailer values (keeping each line's bytes around the value,
    e.g. minio-go's "\\n" before the CRLF), and the x-amz-trailer-signature if signed."""
    lines = trailer.split(b"\r\n")
    for i, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        lname = name.strip().lower().decode("latin-1")
        if colon and lname.startswith("x-amz-checksum-") and lname[15:] in ALGOS:
            stripped = value.strip()
            start = value.index(stripped) if stripped else 0
            lines[i] = name + b":" + value[:start] + checksum(lname[15:], payload, known).encode() + value[start + len(stripped):]
    if sign_trailer is not None:
        canonical = b"".join(l.partition(b":")[0].strip().lower() + b":" + l.partition(b":")[2].strip() + b"\n"
                             for l in lines if b":" in l and not l.lower().startswith(b"x-amz-trailer-signature:"))
        signature = sign_trailer(canonical)
        lines = [b"x-amz-trailer-signature:" + signature.encode() if l.lower().startswith(b"x-amz-trailer-signature:") else l
                 for l in lines]
    return b"\r\n".join(lines)


# ---- the replay engine ------------------------------------------------------------------------

class Record:
    """One replayed request and what the server answered."""

    def __init__(self, cap):
        self.cap = cap
        self.head = b""
        self.sent = b""             # the payload (decoded body) sent
        self.got_100 = None         # Expect: None (not asked), True (100 before the body), False
        self.body_sent = True
        self.status = None
        self.headers = []
        self.body = b""
        self.error = None
        self.after_head = b""       # bytes that followed a HEAD error response (must be none)
        self.faithful = None        # (ok, why): rebuilt body == captured bytes (before re-signing)

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def checksum_headers(self):
        return {k.lower(): v for k, v in self.headers if k.lower().startswith("x-amz-checksum-")}

    def __repr__(self):
        return "%r -> %s %s%s" % (self.cap, self.status, self.body[:300], " error=" + self.error if self.error else "")


class Replayer:
    """Replays captures in order against one server, keeping the server's state the later
    requests of a sequence depend on (upload ids, part ETags and checksums, owner ID), and a
    model of what the bucket should hold."""

    def __init__(self, port):
        self.port = port
        self.upload_ids = {}      # captured upload id -> the server's
        self.parts = {}           # server upload id -> {part number: {etag, checksums, payload}}
        self.owner_id = None
        self.objects = {k: hashlib.md5(v).hexdigest() for k, v in SEED.items()}  # key -> MD5 expected
        self.deleted = set()
        self.records = []
        self.connections = {}     # the capture's connection -> (socket, reader)

    def close(self):
        for sock, _ in self.connections.values():
            sock.close()
        self.connections.clear()

    # -- building the request
    def _body(self, cap, xml_edit=None):
        """-> (Framing, payload, known digests or None)"""
        if cap.op == "CompleteMultipartUpload":
            text = self._complete_xml(cap.body.decode())
            return Framing(), (xml_edit(text) if xml_edit else text).encode(), None
        if cap.op == "PutObjectAcl" and self.owner_id:
            # s3cmd copies the policy GetObjectAcl returned: the owner is the server's.
            return Framing(), cap.body.replace(b"<ID>owner</ID>", b"<ID>%s</ID>" % self.owner_id.encode()), None
        framing, payload, same = framing_and_payload(cap)
        return framing, payload, cap.meta.get("payload_digests") if same else None

    def _complete_xml(self, text):
        """The capture's Complete XML in its exact form, with the server's ETags and checksums."""
        def part(m):
            block = m.group(0)
            number = re.search(r"<PartNumber>\s*(\d+)\s*</PartNumber>", block)
            p = self.parts.get(self._upload_in_flight, {}).get(int(number.group(1))) if number else None
            if p is None:
                return block
            block = re.sub(r"(<ETag>)(&quot;|&#34;|\"|)[^<]*?(\2)(</ETag>)",
                           lambda e: e.group(1) + e.group(2) + p["etag"] + e.group(3) + e.group(4), block)
            for algo, value in p["checksums"].items():
                tag = "Checksum" + XML_NAME[algo]
                block = re.sub(r"(<%s>)[^<]*(</%s>)" % (tag, tag), lambda e: e.group(1) + value + e.group(2), block)
            return block
        return re.sub(r"<Part>.*?</Part>", part, text, flags=re.S)

    def _composite(self, xml_text_, algo):
        """minio-go's whole-object header on Complete: the checksum of the concatenated raw part
        checksums (the server's, as listed in the XML), without a -N suffix."""
        raw = b"".join(base64.b64decode(v) for v in xml_texts(xml_text_, "Checksum" + XML_NAME[algo]))
        return b64(ALGOS[algo](raw))

    def build(self, cap, secret=SECRET, override=None, xml_edit=None):
        """-> (head bytes, body bytes, payload). For negative tests: `override` {header: value} is
        applied before signing, `xml_edit(text)` to a CompleteMultipartUpload body."""
        amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        target = cap.target
        self._upload_in_flight = None
        for captured, ours in self.upload_ids.items():
            if "uploadId=" + captured in target:
                target = target.replace("uploadId=" + captured, "uploadId=" + ours)
                self._upload_in_flight = ours
        framing, payload, known = self._body(cap, xml_edit)
        headers = [list(h) for h in cap.headers]

        def put(name, value):
            for h in headers:
                if h[0].lower() == name:
                    h[2] = value

        put("host", "127.0.0.1:%d" % self.port)
        put("x-amz-date", amz_date)
        content_sha256 = cap.header("x-amz-content-sha256") or "UNSIGNED-PAYLOAD"
        if re.fullmatch(r"[0-9a-fA-F]{64}", content_sha256):
            content_sha256 = hashlib.sha256(payload).hexdigest()
            put("x-amz-content-sha256", content_sha256)
        if cap.header("content-md5") is not None:
            put("content-md5", b64(hashlib.md5(payload).digest()))
        for name, _, _ in cap.headers:
            algo = name.lower()[15:] if name.lower().startswith("x-amz-checksum-") else None
            if algo in ALGOS:
                put(name.lower(), self._composite(payload.decode(), algo) if cap.op == "CompleteMultipartUpload"
                    else checksum(algo, payload, known))
        for name, value in (override or {}).items():
            put(name.lower(), value)
        # Signatures are fixed-width: the length of the captured framing is the length to declare.
        if cap.header("content-length") is not None:
            put("content-length", str(len(frame(framing, payload))))

        m = AUTH_RE.match(cap.header("authorization"))
        assert m, "unexpected Authorization in %r" % cap
        access, _, region, service, term = m.group(2).split("/")
        scope = "/".join([amz_date[:8], region, service, term])
        signed = m.group(5).split(";")
        canonical = "\n".join([cap.method, canonical_uri(cap.raw_path), canonical_query(target.partition("?")[2]),
                               canonical_headers(headers, signed), ";".join(signed), content_sha256])
        key = s3.signing_key(secret, amz_date[:8], region, service)
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode("latin-1")).hexdigest()])
        signature = hmac_hex(key, to_sign)
        put("authorization", "".join([m.group(1), "%s/%s" % (access, scope), m.group(3), m.group(4), m.group(5),
                                      m.group(6), m.group(7), signature]))

        # The body: fresh chunk and trailer signatures chained from the new seed signature.
        sign_chunk = sign_trailer = None
        if content_sha256.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"):
            previous = [signature]

            def sign_chunk(data):
                previous[0] = hmac_hex(key, "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous[0],
                                                       EMPTY_SHA256, hashlib.sha256(data).hexdigest()]))
                return previous[0]

            def sign_trailer(canonical_trailer):
                return hmac_hex(key, "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous[0],
                                                hashlib.sha256(canonical_trailer).hexdigest()]))
        stream = payload
        if framing.aws_chunks is not None:
            # Chunks first (they advance the chain), then the trailer, signed after the last chunk.
            stream = aws_stream(framing, payload, trailer=b"", sign_chunk=sign_chunk)
            stream += rewrite_trailer(framing.aws_trailer, payload, known, sign_trailer)
        body = http_frame(framing, stream)
        head = "%s %s %s\r\n" % (cap.method, target, cap.version)
        head += "".join("%s:%s%s\r\n" % tuple(h) for h in headers) + "\r\n"
        return head.encode("latin-1"), body, payload

    def check_faithful(self, cap):
        """Rebuilds the captured body with its captured signatures: must be the captured bytes."""
        if cap.op in ("CompleteMultipartUpload", "PutObjectAcl"):
            return True, "rewritten on purpose"
        framing, payload, same = framing_and_payload(cap)
        wire = frame(framing, payload)
        if not cap.truncated:
            return wire == cap.body, "rebuilt body differs from the captured one"
        if not same:
            return False, "payload not regenerated (no MD5 match)"
        ok = (hashlib.sha256(wire).hexdigest() == cap.meta["body_wire_sha256"] and len(wire) == cap.meta["body_wire_length"]
              and wire.startswith(cap.body) and wire.endswith(cap.last2k))
        return ok, "rebuilt truncated body differs from the capture's digest"

    # -- sending
    def _connection(self, name):
        if name not in self.connections:
            sock = harness.connect(self.port, timeout_s=60)
            self.connections[name] = (sock, harness.Reader(sock))
        return self.connections[name]

    def _drop(self, name):
        sock, _ = self.connections.pop(name, (None, None))
        if sock is not None:
            sock.close()

    def replay(self, cap, **build):
        """Sends one capture (on the connection the client used for it) and records the answer."""
        rec = Record(cap)
        rec.faithful = self.check_faithful(cap)
        conn = cap.meta.get("connection", "single")
        head, body, payload = self.build(cap, **build)
        rec.head, rec.sent = head, payload
        is_head = cap.method == "HEAD"
        try:
            sock, reader = self._connection(conn)
            expect = (cap.header("expect") or "").lower() == "100-continue"
            if expect:
                sock.sendall(head)
                sock.settimeout(5)
                try:
                    first = reader.read_response(head_request=is_head)
                except socket.timeout:
                    first = None  # clients send the body anyway after a while
                sock.settimeout(60)
                rec.got_100 = first is not None and first.status == 100
                if first is None or first.status == 100:
                    sock.sendall(body)
                    resp = reader.read_response(head_request=is_head)
                else:
                    rec.body_sent, resp = False, first
            else:
                sock.sendall(head + body)
                resp = reader.read_response(head_request=is_head)
            rec.status, rec.headers, rec.body = resp.status, resp.headers, resp.body
            if is_head and resp.status >= 300:
                sock.settimeout(0.1)
                try:
                    rec.after_head = reader.buf + sock.recv(65536)
                except (socket.timeout, OSError):
                    rec.after_head = reader.buf
                sock.settimeout(60)
            closing = ("close" in (resp.header("connection") or "").lower()
                       or "close" in (cap.header("connection") or "").lower() or not rec.body_sent)
            if closing:
                self._drop(conn)
        except (OSError, ConnectionError, AssertionError, ValueError) as e:
            rec.error = repr(e)
            self._drop(conn)
        self.learn(rec)
        self.records.append(rec)
        return rec

    # -- what later requests (and the final checks) need
    def learn(self, rec):
        cap, ok = rec.cap, rec.status is not None and 200 <= rec.status < 300
        if not ok:
            return
        if cap.op == "CreateMultipartUpload":
            ours = xml_text(rec.body, "UploadId")
            self.upload_ids[xml_text(cap.meta["response"]["body"], "UploadId")] = ours
            self.parts[ours] = {}
        elif cap.op == "UploadPart" and self._upload_in_flight in self.parts:
            number = int(urllib.parse.parse_qs(cap.raw_query)["partNumber"][0])
            self.parts[self._upload_in_flight][number] = {
                "etag": (rec.header("etag") or "").strip('"'), "payload": rec.sent,
                "checksums": {k[15:]: v for k, v in rec.checksum_headers().items() if k[15:] in ALGOS}}
        elif cap.op == "CompleteMultipartUpload" and self._upload_in_flight in self.parts:
            parts = self.parts.pop(self._upload_in_flight)
            numbers = [int(n) for n in xml_texts(rec.sent, "PartNumber")]
            md5 = hashlib.md5()
            for n in numbers:
                md5.update(parts[n]["payload"])
            self.objects[cap.key] = md5.hexdigest()
        elif cap.op == "PutObject":
            self.objects[cap.key] = hashlib.md5(rec.sent).hexdigest()
        elif cap.op == "CopyObject":
            source = urllib.parse.unquote(cap.header("x-amz-copy-source")).lstrip("/").split("/", 1)[1]
            self.objects[cap.key] = self.objects[source]
        elif cap.op == "DeleteObjects":
            for key in xml_texts(rec.sent, "Key"):
                self.objects.pop(key, None)
                self.deleted.add(key)
        elif cap.op == "DeleteObject":
            self.objects.pop(cap.key, None)
            self.deleted.add(cap.key)
        elif cap.op == "GetObjectAcl":
            self.owner_id = xml_text(rec.body, "ID")


def signed(port, method, key, headers=None, body=b""):
    """A request of our own (not a capture), signed with the captures' key pair."""
    req = s3.SignedRequest(method, "/%s/%s" % (BUCKET, key) if key is not None else "/" + BUCKET,
                           headers=headers, body=body, access=ACCESS, secret=SECRET, port=port)
    with harness.connect(port, 60) as sock:
        sock.sendall(req.wire())
        return harness.Reader(sock).read_response(head_request=(method == "HEAD"))


def sent_header(rec, name):
    """The value of a header as replayed (rec.head)."""
    for line in rec.head.decode("latin-1").split("\r\n")[1:]:
        n, _, v = line.partition(":")
        if n.lower() == name:
            return v.strip()
    return None


def seed_bucket(port):
    r = signed(port, "PUT", None)
    assert r.status == 200, r
    for key, data in SEED.items():
        r = signed(port, "PUT", key, headers={"Content-Type": "text/plain"}, body=data)
        assert r.status == 200, r


class Run:
    """One (scheme, client) capture sequence replayed on a fresh server, then checked."""

    def __init__(self, scheme, client):
        self.scheme, self.client = scheme, client
        self.records, self.gets, self.heads, self.gone = [], {}, {}, {}
        self.objects = {}
        caps = load_captures(scheme, client)
        if not caps:
            return
        with s3.hots3_server(WIRE_USER) as server:
            seed_bucket(server.port)
            replayer = Replayer(server.port)
            try:
                for cap in caps:
                    replayer.replay(cap)
            finally:
                replayer.close()
            self.records, self.objects = replayer.records, replayer.objects
            # Every object the bucket should hold: GET and HEAD it, with checksum-mode.
            for key in self.objects:
                r = signed(server.port, "GET", key, headers={"x-amz-checksum-mode": "ENABLED"})
                self.gets[key] = (r.status, hashlib.md5(r.body).hexdigest(), r.headers)
                self.heads[key] = signed(server.port, "HEAD", key, headers={"x-amz-checksum-mode": "ENABLED"})
            for key in replayer.deleted:
                self.gone[key] = signed(server.port, "HEAD", key).status

    def rec(self, name):
        for r in self.records:
            if r.cap.name == name:
                return r
        raise KeyError("%s/%s has no %s" % (self.scheme, self.client, name))

    def of(self, op):
        return [r for r in self.records if r.cap.op == op]


class WireReplayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {(scheme, client): Run(scheme, client) for scheme in SCHEMES for client in CLIENTS}

    # -- helpers
    def recs(self, client, name, schemes=SCHEMES):
        """The record of capture `name` of `client`, for each scheme that has it."""
        out = []
        for scheme in schemes:
            try:
                out.append(self.runs[(scheme, client)].rec(name))
            except KeyError:
                pass
        self.assertTrue(out, "%s/%s missing from the captures" % (client, name))
        return out

    def all_records(self):
        return [r for run in self.runs.values() for r in run.records]

    def assertAnswer(self, rec, status):
        self.assertIsNone(rec.error, rec)
        self.assertEqual(rec.status, status, rec)

    def assertXmlError(self, rec, status, code):
        self.assertAnswer(rec, status)
        self.assertEqual(error_code(rec.body), code, rec)

    # ---- the engine itself, and every request ------------------------------------------------

    def test_00_replay_rebuilds_the_captured_bytes(self):
        # The replay engine: every body (regenerated when truncated) rebuilt in the capture's
        # framing, with its captured signatures, is the captured body byte for byte.
        recs = self.all_records()
        self.assertGreater(len(recs), 300)
        for rec in recs:
            ok, why = rec.faithful
            self.assertTrue(ok, "%r: %s" % (rec.cap, why))
            if rec.cap.op in ("PutObject", "UploadPart"):
                self.assertEqual(hashlib.md5(rec.sent).hexdigest(), rec.cap.meta["payload_digests"]["md5_hex"], rec.cap)
            # The head as captured: request line (but the upload id), header names, order and
            # case, values (but what is re-made), the Authorization's separators and SignedHeaders.
            lines = rec.head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            self.assertEqual((method, version), (rec.cap.method, rec.cap.version))
            self.assertEqual(re.sub(r"uploadId=[^&]*", "", target), re.sub(r"uploadId=[^&]*", "", rec.cap.target))
            sent = [tuple(re.match(r"([^:]*):(\s*)(.*)", l).groups()) for l in lines[1:] if l]
            self.assertEqual([(n, sep) for n, sep, _ in sent], [(n, sep) for n, sep, _ in rec.cap.headers], rec.cap)
            remade = {"host", "x-amz-date", "authorization"}
            if rec.cap.op in ("CompleteMultipartUpload", "PutObjectAcl"):
                remade |= {"content-length", "x-amz-content-sha256", "x-amz-checksum-crc32c"}
            for (name, _, value), (_, _, captured) in zip(sent, rec.cap.headers):
                if name.lower() not in remade:
                    self.assertEqual(value, captured, (rec.cap, name))
            ours, theirs = AUTH_RE.match(sent_header(rec, "authorization")), AUTH_RE.match(rec.cap.header("authorization"))
            self.assertEqual(ours.group(1, 3, 4, 5, 6, 7), theirs.group(1, 3, 4, 5, 6, 7), rec.cap)
            self.assertEqual(ours.group(2).split("/")[0::2], theirs.group(2).split("/")[0::2], rec.cap)

    def test_01_every_request_answers_as_s3_does(self):
        # All captures of all clients (http and https runs): the status S3 (and the capture
        # server, which answers like S3 for all of them) gives; an error has an S3 XML error
        # body, except for HEAD, which has none; PutObject/UploadPart ETags are the MD5s.
        failures = []
        for rec in self.all_records():
            expected = rec.cap.meta["response"]["status"]
            if rec.error or rec.status != expected:
                failures.append("%r: expected %d" % (rec, expected))
                continue
            if rec.status >= 300:
                if rec.cap.method == "HEAD":
                    if rec.after_head:
                        failures.append("%r: HEAD error with a body %r" % (rec, rec.after_head[:80]))
                elif error_code(rec.body) is None:
                    failures.append("%r: error without an S3 XML error body" % rec)
            if rec.cap.op in ("PutObject", "UploadPart"):
                if rec.header("etag") != rec.cap.meta["response"]["headers"].get("ETag"):
                    failures.append("%r: ETag %s, capture %s" % (rec, rec.header("etag"), rec.cap.meta["response"]["headers"].get("ETag")))
        self.assertEqual(failures, [], "\n" + "\n".join(failures))

    def test_02_objects_hold_what_was_uploaded(self):
        # After each run: GET of every object the bucket should hold gives the bytes uploaded
        # (MD5 of the captured or regenerated payload, of the parts for multipart, of the
        # source for copies); deleted keys are gone.
        for (scheme, client), run in self.runs.items():
            for key, md5 in run.objects.items():
                status, got, _ = run.gets[key]
                self.assertEqual((status, got), (200, md5), "%s/%s %s" % (scheme, client, key))
            for key, status in run.gone.items():
                self.assertEqual(status, 404, "%s/%s %s" % (scheme, client, key))

    # ---- checklist point 8 ---------------------------------------------------------------------

    def test_point08_expect_100_continue(self):
        # Point 8: Expect: 100-continue. From the replays: awscli/boto3 on every PutObject and
        # UploadPart (001-007 etc.), js-v3 UploadParts with Connection: close (006, 007, 010,
        # 011), rclone's "100-Continue" (015, 016), boto3 1.43 over https with Transfer-Encoding:
        # chunked (https/boto3-1.43/001-007): "100 Continue" came before the body, then 200.
        expecting = [r for r in self.all_records() if r.cap.header("expect") is not None]
        for rec in expecting:
            self.assertTrue(rec.got_100, "no 100 Continue before the body: %r" % rec)
            self.assertAnswer(rec, 200)
        spellings = {r.cap.header("expect") for r in expecting}
        self.assertEqual(spellings, {"100-continue", "100-Continue"})
        self.assertTrue(any(r.cap.http_chunked for r in expecting))
        self.assertTrue(any((r.cap.header("connection") or "").lower() == "close" for r in expecting))
        # An unacceptable request gets its final answer before the body, and no 100: a wrong
        # signature (awscli 001, js-v3 006 with Connection: close, boto3 1.43 https 001 chunked)
        # and an unknown upload id (rclone 015). The connection is then closed cleanly or usable.
        with s3.hots3_server(WIRE_USER) as server:
            seed_bucket(server.port)
            replayer = Replayer(server.port)
            for (scheme, client, name), secret, status, code in (
                    (("http", "awscli", "001-PutObject"), "wrong-secret", 403, "SignatureDoesNotMatch"),
                    (("http", "js-v3", "006-UploadPart"), "wrong-secret", 403, "SignatureDoesNotMatch"),
                    (("https", "boto3-1.43", "001-PutObject"), "wrong-secret", 403, "SignatureDoesNotMatch"),
                    (("http", "rclone", "015-UploadPart"), SECRET, 404, "NoSuchUpload")):
                cap = load_capture(scheme, client, name)
                head, _, _ = replayer.build(cap, secret=secret)
                with harness.connect(server.port, 10) as sock:
                    reader = harness.Reader(sock)
                    sock.sendall(head)  # and no body
                    resp = reader.read_response()
                    self.assertEqual((resp.status, error_code(resp.body)), (status, code), cap)
                    if "close" in (resp.header("connection") or "").lower():
                        self.assertTrue(reader.closed(5.0), cap)
                        self.assertEqual(reader.buf, b"", cap)
                    else:
                        probe = s3.SignedRequest("GET", "/%s/src/hello.txt" % BUCKET, access=ACCESS, secret=SECRET, port=server.port)
                        sock.sendall(probe.wire())
                        self.assertEqual(reader.read_response().status, 200, cap)
                self.assertEqual(signed(server.port, "HEAD", cap.key).status, 404, cap)
            # And the same request, acceptable, is answered 100 Continue, then 200.
            rec = replayer.replay(load_capture("http", "awscli", "001-PutObject"))
            self.assertTrue(rec.got_100, rec)
            self.assertAnswer(rec, 200)
            replayer.close()

    # ---- checklist point 17 --------------------------------------------------------------------

    def test_point17_multipart_checksums(self):
        # Point 17: x-amz-checksum-algorithm on CreateMultipartUpload (js-v3 005/009 and boto3-1.43
        # 005: CRC32; minio-go 004/012/016: CRC32C), UploadPart echoes x-amz-checksum-<algo>,
        # Complete (js-v3 008/012, boto3-1.43 008, minio-go 006/015/019) carries the server's
        # per-part values and, from minio-go, the composite header; GET/HEAD with
        # x-amz-checksum-mode: ENABLED return the composite checksum "<b64>-N".
        cases = {"js-v3": "crc32", "boto3-1.43": "crc32", "minio-go": "crc32c"}
        seen = 0
        for (scheme, client), run in self.runs.items():
            if client not in cases:
                continue
            algo = cases[client]
            creates = [r for r in run.of("CreateMultipartUpload") if r.cap.header("x-amz-checksum-algorithm")]
            self.assertTrue(creates, (scheme, client))
            for create in creates:
                self.assertAnswer(create, 200)
                self.assertEqual(create.cap.header("x-amz-checksum-algorithm").lower(), algo)
                self.assertEqual(create.header("x-amz-checksum-algorithm"), algo.upper(), create)
                upload = xml_text(create.cap.meta["response"]["body"], "UploadId")
                mine = [r for r in run.records if upload in r.cap.target and r.cap.op != "CreateMultipartUpload"]
                parts = [r for r in mine if r.cap.op == "UploadPart"]
                complete = [r for r in mine if r.cap.op == "CompleteMultipartUpload"][0]
                raw = b""
                for part in parts:
                    self.assertAnswer(part, 200)
                    value = part.header("x-amz-checksum-" + algo)
                    self.assertEqual(value, checksum(algo, part.sent, part.cap.meta["payload_digests"]), part)
                    raw += base64.b64decode(value)
                self.assertAnswer(complete, 200)
                sent = complete.sent
                self.assertEqual(xml_texts(sent, "Checksum" + XML_NAME[algo]),
                                 [p.header("x-amz-checksum-" + algo) for p in parts], complete)
                composite = "%s-%d" % (b64(ALGOS[algo](raw)), len(parts))
                if complete.cap.header("x-amz-checksum-" + algo) is not None:  # minio-go: no -N
                    self.assertEqual(sent_header(complete, "x-amz-checksum-" + algo) + "-%d" % len(parts), composite)
                self.assertEqual(xml_text(complete.body, "Checksum" + XML_NAME[algo]), composite, complete)
                status, _, headers = run.gets[complete.cap.key]
                got = {k.lower(): v for k, v in headers}
                self.assertEqual((status, got.get("x-amz-checksum-" + algo)), (200, composite), complete.cap)
                head = run.heads[complete.cap.key]
                self.assertEqual((head.status, head.header("x-amz-checksum-" + algo)), (200, composite), complete.cap)
                self.assertEqual(head.header("x-amz-checksum-type"), "COMPOSITE", complete.cap)
                seen += 1
        self.assertEqual(seen, 2 * (2 + 1 + 3))  # per scheme: js-v3 2, boto3-1.43 1, minio-go 3
        # The server uses what it echoed: on an upload created with a checksum algorithm, S3
        # refuses a Complete without the per-part checksums (400 InvalidRequest "...must include
        # the checksum for each part"), with per-part checksums that are not the parts'
        # (400 InvalidPart), and with a composite header that is not the parts' (400 BadDigest).
        # boto3-1.43 005-008 and minio-go 012-015, each on a fresh upload.
        def without_part_checksums(xml):
            return re.sub(r"<ChecksumCRC32>[^<]*</ChecksumCRC32>", "", xml)

        def swapped_part_checksums(xml):  # well-formed values, each the other part's
            first, second = re.findall(r"<ChecksumCRC32>([^<]*)</ChecksumCRC32>", xml)
            return xml.replace(first, "@").replace(second, first).replace("@", second)

        cases = (("boto3-1.43", 4, 8, {"xml_edit": without_part_checksums}, "InvalidRequest"),
                 ("boto3-1.43", 4, 8, {"xml_edit": swapped_part_checksums}, "InvalidPart"),
                 ("minio-go", 11, 15, {"override": {"x-amz-checksum-crc32c": "AAAAAA=="}}, "BadDigest"),
                 ("boto3-1.43", 4, 8, {}, None),
                 ("minio-go", 11, 15, {}, None))
        with s3.hots3_server(WIRE_USER) as server:
            seed_bucket(server.port)
            replayer = Replayer(server.port)
            for client, first, complete, edit, code in cases:
                caps = load_captures("http", client)
                with self.subTest(client=client, expected=code):
                    for cap in caps[first:complete - 1]:
                        self.assertAnswer(replayer.replay(cap), 200)
                    rec = replayer.replay(caps[complete - 1], **edit)
                    if code is None:
                        self.assertAnswer(rec, 200)
                    else:
                        self.assertXmlError(rec, 400, code)
            replayer.close()

    # ---- checklist point 18 --------------------------------------------------------------------

    def test_point18_complete_xml_forms(self):
        # Point 18: every client's CompleteMultipartUpload XML form is accepted: namespaced or not
        # (s3cmd 006), ETag as &quot;..&quot; (js-v3 008/012), &#34;..&#34; (rclone 017), raw
        # "..." (awscli 008, boto3 008), unquoted (minio-js 008, minio-go 010, s3cmd 006), with
        # PartNumber before or after ETag. The multipart ETag is MD5(part MD5s)-N, as S3's.
        forms = set()
        for rec in self.all_records():
            if rec.cap.op != "CompleteMultipartUpload":
                continue
            self.assertAnswer(rec, 200)
            sent = rec.sent.decode()
            etag = re.search(r"<ETag>(&quot;|&#34;|\"|)[0-9a-f]", sent).group(1)
            forms.add({"&quot;": "&quot;", "&#34;": "&#34;", '"': "raw quote", "": "unquoted"}[etag])
            forms.add("namespace" if "xmlns=" in sent else "no namespace")
            forms.add("PartNumber first" if sent.index("<PartNumber>") < sent.index("<ETag>") else "ETag first")
            run = self.runs[(rec.cap.scheme, rec.cap.client)]
            parts = [r for r in run.of("UploadPart") if r.cap.raw_query.split("uploadId=")[1].split("&")[0]
                     == rec.cap.raw_query.split("uploadId=")[1].split("&")[0]]
            md5s = b"".join(hashlib.md5(p.sent).digest() for p in parts)
            self.assertEqual(rec.header("content-type"), "application/xml")
            self.assertEqual(xml_text(rec.body, "ETag"), '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(parts)), rec)
            self.assertEqual(xml_text(rec.body, "ETag"), xml_text(rec.cap.meta["response"]["body"], "ETag"), rec)
            self.assertEqual(run.gets[rec.cap.key][:2], (200, run.objects[rec.cap.key]), rec.cap)
        self.assertEqual(forms, {"&quot;", "&#34;", "raw quote", "unquoted", "namespace", "no namespace",
                                 "PartNumber first", "ETag first"})

    # ---- checklist point 19 --------------------------------------------------------------------

    def test_point19_part_numbers_2_and_3(self):
        # Point 19: minio-js uploads parts 2 and 3 (006, 007) and completes with 2 and 3 (008).
        for run in (self.runs[(s, "minio-js")] for s in SCHEMES):
            parts = run.of("UploadPart")
            self.assertEqual([urllib.parse.parse_qs(p.cap.raw_query)["partNumber"][0] for p in parts], ["2", "3"])
            for part in parts:
                self.assertAnswer(part, 200)
                self.assertEqual(part.header("etag"), '"%s"' % hashlib.md5(part.sent).hexdigest())
            complete = run.rec("008-CompleteMultipartUpload")
            self.assertEqual(xml_texts(complete.sent, "PartNumber"), ["2", "3"])
            self.assertAnswer(complete, 200)
            self.assertTrue(xml_text(complete.body, "ETag").endswith('-2"'), complete)
            self.assertEqual(run.gets["minio-js/10m.bin"][:2], (200, hashlib.md5(dataset(b"10m", 10 * MiB)).hexdigest()))

    # ---- checklist point 20 --------------------------------------------------------------------

    def test_point20_list_multipart_uploads_as_minio_js_sends_it(self):
        # Point 20: minio-js 004 `GET /wire-test?uploads&delimiter=&max-uploads=1000&prefix=...`
        # before its multipart upload: an empty ListMultipartUploadsResult, as the capture's;
        # sent again after its CreateMultipartUpload (005), it lists that upload.
        for rec in self.recs("minio-js", "004-ListMultipartUploads"):
            self.assertEqual(rec.cap.raw_query, "uploads&delimiter=&max-uploads=1000&prefix=minio-js%2F10m.bin")
            self.assertAnswer(rec, 200)
            self.assertEqual(local(xml_root(rec.body).tag), "ListMultipartUploadsResult")
            self.assertEqual(xml_text(rec.body, "MaxUploads"), "1000")
            self.assertEqual(xml_text(rec.body, "IsTruncated"), "false")
            self.assertEqual(xml_texts(rec.body, "Upload"), [])
        with s3.hots3_server(WIRE_USER) as server:
            seed_bucket(server.port)
            replayer = Replayer(server.port)
            for cap in load_captures("http", "minio-js")[:5]:
                replayer.replay(cap)
            rec = replayer.replay(load_capture("http", "minio-js", "004-ListMultipartUploads"))
            replayer.close()
            self.assertAnswer(rec, 200)
            self.assertEqual(xml_texts(rec.body, "Key"), ["minio-js/10m.bin"])
            self.assertEqual(xml_texts(rec.body, "UploadId"), list(replayer.upload_ids.values()))
            self.assertEqual(xml_text(rec.body, "Prefix"), "minio-js/10m.bin")

    # ---- checklist point 21 --------------------------------------------------------------------

    def test_point21_listings(self):
        # Point 21: ListObjects v1 (s3cmd 013/014, rclone 020/024/026) and v2 (awscli 013/014,
        # boto3 012, js-v3 016, minio-js 011, minio-go 022, rclone 025), with their exact query
        # strings: the same keys and common prefixes the capture server listed; encoding-type=url
        # echoed as <EncodingType>url</EncodingType>; fetch-owner=true gives Owners; max-keys=1000.
        queries = set()
        for rec in self.all_records():
            if rec.cap.op not in ("ListObjects", "ListObjectsV2"):
                continue
            self.assertAnswer(rec, 200)
            queries.add(rec.cap.raw_query)
            q = urllib.parse.parse_qs(rec.cap.raw_query, keep_blank_values=True)
            url = q.get("encoding-type") == ["url"]
            root = xml_root(rec.body)
            self.assertEqual(local(root.tag), "ListBucketResult", rec)
            names = {local(e.tag) for e in root}
            if rec.cap.op == "ListObjects":
                self.assertIn("Marker", names, rec)
                self.assertNotIn("KeyCount", names, rec)
            else:
                self.assertIn("KeyCount", names, rec)
            self.assertEqual(xml_text(rec.body, "EncodingType"), "url" if url else None, rec)
            decode = urllib.parse.unquote_plus if url else (lambda s: s)

            def listed(body):
                r = xml_root(body)
                keys = [decode(e.text) for c in r if local(c.tag) == "Contents" for e in c if local(e.tag) == "Key"]
                prefixes = [decode(e.text) for c in r if local(c.tag) == "CommonPrefixes" for e in c]
                return keys, prefixes
            self.assertEqual(listed(rec.body), listed(rec.cap.meta["response"]["body"].encode()), rec)
            contents = [c for c in root if local(c.tag) == "Contents"]
            if q.get("fetch-owner") == ["true"]:
                self.assertTrue(contents)
                self.assertTrue(all(any(local(e.tag) == "Owner" for e in c) for c in contents), rec)
            if "max-keys" in q:
                self.assertEqual(xml_text(rec.body, "MaxKeys"), q["max-keys"][0])
        for q in ("delimiter=%2F&prefix=list%2F", "prefix=del%2F", "delimiter=%2F&max-keys=1000&prefix=list%2F",
                  "delimiter=&max-keys=1000&prefix=del%2F", "list-type=2&delimiter=%2F&prefix=list%2F&encoding-type=url",
                  "delimiter=%2F&list-type=2&prefix=list%2F",
                  "delimiter=%2F&encoding-type=url&list-type=2&max-keys=1000&prefix=list%2F",
                  "delimiter=%2F&encoding-type=url&fetch-owner=true&list-type=2&prefix=list%2F",
                  "delimiter=%2F&list-type=2&max-keys=1000&prefix=list%2F"):
            self.assertIn(q, queries)

    # ---- checklist point 22 --------------------------------------------------------------------

    def test_point22_delete_objects(self):
        # Point 22: DeleteObjects namespaced (awscli 015, boto3 013, js-v3 017/023) or not
        # (minio-js 012 with <Quiet>true</Quiet>, minio-go 023 with <Quiet>false</Quiet>, s3cmd
        # 015); with Content-MD5, or only x-amz-checksum-crc32 (js-v3, boto3-1.43). The result
        # lists what the capture server's did (nothing when quiet); the keys are gone. And the
        # crc32 is checked: js-v3 017 with a wrong x-amz-checksum-crc32 deletes nothing.
        forms = set()
        for rec in self.all_records():
            if rec.cap.op != "DeleteObjects":
                continue
            self.assertAnswer(rec, 200)
            sent = rec.sent.decode()
            forms.add("namespace" if "xmlns=" in sent else "no namespace")
            forms.add("md5" if rec.cap.header("content-md5") else "crc32 only" if rec.cap.header("x-amz-checksum-crc32") else "?")
            quiet = xml_text(sent, "Quiet")
            forms.add("Quiet " + str(quiet))
            self.assertEqual(local(xml_root(rec.body).tag), "DeleteResult")
            self.assertEqual(xml_texts(rec.body, "Error"), [], rec)
            self.assertEqual(sorted(xml_texts(rec.body, "Key")), sorted(xml_texts(rec.cap.meta["response"]["body"], "Key")), rec)
            if quiet == "true":
                self.assertEqual(xml_texts(rec.body, "Deleted"), [])
            run = self.runs[(rec.cap.scheme, rec.cap.client)]
            for key in xml_texts(sent, "Key"):
                self.assertEqual(run.gone.get(key), 404, (rec.cap, key))
        self.assertEqual(forms, {"namespace", "no namespace", "md5", "crc32 only", "Quiet None", "Quiet true", "Quiet false"})
        with s3.hots3_server(WIRE_USER) as server:
            seed_bucket(server.port)
            replayer = Replayer(server.port)
            rec = replayer.replay(load_capture("http", "js-v3", "017-DeleteObjects"), override={"x-amz-checksum-crc32": "AAAAAA=="})
            self.assertXmlError(rec, 400, "BadDigest")
            self.assertEqual(signed(server.port, "HEAD", "del/one.txt").status, 200)
            rec = replayer.replay(load_capture("http", "js-v3", "017-DeleteObjects"))
            self.assertAnswer(rec, 200)
            self.assertEqual(signed(server.port, "HEAD", "del/one.txt").status, 404)
            replayer.close()

    # ---- checklist point 23 --------------------------------------------------------------------

    def test_point23_copy_object(self):
        # Point 23: x-amz-copy-source as bucket/key (awscli 016/018, boto3 014, js-v3 018, minio-go
        # 024, rclone 033) or /bucket/key (minio-js 013, s3cmd 018); rclone's
        # x-amz-metadata-directive: COPY and x-amz-acl: private; the HEAD on the source before
        # (awscli 017, rclone 029/030). A CopyObjectResult with the source's ETag; same bytes.
        source_etag = '"%s"' % hashlib.md5(SEED["src/hello.txt"]).hexdigest()
        sources = set()
        for rec in self.all_records():
            if rec.cap.op != "CopyObject":
                continue
            sources.add(rec.cap.header("x-amz-copy-source"))
            self.assertAnswer(rec, 200)
            self.assertEqual(local(xml_root(rec.body).tag), "CopyObjectResult", rec)
            self.assertEqual(xml_text(rec.body, "ETag"), source_etag, rec)
            run = self.runs[(rec.cap.scheme, rec.cap.client)]
            self.assertEqual(run.gets[rec.cap.key][:2], (200, hashlib.md5(SEED["src/hello.txt"]).hexdigest()), rec.cap)
        self.assertEqual(sources, {"wire-test/src/hello.txt", "/wire-test/src/hello.txt"})
        for rec in self.recs("rclone", "033-CopyObject"):
            self.assertEqual((rec.cap.header("x-amz-metadata-directive"), rec.cap.header("x-amz-acl")), ("COPY", "private"))
        for client, name in (("awscli", "017-HeadObject"), ("rclone", "029-HeadObject"), ("rclone", "030-HeadObject")):
            for rec in self.recs(client, name):
                self.assertAnswer(rec, 200)
                self.assertEqual(rec.header("etag"), source_etag)

    # ---- checklist point 24 --------------------------------------------------------------------

    def test_point24_ranges(self):
        # Point 24: Range: bytes=6-10 (awscli/boto3 009, js-v3 013, minio-js 009, minio-go 020,
        # rclone 021 with a signed accept-encoding: gzip) and bytes=6- (s3cmd 008): 206 "world".
        # With x-amz-checksum-mode: ENABLED (js-v3 013, boto3-1.43 009) a range carries no
        # full-object checksum; the full GETs (js-v3 014, boto3-1.43 010) do.
        ranged = [r for r in self.all_records() if r.cap.op == "GetObject" and r.cap.header("range")]
        self.assertEqual({r.cap.header("range") for r in ranged}, {"bytes=6-10", "bytes=6-"})
        for rec in ranged:
            self.assertAnswer(rec, 206)
            self.assertEqual(rec.body, b"world", rec)
            self.assertEqual(rec.header("content-range"), "bytes 6-10/11", rec)
            if rec.cap.header("x-amz-checksum-mode") == "ENABLED":
                self.assertEqual(rec.checksum_headers(), {}, rec)
        for client, name in (("js-v3", "013-GetObject"), ("boto3-1.43", "009-GetObject")):
            for rec in self.recs(client, name):
                self.assertEqual(rec.cap.header("x-amz-checksum-mode"), "ENABLED")
        for client, name in (("js-v3", "014-GetObject"), ("boto3-1.43", "010-GetObject")):
            for rec in self.recs(client, name):
                self.assertAnswer(rec, 200)
                self.assertEqual(rec.body, b"hello world")
                self.assertEqual(rec.header("x-amz-checksum-crc32"), "DUoRhQ==", rec)

    # ---- checklist point 25 --------------------------------------------------------------------

    def test_point25_extra_calls(self):
        # Point 25: rclone's CreateBucket (x-amz-acl: private) before every upload (002, 006,
        # 009, 013, 032, 039) on the caller's own existing bucket: 200, as S3 in us-east-1.
        for rec in (r for s in SCHEMES for r in self.runs[(s, "rclone")].of("CreateBucket")):
            self.assertEqual(rec.cap.header("x-amz-acl"), "private")
            self.assertAnswer(rec, 200)
        # rclone's HEADs of missing keys (001, 005, 012, 031, 038): 404 with no body, and the
        # kept-alive connection goes on (the next request on it was answered).
        for rec in (r for s in SCHEMES for r in self.runs[(s, "rclone")].of("HeadObject") if r.cap.meta["response"]["status"] == 404):
            self.assertAnswer(rec, 404)
            self.assertEqual(rec.after_head, b"", rec)
        # minio-go's GetBucketLocation `?location=` (001, 011): the empty us-east-1 constraint.
        for name in ("001-GetBucketLocation", "011-GetBucketLocation"):
            for rec in self.recs("minio-go", name):
                self.assertEqual(rec.cap.raw_query, "location=")
                self.assertAnswer(rec, 200)
                self.assertEqual(local(xml_root(rec.body).tag), "LocationConstraint")
                self.assertIn(xml_root(rec.body).text, (None, ""))
        # s3cmd info (009 HEAD, 010 ?policy, 011 ?cors, 012 ?acl): S3's answers for a bucket
        # with no policy and no CORS configuration, and the owner's full-control ACL; s3cmd cp's
        # GetObjectAcl (016) and PutObjectAcl (019) of that same ACL.
        for rec in self.recs("s3cmd", "009-HeadObject"):
            self.assertAnswer(rec, 200)
        for rec in self.recs("s3cmd", "010-GetBucketPolicy"):
            self.assertXmlError(rec, 404, "NoSuchBucketPolicy")
        for rec in self.recs("s3cmd", "011-GetBucketCors"):
            self.assertXmlError(rec, 404, "NoSuchCORSConfiguration")
        for name in ("012-GetObjectAcl", "016-GetObjectAcl"):
            for rec in self.recs("s3cmd", name):
                self.assertAnswer(rec, 200)
                self.assertEqual(local(xml_root(rec.body).tag), "AccessControlPolicy")
                self.assertEqual(xml_texts(rec.body, "Permission"), ["FULL_CONTROL"])
        for rec in self.recs("s3cmd", "019-PutObjectAcl"):
            self.assertIn(b"<ID>%s</ID>" % xml_text(self.runs[(rec.cap.scheme, "s3cmd")].rec("016-GetObjectAcl").body, "ID").encode(), rec.sent)
            self.assertAnswer(rec, 200)
        # awscli s3 cp download: HEAD (010) then GET (011).
        for head, get in zip(self.recs("awscli", "010-HeadObject"), self.recs("awscli", "011-GetObject")):
            self.assertAnswer(head, 200)
            self.assertAnswer(get, 200)
            self.assertEqual((head.header("content-length"), head.header("etag")), ("11", get.header("etag")))
            self.assertEqual(get.body, b"hello world")

    # ---- checklist point 26 --------------------------------------------------------------------

    def test_point26_user_metadata(self):
        # Point 26: rclone's X-Amz-Meta-Mtime (003, 007, 010, 040) and, on CreateMultipartUpload
        # (014), X-Amz-Meta-Md5chksum; s3cmd's x-amz-meta-s3cmd-attrs and x-amz-storage-class:
        # STANDARD (001, 002, 003, 021). Accepted, and returned as sent on HEAD and GET.
        checked = 0
        for (scheme, client), run in self.runs.items():
            for rec in run.records:
                if rec.cap.op not in ("PutObject", "CreateMultipartUpload"):
                    continue
                meta = {n.lower(): v for n, _, v in rec.cap.headers if n.lower().startswith("x-amz-meta-")}
                if not meta:
                    continue
                self.assertAnswer(rec, 200)
                head = run.heads[rec.cap.key]
                _, _, get_headers = run.gets[rec.cap.key]
                got = {k.lower(): v for k, v in get_headers}
                for name, value in meta.items():
                    self.assertEqual(head.header(name), value, (rec.cap, name))
                    self.assertEqual(got.get(name), value, (rec.cap, name))
                checked += 1
        self.assertGreaterEqual(checked, 2 * (5 + 4))
        for rec in self.recs("rclone", "014-CreateMultipartUpload"):
            self.assertIsNotNone(rec.cap.header("x-amz-meta-md5chksum"))
        for rec in self.recs("rclone", "004-HeadObject"):
            self.assertEqual(rec.header("x-amz-meta-mtime"), rec.cap.meta["response"]["headers"]["x-amz-meta-mtime"])
        for rec in self.recs("s3cmd", "001-PutObject"):
            self.assertEqual(rec.cap.header("x-amz-storage-class"), "STANDARD")
            self.assertAnswer(rec, 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
