"""The tiering scenario matrix against a real upstream S3: in each mode (writeback, writethrough,
cache) a PUT, a multipart upload, a copy, a rename, an overwrite and a delete made through hots3
end with the upstream bucket holding what hots3 holds (the same bytes, ETag, content headers and
metadata, under upstream_prefix + key), an object evicted here reads back through, and what
another writer puts upstream is read through on a miss.

The upstream is a second hots3 by default. HOTS3_TIER_PEER="ENDPOINT ACCESS_KEY SECRET_KEY"
names another S3 instead (`bench/peers/radosgw.sh tier` runs this file against Ceph's radosgw): the
matrix then shows what hots3 does with that server's own answers."""

import hashlib
import os
import shutil
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import s3_support  # noqa: E402
import boto3  # noqa: E402
import botocore.config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from test_tier_writeback import KiB, MiB, client, data, run_hots3, tier_config  # noqa: E402

PEER = os.environ.get("HOTS3_TIER_PEER", "").split()


def status_of(call):
    """The HTTP status a client call failed with; 200 when it did not."""
    try:
        call()
        return 200
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]


def sha256(body):
    return hashlib.sha256(body).hexdigest()


class Matrix:
    """A hots3 whose bucket "mat" is bound in `mode` to the upstream's bucket under prefix
    "<mode>/"; each test uses keys of its own."""

    mode = None

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hots3-matrix-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        cls.upstream = None
        cls.local = None
        try:
            if PEER:
                endpoint, access, secret = PEER
                cls.up_bucket = "hots3-matrix-%s" % uuid.uuid4().hex[:12]
            else:
                cls.upstream = s3_support.hots3_server(device_size="1GiB").start()
                endpoint = "http://127.0.0.1:%d" % cls.upstream.port
                access, secret = s3_support.ACCESS_KEY, s3_support.SECRET_KEY
                cls.up_bucket = "golden"
            cls.up = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                                  aws_secret_access_key=secret, region_name=s3_support.REGION,
                                  config=botocore.config.Config(s3={"addressing_style": "path"}))
            cls.up.create_bucket(Bucket=cls.up_bucket)
            credentials = os.path.join(cls.dir, "upstream.toml")
            with open(credentials, "w") as f:
                f.write('access_key = "%s"\nsecret_key = "%s"\n' % (access, secret))
            cls.prefix = cls.mode + "/"
            config = tier_config(endpoint, credentials, prefix=cls.prefix, bucket="mat", mode=cls.mode,
                                 delay="200ms", upstream_bucket=cls.up_bucket)
            cls.local = s3_support.hots3_server(config, device_size="1GiB").start()
            cls.s3 = client(cls.local.port)
            cls.endpoint = "http://127.0.0.1:%d" % cls.local.port
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.local is not None:
                assert cls.local.stop() == 0
        finally:
            if cls.local is not None:
                cls.local.cleanup()
            if PEER and hasattr(cls, "up"):
                cls.empty_peer_bucket()
            if cls.upstream is not None:
                cls.upstream.stop()
                cls.upstream.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def empty_peer_bucket(cls):
        """Leaves the peer as it was: the test's objects, uploads and bucket go."""
        try:
            for page in cls.up.get_paginator("list_objects_v2").paginate(Bucket=cls.up_bucket):
                for o in page.get("Contents", []):
                    cls.up.delete_object(Bucket=cls.up_bucket, Key=o["Key"])
            for u in cls.up.list_multipart_uploads(Bucket=cls.up_bucket).get("Uploads", []):
                cls.up.abort_multipart_upload(Bucket=cls.up_bucket, Key=u["Key"], UploadId=u["UploadId"])
            cls.up.delete_bucket(Bucket=cls.up_bucket)
        except ClientError as e:
            print("the peer's bucket %s stays: %s" % (cls.up_bucket, e), file=sys.stderr)

    def settle(self, key):
        """Write-back: waits until everything acknowledged under `key` is upstream. The other
        modes acknowledge only what the upstream holds, so nothing is waited for."""
        if self.mode != "writeback":
            return
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "mat",
                                 "--prefix", key, "--wait")
        self.assertEqual(rc, 0, out + err)

    def upstream_head(self, key):
        """The upstream's HEAD of `key` (local name); None when it has none."""
        try:
            return self.up.head_object(Bucket=self.up_bucket, Key=self.prefix + key)
        except ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                return None
            raise

    def upstream_body(self, key):
        return self.up.get_object(Bucket=self.up_bucket, Key=self.prefix + key)["Body"].read()

    def assertSameUpstream(self, key, body):
        """The upstream holds `key` with `body` and the ETag hots3 gives it."""
        local = self.s3.head_object(Bucket="mat", Key=key)
        up = self.upstream_head(key)
        self.assertIsNotNone(up, "%s is not upstream" % key)
        self.assertEqual(up["ETag"], local["ETag"])
        self.assertEqual(up["ContentLength"], len(body))
        self.assertEqual(sha256(self.upstream_body(key)), sha256(body))
        return up

    def test_a_put_goes_up_with_its_headers_and_metadata(self):
        body = data(100 * KiB, seed=1)
        self.s3.put_object(Bucket="mat", Key="put/one", Body=body, ContentType="application/x-tensor",
                           CacheControl="no-cache", ContentDisposition="attachment",
                           Metadata={"step": "1200", "run": "a"})
        self.settle("put/")
        up = self.assertSameUpstream("put/one", body)
        self.assertEqual(up["ContentType"], "application/x-tensor")
        self.assertEqual(up["CacheControl"], "no-cache")
        self.assertEqual(up["ContentDisposition"], "attachment")
        self.assertEqual(up["Metadata"], {"step": "1200", "run": "a"})
        self.assertEqual(sha256(self.s3.get_object(Bucket="mat", Key="put/one")["Body"].read()), sha256(body))

    def test_a_multipart_upload_keeps_its_parts_and_etag(self):
        parts = [data(5 * MiB, seed=2), data(5 * MiB, seed=3), data(MiB + 7, seed=4)]
        upload = self.s3.create_multipart_upload(Bucket="mat", Key="mpu/big", ContentType="application/x-shard",
                                                 Metadata={"shard": "3"})["UploadId"]
        done = [{"PartNumber": n + 1,
                 "ETag": self.s3.upload_part(Bucket="mat", Key="mpu/big", UploadId=upload, PartNumber=n + 1,
                                             Body=p)["ETag"]}
                for n, p in enumerate(parts)]
        etag = self.s3.complete_multipart_upload(Bucket="mat", Key="mpu/big", UploadId=upload,
                                                 MultipartUpload={"Parts": done})["ETag"]
        self.assertTrue(etag.endswith('-3"'), etag)
        self.settle("mpu/")
        up = self.assertSameUpstream("mpu/big", b"".join(parts))
        self.assertEqual(up["ContentType"], "application/x-shard")
        self.assertEqual(up["Metadata"], {"shard": "3"})
        # (The same "<md5 of the parts' MD5s>-3" ETag upstream: the same part boundaries.)
        self.assertEqual(self.up.list_multipart_uploads(Bucket=self.up_bucket,
                                                        Prefix=self.prefix + "mpu/").get("Uploads", []), [])

    def test_a_copy_and_a_rename_follow(self):
        body = data(300 * KiB, seed=5)
        self.s3.put_object(Bucket="mat", Key="cr/src", Body=body)
        self.s3.copy_object(Bucket="mat", Key="cr/copy", CopySource={"Bucket": "mat", "Key": "cr/src"})
        self.s3.rename_object(Bucket="mat", Key="cr/moved", RenameSource="mat/cr/copy")
        self.settle("cr/")
        self.assertSameUpstream("cr/src", body)
        self.assertSameUpstream("cr/moved", body)
        self.assertIsNone(self.upstream_head("cr/copy"))
        self.assertEqual(status_of(lambda: self.s3.head_object(Bucket="mat", Key="cr/copy")), 404)

    def test_an_overwrite_and_a_delete_follow(self):
        self.s3.put_object(Bucket="mat", Key="od/k", Body=b"first")
        self.settle("od/")
        self.assertSameUpstream("od/k", b"first")
        self.s3.put_object(Bucket="mat", Key="od/k", Body=b"second, longer")
        self.settle("od/")
        self.assertSameUpstream("od/k", b"second, longer")
        self.s3.delete_object(Bucket="mat", Key="od/k")
        self.settle("od/")
        self.assertIsNone(self.upstream_head("od/k"))
        self.assertEqual(status_of(lambda: self.s3.get_object(Bucket="mat", Key="od/k")), 404)

    def test_an_evicted_object_reads_back_through(self):
        body = data(2 * MiB + 3, seed=6)
        self.s3.put_object(Bucket="mat", Key="ev/k", Body=body)
        self.settle("ev/")
        rc, out, err = run_hots3("tier", "evict", "--endpoint", self.endpoint, "--bucket", "mat", "--prefix", "ev/")
        self.assertEqual(rc, 0, out + err)
        got = self.s3.get_object(Bucket="mat", Key="ev/k", Range="bytes=1000-1999")["Body"].read()
        self.assertEqual(got, body[1000:2000])
        self.assertEqual(sha256(self.s3.get_object(Bucket="mat", Key="ev/k")["Body"].read()), sha256(body))

    def test_what_another_writer_puts_upstream_after_a_404_reads_through_at_once(self):
        # A miss is not remembered (negative_ttl is 0 unless set): the next GET asks again.
        for ask in (lambda: self.s3.head_object(Bucket="mat", Key="theirs/k"),
                    lambda: self.s3.get_object(Bucket="mat", Key="theirs/k")):
            self.assertEqual(status_of(ask), 404)
        body = data(700 * KiB, seed=7)
        self.up.put_object(Bucket=self.up_bucket, Key=self.prefix + "theirs/k", Body=body,
                           ContentType="text/csv")
        got = self.s3.get_object(Bucket="mat", Key="theirs/k")
        self.assertEqual(got["ContentType"], "text/csv")
        self.assertEqual(sha256(got["Body"].read()), sha256(body))


class WriteBackMatrix(Matrix, unittest.TestCase):
    mode = "writeback"


class WriteThroughMatrix(Matrix, unittest.TestCase):
    mode = "writethrough"


class CacheMatrix(Matrix, unittest.TestCase):
    mode = "cache"


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    failed = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (max(0, result.testsRun - failed - len(result.skipped)), failed))
    sys.exit(1 if failed or not result.testsRun else 0)
