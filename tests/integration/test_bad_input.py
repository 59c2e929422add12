"""Bad input against a real hots3: clients that disconnect mid-PUT (Content-Length and chunked,
single and multipart), bodies shorter or longer than declared, bad chunk signatures, bad
trailer checksums, a wrong Content-MD5, malformed XML and hostile keys. Each gets the S3 error
(where the client is still there to read it) and leaves no object behind. At the end the server
is stopped, and the device space it still had in use must be exactly the space that
`hots3 check` finds referenced by the catalog: nothing of the failed writes is leaked."""

import base64
import hashlib
import os
import re
import socket
import subprocess
import sys
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
MiB = 1024 * 1024


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


class BadInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server(device_size="1GiB").start()
        cls.port = cls.server.port
        r = cls.raw("PUT", "/bad")
        assert r.status == 200, r

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    @classmethod
    def raw(cls, method, path, query=(), headers=None, body=b"", **kw):
        req = s3.SignedRequest(method, path, query, headers, body=body, port=cls.port, **kw)
        return s3.send(cls.port, req.wire())

    def keys(self):
        r = self.raw("GET", "/bad", [("list-type", "2")])
        self.assertEqual(r.status, 200)
        return re.findall(rb"<Key>([^<]*)</Key>", r.body)

    def send_and_vanish(self, wire, wait_s=0.3):
        """Sends the bytes and drops the connection without reading an answer."""
        with harness.connect(self.port) as sock:
            sock.sendall(wire)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
        time.sleep(wait_s)

    def test_every_bad_write_leaves_nothing(self):
        kept = {}
        for i, size in enumerate((0, 3000, 5 * MiB + 7)):  # inline, inline, on the device
            body = data(size, seed=i)
            self.assertEqual(self.raw("PUT", "/bad/keep/%d" % i, body=body).status, 200)
            kept["keep/%d" % i] = body

        # 1. Disconnect mid-PUT: declared 12 MiB, 5 MiB sent (data already on the device).
        req = s3.SignedRequest("PUT", "/bad/gone/length", headers={"content-length": str(12 * MiB)},
                               payload_hash="UNSIGNED-PAYLOAD", port=self.port)
        self.send_and_vanish(req.wire(data(5 * MiB)), wait_s=0.5)

        # 2. Disconnect mid-PUT with chunked transfer encoding (size unknown: the writer grows).
        req = s3.SignedRequest("PUT", "/bad/gone/chunked", headers={"transfer-encoding": "chunked"},
                               payload_hash="UNSIGNED-PAYLOAD", port=self.port)
        piece = data(MiB)
        body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(6))
        self.send_and_vanish(req.wire(body), wait_s=0.5)

        # 3. A body shorter than declared: the client says it is done (half-close) and waits.
        req = s3.SignedRequest("PUT", "/bad/short", headers={"content-length": str(3 * MiB)},
                               payload_hash="UNSIGNED-PAYLOAD", port=self.port)
        r = s3.send(self.port, req.wire(data(2 * MiB)))
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>IncompleteBody</Code>", r.body)

        # 4. A body longer than declared: HTTP framing takes the declared bytes; the rest is not
        #    a request, so it gets 400 and the connection is closed. The object is the declared
        #    bytes, as with any S3 server.
        req = s3.SignedRequest("PUT", "/bad/long", body=b"x" * 100, port=self.port)
        with harness.connect(self.port) as sock:
            sock.sendall(req.wire() + b"y" * 50 + b"\r\n\r\n")
            reader = harness.Reader(sock)
            self.assertEqual(reader.read_response().status, 200)
            self.assertEqual(reader.read_response().status, 400)
        kept["long"] = b"x" * 100

        # 5. aws-chunked whose chunks carry more than x-amz-decoded-content-length.
        payload = data(100000, seed=5)
        req = s3.SignedRequest("PUT", "/bad/decoded", payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                               headers={"content-encoding": "aws-chunked", "x-amz-decoded-content-length": "99999"},
                               port=self.port)
        r = s3.send(self.port, req.wire(s3.aws_chunked_signed(req, payload)))
        self.assertEqual(r.status, 400, r)

        # 6. A bad chunk signature in the second chunk.
        req = s3.SignedRequest("PUT", "/bad/chunk-signature", payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                               headers={"content-encoding": "aws-chunked",
                                        "x-amz-decoded-content-length": str(len(payload))}, port=self.port)
        r = s3.send(self.port, req.wire(s3.aws_chunked_signed(req, payload, corrupt_chunk=1)))
        self.assertEqual(r.status, 403)
        self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", r.body)

        # 7. A trailer checksum that does not match the data.
        wrong = base64.b64encode((zlib.crc32(payload) ^ 1).to_bytes(4, "big")).decode()
        req = s3.SignedRequest("PUT", "/bad/trailer", payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                               headers={"content-encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
                                        "x-amz-decoded-content-length": str(len(payload))}, port=self.port)
        r = s3.send(self.port, req.wire(s3.aws_chunked_unsigned(payload, trailer=("x-amz-checksum-crc32", wrong))))
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)

        # 8. A wrong Content-MD5 on a device-sized body.
        big = data(3 * MiB, seed=8)
        r = self.raw("PUT", "/bad/md5", body=big,
                     headers={"content-md5": base64.b64encode(hashlib.md5(big + b"!").digest()).decode()})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)

        # 9. Hostile keys: too long, not UTF-8.
        r = self.raw("PUT", "/bad/" + "k" * 1025, body=b"x")
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>KeyTooLongError</Code>", r.body)
        r = self.raw("PUT", b"/bad/\xc3(", body=b"x")  # correctly signed, but not UTF-8
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidArgument</Code>", r.body)

        # 10. Multipart: one part completes, another is cut off mid-body, the Complete XML is
        #     malformed; then the upload is aborted.
        r = self.raw("POST", "/bad/multi", [("uploads", "")])
        self.assertEqual(r.status, 200)
        upload_id = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        part = data(5 * MiB, seed=10)
        r = self.raw("PUT", "/bad/multi", [("partNumber", "1"), ("uploadId", upload_id)], body=part)
        self.assertEqual(r.status, 200)
        req = s3.SignedRequest("PUT", "/bad/multi", [("partNumber", "2"), ("uploadId", upload_id)],
                               headers={"content-length": str(5 * MiB)}, payload_hash="UNSIGNED-PAYLOAD",
                               port=self.port)
        self.send_and_vanish(req.wire(part[:3 * MiB]), wait_s=0.5)
        r = self.raw("POST", "/bad/multi", [("uploadId", upload_id)], body=b"<CompleteMultipartUpload><Part>")
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>MalformedXML</Code>", r.body)
        r = self.raw("DELETE", "/bad/multi", [("uploadId", upload_id)])
        self.assertEqual(r.status, 204)

        # An upload left open keeps its parts: they are referenced, not leaked.
        r = self.raw("POST", "/bad/open", [("uploads", "")])
        open_id = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        self.assertEqual(self.raw("PUT", "/bad/open", [("partNumber", "1"), ("uploadId", open_id)],
                                  body=data(MiB, seed=11)).status, 200)

        # Nothing but the good objects is visible, and they are intact.
        self.assertEqual(sorted(k.decode() for k in self.keys()), sorted(kept))
        for key, body in kept.items():
            r = self.raw("GET", "/bad/" + key)
            self.assertEqual((r.status, r.body), (200, body), key)

        # Stop the server; the space it had in use must be what the catalog references.
        self.assertEqual(self.server.stop(), 0)
        logged = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", self.server.read_stderr())
        self.assertIsNotNone(logged, self.server.read_stderr()[-2000:])
        in_use, waiting = int(logged.group(1)), int(logged.group(2))
        self.assertEqual(waiting, 0)
        check = subprocess.run([HOTS3, "check", "--data", os.path.join(self.server.dir, "data")],
                               capture_output=True, text=True, timeout=300)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        referenced = int(re.search(r"referenced .*?\((\d+) bytes\)", check.stdout).group(1))
        # The kept 5 MiB object and the open upload's 1 MiB part, rounded up to 4 KiB blocks.
        self.assertEqual(referenced, (5 * MiB + 4096) + MiB)
        self.assertEqual(in_use, referenced, "space of failed writes was leaked")


if __name__ == "__main__":
    unittest.main(verbosity=2)
