"""What S3 Express One Zone offers beyond the S3 standard, against a real hots3 process:
RenameObject (PUT /bucket/key?renameObject, x-amz-rename-source, conditions on both objects,
x-amz-client-token) and appends (PutObject with x-amz-write-offset-bytes). boto3 1.43 (the
image's python3), the AWS CLI v1, and raw HTTP for the headers SDKs do not send."""

import base64
import datetime
import hashlib
import os
import re
import subprocess
import sys
import threading
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

MiB = 1024 * 1024


def client(port):
    return boto3.client(
        "s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=s3.ACCESS_KEY,
        aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


def http_date(delta_s):
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=delta_s)
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


def code(e):
    return e.exception.response["Error"]["Code"]


def _table(poly, width):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table, (1 << width) - 1


_CRC64NVME = _table(0x9A6C9329AC4BC9B5, 64)
_CRC32C = _table(0x82F63B78, 32)


def _crc(spec, data):
    table, mask = spec
    c = mask
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ mask


def b64(value, width):
    return base64.b64encode(value.to_bytes(width, "big")).decode()


def crc64nvme(data):
    return b64(_crc(_CRC64NVME, data), 8)


def crc32c(data):
    return b64(_crc(_CRC32C, data), 4)


def crc32(data):
    return b64(zlib.crc32(data), 4)


class ExpressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server().start()
        cls.port = cls.server.port
        cls.s3 = client(cls.port)
        cls.s3.create_bucket(Bucket="express")
        cls.s3.create_bucket(Bucket="express-other")

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
            # Renames and appends (the losers of races included) leak no space.
            logged = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", cls.server.read_stderr())
            check = subprocess.run([harness.find_binary("HOTS3_BIN", "hots3"), "check", "--data",
                                    os.path.join(cls.server.dir, "data")], capture_output=True, text=True, timeout=300)
            assert check.returncode == 0, check.stdout + check.stderr
            referenced = int(re.search(r"referenced .*?\((\d+) bytes\)", check.stdout).group(1))
            assert (int(logged.group(1)), int(logged.group(2))) == (referenced, 0), (logged.group(0), check.stdout)
        finally:
            cls.server.cleanup()

    def raw(self, method, key, query=(), headers=None, body=b"", bucket="express"):
        req = s3.SignedRequest(method, "/%s/%s" % (bucket, key), query, headers, body=body, port=self.port)
        return s3.send(self.port, req.wire())

    def rename(self, source, target, headers=None):
        h = {"x-amz-rename-source": s3.uri_encode("/express/" + source, True)}
        h.update(headers or {})
        return self.raw("PUT", target, [("renameObject", "")], headers=h)

    def body(self, key):
        return self.s3.get_object(Bucket="express", Key=key)["Body"].read()

    def missing(self, key):
        try:
            self.s3.head_object(Bucket="express", Key=key)
            return False
        except ClientError as e:
            self.assertEqual(e.response["Error"]["Code"], "404")
            return True

    # ---- RenameObject -------------------------------------------------------------------------

    def test_boto3_rename_moves_the_object_with_its_metadata(self):
        put = self.s3.put_object(Bucket="express", Key="ckpt/step-1.tmp", Body=data(3 * MiB, 1),
                                 ContentType="application/x-ckpt", Metadata={"step": "1"})
        r = self.s3.rename_object(Bucket="express", Key="ckpt/step-1", RenameSource="express/ckpt/step-1.tmp")
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 200)
        self.assertTrue(self.missing("ckpt/step-1.tmp"))
        got = self.s3.get_object(Bucket="express", Key="ckpt/step-1")
        self.assertEqual(got["Body"].read(), data(3 * MiB, 1))
        self.assertEqual(got["ETag"], put["ETag"])
        self.assertEqual(got["ContentType"], "application/x-ckpt")
        self.assertEqual(got["Metadata"], {"step": "1"})
        keys = [o["Key"] for o in self.s3.list_objects_v2(Bucket="express", Prefix="ckpt/")["Contents"]]
        self.assertEqual(keys, ["ckpt/step-1"])
        # A source with a leading slash, and keys that need URL encoding.
        self.s3.put_object(Bucket="express", Key="dir/a b+ü.tmp", Body=b"odd")
        self.s3.rename_object(Bucket="express", Key="dir/a b+ü", RenameSource="/express/dir/a b+ü.tmp")
        self.assertEqual(self.body("dir/a b+ü"), b"odd")
        r = self.rename("dir/a b+ü", "dir/plain")
        self.assertEqual((r.status, r.body), (200, b""))
        self.assertEqual(self.body("dir/plain"), b"odd")

    def test_if_none_match_star_never_overwrites(self):
        self.s3.put_object(Bucket="express", Key="manifest", Body=b"committed")
        self.s3.put_object(Bucket="express", Key="manifest.tmp", Body=b"second")
        with self.assertRaises(ClientError) as e:
            self.s3.rename_object(Bucket="express", Key="manifest", RenameSource="express/manifest.tmp",
                                  DestinationIfNoneMatch="*")
        self.assertEqual(code(e), "PreconditionFailed")
        self.assertEqual(self.body("manifest"), b"committed")
        self.assertEqual(self.body("manifest.tmp"), b"second")
        # Without the condition the destination is replaced.
        self.s3.rename_object(Bucket="express", Key="manifest", RenameSource="express/manifest.tmp")
        self.assertEqual(self.body("manifest"), b"second")
        self.assertTrue(self.missing("manifest.tmp"))

    def test_errors(self):
        with self.assertRaises(ClientError) as e:
            self.s3.rename_object(Bucket="express", Key="to", RenameSource="express/never-written")
        self.assertEqual(code(e), "NoSuchKey")
        r = self.raw("PUT", "to", [("renameObject", "")])
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidRequest</Code>", r.body)
        r = self.raw("PUT", "to", [("renameObject", "")], headers={"x-amz-rename-source": "no-key"})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidArgument</Code>", r.body)
        self.s3.put_object(Bucket="express-other", Key="elsewhere", Body=b"x")
        r = self.raw("PUT", "to", [("renameObject", "")], headers={"x-amz-rename-source": "/express-other/elsewhere"})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidRequest</Code>", r.body)
        r = self.raw("PUT", "to", [("renameObject", "")], bucket="no-such-bucket",
                     headers={"x-amz-rename-source": "/no-such-bucket/a"})
        self.assertEqual(r.status, 404)
        self.assertIn(b"<Code>NoSuchBucket</Code>", r.body)
        r = self.rename("x", "to", {"x-amz-client-token": "bad token"})
        self.assertEqual(r.status, 400)

    def test_destination_conditions(self):
        etag = self.s3.put_object(Bucket="express", Key="dst", Body=b"old")["ETag"]
        cases = [  # (headers, renamed?)
            ({"If-Match": '"0123"'}, False),
            ({"If-Match": etag}, True),
            ({"If-None-Match": "*"}, False),
            ({"If-None-Match": etag}, False),
            ({"If-None-Match": '"0123"'}, True),
            ({"If-Unmodified-Since": http_date(-3600)}, False),
            ({"If-Unmodified-Since": http_date(3600)}, True),
            ({"If-Modified-Since": http_date(3600)}, False),
            ({"If-Modified-Since": http_date(-3600)}, True),
        ]
        for n, (headers, renamed) in enumerate(cases):
            self.s3.put_object(Bucket="express", Key="src-%d" % n, Body=b"new-%d" % n)
            r = self.rename("src-%d" % n, "dst", headers)
            if renamed:
                self.assertEqual(r.status, 200, (headers, r.body))
                self.assertEqual(self.body("dst"), b"new-%d" % n)
                self.assertTrue(self.missing("src-%d" % n))
                etag = self.s3.put_object(Bucket="express", Key="dst", Body=b"old")["ETag"]
            else:
                self.assertEqual(r.status, 412, (headers, r.body))
                self.assertIn(b"<Code>PreconditionFailed</Code>", r.body)
                self.assertEqual(self.body("dst"), b"old")
                self.assertEqual(self.body("src-%d" % n), b"new-%d" % n)
        # No destination: If-Match and If-Modified-Since need one; the others hold.
        for n, (headers, renamed) in enumerate([({"If-Match": etag}, False), ({"If-Modified-Since": http_date(-3600)}, False),
                                                ({"If-None-Match": "*"}, True), ({"If-Unmodified-Since": http_date(-3600)}, True)]):
            self.s3.put_object(Bucket="express", Key="lone-%d" % n, Body=b"lone")
            r = self.rename("lone-%d" % n, "fresh-%d" % n, headers)
            self.assertEqual(r.status, 200 if renamed else 412, (headers, r.body))

    def test_source_conditions(self):
        prefix = "x-amz-rename-source-"
        cases = [
            ({prefix + "if-match": '"0123"'}, False),
            ({prefix + "if-match": "ETAG"}, True),
            ({prefix + "if-none-match": "*"}, False),
            ({prefix + "if-none-match": "ETAG"}, False),
            ({prefix + "if-none-match": '"0123"'}, True),
            ({prefix + "if-unmodified-since": http_date(-3600)}, False),
            ({prefix + "if-unmodified-since": http_date(3600)}, True),
            ({prefix + "if-modified-since": http_date(3600)}, False),
            ({prefix + "if-modified-since": http_date(-3600)}, True),
            ({prefix + "if-match": "ETAG", "If-None-Match": "*"}, True),
        ]
        for n, (headers, renamed) in enumerate(cases):
            etag = self.s3.put_object(Bucket="express", Key="s-%d" % n, Body=b"s-%d" % n)["ETag"]
            headers = {k: v.replace("ETAG", etag) for k, v in headers.items()}
            r = self.rename("s-%d" % n, "t-%d" % n, headers)
            self.assertEqual(r.status, 200 if renamed else 412, (headers, r.body))
            self.assertEqual(self.missing("t-%d" % n), not renamed)
            self.assertEqual(self.missing("s-%d" % n), renamed)
        # boto3 sends them too.
        etag = self.s3.put_object(Bucket="express", Key="b-src", Body=b"b")["ETag"]
        with self.assertRaises(ClientError) as e:
            self.s3.rename_object(Bucket="express", Key="b-dst", RenameSource="express/b-src", SourceIfNoneMatch=etag)
        self.assertEqual(code(e), "PreconditionFailed")
        self.s3.rename_object(Bucket="express", Key="b-dst", RenameSource="express/b-src", SourceIfMatch=etag,
                              SourceIfUnmodifiedSince=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
        self.assertEqual(self.body("b-dst"), b"b")

    def test_client_token_makes_a_retry_idempotent(self):
        self.s3.put_object(Bucket="express", Key="tok-src", Body=b"tok")
        headers = {"x-amz-client-token": "retry-token-1", "If-None-Match": "*"}
        self.assertEqual(self.rename("tok-src", "tok-dst", headers).status, 200)
        # The retry of a rename that succeeded succeeds without doing anything again.
        self.s3.put_object(Bucket="express", Key="tok-src", Body=b"newer")
        self.assertEqual(self.rename("tok-src", "tok-dst", headers).status, 200)
        self.assertEqual(self.body("tok-dst"), b"tok")
        self.assertEqual(self.body("tok-src"), b"newer")
        # The same token with other parameters is refused.
        r = self.rename("tok-src", "tok-elsewhere", headers)
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>IdempotencyParameterMismatch</Code>", r.body)
        r = self.rename("tok-src", "tok-dst", {"x-amz-client-token": "retry-token-1"})
        self.assertEqual(r.status, 400)
        self.assertEqual(self.body("tok-src"), b"newer")
        # A token whose rename failed can be used again.
        r = self.rename("nothing-here", "tok-x", {"x-amz-client-token": "retry-token-2"})
        self.assertEqual(r.status, 404)
        self.assertEqual(self.rename("tok-src", "tok-x", {"x-amz-client-token": "retry-token-2"}).status, 200)

    def test_concurrent_renames_of_one_source_have_one_winner(self):
        for round_number in range(5):
            self.s3.put_object(Bucket="express", Key="race", Body=b"r%d" % round_number)
            results = {}

            def go(n):
                results[n] = self.rename("race", "race-%d-%d" % (round_number, n)).status

            threads = [threading.Thread(target=go, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(sorted(results.values()), [200, 404, 404, 404], results)
            winners = [n for n, status in results.items() if status == 200]
            self.assertEqual(self.body("race-%d-%d" % (round_number, winners[0])), b"r%d" % round_number)

    def test_aws_cli_v1_rename_object(self):
        self.s3.put_object(Bucket="express", Key="cli.tmp", Body=b"cli")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3.SECRET_KEY,
                   AWS_DEFAULT_REGION=s3.REGION, AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        run = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", "http://127.0.0.1:%d" % self.port,
                              "s3api", "rename-object", "--bucket", "express", "--key", "cli",
                              "--rename-source", "express/cli.tmp", "--destination-if-none-match", "*"],
                             env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.body("cli"), b"cli")
        self.assertTrue(self.missing("cli.tmp"))

    # ---- appends (PutObject with x-amz-write-offset-bytes) --------------------------------------

    def append(self, key, body, offset, headers=None):
        h = {"x-amz-write-offset-bytes": str(offset)}
        h.update(headers or {})
        return self.raw("PUT", key, headers=h, body=body)

    def test_crc64_vectors(self):  # the test's own CRCs, against the standard check values
        self.assertEqual(_crc(_CRC64NVME, b"123456789"), 0xAE8B14860A799888)
        self.assertEqual(_crc(_CRC32C, b"123456789"), 0xE3069283)

    def test_boto3_appends_build_the_object_in_parts(self):
        pieces = [data(5 * MiB + 7, 20), data(MiB, 21), data(10, 22), data(3 * MiB + 1, 23)]
        offset = 0
        for n, piece in enumerate(pieces):
            r = self.s3.put_object(Bucket="express", Key="shard.log", Body=piece, WriteOffsetBytes=offset)
            offset += len(piece)
            self.assertEqual(int(r["ResponseMetadata"]["HTTPHeaders"]["x-amz-object-size"]), offset)
            if n > 0:
                self.assertTrue(r["ETag"].endswith('-%d"' % (n + 1)), r["ETag"])
        whole = b"".join(pieces)
        got = self.s3.get_object(Bucket="express", Key="shard.log")
        self.assertEqual(got["Body"].read(), whole)
        self.assertEqual(got["ContentLength"], len(whole))
        # Every append is a part, readable on its own.
        head = self.s3.head_object(Bucket="express", Key="shard.log", PartNumber=3)
        self.assertEqual(head["PartsCount"], 4)
        self.assertEqual(head["ContentLength"], 10)
        part = self.s3.get_object(Bucket="express", Key="shard.log", PartNumber=2)["Body"].read()
        self.assertEqual(part, pieces[1])
        # boto3 sent CRC32 checksums: the object keeps the CRC32 of all of it.
        head = self.s3.head_object(Bucket="express", Key="shard.log", ChecksumMode="ENABLED")
        self.assertEqual(head.get("ChecksumCRC32"), crc32(whole))
        self.assertEqual(head.get("ChecksumType"), "FULL_OBJECT")
        # ETags differ from version to version.
        before = head["ETag"]
        self.s3.put_object(Bucket="express", Key="shard.log", Body=b"x", WriteOffsetBytes=len(whole))
        self.assertNotEqual(self.s3.head_object(Bucket="express", Key="shard.log")["ETag"], before)

    def test_offset_must_be_the_size(self):
        with self.assertRaises(ClientError) as e:
            self.s3.put_object(Bucket="express", Key="absent.log", Body=b"x", WriteOffsetBytes=5)
        self.assertEqual(code(e), "InvalidWriteOffset")
        self.assertTrue(self.missing("absent.log"))
        self.s3.put_object(Bucket="express", Key="sized.log", Body=b"12345")
        for wrong in (0, 4, 6):
            r = self.append("sized.log", b"more", wrong)
            self.assertEqual(r.status, 400, wrong)
            self.assertIn(b"<Code>InvalidWriteOffset</Code>", r.body)
        self.assertEqual(self.append("sized.log", b"more", 5).status, 200)
        self.assertEqual(self.body("sized.log"), b"12345more")
        r = self.append("sized.log", b"x", "-1")
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidArgument</Code>", r.body)

    def test_appends_refuse_what_s3_express_refuses(self):
        self.s3.put_object(Bucket="express", Key="meta.log", Body=b"abc", Metadata={"k": "v"})
        r = self.append("meta.log", b"def", 3, {"x-amz-meta-other": "x"})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>InvalidRequest</Code>", r.body)
        r = self.append("meta.log", b"", 3)
        self.assertEqual(r.status, 400)
        self.assertIn(b"Request body cannot be empty", r.body)
        r = self.append("meta.log", b"def", 3, {"If-None-Match": "*"})
        self.assertEqual(r.status, 412)
        r = self.append("meta.log", b"def", 3, {"If-Match": '"0123"'})
        self.assertEqual(r.status, 412)
        # The object was stored with a CRC32 (boto3's default): another algorithm is refused.
        r = self.append("meta.log", b"def", 3, {"x-amz-checksum-crc32c": crc32c(b"def")})
        self.assertEqual(r.status, 400)
        self.assertIn(b"Checksum Type mismatch occurred, expected checksum Type: crc32, actual checksum Type: crc32c",
                      r.body)
        r = self.append("meta.log", b"def", 3, {"x-amz-checksum-crc32": crc32(b"xyz")})
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)
        etag = self.s3.head_object(Bucket="express", Key="meta.log")["ETag"]
        r = self.append("meta.log", b"def", 3, {"If-Match": etag, "x-amz-checksum-crc32": crc32(b"def")})
        self.assertEqual(r.status, 200, r.body)
        got = self.s3.get_object(Bucket="express", Key="meta.log")
        self.assertEqual(got["Body"].read(), b"abcdef")
        self.assertEqual(got["Metadata"], {"k": "v"})  # the object keeps its metadata
        # Offset 0 creates an object that does not exist, with metadata if asked.
        r = self.append("fresh.log", b"first", 0, {"x-amz-meta-a": "b"})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("x-amz-object-size"), "5")
        self.assertEqual(r.header("etag"), '"%s"' % hashlib.md5(b"first").hexdigest())
        self.assertEqual(self.s3.head_object(Bucket="express", Key="fresh.log")["Metadata"], {"a": "b"})

    def test_the_full_object_crc64nvme_is_carried_on(self):
        # Raw PUTs without a checksum: hots3 keeps a CRC64NVME of its own; appends extend it,
        # for small (inline) objects and large ones alike.
        for key, first in (("crc-small", data(300, 30)), ("crc-large", data(200000, 31))):
            self.assertEqual(self.raw("PUT", key, body=first).status, 200)
            whole = first
            for n in range(3):
                piece = data(1000 * (n + 1), 32 + n)
                r = self.append(key, piece, len(whole))
                self.assertEqual(r.status, 200, r.body)
                whole += piece
                self.assertEqual(r.header("x-amz-checksum-crc64nvme"), crc64nvme(whole))
            head = self.s3.head_object(Bucket="express", Key=key, ChecksumMode="ENABLED")
            self.assertEqual(head["ChecksumCRC64NVME"], crc64nvme(whole))
            self.assertEqual(self.body(key), whole)

    def test_concurrent_appends_at_one_offset_have_one_winner(self):
        for key, first in (("race-small.log", b"s" * 100), ("race-large.log", data(300000, 40))):
            self.s3.put_object(Bucket="express", Key=key, Body=first)
            for round_number in range(3):
                size = len(self.body(key))
                results = {}

                def go(n):
                    results[n] = self.append(key, data(70000, 100 * round_number + n), size).status

                threads = [threading.Thread(target=go, args=(n,)) for n in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                winners = [n for n, status in results.items() if status == 200]
                self.assertEqual(len(winners), 1, results)
                self.assertEqual(sorted(results.values()), [200, 400, 400, 400], results)
                got = self.body(key)
                self.assertEqual(len(got), size + 70000)
                self.assertEqual(got[size:], data(70000, 100 * round_number + winners[0]))


class DirectoryBucketTest(unittest.TestCase):
    """Directory buckets (base--zone--x-s3) created, described, used and deleted with boto3 signing
    as S3 Express does for them (service s3express), the session handshake left out."""

    BUCKET = "ckpt--use1-az4--x-s3"

    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server().start()
        cls.s3 = boto3.client(
            "s3", endpoint_url="http://127.0.0.1:%d" % cls.server.port, aws_access_key_id=s3.ACCESS_KEY,
            aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
            config=Config(s3={"disable_s3_express_session_auth": True}, retries={"max_attempts": 1}))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def configuration(self, zone="use1-az4", kind="Directory"):
        return {"Location": {"Type": "AvailabilityZone", "Name": zone},
                "Bucket": {"DataRedundancy": "SingleAvailabilityZone", "Type": kind}}

    def test_a_directory_bucket_is_created_described_used_and_deleted(self):
        scopes = []

        def note_scope(request, **_):
            auth = request.headers.get("Authorization")
            scopes.append(auth.decode() if isinstance(auth, bytes) else auth)
        self.s3.meta.events.register("before-send.s3", note_scope)
        try:
            self.s3.create_bucket(Bucket=self.BUCKET, CreateBucketConfiguration=self.configuration())
        finally:
            self.s3.meta.events.unregister("before-send.s3", note_scope)
        self.assertIn("/s3express/aws4_request", scopes[-1])  # signed as for S3 Express
        head = self.s3.head_bucket(Bucket=self.BUCKET)["ResponseMetadata"]["HTTPHeaders"]
        self.assertEqual((head["x-amz-bucket-location-type"], head["x-amz-bucket-location-name"]),
                         ("AvailabilityZone", "use1-az4"))
        body = data(3 * MiB + 1, 7)
        self.s3.put_object(Bucket=self.BUCKET, Key="a/b", Body=body)
        self.assertEqual(self.s3.get_object(Bucket=self.BUCKET, Key="a/b")["Body"].read(), body)
        self.s3.delete_object(Bucket=self.BUCKET, Key="a/b")
        self.s3.delete_bucket(Bucket=self.BUCKET)
        with self.assertRaises(ClientError) as gone:
            self.s3.head_bucket(Bucket=self.BUCKET)
        self.assertEqual(gone.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)

    def test_a_directory_bucket_needs_its_configuration_and_its_zone(self):
        for bucket, kwargs, expected in (
                ("other--use1-az4--x-s3", {}, "InvalidRequest"),
                ("other--use1-az4--x-s3", {"CreateBucketConfiguration": self.configuration("use1-az5")},
                 "InvalidArgument"),
                ("other--use1-az4--x-s3", {"CreateBucketConfiguration": self.configuration(kind="General")},
                 "InvalidRequest"),
                ("other-use1-az4-x-s3", {"CreateBucketConfiguration": self.configuration()}, "InvalidBucketName"),
                ("Other--use1-az4--x-s3", {"CreateBucketConfiguration": self.configuration()}, "InvalidBucketName")):
            with self.assertRaises(ClientError) as refused:
                self.s3.create_bucket(Bucket=bucket, **kwargs)
            self.assertEqual(code(refused), expected, (bucket, kwargs))
            with self.assertRaises(ClientError):
                self.s3.head_bucket(Bucket=bucket)


if __name__ == "__main__":
    unittest.main(verbosity=2)
