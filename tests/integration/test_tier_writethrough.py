"""Write-through to an upstream S3, end to end: a hots3 whose bucket is bound in mode
"writethrough" to a second hots3 used as the upstream, with a fault proxy between them. A 200
means the upstream holds the version too (same bytes, ETag, content headers and metadata); a PUT
the upstream does not take leaves the previous version visible, here and there; a body the
client's own checksum refuses never completes upstream; another writer's upstream version is a
conflict the client hears of; deletes, copies, renames, appends and multipart uploads are
upstream before their 200 as well."""

import base64
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402

from botocore.exceptions import ClientError  # noqa: E402
from test_tier_writeback import (KiB, MiB, PREFIX, client, data, health, tier_config,  # noqa: E402
                                 write_credentials)


def writethrough_config(endpoint, credentials_file, delay="60s"):
    """By default the write-back delay is long: whatever is upstream right after a 200 went there
    because the request waited for it, not because a queue happened to drain meanwhile."""
    return tier_config(endpoint, credentials_file, bucket="wtb", mode="writethrough", delay=delay)


def etag_of(s3, bucket, key):
    """The key's ETag there; None when it has none."""
    try:
        return s3.head_object(Bucket=bucket, Key=key)["ETag"]
    except ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return None
        raise


def no_retry_client(port):
    """A client that sends each request once: what a failed PUT answered is what the test sees."""
    import boto3
    import botocore.config
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port,
                        aws_access_key_id=s3_support.ACCESS_KEY,
                        aws_secret_access_key=s3_support.SECRET_KEY, region_name=s3_support.REGION,
                        config=botocore.config.Config(retries={"total_max_attempts": 1}))


def error_code(e):
    return e.response["Error"]["Code"]


class WriteThroughTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hots3-wt-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        cls.credentials = write_credentials(cls.dir)
        cls.upstream = s3_support.hots3_server(device_size="1GiB").start()
        cls.up = client(cls.upstream.port)
        cls.up.create_bucket(Bucket="team-ckpt")
        cls.proxy = fault_proxy.FaultProxy(cls.upstream.port).start()
        cls.local = None
        try:
            cls.local = s3_support.hots3_server(
                writethrough_config("http://127.0.0.1:%d" % cls.proxy.port, cls.credentials),
                device_size="1GiB").start()
        except Exception:
            cls.tearDownClass()
            raise
        cls.s3 = client(cls.local.port)
        cls.once = no_retry_client(cls.local.port)

    @classmethod
    def tearDownClass(cls):
        try:
            for server in (cls.local, cls.upstream):
                if server is not None and server.proc is not None and server.proc.poll() is None:
                    assert server.stop() == 0
        finally:
            cls.proxy.stop()
            for server in (cls.local, cls.upstream):
                if server is not None:
                    server.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.proxy.slowdown = 0.0
        self.proxy.reset_after = None
        self.proxy.lose_answer = False
        self.proxy.fail_answer = False
        self.proxy.refuse_heads = 0

    def upstream_etag(self, key):
        return etag_of(self.up, "team-ckpt", PREFIX + key)

    def local_etag(self, key):
        return etag_of(self.s3, "wtb", key)

    def test_a_put_is_upstream_when_it_is_acknowledged(self):
        body = data(3 * MiB + 17, seed=1)
        put = self.s3.put_object(Bucket="wtb", Key="model/shard-0", Body=body,
                                 ContentType="application/x-tensor", Metadata={"step": "1200"})
        self.assertEqual(put["ETag"], '"%s"' % hashlib.md5(body).hexdigest())
        held = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "model/shard-0")
        self.assertEqual(held["Body"].read(), body)
        self.assertEqual(held["ETag"], put["ETag"])
        self.assertEqual(held["ContentType"], "application/x-tensor")
        self.assertEqual(held["Metadata"], {"step": "1200"})
        self.assertEqual(self.s3.get_object(Bucket="wtb", Key="model/shard-0")["Body"].read(), body)

        # What a client vouches for in headers goes up with the body; an empty body as well.
        md5 = base64.b64encode(hashlib.md5(b"tiny").digest()).decode()
        self.s3.put_object(Bucket="wtb", Key="tiny", Body=b"tiny", ContentMD5=md5)
        self.assertEqual(self.upstream_etag("tiny"), '"%s"' % hashlib.md5(b"tiny").hexdigest())
        self.s3.put_object(Bucket="wtb", Key="empty", Body=b"")
        self.assertEqual(self.upstream_etag("empty"), '"d41d8cd98f00b204e9800998ecf8427e"')

    def test_an_upstream_cut_off_mid_body_fails_the_put_and_keeps_the_previous_version(self):
        before = self.s3.put_object(Bucket="wtb", Key="ckpt", Body=data(MiB, seed=2))["ETag"]
        self.proxy.reset_after = 512 * KiB
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="ckpt", Body=data(4 * MiB, seed=3))
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        self.assertEqual(self.proxy.reset_after, None, "the proxy never cut the upstream PUT off")
        self.assertEqual(self.local_etag("ckpt"), before)
        self.assertEqual(self.upstream_etag("ckpt"), before)
        # The key is free again: the next PUT goes through.
        after = self.s3.put_object(Bucket="wtb", Key="ckpt", Body=data(2 * MiB, seed=4))["ETag"]
        self.assertEqual(self.upstream_etag("ckpt"), after)
        self.assertEqual(self.local_etag("ckpt"), after)

    def patient_client(self):
        """Sends each request once, and gives up on a body or an answer the server does not
        take or give for 20 s: a PUT left waiting fails."""
        import boto3
        import botocore.config
        return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % self.local.port,
                            aws_access_key_id=s3_support.ACCESS_KEY,
                            aws_secret_access_key=s3_support.SECRET_KEY,
                            region_name=s3_support.REGION,
                            config=botocore.config.Config(retries={"total_max_attempts": 1},
                                                          connect_timeout=20, read_timeout=20))

    def test_an_upstream_cut_off_while_the_request_waits_for_it_answers_and_frees_the_key(self):
        # The upstream takes the body slower than the client sends it, so the request waits for
        # the upload to take each piece when the upload is cut off.
        before = self.s3.put_object(Bucket="wtb", Key="slow", Body=data(MiB, seed=40))["ETag"]
        self.proxy.bandwidth = 2 * MiB
        self.proxy.reset_after = 3 * MiB
        try:
            with self.assertRaises(ClientError) as caught:
                self.patient_client().put_object(Bucket="wtb", Key="slow",
                                                 Body=data(64 * MiB, seed=41))
        finally:
            self.proxy.bandwidth = None
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        self.assertIsNone(self.proxy.reset_after, "the proxy never cut the upstream PUT off")
        self.assertEqual(self.local_etag("slow"), before)
        self.assertEqual(self.upstream_etag("slow"), before)
        after = self.patient_client().put_object(Bucket="wtb", Key="slow",
                                                 Body=data(MiB, seed=42))["ETag"]
        self.assertEqual(self.upstream_etag("slow"), after)

    def test_a_part_cut_off_upstream_while_the_request_waits_for_it_is_stored_here(self):
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key="slow-part")["UploadId"]
        part = data(32 * MiB, seed=43)
        self.proxy.bandwidth = 2 * MiB
        self.proxy.reset_after = 3 * MiB
        try:
            etag = self.patient_client().upload_part(Bucket="wtb", Key="slow-part",
                                                     UploadId=upload, PartNumber=1,
                                                     Body=part)["ETag"]
        finally:
            self.proxy.bandwidth = None
        self.assertIsNone(self.proxy.reset_after, "the proxy never cut the part off")
        done = self.s3.complete_multipart_upload(
            Bucket="wtb", Key="slow-part", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})["ETag"]
        self.assertEqual(self.upstream_etag("slow-part"), done)
        self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "slow-part")
                         ["Body"].read(), part)

    def test_a_refusing_upstream_fails_the_put_and_nothing_becomes_visible(self):
        self.proxy.slowdown = 1.0
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="refused", Body=b"x" * 1000)
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        self.assertIn("upstream", caught.exception.response["Error"]["Message"])
        self.proxy.slowdown = 0.0
        self.assertIsNone(self.local_etag("refused"))
        self.assertIsNone(self.upstream_etag("refused"))

    def test_a_body_its_checksum_refuses_never_completes_upstream(self):
        payload = data(300 * KiB, seed=5)

        def put(crc32):
            """A PUT streamed as aws-chunked with its CRC32 in the trailer (the 2025 SDKs' way)."""
            req = s3_support.SignedRequest(
                "PUT", "/wtb/damaged", payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                headers={"content-encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
                         "x-amz-decoded-content-length": str(len(payload))}, port=self.local.port)
            value = base64.b64encode(crc32.to_bytes(4, "big")).decode()
            return s3_support.send(self.local.port, req.wire(
                s3_support.aws_chunked_unsigned(payload, trailer=("x-amz-checksum-crc32", value))))

        r = put(zlib.crc32(payload) ^ 1)
        self.assertEqual(r.status, 400)
        self.assertIn(b"<Code>BadDigest</Code>", r.body)
        self.assertIsNone(self.local_etag("damaged"))
        self.assertIsNone(self.upstream_etag("damaged"))
        # The same body with its right checksum is stored in both places.
        r = put(zlib.crc32(payload))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(self.upstream_etag("damaged"), '"%s"' % hashlib.md5(payload).hexdigest())

    def test_another_writers_upstream_version_is_a_conflict_the_client_hears_of(self):
        self.s3.put_object(Bucket="wtb", Key="shared", Body=b"ours v1")
        theirs = self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "shared", Body=b"theirs")["ETag"]
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="shared", Body=b"ours v2")
        self.assertEqual(error_code(caught.exception), "ConditionalRequestConflict")
        self.assertEqual(self.upstream_etag("shared"), theirs)
        self.assertEqual(self.s3.get_object(Bucket="wtb", Key="shared")["Body"].read(), b"ours v1")
        # Told of it, the client writes again: its version replaces theirs, knowingly.
        again = self.s3.put_object(Bucket="wtb", Key="shared", Body=b"ours v2")["ETag"]
        self.assertEqual(self.upstream_etag("shared"), again)

    def test_an_answer_lost_on_the_way_back_is_settled_before_the_200(self):
        self.s3.put_object(Bucket="wtb", Key="lost", Body=b"v1")
        before = self.conflicts()
        self.proxy.lose_answer = True  # the upstream stores v2; hots3 never hears of it
        lost_before = self.proxy.lost
        v2 = self.s3.put_object(Bucket="wtb", Key="lost", Body=b"v2")["ETag"]
        self.assertEqual(self.proxy.lost, lost_before + 1)
        self.assertEqual(self.upstream_etag("lost"), v2)
        self.assertEqual(self.local_etag("lost"), v2)
        self.assertEqual(self.conflicts(), before)

    def test_a_server_error_after_the_whole_body_is_settled_by_asking_the_upstream(self):
        self.s3.put_object(Bucket="wtb", Key="err500", Body=b"v1")
        self.proxy.fail_answer = True  # the upstream stores v2; hots3 hears 500 InternalError
        v2 = self.once.put_object(Bucket="wtb", Key="err500", Body=b"v2")["ETag"]
        self.assertFalse(self.proxy.fail_answer, "the proxy never replaced the answer")
        self.assertEqual(self.upstream_etag("err500"), v2)
        self.assertEqual(self.local_etag("err500"), v2)

    def test_an_unsettled_put_answers_503_and_its_retry_is_stored(self):
        v1 = self.s3.put_object(Bucket="wtb", Key="unsettled", Body=b"v1")["ETag"]
        before = self.conflicts()
        v2 = '"%s"' % hashlib.md5(b"v2").hexdigest()
        self.proxy.lose_answer = True  # the upstream stores v2; hots3 never hears of it ...
        self.proxy.refuse_heads = 1    # ... and cannot ask
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="unsettled", Body=b"v2")
        self.assertEqual(error_code(caught.exception), "ServiceUnavailable")
        self.assertEqual(self.proxy.refuse_heads, 0, "hots3 never asked the upstream")
        self.assertEqual(self.local_etag("unsettled"), v1)  # nothing new is visible here
        self.assertEqual(self.upstream_etag("unsettled"), v2)
        # The client's retry meets its own body upstream: stored, and no conflict.
        self.assertEqual(self.once.put_object(Bucket="wtb", Key="unsettled", Body=b"v2")["ETag"], v2)
        self.assertEqual(self.local_etag("unsettled"), v2)
        self.assertEqual(self.conflicts(), before)

    def test_an_unsettled_put_the_client_gives_up_on_is_undone_upstream(self):
        v1 = self.s3.put_object(Bucket="wtb", Key="undone", Body=b"v1")["ETag"]
        before = self.conflicts()
        self.proxy.lose_answer = True
        self.proxy.refuse_heads = 1
        with self.assertRaises(ClientError):
            self.once.put_object(Bucket="wtb", Key="undone", Body=b"v2")
        self.assertEqual(self.upstream_etag("undone"), '"%s"' % hashlib.md5(b"v2").hexdigest())
        # Another body of ours in between: a 503 to retry, not a conflict.
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="undone", Body=b"v3")
        self.assertEqual(error_code(caught.exception), "ServiceUnavailable")
        # Given up on: the key's state here (v1) goes up again.
        self.flush("undone")
        self.assertEqual(self.upstream_etag("undone"), v1)
        self.assertEqual(self.local_etag("undone"), v1)
        self.assertEqual(self.conflicts(), before)

    def conflicts(self):
        """The bucket's conflicts, as the health report counts them once it is rebuilt (every
        second): what came before the call is in."""
        time.sleep(1.1)
        _, report = health(self.local.port)
        return [b["conflicts"] for b in report["buckets"] if b["bucket"] == "wtb"][0]

    def test_an_older_queued_change_never_overwrites_another_writers_version(self):
        v1 = self.s3.put_object(Bucket="wtb", Key="guarded", Body=b"v1")["ETag"]
        self.proxy.lose_answer = True
        self.proxy.refuse_heads = 1
        with self.assertRaises(ClientError):  # unsettled: a queued job now owes the upstream v1
            self.once.put_object(Bucket="wtb", Key="guarded", Body=b"v2")
        theirs = self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "guarded", Body=b"theirs")["ETag"]
        before = self.conflicts()
        with self.assertRaises(ClientError) as caught:
            self.once.put_object(Bucket="wtb", Key="guarded", Body=b"v3")
        self.assertEqual(error_code(caught.exception), "ConditionalRequestConflict")
        # The queued v1 meets their version on its own, and goes beside it (on_conflict's default).
        self.flush("guarded")
        self.assertEqual(self.upstream_etag("guarded"), theirs)
        listed = self.up.list_objects_v2(Bucket="team-ckpt", Prefix=PREFIX + "guarded.hots3-conflict-")
        self.assertEqual([o["ETag"] for o in listed.get("Contents", [])], [v1])
        self.assertEqual(self.local_etag("guarded"), v1)
        self.assertEqual(self.conflicts(), before + 2)  # the refused PUT, and the queued v1

    def flush(self, prefix):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3_support.ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=s3_support.SECRET_KEY)
        done = subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), "tier", "flush", "--endpoint",
                               "http://127.0.0.1:%d" % self.local.port, "--bucket", "wtb",
                               "--prefix", prefix, "--wait"],
                              env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_a_client_retry_after_a_cut_off_put_stores_it(self):
        # What SDKs do with the 503 of a PUT the upstream did not take: send it again.
        self.proxy.reset_after = 256 * KiB
        body = data(MiB, seed=9)
        etag = self.s3.put_object(Bucket="wtb", Key="retried", Body=body)["ETag"]
        self.assertEqual(self.proxy.reset_after, None)
        self.assertEqual(self.upstream_etag("retried"), etag)
        self.assertEqual(self.local_etag("retried"), etag)

    def test_concurrent_puts_of_one_key_end_the_same_here_and_upstream(self):
        bodies = [data(256 * KiB, seed=100 + i) for i in range(8)]

        def put(body):
            return client(self.local.port).put_object(Bucket="wtb", Key="race", Body=body)["ETag"]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            etags = list(pool.map(put, bodies))
        self.assertEqual(len(set(etags)), 8)
        final = self.local_etag("race")
        self.assertIn(final, etags)
        self.assertEqual(self.upstream_etag("race"), final)

    def upload(self, key, parts):
        """A multipart upload of `parts` through the client; the completed ETag."""
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key=key,
                                                 ContentType="application/x-tensor")["UploadId"]
        done = [{"PartNumber": n + 1,
                 "ETag": self.s3.upload_part(Bucket="wtb", Key=key, UploadId=upload,
                                             PartNumber=n + 1, Body=p)["ETag"]}
                for n, p in enumerate(parts)]
        return self.s3.complete_multipart_upload(Bucket="wtb", Key=key, UploadId=upload,
                                                 MultipartUpload={"Parts": done})["ETag"]

    def upstream_uploads(self, key):
        listed = self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix=PREFIX + key)
        return listed.get("Uploads", [])

    def test_multipart_parts_go_up_as_they_come_and_only_once(self):
        parts = [data(5 * MiB, seed=20 + n) for n in range(3)] + [data(MiB + 5, seed=23)]
        before = self.proxy.body_bytes
        etag = self.upload("teed", parts)
        sent = self.proxy.body_bytes - before
        self.assertEqual(self.upstream_etag("teed"), etag)
        held = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "teed")
        self.assertEqual(held["Body"].read(), b"".join(parts))
        self.assertEqual(held["ContentType"], "application/x-tensor")
        total = sum(len(p) for p in parts)
        self.assertGreaterEqual(sent, total)
        self.assertLess(sent, total + 64 * KiB, "parts were sent upstream twice")
        self.assertEqual(self.upstream_uploads("teed"), [])

    def test_a_part_the_upstream_did_not_take_is_sent_by_the_complete(self):
        parts = [data(5 * MiB, seed=30), data(5 * MiB, seed=31), data(MiB, seed=32)]
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key="gap")["UploadId"]
        etags = []
        for n, p in enumerate(parts):
            if n == 1:
                self.proxy.reset_after = MiB  # the second part's upstream side is cut off
            etags.append(self.once.upload_part(Bucket="wtb", Key="gap", UploadId=upload,
                                               PartNumber=n + 1, Body=p)["ETag"])
        self.assertIsNone(self.proxy.reset_after, "the proxy never cut a part off")
        before = self.proxy.body_bytes
        etag = self.s3.complete_multipart_upload(
            Bucket="wtb", Key="gap", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e}
                                       for n, e in enumerate(etags)]})["ETag"]
        sent = self.proxy.body_bytes - before
        self.assertEqual(self.upstream_etag("gap"), etag)
        self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "gap")["Body"].read(),
                         b"".join(parts))
        self.assertGreaterEqual(sent, len(parts[1]))
        self.assertLess(sent, len(parts[1]) + 64 * KiB, "the Complete sent more than the gap")
        self.assertEqual(self.upstream_uploads("gap"), [])

    def test_a_teed_part_replaced_upstream_is_sent_again_by_the_complete(self):
        # What a part sent again leaves when its commit here never comes (a kill, a failed
        # commit): the upstream upload holds other bytes for it than the catalog recorded.
        parts = [data(5 * MiB, seed=60), data(MiB, seed=61)]
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key="swapped")["UploadId"]
        etags = [self.s3.upload_part(Bucket="wtb", Key="swapped", UploadId=upload, PartNumber=n + 1,
                                     Body=p)["ETag"] for n, p in enumerate(parts)]
        [teed] = self.upstream_uploads("swapped")
        self.up.upload_part(Bucket="team-ckpt", Key=PREFIX + "swapped", UploadId=teed["UploadId"],
                            PartNumber=1, Body=data(5 * MiB, seed=62))
        etag = self.s3.complete_multipart_upload(
            Bucket="wtb", Key="swapped", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e}
                                       for n, e in enumerate(etags)]})["ETag"]
        self.assertEqual(self.upstream_etag("swapped"), etag)
        self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "swapped")["Body"].read(),
                         b"".join(parts))

    def test_an_aborted_upload_is_aborted_upstream(self):
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key="dropped")["UploadId"]
        self.s3.upload_part(Bucket="wtb", Key="dropped", UploadId=upload, PartNumber=1,
                            Body=data(5 * MiB, seed=40))
        self.assertEqual(len(self.upstream_uploads("dropped")), 1)
        self.s3.abort_multipart_upload(Bucket="wtb", Key="dropped", UploadId=upload)
        deadline = time.time() + 10
        while self.upstream_uploads("dropped") and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.upstream_uploads("dropped"), [])
        self.assertIsNone(self.upstream_etag("dropped"))

    def test_other_writes_are_upstream_before_their_answer(self):
        self.s3.put_object(Bucket="wtb", Key="a", Body=b"alpha")
        # A delete.
        self.s3.delete_object(Bucket="wtb", Key="a")
        self.assertIsNone(self.upstream_etag("a"))
        # A copy, and a rename of the copy.
        src = self.s3.put_object(Bucket="wtb", Key="src", Body=data(64 * KiB, seed=6))["ETag"]
        self.s3.copy_object(Bucket="wtb", Key="copy", CopySource={"Bucket": "wtb", "Key": "src"})
        self.assertEqual(self.upstream_etag("copy"), src)
        self.s3.rename_object(Bucket="wtb", Key="renamed", RenameSource="wtb/copy")
        self.assertEqual(self.upstream_etag("renamed"), src)
        self.assertIsNone(self.upstream_etag("copy"))
        # A multipart upload keeps its parts, and so its ETag, upstream.
        parts = [data(5 * MiB, seed=7), data(MiB, seed=8)]
        upload = self.s3.create_multipart_upload(Bucket="wtb", Key="mpu")["UploadId"]
        done = [{"PartNumber": n + 1,
                 "ETag": self.s3.upload_part(Bucket="wtb", Key="mpu", UploadId=upload,
                                             PartNumber=n + 1, Body=p)["ETag"]}
                for n, p in enumerate(parts)]
        etag = self.s3.complete_multipart_upload(Bucket="wtb", Key="mpu", UploadId=upload,
                                                 MultipartUpload={"Parts": done})["ETag"]
        self.assertEqual(self.upstream_etag("mpu"), etag)
        # An append.
        self.s3.put_object(Bucket="wtb", Key="log", Body=b"one,")
        appended = self.s3.put_object(Bucket="wtb", Key="log", Body=b"two", WriteOffsetBytes=4)
        held = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "log")
        self.assertEqual(held["Body"].read(), b"one,two")
        self.assertEqual(self.local_etag("log"), appended["ETag"])
        # DeleteObjects.
        self.s3.delete_objects(Bucket="wtb", Delete={"Objects": [{"Key": "src"}, {"Key": "mpu"}]})
        self.assertIsNone(self.upstream_etag("src"))
        self.assertIsNone(self.upstream_etag("mpu"))


class WriteThroughCrashTest(unittest.TestCase):
    """A kill -9 after the upstream took a PUT and before hots3 committed it: the upstream comes
    back to the version hots3 holds (the PUT was never acknowledged)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hots3-wt-crash-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        credentials = os.path.join(self.dir, "golden.toml")
        with open(credentials, "w") as f:
            f.write('access_key = "%s"\nsecret_key = "%s"\n' % (s3_support.ACCESS_KEY,
                                                                 s3_support.SECRET_KEY))
        self.upstream = s3_support.hots3_server(device_size="1GiB").start()
        self.addCleanup(self.upstream.cleanup)
        self.up = client(self.upstream.port)
        self.up.create_bucket(Bucket="team-ckpt")
        self.proxy = fault_proxy.FaultProxy(self.upstream.port).start()
        self.addCleanup(self.proxy.stop)
        self.config = writethrough_config("http://127.0.0.1:%d" % self.proxy.port, credentials,
                                          delay="200ms")
        self.workdir = os.path.join(self.dir, "local")
        os.makedirs(self.workdir)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.local = self.start_local()

    def start_local(self):
        server = s3_support.hots3_server(self.config, device_size="1GiB", workdir=self.workdir)
        self.addCleanup(server.cleanup)
        return server.start()

    def upstream_etag(self, key):
        return etag_of(self.up, "team-ckpt", PREFIX + key)

    def wait_upstream(self, key, etag, timeout=20):
        deadline = time.monotonic() + timeout
        while self.upstream_etag(key) != etag:
            if time.monotonic() > deadline:
                self.fail("the upstream's %s never became %s: %s" % (key, etag, self.upstream_etag(key)))
            time.sleep(0.05)

    def test_a_kill_between_the_upstream_and_the_commit_brings_the_upstream_back(self):
        s3 = client(self.local.port)
        v1 = s3.put_object(Bucket="wtb", Key="ckpt", Body=b"v1")["ETag"]
        self.assertEqual(self.upstream_etag("ckpt"), v1)
        v2 = '"%s"' % hashlib.md5(b"v2" * 1000).hexdigest()
        self.proxy.withhold_answer = True  # upstream PUTs are stored, and never answered
        once = no_retry_client(self.local.port)
        outcome = []

        def put(key):
            try:
                once.put_object(Bucket="wtb", Key=key, Body=b"v2" * 1000)
                outcome.append("acknowledged")
            except Exception as e:  # the server is killed under the request
                outcome.append(repr(e))

        writer = threading.Thread(target=put, args=("ckpt",))
        writer.start()
        self.wait_upstream("ckpt", v2)
        self.local.proc.kill()
        self.local.proc.wait()
        writer.join(30)
        self.assertNotIn("acknowledged", outcome)
        self.proxy.withhold_answer = False
        self.local = self.start_local()
        self.wait_upstream("ckpt", v1)
        self.assertEqual(client(self.local.port).head_object(Bucket="wtb", Key="ckpt")["ETag"], v1)

    def upstream_uploads(self, key):
        listed = self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix=PREFIX + key)
        return listed.get("Uploads", [])

    def kill_and_restart(self):
        """kill -9, a restart, and the restart's sweep of orphaned upstream uploads seen."""
        self.local.proc.kill()
        self.local.proc.wait()
        listings = sum(1 for line in self.proxy.lines if "?uploads" in line)
        self.local = self.start_local()
        deadline = time.monotonic() + 20
        while sum(1 for line in self.proxy.lines if "?uploads" in line) == listings:
            self.assertLess(time.monotonic(), deadline, "no sweep after the restart")
            time.sleep(0.05)

    def test_parts_teed_before_a_kill_are_not_sent_again(self):
        s3 = client(self.local.port)
        parts = [data(5 * MiB, seed=50), data(5 * MiB, seed=51), data(MiB, seed=52)]
        upload = s3.create_multipart_upload(Bucket="wtb", Key="big",
                                            ContentType="application/x-tensor")["UploadId"]
        etags = [s3.upload_part(Bucket="wtb", Key="big", UploadId=upload, PartNumber=n + 1,
                                Body=p)["ETag"] for n, p in enumerate(parts[:2])]
        self.kill_and_restart()
        # The sweep spares the upstream upload: the client may still finish it.
        self.assertEqual(len(self.upstream_uploads("big")), 1)
        s3 = client(self.local.port)
        before = self.proxy.body_bytes
        etags.append(s3.upload_part(Bucket="wtb", Key="big", UploadId=upload, PartNumber=3,
                                    Body=parts[2])["ETag"])
        etag = s3.complete_multipart_upload(
            Bucket="wtb", Key="big", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e}
                                       for n, e in enumerate(etags)]})["ETag"]
        sent = self.proxy.body_bytes - before
        self.assertEqual(self.upstream_etag("big"), etag)
        held = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "big")
        self.assertEqual(held["Body"].read(), b"".join(parts))
        self.assertEqual(held["ContentType"], "application/x-tensor")
        self.assertGreaterEqual(sent, len(parts[2]))
        self.assertLess(sent, len(parts[2]) + 64 * KiB, "parts teed before the kill went again")
        self.assertEqual(self.upstream_uploads("big"), [])

    def test_an_upload_aborted_after_a_kill_is_aborted_upstream(self):
        s3 = client(self.local.port)
        upload = s3.create_multipart_upload(Bucket="wtb", Key="left")["UploadId"]
        s3.upload_part(Bucket="wtb", Key="left", UploadId=upload, PartNumber=1,
                       Body=data(5 * MiB, seed=53))
        self.kill_and_restart()
        self.assertEqual(len(self.upstream_uploads("left")), 1)
        client(self.local.port).abort_multipart_upload(Bucket="wtb", Key="left", UploadId=upload)
        deadline = time.monotonic() + 10
        while self.upstream_uploads("left") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.upstream_uploads("left"), [])


if __name__ == "__main__":
    unittest.main()
