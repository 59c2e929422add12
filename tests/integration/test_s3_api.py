"""The S3 API of a real hots3 process, through boto3 (whichever version this interpreter has:
CTest runs this file under the image's python3 with boto3 1.43 and under Debian's python3 with
boto3 1.26) and through raw HTTP for error paths and exact headers."""

import base64
import datetime
import hashlib
import os
import sys
import tempfile
import socket
import threading
import time
import unittest
import unittest.mock
import urllib.error
import urllib.parse
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
import botocore  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

BOTO_NEW = tuple(int(x) for x in botocore.__version__.split(".")[:2]) >= (1, 36)


def client(port, access=s3.ACCESS_KEY, secret=s3.SECRET_KEY, scheme="http", verify=None, **config):
    return boto3.client(
        "s3", endpoint_url="%s://127.0.0.1:%d" % (scheme, port), aws_access_key_id=access,
        aws_secret_access_key=secret, region_name=s3.REGION, verify=verify,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      signature_version="s3v4", **config))


def error_code(e):
    return e.response["Error"]["Code"]


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


class S3Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server().start()
        cls.port = cls.server.port
        cls.s3 = client(cls.port)
        cls.s3.create_bucket(Bucket="main")

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()

    def raw(self, method, path, query=(), headers=None, body=b"", **kw):
        req = s3.SignedRequest(method, path, query, headers, body=body, port=self.port, **kw)
        return s3.send(self.port, req.wire())

    # ---- buckets ----------------------------------------------------------------------------

    def test_bucket_lifecycle(self):
        self.s3.create_bucket(Bucket="lifecycle-1")
        self.s3.create_bucket(Bucket="lifecycle-2",
                              CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        names = [b["Name"] for b in self.s3.list_buckets()["Buckets"]]
        self.assertIn("lifecycle-1", names)
        self.assertIn("lifecycle-2", names)
        self.s3.head_bucket(Bucket="lifecycle-1")
        loc = self.s3.get_bucket_location(Bucket="lifecycle-1")["LocationConstraint"]
        self.assertIn(loc, (None, ""))  # us-east-1 is the empty constraint
        # The owner re-creating its bucket: 200 in us-east-1, as S3 answers "for legacy
        # compatibility" (rclone does it before every upload); another user: BucketAlreadyExists.
        self.s3.create_bucket(Bucket="lifecycle-1")
        with self.assertRaises(ClientError) as e:
            client(self.port, "HOTS3WRITERACCESSKEY", "writer-secret-key-0123456789").create_bucket(Bucket="lifecycle-1")
        self.assertEqual(error_code(e.exception), "BucketAlreadyExists")
        self.s3.put_object(Bucket="lifecycle-1", Key="k", Body=b"x")
        with self.assertRaises(ClientError) as e:
            self.s3.delete_bucket(Bucket="lifecycle-1")
        self.assertEqual(error_code(e.exception), "BucketNotEmpty")
        self.s3.delete_object(Bucket="lifecycle-1", Key="k")
        self.s3.delete_bucket(Bucket="lifecycle-1")
        with self.assertRaises(ClientError) as e:
            self.s3.head_bucket(Bucket="lifecycle-1")
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)

    def test_bucket_already_owned_outside_us_east_1(self):
        with s3.hots3_server('\n[s3]\nregion = "eu-central-1"\n') as server:
            c = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % server.port, aws_access_key_id=s3.ACCESS_KEY,
                             aws_secret_access_key=s3.SECRET_KEY, region_name="eu-central-1",
                             config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
            c.create_bucket(Bucket="mine", CreateBucketConfiguration={"LocationConstraint": "eu-central-1"})
            with self.assertRaises(ClientError) as e:
                c.create_bucket(Bucket="mine", CreateBucketConfiguration={"LocationConstraint": "eu-central-1"})
            self.assertEqual(error_code(e.exception), "BucketAlreadyOwnedByYou")
            self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 409)

    def test_bucket_names_follow_s3_rules(self):
        for bad in ("ab", "UPPER", "a" * 64, "-start", "end-", "two..dots", "192.168.1.1", "xn--x", "under_score"):
            r = self.raw("PUT", "/" + bad)
            self.assertEqual(r.status, 400, bad)
            self.assertIn(b"<Code>InvalidBucketName</Code>", r.body, bad)

    def test_missing_bucket(self):
        with self.assertRaises(ClientError) as e:
            self.s3.get_object(Bucket="no-such-bucket", Key="k")
        self.assertEqual(error_code(e.exception), "NoSuchBucket")

    # ---- put / get / head -------------------------------------------------------------------

    def test_put_get_round_trip_with_metadata(self):
        body = data(100000, 1)
        put = self.s3.put_object(Bucket="main", Key="docs/a.bin", Body=body, ContentType="application/x-test",
                                 ContentEncoding="identity", ContentDisposition="attachment",
                                 CacheControl="no-cache", Expires=datetime.datetime(2030, 1, 2),
                                 Metadata={"Color": "blue", "num": "7"})
        self.assertEqual(put["ETag"], '"%s"' % hashlib.md5(body).hexdigest())
        got = self.s3.get_object(Bucket="main", Key="docs/a.bin")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ContentType"], "application/x-test")
        self.assertEqual(got["ContentEncoding"], "identity")
        self.assertEqual(got["ContentDisposition"], "attachment")
        self.assertEqual(got["CacheControl"], "no-cache")
        self.assertEqual(got["Metadata"], {"color": "blue", "num": "7"})
        self.assertEqual(got["ETag"], put["ETag"])
        self.assertEqual(got["ContentLength"], len(body))
        head = self.s3.head_object(Bucket="main", Key="docs/a.bin")
        self.assertEqual(head["ContentLength"], len(body))
        self.assertEqual(head["AcceptRanges"], "bytes")
        self.assertIsNotNone(head["LastModified"])

    def test_zero_byte_and_default_content_type(self):
        self.s3.put_object(Bucket="main", Key="empty", Body=b"")
        got = self.s3.get_object(Bucket="main", Key="empty")
        self.assertEqual(got["Body"].read(), b"")
        self.assertEqual(got["ContentType"], "binary/octet-stream")
        self.assertEqual(got["ETag"], '"d41d8cd98f00b204e9800998ecf8427e"')

    def test_missing_key_and_head_without_body(self):
        with self.assertRaises(ClientError) as e:
            self.s3.get_object(Bucket="main", Key="missing")
        self.assertEqual(error_code(e.exception), "NoSuchKey")
        r = self.raw("HEAD", "/main/missing")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, b"")
        self.assertIsNotNone(r.header("x-amz-request-id"))
        self.assertIsNotNone(r.header("x-amz-id-2"))

    def test_ranges(self):
        body = data(10000, 2)
        self.s3.put_object(Bucket="main", Key="r", Body=body)
        for rng, lo, hi in (("bytes=0-0", 0, 0), ("bytes=10-99", 10, 99), ("bytes=9990-", 9990, 9999),
                            ("bytes=-10", 9990, 9999), ("bytes=9000-20000", 9000, 9999), ("bytes=-20000", 0, 9999)):
            got = self.s3.get_object(Bucket="main", Key="r", Range=rng)
            self.assertEqual(got["Body"].read(), body[lo:hi + 1], rng)
            self.assertEqual(got["ContentRange"], "bytes %d-%d/10000" % (lo, hi), rng)
            self.assertEqual(got["ResponseMetadata"]["HTTPStatusCode"], 206)
        r = self.raw("GET", "/main/r", headers={"Range": "bytes=10000-"})
        self.assertEqual(r.status, 416)
        self.assertEqual(r.header("content-range"), "bytes */10000")
        self.assertIn(b"<Code>InvalidRange</Code>", r.body)
        # Malformed or multiple ranges are ignored: the whole object.
        for ignored in ("bytes=5-2", "items=0-1", "bytes=0-1,5-6"):
            r = self.raw("GET", "/main/r", headers={"Range": ignored})
            self.assertEqual((r.status, len(r.body)), (200, 10000), ignored)

    def test_conditional_reads(self):
        put = self.s3.put_object(Bucket="main", Key="cond", Body=b"abc")
        etag = put["ETag"]
        last = self.s3.head_object(Bucket="main", Key="cond")["LastModified"]
        past = "Sat, 01 Jan 2000 00:00:00 GMT"
        future = "Fri, 01 Jan 2100 00:00:00 GMT"
        cases = [
            ({"If-Match": etag}, 200), ({"If-Match": '"nope"'}, 412), ({"If-Match": "*"}, 200),
            ({"If-None-Match": etag}, 304), ({"If-None-Match": '"nope"'}, 200),
            ({"If-Modified-Since": past}, 200), ({"If-Modified-Since": future}, 304),
            ({"If-Unmodified-Since": past}, 412), ({"If-Unmodified-Since": future}, 200),
            # Precedence (RFC 9110, as S3 documents it): If-Match wins over If-Unmodified-Since,
            # If-None-Match over If-Modified-Since.
            ({"If-Match": etag, "If-Unmodified-Since": past}, 200),
            ({"If-None-Match": etag, "If-Modified-Since": past}, 304),
            ({"If-None-Match": '"nope"', "If-Modified-Since": future}, 200),
        ]
        for method in ("GET", "HEAD"):  # HeadObject honours the same conditions
            for headers, status in cases:
                r = self.raw(method, "/main/cond", headers=headers)
                self.assertEqual(r.status, status, (method, headers))
                # Every response carries S3's request ids, successes as well as errors.
                self.assertTrue(r.header("x-amz-request-id"), (method, headers))
                self.assertTrue(r.header("x-amz-id-2"), (method, headers))
                if status == 304 or method == "HEAD":
                    self.assertEqual(r.body, b"")
                if status == 304:
                    self.assertEqual(r.header("etag"), etag)
        del last

    def test_request_ids_on_successful_responses(self):
        self.s3.put_object(Bucket="main", Key="ids", Body=b"x")
        for name, call in [
            ("put", lambda: self.s3.put_object(Bucket="main", Key="ids", Body=b"y")),
            ("get", lambda: self.s3.get_object(Bucket="main", Key="ids")),
            ("head", lambda: self.s3.head_object(Bucket="main", Key="ids")),
            ("list", lambda: self.s3.list_objects_v2(Bucket="main", Prefix="ids")),
            ("copy", lambda: self.s3.copy_object(Bucket="main", Key="ids2", CopySource="main/ids")),
            ("buckets", lambda: self.s3.list_buckets()),
            ("delete", lambda: self.s3.delete_object(Bucket="main", Key="ids2")),
        ]:
            headers = call()["ResponseMetadata"]["HTTPHeaders"]
            self.assertRegex(headers.get("x-amz-request-id", ""), r"^[0-9A-F]{16}$", name)
            self.assertTrue(headers.get("x-amz-id-2"), name)

    def test_response_overrides(self):
        self.s3.put_object(Bucket="main", Key="ov", Body=b"x", ContentType="text/plain")
        got = self.s3.get_object(Bucket="main", Key="ov", ResponseContentType="image/png",
                                 ResponseContentDisposition="inline", ResponseCacheControl="max-age=1",
                                 ResponseContentLanguage="fr", ResponseContentEncoding="gzip",
                                 ResponseExpires=datetime.datetime(2031, 1, 1))
        self.assertEqual(got["ContentType"], "image/png")
        self.assertEqual(got["ContentDisposition"], "inline")
        self.assertEqual(got["CacheControl"], "max-age=1")
        self.assertEqual(got["ContentLanguage"], "fr")

    def test_part_number_of_a_single_part_object(self):
        self.s3.put_object(Bucket="main", Key="single", Body=b"hello")
        got = self.s3.get_object(Bucket="main", Key="single", PartNumber=1)
        self.assertEqual(got["Body"].read(), b"hello")
        self.assertEqual(got["PartsCount"], 1)
        with self.assertRaises(ClientError) as e:
            self.s3.get_object(Bucket="main", Key="single", PartNumber=2)
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 416)

    def test_odd_keys(self):
        keys = ["odd key+plus~tilde=eq&amp(paren)!star*\u00e9.txt", "a//b", "/leading", "%percent%20",
                "unicode/\u65e5\u672c\u8a9e/\u2603", "spaces  in  middle ", "k" * 1024]
        for key in keys:
            self.s3.put_object(Bucket="main", Key=key, Body=key.encode())
            self.assertEqual(self.s3.get_object(Bucket="main", Key=key)["Body"].read(), key.encode(), key)
        listed = set()
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="main"):
            listed.update(o["Key"] for o in page.get("Contents", []))
        for key in keys:
            self.assertIn(key, listed)
        with self.assertRaises(ClientError) as e:
            self.s3.put_object(Bucket="main", Key="k" * 1025, Body=b"x")
        self.assertEqual(error_code(e.exception), "KeyTooLongError")

    def test_metadata_size_limit(self):
        with self.assertRaises(ClientError) as e:
            self.s3.put_object(Bucket="main", Key="meta", Body=b"x", Metadata={"big": "v" * 3000})
        self.assertEqual(error_code(e.exception), "MetadataTooLarge")

    # ---- integrity ----------------------------------------------------------------------------

    def test_content_md5_is_verified(self):
        good = base64.b64encode(hashlib.md5(b"hello").digest()).decode()
        bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        self.assertEqual(self.raw("PUT", "/main/md5", headers={"Content-MD5": good}, body=b"hello").status, 200)
        r = self.raw("PUT", "/main/md5-bad", headers={"Content-MD5": bad}, body=b"hello")
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)
        r = self.raw("PUT", "/main/md5-bad", headers={"Content-MD5": "not base64!"}, body=b"hello")
        self.assertIn(b"<Code>InvalidDigest</Code>", r.body)
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="main", Key="md5-bad")

    def test_payload_hash_is_verified(self):
        req = s3.SignedRequest("PUT", "/main/sha", body=b"hello", port=self.port,
                               payload_hash=hashlib.sha256(b"HELLO").hexdigest())
        r = s3.send(self.port, req.wire())
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>XAmzContentSHA256Mismatch</Code>", r.body)
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="main", Key="sha")

    def test_checksum_headers_are_verified_stored_and_returned(self):
        body = b"checksummed payload"
        values = {
            "crc32": base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode(),
            "sha1": base64.b64encode(hashlib.sha1(body).digest()).decode(),
            "sha256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
        }
        for name, value in values.items():
            r = self.raw("PUT", "/main/ck-" + name, headers={"x-amz-checksum-" + name: value}, body=body)
            self.assertEqual(r.status, 200, name)
            self.assertEqual(r.header("x-amz-checksum-" + name), value)
            got = self.raw("GET", "/main/ck-" + name, headers={"x-amz-checksum-mode": "ENABLED"})
            self.assertEqual(got.header("x-amz-checksum-" + name), value)
            # Not for ranges.
            got = self.raw("GET", "/main/ck-" + name, headers={"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-1"})
            self.assertIsNone(got.header("x-amz-checksum-" + name))
            wrong = self.raw("PUT", "/main/ck-wrong", headers={"x-amz-checksum-" + name: values["crc32" if name != "crc32" else "sha1"]}, body=body)
            self.assertEqual(wrong.status, 400, name)
        # With no checksum from the client, CRC64NVME is computed and kept (as S3 does).
        r = self.raw("PUT", "/main/ck-default", body=body)
        self.assertIsNotNone(r.header("x-amz-checksum-crc64nvme"))
        r = self.raw("PUT", "/main/ck-two", headers={"x-amz-checksum-crc32": values["crc32"],
                                                     "x-amz-checksum-sha1": values["sha1"]}, body=body)
        self.assertEqual(r.status, 400)

    def test_boto3_checksum_algorithms(self):
        if not BOTO_NEW:
            self.skipTest("needs botocore >= 1.36 (flexible checksums)")
        tested = 0
        for algorithm in ("CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"):
            key = "boto-ck-" + algorithm
            try:
                self.s3.put_object(Bucket="main", Key=key, Body=data(70000, 3), ChecksumAlgorithm=algorithm)
            except botocore.exceptions.MissingDependencyException:
                continue  # CRC32C/CRC64NVME need the optional awscrt package in botocore
            tested += 1
            got = self.s3.get_object(Bucket="main", Key=key, ChecksumMode="ENABLED")
            self.assertEqual(got["Body"].read(), data(70000, 3))  # botocore validates the checksum
            self.assertIn("Checksum" + algorithm, got)
        self.assertGreaterEqual(tested, 3)

    # ---- aws-chunked (hand-made: SDKs only stream over https) ---------------------------------

    def test_signed_aws_chunked_upload(self):
        payload = data(200000, 4)
        req = s3.SignedRequest("PUT", "/main/chunked-signed", port=self.port,
                               payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                               headers={"x-amz-decoded-content-length": str(len(payload))})
        body = s3.aws_chunked_signed(req, payload)
        req.headers["content-length"] = str(len(body))
        r = s3.send(self.port, req.wire(body))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(self.s3.get_object(Bucket="main", Key="chunked-signed")["Body"].read(), payload)

    def test_signed_aws_chunked_with_signed_trailer(self):
        payload = data(100000, 5)
        crc = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
        req = s3.SignedRequest("PUT", "/main/chunked-trailer", port=self.port,
                               payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
                               headers={"x-amz-decoded-content-length": str(len(payload)),
                                        "x-amz-trailer": "x-amz-checksum-crc32"})
        body = s3.aws_chunked_signed(req, payload, trailer=("x-amz-checksum-crc32", crc))
        req.headers["content-length"] = str(len(body))
        r = s3.send(self.port, req.wire(body))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.header("x-amz-checksum-crc32"), crc)

    def test_bad_chunk_signature_stores_nothing(self):
        payload = data(200000, 6)
        req = s3.SignedRequest("PUT", "/main/chunked-bad", port=self.port,
                               payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                               headers={"x-amz-decoded-content-length": str(len(payload))})
        body = s3.aws_chunked_signed(req, payload, corrupt_chunk=1)
        req.headers["content-length"] = str(len(body))
        r = s3.send(self.port, req.wire(body))
        self.assertEqual(r.status, 403)
        self.assertIn(b"<Code>SignatureDoesNotMatch</Code>", r.body)
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="main", Key="chunked-bad")

    def test_unsigned_trailer_inside_http_chunked(self):
        payload = data(70000, 7)
        crc = base64.b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
        req = s3.SignedRequest("PUT", "/main/unsigned-trailer", port=self.port,
                               payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                               headers={"x-amz-decoded-content-length": str(len(payload)),
                                        "x-amz-trailer": "x-amz-checksum-crc32",
                                        "content-encoding": "aws-chunked", "transfer-encoding": "chunked"})
        inner = s3.aws_chunked_unsigned(payload, trailer=("x-amz-checksum-crc32", crc))
        # HTTP chunks that do not line up with the aws-chunks (js-v3 sends every piece apart).
        outer = b""
        for i in range(0, len(inner), 7777):
            piece = inner[i:i + 7777]
            outer += b"%x\r\n%s\r\n" % (len(piece), piece)
        outer += b"0\r\n\r\n"
        r = s3.send(self.port, req.wire(outer))
        self.assertEqual(r.status, 200, r.body)
        got = self.s3.get_object(Bucket="main", Key="unsigned-trailer")
        self.assertEqual(got["Body"].read(), payload)
        self.assertIsNone(got.get("ContentEncoding"))  # aws-chunked is framing, not stored
        bad = s3.aws_chunked_unsigned(payload, trailer=("x-amz-checksum-crc32", "AAAAAA=="))
        req2 = s3.SignedRequest("PUT", "/main/unsigned-trailer-bad", port=self.port,
                                payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                                headers={"x-amz-decoded-content-length": str(len(payload)),
                                         "x-amz-trailer": "x-amz-checksum-crc32",
                                         "content-length": str(len(bad))})
        r = s3.send(self.port, req2.wire(bad))
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)

    def test_truncated_bodies_leave_nothing(self):
        req = s3.SignedRequest("PUT", "/main/short", body=b"x" * 1000, port=self.port,
                               headers={"content-length": "5000"})
        with harness.connect(self.port) as sock:
            sock.sendall(req.wire(b"x" * 1000))
            sock.close()
        time.sleep(0.3)
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="main", Key="short")

    # ---- delete ---------------------------------------------------------------------------

    def test_delete_object_and_delete_objects(self):
        for i in range(20):
            self.s3.put_object(Bucket="main", Key="del/%02d" % i, Body=b"x")
        self.s3.delete_object(Bucket="main", Key="del/00")
        self.s3.delete_object(Bucket="main", Key="del/never-existed")  # 204 anyway
        r = self.s3.delete_objects(Bucket="main", Delete={"Objects": [{"Key": "del/%02d" % i} for i in range(1, 10)]})
        self.assertEqual(sorted(d["Key"] for d in r["Deleted"]), ["del/%02d" % i for i in range(1, 10)])
        r = self.s3.delete_objects(Bucket="main", Delete={"Objects": [{"Key": "del/%02d" % i} for i in range(10, 20)],
                                                         "Quiet": True})
        self.assertNotIn("Deleted", r)
        self.assertEqual(self.s3.list_objects_v2(Bucket="main", Prefix="del/")["KeyCount"], 0)

    def test_delete_objects_of_a_thousand_keys(self):
        keys = [{"Key": "thousand/%04d" % i} for i in range(1000)]
        r = self.s3.delete_objects(Bucket="main", Delete={"Objects": keys})
        self.assertEqual(len(r["Deleted"]), 1000)
        with self.assertRaises(ClientError) as e:
            self.s3.delete_objects(Bucket="main", Delete={"Objects": keys + [{"Key": "one-too-many"}]})
        self.assertEqual(error_code(e.exception), "MalformedXML")

    def test_delete_objects_needs_an_integrity_header(self):
        body = b'<Delete><Object><Key>a</Key></Object></Delete>'
        r = self.raw("POST", "/main", query=[("delete", "")], body=body)
        self.assertEqual(r.status, 400)
        crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        r = self.raw("POST", "/main", query=[("delete", "")], body=body, headers={"x-amz-checksum-crc32": crc})
        self.assertEqual(r.status, 200)

    # ---- copy -----------------------------------------------------------------------------

    def test_copy_object(self):
        body = data(300000, 8)
        put = self.s3.put_object(Bucket="main", Key="src/odd key+.bin", Body=body, Metadata={"a": "1"},
                                 ContentType="text/x-a")
        r = self.s3.copy_object(Bucket="main", Key="dst/copy", CopySource={"Bucket": "main", "Key": "src/odd key+.bin"})
        self.assertEqual(r["CopyObjectResult"]["ETag"], put["ETag"])
        got = self.s3.get_object(Bucket="main", Key="dst/copy")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["Metadata"], {"a": "1"})
        self.assertEqual(got["ContentType"], "text/x-a")
        self.s3.copy_object(Bucket="main", Key="dst/replaced", CopySource="main/src/odd key+.bin",
                            MetadataDirective="REPLACE", Metadata={"b": "2"}, ContentType="text/x-b")
        got = self.s3.head_object(Bucket="main", Key="dst/replaced")
        self.assertEqual(got["Metadata"], {"b": "2"})
        self.assertEqual(got["ContentType"], "text/x-b")
        with self.assertRaises(ClientError) as e:
            self.s3.copy_object(Bucket="main", Key="dst/copy", CopySource="main/dst/copy")
        self.assertEqual(error_code(e.exception), "InvalidRequest")
        # Copy onto itself with REPLACE: new metadata, same data.
        self.s3.copy_object(Bucket="main", Key="dst/copy", CopySource="main/dst/copy",
                            MetadataDirective="REPLACE", Metadata={"c": "3"})
        got = self.s3.get_object(Bucket="main", Key="dst/copy")
        self.assertEqual(got["Metadata"], {"c": "3"})
        self.assertEqual(got["Body"].read(), body)
        with self.assertRaises(ClientError) as e:
            self.s3.copy_object(Bucket="main", Key="dst/x", CopySource="main/src/odd key+.bin", CopySourceIfMatch='"nope"')
        self.assertEqual(error_code(e.exception), "PreconditionFailed")
        with self.assertRaises(ClientError) as e:
            self.s3.copy_object(Bucket="main", Key="dst/x", CopySource="main/missing")
        self.assertEqual(error_code(e.exception), "NoSuchKey")

    # ---- conditional writes ------------------------------------------------------------------

    def test_if_none_match_star_and_if_match_on_put(self):
        r = self.raw("PUT", "/main/once", headers={"If-None-Match": "*"}, body=b"first")
        self.assertEqual(r.status, 200)
        r = self.raw("PUT", "/main/once", headers={"If-None-Match": "*"}, body=b"second")
        self.assertEqual(r.status, 412)
        etag = self.s3.head_object(Bucket="main", Key="once")["ETag"]
        self.assertEqual(self.raw("PUT", "/main/once", headers={"If-Match": etag}, body=b"third").status, 200)
        self.assertEqual(self.raw("PUT", "/main/once", headers={"If-Match": etag}, body=b"fourth").status, 412)
        self.assertEqual(self.raw("PUT", "/main/nothing-here", headers={"If-Match": etag}, body=b"x").status, 404)

    def test_racing_create_only_writers(self):
        results = []

        def writer(i):
            r = self.raw("PUT", "/main/race", headers={"If-None-Match": "*"}, body=data(2000000, i))
            results.append(r.status)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results.count(200), 1, results)
        self.assertTrue(all(s in (200, 412, 409) for s in results), results)

    # ---- listing -----------------------------------------------------------------------------

    def test_listing_v2_and_v1(self):
        self.s3.create_bucket(Bucket="listing")
        keys = ["a/1", "a/2", "a/b/3", "b", "c d/e", "c+d/f", "z"]
        for k in keys:
            self.s3.put_object(Bucket="listing", Key=k, Body=b"x")
        r = self.s3.list_objects_v2(Bucket="listing", Delimiter="/")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["b", "z"])
        self.assertEqual([p["Prefix"] for p in r["CommonPrefixes"]], ["a/", "c d/", "c+d/"])
        self.assertEqual(r["KeyCount"], 5)
        r = self.s3.list_objects_v2(Bucket="listing", Prefix="a/", Delimiter="/")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["a/1", "a/2"])
        self.assertEqual([p["Prefix"] for p in r["CommonPrefixes"]], ["a/b/"])
        # Pagination never repeats or skips.
        seen = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="listing", PaginationConfig={"PageSize": 2}):
            seen += [o["Key"] for o in page.get("Contents", [])]
            self.assertLessEqual(page["KeyCount"], 2)
        self.assertEqual(seen, sorted(keys))
        seen = []
        for page in self.s3.get_paginator("list_objects").paginate(Bucket="listing", PaginationConfig={"PageSize": 3}):
            seen += [o["Key"] for o in page.get("Contents", [])]
        self.assertEqual(seen, sorted(keys))
        r = self.s3.list_objects_v2(Bucket="listing", StartAfter="b", MaxKeys=2, FetchOwner=True)
        self.assertEqual([o["Key"] for o in r["Contents"]], ["c d/e", "c+d/f"])
        self.assertTrue(r["IsTruncated"])
        self.assertIn("Owner", r["Contents"][0])
        r = self.s3.list_objects(Bucket="listing", Marker="c+d/f")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["z"])

    def test_listing_with_url_encoding(self):
        self.s3.create_bucket(Bucket="encoded")
        key = "dir with space/\u00e9+plus&amp"
        self.s3.put_object(Bucket="encoded", Key=key, Body=b"x")
        r = self.raw("GET", "/encoded", query=[("list-type", "2"), ("encoding-type", "url")])
        self.assertIn(b"<EncodingType>url</EncodingType>", r.body)
        self.assertNotIn(b"dir with space", r.body)
        # Asked for explicitly, keys stay encoded for the caller; asked for by botocore itself
        # (its default), it decodes them back.
        r = self.s3.list_objects_v2(Bucket="encoded", EncodingType="url")
        self.assertEqual(urllib.parse.unquote_plus(r["Contents"][0]["Key"]), key)
        r = self.s3.list_objects_v2(Bucket="encoded")
        self.assertEqual(r["Contents"][0]["Key"], key)
        r = self.s3.list_objects_v2(Bucket="encoded", Delimiter="/")
        self.assertEqual(r["CommonPrefixes"][0]["Prefix"], "dir with space/")
        r = self.raw("GET", "/encoded", query=[("list-type", "2"), ("encoding-type", "base64")])
        self.assertEqual(r.status, 400)

    def test_max_keys_is_capped_and_checked(self):
        r = self.raw("GET", "/main", query=[("list-type", "2"), ("max-keys", "5000")])
        self.assertIn(b"<MaxKeys>1000</MaxKeys>", r.body)
        r = self.raw("GET", "/main", query=[("list-type", "2"), ("max-keys", "-1")])
        self.assertEqual(r.status, 400)

    # ---- multipart ---------------------------------------------------------------------------

    def test_multipart_upload(self):
        parts_data = [data(5 * 1024 * 1024, 10), data(5 * 1024 * 1024, 11), data(1234, 12)]
        up = self.s3.create_multipart_upload(Bucket="main", Key="mp/object", Metadata={"m": "1"})
        upload_id = up["UploadId"]
        etags = []
        for n, body in enumerate(parts_data, start=1):
            etags.append(self.s3.upload_part(Bucket="main", Key="mp/object", UploadId=upload_id, PartNumber=n, Body=body)["ETag"])
        listed = self.s3.list_parts(Bucket="main", Key="mp/object", UploadId=upload_id)
        self.assertEqual([p["PartNumber"] for p in listed["Parts"]], [1, 2, 3])
        uploads = self.s3.list_multipart_uploads(Bucket="main", Prefix="mp/")
        self.assertEqual([u["UploadId"] for u in uploads["Uploads"]], [upload_id])
        r = self.s3.complete_multipart_upload(Bucket="main", Key="mp/object", UploadId=upload_id, MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, start=1)]})
        md5s = b"".join(hashlib.md5(p).digest() for p in parts_data)
        self.assertEqual(r["ETag"], '"%s-3"' % hashlib.md5(md5s).hexdigest())
        got = self.s3.get_object(Bucket="main", Key="mp/object")
        self.assertEqual(got["Body"].read(), b"".join(parts_data))
        self.assertEqual(got["Metadata"], {"m": "1"})
        part2 = self.s3.get_object(Bucket="main", Key="mp/object", PartNumber=2)
        self.assertEqual(part2["Body"].read(), parts_data[1])
        self.assertEqual(part2["PartsCount"], 3)

    def test_multipart_validation(self):
        up = self.s3.create_multipart_upload(Bucket="main", Key="mp/bad")["UploadId"]
        e1 = self.s3.upload_part(Bucket="main", Key="mp/bad", UploadId=up, PartNumber=1, Body=b"small")["ETag"]
        e2 = self.s3.upload_part(Bucket="main", Key="mp/bad", UploadId=up, PartNumber=2, Body=b"also small")["ETag"]
        for parts, code in (([(2, e2), (1, e1)], "InvalidPartOrder"), ([(1, '"0000"')], "InvalidPart"),
                            ([(1, e1), (2, e2)], "EntityTooSmall"), ([(3, e1)], "InvalidPart")):
            with self.assertRaises(ClientError) as e:
                self.s3.complete_multipart_upload(Bucket="main", Key="mp/bad", UploadId=up, MultipartUpload={
                    "Parts": [{"PartNumber": n, "ETag": t} for n, t in parts]})
            self.assertEqual(error_code(e.exception), code)
        # Unquoted ETags and a single small (last) part are fine.
        self.s3.complete_multipart_upload(Bucket="main", Key="mp/bad", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1.strip('"')}]})
        self.assertEqual(self.s3.get_object(Bucket="main", Key="mp/bad")["Body"].read(), b"small")
        with self.assertRaises(ClientError) as e:
            self.s3.abort_multipart_upload(Bucket="main", Key="mp/bad", UploadId=up)
        self.assertEqual(error_code(e.exception), "NoSuchUpload")
        up = self.s3.create_multipart_upload(Bucket="main", Key="mp/aborted")["UploadId"]
        self.s3.upload_part(Bucket="main", Key="mp/aborted", UploadId=up, PartNumber=1, Body=b"x")
        self.s3.abort_multipart_upload(Bucket="main", Key="mp/aborted", UploadId=up)
        with self.assertRaises(ClientError) as e:
            self.s3.upload_part(Bucket="main", Key="mp/aborted", UploadId=up, PartNumber=2, Body=b"x")
        self.assertEqual(error_code(e.exception), "NoSuchUpload")

    def test_transfer_manager_upload_and_download(self):
        from boto3.s3.transfer import TransferConfig
        cfg = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024, max_concurrency=4)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src.bin")
            with open(src, "wb") as f:
                f.write(data(30 * 1024 * 1024 + 17, 13))
            self.s3.upload_file(src, "main", "tm/big.bin", Config=cfg)
            dst = os.path.join(d, "dst.bin")
            self.s3.download_file("main", "tm/big.bin", dst, Config=cfg)
            with open(src, "rb") as a, open(dst, "rb") as b:
                self.assertEqual(hashlib.sha256(a.read()).digest(), hashlib.sha256(b.read()).digest())
        self.assertTrue(self.s3.head_object(Bucket="main", Key="tm/big.bin")["ETag"].endswith('-4"'))

    # ---- authentication and authorization ---------------------------------------------------

    def test_wrong_secret_gets_signature_does_not_match_with_string_to_sign(self):
        bad = client(self.port, secret="wrong-secret-0123456789")
        with self.assertRaises(ClientError) as e:
            bad.list_objects_v2(Bucket="main")
        self.assertEqual(error_code(e.exception), "SignatureDoesNotMatch")
        r = self.raw("GET", "/main", secret="wrong-secret-0123456789")
        self.assertEqual(r.status, 403)
        self.assertIn(b"<StringToSign>AWS4-HMAC-SHA256\n", r.body)
        self.assertIn(b"<CanonicalRequest>GET\n/main\n", r.body)

    def test_unknown_access_key_and_anonymous(self):
        with self.assertRaises(ClientError) as e:
            client(self.port, access="AKIANOBODY").list_buckets()
        self.assertEqual(error_code(e.exception), "InvalidAccessKeyId")
        r = harness.request(self.port, "GET", "/main")
        self.assertEqual(r.status, 403)
        self.assertIn(b"<Code>AccessDenied</Code>", r.body)

    def test_clock_skew(self):
        old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=20)
        r = self.raw("GET", "/main", when=old)
        self.assertEqual(r.status, 403)
        self.assertIn(b"<Code>RequestTimeTooSkewed</Code>", r.body)

    def test_malformed_authorization(self):
        r = harness.request(self.port, "GET", "/main", {"Authorization": "AWS4-HMAC-SHA256 Credential=x",
                                                        "x-amz-date": "20261122T000000Z",
                                                        "x-amz-content-sha256": s3.EMPTY_SHA256})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>AuthorizationHeaderMalformed</Code>", r.body)

    def test_presigned_urls_v4_and_v2(self):
        self.s3.put_object(Bucket="main", Key="pre/signed file.txt", Body=b"presigned!")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": "main", "Key": "pre/signed file.txt"}, ExpiresIn=60)
        self.assertIn("X-Amz-Signature", url)
        with urllib.request.urlopen(url) as f:
            self.assertEqual(f.read(), b"presigned!")
        v2 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % self.port, aws_access_key_id=s3.ACCESS_KEY,
                          aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
                          config=Config(s3={"addressing_style": "path"}, signature_version="s3"))
        url = v2.generate_presigned_url("get_object", Params={"Bucket": "main", "Key": "pre/signed file.txt"}, ExpiresIn=60)
        self.assertIn("AWSAccessKeyId", url)
        with urllib.request.urlopen(url) as f:
            self.assertEqual(f.read(), b"presigned!")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": "main", "Key": "pre/signed file.txt"}, ExpiresIn=1)
        time.sleep(2.1)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"Request has expired", e.exception.read())
        tampered = url.replace("pre/signed", "pre/SIGNED")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(tampered)
        self.assertEqual(e.exception.code, 403)

    def test_presigned_put(self):
        url = self.s3.generate_presigned_url("put_object", Params={"Bucket": "main", "Key": "pre/put"}, ExpiresIn=60)
        req = urllib.request.Request(url, data=b"uploaded via presigned url", method="PUT")
        with urllib.request.urlopen(req) as f:
            self.assertEqual(f.status, 200)
        self.assertEqual(self.s3.get_object(Bucket="main", Key="pre/put")["Body"].read(), b"uploaded via presigned url")

    def test_users_and_grants(self):
        self.s3.create_bucket(Bucket="shared-data")
        self.s3.put_object(Bucket="shared-data", Key="k", Body=b"shared")
        reader = client(self.port, access="HOTS3READERACCESSKEY", secret="reader-secret-key-0123456789")
        writer = client(self.port, access="HOTS3WRITERACCESSKEY", secret="writer-secret-key-0123456789")
        self.assertEqual(reader.get_object(Bucket="shared-data", Key="k")["Body"].read(), b"shared")
        with self.assertRaises(ClientError) as e:
            reader.put_object(Bucket="shared-data", Key="k2", Body=b"x")
        self.assertEqual(error_code(e.exception), "AccessDenied")
        with self.assertRaises(ClientError) as e:
            reader.get_object(Bucket="main", Key="empty")
        self.assertEqual(error_code(e.exception), "AccessDenied")
        writer.put_object(Bucket="shared-data", Key="k2", Body=b"x")
        with self.assertRaises(ClientError) as e:
            writer.delete_bucket(Bucket="shared-data")
        self.assertEqual(error_code(e.exception), "AccessDenied")
        # A non-admin user owns what it creates, and sees only what it may read.
        reader.create_bucket(Bucket="readers-own")
        reader.put_object(Bucket="readers-own", Key="mine", Body=b"m")
        names = [b["Name"] for b in reader.list_buckets()["Buckets"]]
        self.assertIn("readers-own", names)
        self.assertIn("shared-data", names)
        self.assertNotIn("main", names)

    # ---- what hots3 does not do answers NotImplemented ----------------------------------------

    def test_unsupported_operations_are_not_implemented(self):
        self.s3.put_object(Bucket="main", Key="ni", Body=b"x")
        for call in (lambda: self.s3.put_bucket_versioning(Bucket="main", VersioningConfiguration={"Status": "Enabled"}),
                     lambda: self.s3.put_object_tagging(Bucket="main", Key="ni", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]}),
                     lambda: self.s3.put_object_acl(Bucket="main", Key="ni", ACL="public-read"),
                     lambda: self.s3.put_object(Bucket="main", Key="ni2", Body=b"x", ServerSideEncryption="AES256"),
                     lambda: self.s3.put_bucket_policy(Bucket="main", Policy="{}")):
            with self.assertRaises(ClientError) as e:
                call()
            self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 501)
        # Reading what does not exist answers truthfully.
        self.assertEqual(self.s3.get_bucket_versioning(Bucket="main").get("Status"), None)
        self.assertEqual(self.s3.get_object_tagging(Bucket="main", Key="ni")["TagSet"], [])
        # The grantee carries xsi:type as S3 writes it (s3cmd info/cp/mv fail without it).
        for acl in (self.s3.get_object_acl(Bucket="main", Key="ni"), self.s3.get_bucket_acl(Bucket="main")):
            self.assertEqual(len(acl["Grants"]), 1)
            self.assertEqual(acl["Grants"][0]["Permission"], "FULL_CONTROL")
            self.assertEqual(acl["Grants"][0]["Grantee"]["Type"], "CanonicalUser")
            self.assertEqual(acl["Grants"][0]["Grantee"]["ID"], acl["Owner"]["ID"])
        self.s3.put_object_acl(Bucket="main", Key="ni", ACL="private")


class S3OverTlsTest(unittest.TestCase):
    """Over https, boto3 >= 1.36 streams every upload as STREAMING-UNSIGNED-PAYLOAD-TRAILER."""

    def test_boto3_over_https(self):
        with tempfile.TemporaryDirectory() as d:
            cert, key = s3.self_signed_certificate(d)
            server = s3.hots3_server('\n[http.tls]\ncertificate = "%s"\nprivate_key = "%s"\n' % (cert, key))
            with server:
                c = client(server.port, scheme="https", verify=cert)
                c.create_bucket(Bucket="tls")
                body = data(3 * 1024 * 1024 + 5, 20)
                c.put_object(Bucket="tls", Key="k", Body=body)
                self.assertEqual(c.get_object(Bucket="tls", Key="k")["Body"].read(), body)
                with tempfile.NamedTemporaryFile() as f:
                    f.write(data(12 * 1024 * 1024, 21))
                    f.flush()
                    from boto3.s3.transfer import TransferConfig
                    c.upload_file(f.name, "tls", "big", Config=TransferConfig(multipart_threshold=5 * 1024 * 1024,
                                                                                 multipart_chunksize=5 * 1024 * 1024))
                self.assertEqual(c.head_object(Bucket="tls", Key="big")["ContentLength"], 12 * 1024 * 1024)


class VirtualHostTest(unittest.TestCase):
    """Virtual-hosted-style addressing ("<bucket>.<domain>") next to path style on one server.
    Names under the test domain resolve to 127.0.0.1 inside this process only."""

    DOMAIN = "s3.hots3.test"

    def test_virtual_hosted_and_path_style(self):
        real_getaddrinfo = socket.getaddrinfo

        def getaddrinfo(host, *args, **kwargs):
            if isinstance(host, str) and (host == self.DOMAIN or host.endswith("." + self.DOMAIN)):
                host = "127.0.0.1"
            return real_getaddrinfo(host, *args, **kwargs)

        server = s3.hots3_server('\n[s3]\ndomain = "%s"\n' % self.DOMAIN)
        with server, unittest.mock.patch("socket.getaddrinfo", getaddrinfo):
            endpoint = "http://%s:%d" % (self.DOMAIN, server.port)
            virtual = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=s3.ACCESS_KEY,
                                   aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
                                   config=Config(s3={"addressing_style": "virtual"}, retries={"max_attempts": 1},
                                                 signature_version="s3v4"))
            virtual.create_bucket(Bucket="vhost")
            body = data(100000, 30)
            virtual.put_object(Bucket="vhost", Key="dir/odd key+.bin", Body=body)
            got = virtual.get_object(Bucket="vhost", Key="dir/odd key+.bin", Range="bytes=10-19")
            self.assertEqual(got["Body"].read(), body[10:20])
            listed = virtual.list_objects_v2(Bucket="vhost", Prefix="dir/", Delimiter="/")
            self.assertEqual([o["Key"] for o in listed["Contents"]], ["dir/odd key+.bin"])
            # Presigned URLs name the virtual host too: SigV4, and SigV2 (boto3's default).
            for version in ("s3v4", "s3"):
                signer = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=s3.ACCESS_KEY,
                                      aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
                                      config=Config(s3={"addressing_style": "virtual"}, signature_version=version))
                url = signer.generate_presigned_url("get_object", Params={"Bucket": "vhost", "Key": "dir/odd key+.bin"})
                self.assertIn("//vhost.%s:" % self.DOMAIN, url)
                with urllib.request.urlopen(url) as r:
                    self.assertEqual(r.read(), body)
            # The same object path-style, by IP and by the bare domain.
            self.assertEqual(client(server.port).get_object(Bucket="vhost", Key="dir/odd key+.bin")["Body"].read(), body)
            r = s3.send(server.port, s3.SignedRequest("GET", "/vhost/dir/odd key+.bin", port=server.port,
                                                      headers={"host": "%s:%d" % (self.DOMAIN, server.port)}).wire())
            self.assertEqual((r.status, r.body), (200, body))
            # A virtual host naming a bucket that does not exist.
            r = s3.send(server.port, s3.SignedRequest("GET", "/k", port=server.port,
                                                      headers={"host": "nothere.%s:%d" % (self.DOMAIN, server.port)}).wire())
            self.assertEqual(r.status, 404)
            self.assertIn(b"<Code>NoSuchBucket</Code>", r.body)
            virtual.delete_object(Bucket="vhost", Key="dir/odd key+.bin")
            virtual.delete_bucket(Bucket="vhost")

if __name__ == "__main__":
    unittest.main(verbosity=2)
