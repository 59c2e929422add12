"""Read-through of evicted objects: a write-back bucket's objects, once upstream, give their device
space back (`hots3 tier evict`); HEAD and LIST still answer from the catalog, and a GET brings the
data back from the upstream as the client reads it, verified, so that the next GET is local.

The upstream is a second hots3 behind the fault proxy, whose request lines show what went
upstream; the local store's catalog shows what it keeps."""

import concurrent.futures
import datetime
import hashlib
import io
import os
import re
import socket
import signal
import sqlite3
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402
from test_tier_writeback import (start_local, KiB, MiB, PREFIX, client, data, health, run_hots3,  # noqa: E402
                                 start_upstream, stop_servers, tier_config, wait_health)

import boto3.s3.transfer  # noqa: E402
import urllib3.exceptions  # noqa: E402
import botocore.config  # noqa: E402
import botocore.exceptions  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


def chunk_ranges(size):
    """The Range of each 8 MiB chunk of an object of `size` bytes, in order."""
    return ["bytes=%d-%d" % (at, min(at + 8 * MiB, size) - 1) for at in range(0, size, 8 * MiB)]


class TieredTest(unittest.TestCase):
    """A bucket bound to an upstream hots3 behind the fault proxy, in `mode`; `binding`: more of
    its [[tier.bucket]] entry."""

    binding = ""
    upstream_keys = ""
    mode = "writeback"

    @classmethod
    def setUpClass(cls):
        start_upstream(cls)
        cls.proxy = fault_proxy.FaultProxy(cls.upstream.port).start()
        cls.config = tier_config("http://127.0.0.1:%d" % cls.proxy.port, cls.credentials, binding=cls.binding,
                                 upstream=cls.upstream_keys, mode=cls.mode)
        start_local(cls, cls.config, "1GiB")

    @classmethod
    def tearDownClass(cls):
        stop_servers(cls)

    def flush_and_evict(self, prefix):
        """Everything under `prefix` upstream, then evicted; returns the evict command's output."""
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                  "--prefix", prefix, "--wait")
        self.assertEqual(rc, 0, out + err)
        rc, out, err = run_hots3("tier", "evict", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                  "--prefix", prefix)
        self.assertEqual(rc, 0, out + err)
        return out

    def catalog_rows(self, sql, args=()):
        """The rows `sql` finds in the local catalog (opened read-only)."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.local_dir, "data", "catalog.db"), uri=True)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def read_back_once_it_answers(self, key, body, timeout_s):
        """GETs `key` until the upstream answers a miss again (its reads are refused until a
        trial finds it does), then checks the bytes."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.assertEqual(self.s3.get_object(Bucket="ckpt", Key=key)["Body"].read(), body)
                return
            except ClientError:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.2)

    def until(self, condition, timeout_s=10):
        deadline = time.monotonic() + timeout_s
        while not condition():
            self.assertLess(time.monotonic(), deadline, "never came true")
            time.sleep(0.02)

    def until_here(self, key, timeout_s=30):
        """Waits until hots3 serves `key` as here and upstream. The catalog file shows a fill as
        soon as it commits; hots3 answers by it only once it is durable, a moment later."""
        self.until(lambda: self.s3.head_object(Bucket="ckpt", Key=key)["ResponseMetadata"]["HTTPHeaders"].get(
            "x-hots3-tier") == "clean", timeout_s)
        self.assertEqual(self.catalog(key)[0], 1)

    def catalog(self, key):
        """(tier_state, extents) of `key`'s current version in the local catalog."""
        [row] = self.catalog_rows("SELECT o.tier_state, (SELECT count(*) FROM extents e WHERE e.owner_id = o.id) "
                                  "FROM objects o WHERE o.key = ?", (key,))
        return tuple(row)

    def upstream_bytes(self, key):
        """Body bytes of the upstream's answers to GETs of `key` so far."""
        return self.proxy.object_bytes.get("/team-ckpt/" + PREFIX + key, 0)

    def upstream_ranges(self, key):
        """The Range of each GET of `key` that reached the upstream so far (None: the whole)."""
        path = "/team-ckpt/" + PREFIX + key
        return [asked for p, asked in list(self.proxy.object_gets) if p == path]

    def upstream_reads(self, key):
        """How many reads of `key` from its first byte reached the upstream so far: whole GETs and
        ranges from byte 0 (a whole read in chunks begins with one)."""
        return len([r for r in self.upstream_ranges(key) if r is None or r.startswith("bytes=0-")])

    def upstream_gets(self, key):
        """The GETs of `key` that reached the upstream so far."""
        path = "/team-ckpt/" + PREFIX + key
        return [line for line in list(self.proxy.lines) if line.startswith("GET " + path + " ")
                or line.startswith("GET " + path + "?")]

    def get_unavailable(self, key, s3=None):
        """GETs `key` (with `s3`, else the test's client) and checks that the answer is 503
        ServiceUnavailable."""
        with self.assertRaises(ClientError) as refused:
            (s3 or self.s3).get_object(Bucket="ckpt", Key=key)
        self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503, key)


class ReadThroughTest(TieredTest):
    """Evicted objects: described from the catalog, read back once, never mixed or damaged."""

    # Fewer ranged GETs at once than a 40 MiB object has chunks.
    upstream_keys = "read_streams = 3"

    def test_an_evicted_object_is_described_locally_and_read_through_once(self):
        single = data(3 * MiB + 17, 1)
        parts = [data(5 * MiB, 2), data(5 * MiB, 3), data(2 * MiB + 5, 4)]
        described = {"ContentEncoding": "zstd", "ContentLanguage": "en", "CacheControl": "max-age=60",
                     "ContentDisposition": 'attachment; filename="s.bin"'}
        expires = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
        put = self.s3.put_object(Bucket="ckpt", Key="ds/single", Body=single, ContentType="application/x-shard",
                                 Metadata={"epoch": "7"}, ChecksumAlgorithm="SHA256", Expires=expires,
                                 **described)
        upload = self.s3.create_multipart_upload(Bucket="ckpt", Key="ds/multi")["UploadId"]
        etags = [self.s3.upload_part(Bucket="ckpt", Key="ds/multi", UploadId=upload, PartNumber=n + 1,
                                     Body=body)["ETag"] for n, body in enumerate(parts)]
        multi_etag = self.s3.complete_multipart_upload(
            Bucket="ckpt", Key="ds/multi", UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})["ETag"]
        self.s3.put_object(Bucket="ckpt", Key="ds/small", Body=b"inline, never evicted")
        single_etag = self.s3.head_object(Bucket="ckpt", Key="ds/single")["ETag"]

        out = self.flush_and_evict("ds/")
        self.assertIn("2 objects evicted, %d bytes freed" % (len(single) + sum(map(len, parts))), out)
        self.assertEqual(self.catalog("ds/single"), (2, 0))
        self.assertEqual(self.catalog("ds/multi"), (2, 0))

        # HEAD, a part's HEAD and LIST answer from the catalog: nothing goes upstream.
        asked = len(self.proxy.lines)
        head = self.s3.head_object(Bucket="ckpt", Key="ds/single", ChecksumMode="ENABLED")
        self.assertEqual((head["ETag"], head["ContentLength"], head["ContentType"], head["Metadata"]),
                         (single_etag, len(single), "application/x-shard", {"epoch": "7"}))
        self.assertEqual({name: head.get(name) for name in described}, described)
        self.assertEqual(head["Expires"], expires)
        self.assertEqual(head["ChecksumSHA256"], put["ChecksumSHA256"])
        part = self.s3.head_object(Bucket="ckpt", Key="ds/multi", PartNumber=2)
        self.assertEqual((part["ContentLength"], part["PartsCount"]), (5 * MiB, 3))
        listed = self.s3.list_objects_v2(Bucket="ckpt", Prefix="ds/")["Contents"]
        self.assertEqual([(o["Key"], o["Size"], o["ETag"]) for o in listed],
                         [("ds/multi", sum(map(len, parts)), multi_etag), ("ds/single", len(single), single_etag),
                          ("ds/small", 21, self.s3.head_object(Bucket="ckpt", Key="ds/small")["ETag"])])
        self.assertEqual([line for line in self.proxy.lines[asked:] if "/ds/" in line], [])

        # The first GET reads through, the second is local.
        for key, body, etag in (("ds/single", single, single_etag), ("ds/multi", b"".join(parts), multi_etag)):
            got = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss", key)
            self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
            self.assertEqual(got["ETag"], etag)
            self.assertEqual(self.upstream_bytes(key), len(body), key)
            self.assertEqual(self.catalog(key)[0], 1, key)
            again = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(again["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit", key)
            self.assertEqual(again["Body"].read(), body)
            self.assertEqual(again["ETag"], etag)
            self.assertEqual(self.upstream_bytes(key), len(body), key)
        # One GET for the small object; 8 MiB chunks for the larger one.
        self.assertEqual(self.upstream_ranges("ds/single"), [None])
        self.assertEqual(sorted(self.upstream_ranges("ds/multi")),
                         ["bytes=0-%d" % (8 * MiB - 1), "bytes=%d-%d" % (8 * MiB, sum(map(len, parts)) - 1)])
        # The filled version keeps its part table.
        got = self.s3.get_object(Bucket="ckpt", Key="ds/multi", PartNumber=3)
        self.assertEqual(got["Body"].read(), parts[2])

    def test_a_range_of_a_one_chunk_object_keeps_it_and_a_look_at_its_head_keeps_nothing(self):
        body = data(4 * MiB, 5)
        for key in ("range/k", "range/peek"):
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        self.flush_and_evict("range/")
        # The range covers the object's only chunk: it passes through, and the object is fetched
        # and kept behind it, so that reading it again is a hit.
        asked = "bytes=%d-%d" % (MiB, 2 * MiB - 1)
        got = self.s3.get_object(Bucket="ckpt", Key="range/k", Range=asked)
        self.assertEqual(got["Body"].read(), body[MiB:2 * MiB])
        self.assertEqual(got["ContentRange"], "bytes %d-%d/%d" % (MiB, 2 * MiB - 1, len(body)))
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss")
        self.until_here("range/k")
        again = self.s3.get_object(Bucket="ckpt", Key="range/k", Range=asked)
        self.assertEqual(again["Body"].read(), body[MiB:2 * MiB])
        self.assertEqual(again["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(self.upstream_ranges("range/k"), [asked, None])
        # A look at the head of a file is no download: nothing is fetched behind it.
        got = self.s3.get_object(Bucket="ckpt", Key="range/peek", Range="bytes=0-1023")
        self.assertEqual(got["Body"].read(), body[:1024])
        time.sleep(0.5)
        self.assertEqual(len(self.upstream_gets("range/peek")), 1)
        self.assertEqual(self.catalog("range/peek"), (2, 0))

    def test_a_download_in_ranges_leaves_the_object_local(self):
        # What boto3's download_file and `aws s3 cp` make of a large object: ranged GETs, the
        # first from byte 0; the whole version is fetched behind them.
        body = data(24 * MiB + 5, 14)
        self.s3.put_object(Bucket="ckpt", Key="ranged/k", Body=body)
        self.flush_and_evict("ranged/")
        ranges = boto3.s3.transfer.TransferConfig(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB,
                                                  max_concurrency=4)
        first = io.BytesIO()
        self.s3.download_fileobj("ckpt", "ranged/k", first, Config=ranges)
        self.assertEqual(hashlib.sha256(first.getvalue()).hexdigest(), hashlib.sha256(body).hexdigest())
        self.until_here("ranged/k")
        # Four ranges and one whole fetch by chunks, which took the first chunk from the first range
        # (kept by it, or on its way), and any other a range kept before the fetch began.
        fetched = self.upstream_bytes("ranged/k")
        self.assertGreaterEqual(fetched, len(body))
        self.assertLessEqual(fetched, 2 * len(body) - 8 * MiB)
        again = io.BytesIO()
        self.s3.download_fileobj("ckpt", "ranged/k", again, Config=ranges)
        self.assertEqual(again.getvalue(), body)
        got = self.s3.get_object(Bucket="ckpt", Key="ranged/k")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(self.upstream_bytes("ranged/k"), fetched)

    def test_restore_object_brings_evicted_objects_back_ahead_of_reading(self):
        body = data(12 * MiB + 7, 15)
        self.s3.put_object(Bucket="ckpt", Key="restore/k", Body=body)
        self.flush_and_evict("restore/")
        self.assertNotIn("Restore", self.s3.head_object(Bucket="ckpt", Key="restore/k"))
        # Late, so that the restore is still under way while it is looked at.
        self.proxy.delay_object_gets = 1.0
        try:
            asked = self.s3.restore_object(Bucket="ckpt", Key="restore/k", RestoreRequest={"Days": 1})
            self.assertEqual(asked["ResponseMetadata"]["HTTPStatusCode"], 202)
            self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="restore/k")["Restore"],
                             'ongoing-request="true"')
            with self.assertRaises(ClientError) as again:
                self.s3.restore_object(Bucket="ckpt", Key="restore/k")
            self.assertEqual(again.exception.response["Error"]["Code"], "RestoreAlreadyInProgress")
            self.assertEqual(again.exception.response["ResponseMetadata"]["HTTPStatusCode"], 409)
        finally:
            self.proxy.delay_object_gets = 0.0
        self.until_here("restore/k")
        self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="restore/k")["Restore"], 'ongoing-request="false"')
        got = self.s3.get_object(Bucket="ckpt", Key="restore/k")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(self.upstream_bytes("restore/k"), len(body))
        # Here already: nothing to do.
        self.assertEqual(self.s3.restore_object(Bucket="ckpt", Key="restore/k")["ResponseMetadata"]["HTTPStatusCode"],
                         200)

        # More than run at once: the rest wait their turn, and all come back, once each.
        bodies = {"restore/many/%d" % n: data(MiB + n, 50 + n) for n in range(10)}
        for key, b in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=key, Body=b)
        self.flush_and_evict("restore/many/")
        for key in bodies:
            self.assertEqual(self.s3.restore_object(Bucket="ckpt", Key=key)["ResponseMetadata"]["HTTPStatusCode"],
                             202)
        for key in bodies:
            self.until_here(key)
        for key, b in bodies.items():
            self.assertEqual(self.s3.get_object(Bucket="ckpt", Key=key)["Body"].read(), b)
            self.assertEqual(self.upstream_bytes(key), len(b), key)

        # What cannot be restored.
        with self.assertRaises(ClientError) as missing:
            self.s3.restore_object(Bucket="ckpt", Key="restore/none")
        self.assertEqual(missing.exception.response["Error"]["Code"], "NoSuchKey")
        for wrong, code in ((b"<Restore/>", "MalformedXML"), (b"<RestoreRequest><Days>0</Days></RestoreRequest>",
                                                              "MalformedXML"),
                            (b"<RestoreRequest><Type>SELECT</Type></RestoreRequest>", "NotImplemented")):
            answer = s3_support.send(self.local.port, s3_support.SignedRequest(
                "POST", "/ckpt/restore/k", query=[("restore", "")], body=wrong, port=self.local.port).wire())
            self.assertIn(b"<Code>%s</Code>" % code.encode(), answer.body, wrong)

    def test_a_restore_whose_fetch_is_refused_is_tried_again(self):
        body = data(2 * MiB, 16)
        self.s3.put_object(Bucket="ckpt", Key="retry/k", Body=body)
        self.flush_and_evict("retry/")
        self.proxy.slowdown = 1.0  # every request answered 503 SlowDown
        try:
            asked = self.s3.restore_object(Bucket="ckpt", Key="retry/k")
            self.assertEqual(asked["ResponseMetadata"]["HTTPStatusCode"], 202)
            self.until(lambda: len(self.upstream_gets("retry/k")) == 1)
        finally:
            self.proxy.slowdown = 0.0
        # Still asked for while it waits its next turn.
        self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="retry/k")["Restore"], 'ongoing-request="true"')
        self.until_here("retry/k")
        self.assertEqual(len(self.upstream_gets("retry/k")), 2)
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="retry/k")["Body"].read(), body)

    def settled(self):
        """Once no GET of an object is under way at the proxy (a read's GETs asked for before it
        ended still come and go)."""
        time.sleep(0.2)
        self.until(lambda: self.proxy.object_gets_now == 0)

    def test_a_large_miss_is_fetched_in_ranges_at_once_and_a_failed_range_keeps_the_chunks_before_it(self):
        body = data(40 * MiB + 9, 17)
        for key in ("wide/failed", "wide/k"):
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        self.flush_and_evict("wide/")
        # The third chunk is refused: the answer is cut short after the two before it, which are
        # kept (as chunks: the version stays evicted). The refusal reaches the request after every
        # byte that came before it.
        self.proxy.refuse_gets_from = 16 * MiB
        received = b""
        try:
            got = self.s3.get_object(Bucket="ckpt", Key="wide/failed")
            self.assertEqual(got["ContentLength"], len(body))
            with self.assertRaises((botocore.exceptions.BotoCoreError, urllib3.exceptions.HTTPError)):
                while True:
                    piece = got["Body"].read(64 * KiB)
                    if not piece:
                        break
                    received += piece
            self.settled()
        finally:
            self.proxy.refuse_gets_from = None
        # What came is the object's first two chunks, but for what the cut took from the client's
        # socket (a connection closed with a request unread ends in a reset, which drops what the
        # client had not read yet).
        self.assertGreaterEqual(len(received), 16 * MiB - 2 * MiB - 64 * KiB)
        self.assertLessEqual(len(received), 16 * MiB)
        self.assertEqual(received, body[:len(received)])
        self.assertEqual(self.catalog("wide/failed"), (2, 0))
        chunks_kept = ("SELECT c.chunk FROM tier_chunks c JOIN objects o ON o.id = c.object_id WHERE o.key = ? "
                       "ORDER BY c.chunk")
        self.until(lambda: self.catalog_rows(chunks_kept, ("wide/failed",)) == [(0,), (1,)])
        kept = self.catalog_rows(chunks_kept, ("wide/failed",))
        # The next GET fetches only the rest.
        before = self.upstream_bytes("wide/failed")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="wide/failed")["Body"].read(), body)
        self.assertEqual(self.upstream_bytes("wide/failed") - before, len(body) - len(kept) * 8 * MiB)
        self.assertEqual(self.catalog("wide/failed")[0], 1)

        # Late answers, so that the chunks asked for together are seen under way together: three
        # at a time (read_streams), the next asked for as each is passed on.
        self.proxy.object_gets_at_once = 0
        self.proxy.delay_object_gets = 0.5
        try:
            got = self.s3.get_object(Bucket="ckpt", Key="wide/k")
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss")
            self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
        finally:
            self.proxy.delay_object_gets = 0.0
        self.assertEqual(self.proxy.object_gets_at_once, 3)
        self.assertEqual(self.catalog("wide/k")[0], 1)
        self.assertEqual(sorted(self.upstream_ranges("wide/k"), key=lambda r: int(r[6:].split("-")[0])),
                         chunk_ranges(len(body)))
        self.assertEqual(self.upstream_bytes("wide/k"), len(body))
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="wide/k")["Body"].read(), body)
        self.assertEqual(len(self.upstream_ranges("wide/k")), 6)

    def test_a_large_miss_asks_for_its_first_chunk_alone_until_its_first_bytes_are_passed_on(self):
        # The other chunks would compete with the first for the upstream (and the cores) while the
        # client waits for its first byte: an upstream that takes GETs and never answers is asked
        # for the first chunk only, and the miss fails as any unanswered one does.
        body = data(24 * MiB + 3, 23)
        self.s3.put_object(Bucket="ckpt", Key="first/k", Body=body)
        self.flush_and_evict("first/")
        self.proxy.hang_object_gets = True
        try:
            self.get_unavailable("first/k")
            ranges = self.upstream_ranges("first/k")
            self.assertTrue(ranges)
            self.assertEqual(set(ranges), {chunk_ranges(len(body))[0]})
        finally:
            self.proxy.hang_object_gets = False
        self.read_back_once_it_answers("first/k", body, 15)
        self.assertEqual(sorted(set(self.upstream_ranges("first/k"))), sorted(chunk_ranges(len(body))))

    def test_a_chunked_miss_answered_whole_is_refused_and_keeps_nothing(self):
        # Something on the way drops the Range: each chunk's GET gets the whole object, which is
        # not the chunk asked for.
        body = data(24 * MiB + 1, 19)
        self.s3.put_object(Bucket="ckpt", Key="norange/k", Body=body)
        self.flush_and_evict("norange/")
        self.proxy.ignore_ranges = True
        try:
            self.get_unavailable("norange/k")
            self.settled()
        finally:
            self.proxy.ignore_ranges = False
        self.assertEqual(self.catalog("norange/k"), (2, 0))
        got = self.s3.get_object(Bucket="ckpt", Key="norange/k")
        self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
        self.assertEqual(self.catalog("norange/k")[0], 1)

    def test_a_chunked_miss_whose_client_goes_away_asks_for_nothing_more(self):
        body = data(48 * MiB, 18)
        self.s3.put_object(Bucket="ckpt", Key="gone/k", Body=body)
        self.flush_and_evict("gone/")
        self.proxy.delay_object_gets = 0.3
        try:
            leaver = socket.create_connection(("127.0.0.1", self.local.port))
            try:
                leaver.sendall(s3_support.SignedRequest("GET", "/ckpt/gone/k", port=self.local.port).wire())
                self.assertTrue(leaver.recv(65536).startswith(b"HTTP/1.1 200"))
            finally:
                leaver.close()
            time.sleep(1.0)  # long enough for every chunk to come, were they still asked for
            self.settled()
        finally:
            self.proxy.delay_object_gets = 0.0
        # The chunks under way when it left (three at most, and the one after the first passed on).
        self.assertLessEqual(len(self.upstream_ranges("gone/k")), 4)
        self.assertLessEqual(self.upstream_bytes("gone/k"), 4 * 8 * MiB)
        self.assertEqual(self.catalog("gone/k"), (2, 0))
        got = self.s3.get_object(Bucket="ckpt", Key="gone/k")
        self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
        self.assertEqual(self.catalog("gone/k")[0], 1)

    def test_misses_whose_clients_stop_reading_then_leave_end_upstream(self):
        # Each client reads the head, then nothing until the server waits on it (its socket, then
        # the read-through's pieces are full), then leaves: the read-through must end, its chunks'
        # buffers and upstream GETs with it, not wait for room that will never come.
        body = data(40 * MiB, 24)
        self.s3.put_object(Bucket="ckpt", Key="stall/k", Body=body)
        self.flush_and_evict("stall/")
        # (The server is the class's: what other tests left under way is not this test's.)
        before = wait_health(self.local.port, lambda status, report: True)["reads_under_way"]
        for _ in range(3):
            leaver = socket.socket()
            leaver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            leaver.settimeout(30)
            try:
                leaver.connect(("127.0.0.1", self.local.port))
                leaver.sendall(s3_support.SignedRequest("GET", "/ckpt/stall/k", port=self.local.port).wire())
                self.assertTrue(leaver.recv(1024).startswith(b"HTTP/1.1 200"))
                time.sleep(1.0)  # every chunk under way comes meanwhile, were it unread
            finally:
                leaver.close()
        self.settled()
        # (The report is rebuilt every second.)
        wait_health(self.local.port, lambda status, report: report["reads_under_way"] <= before, timeout=10)
        self.assertEqual(self.catalog("stall/k"), (2, 0))
        got = self.s3.get_object(Bucket="ckpt", Key="stall/k")
        self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())

    def test_damaged_bytes_from_the_upstream_are_cut_off_and_never_kept(self):
        body = data(2 * MiB, 6)
        self.s3.put_object(Bucket="ckpt", Key="flip/k", Body=body)
        self.flush_and_evict("flip/")
        self.proxy.flip_answer_byte = MiB
        with self.assertRaises((botocore.exceptions.BotoCoreError, ClientError)):
            # The body ends short of its Content-Length: the SDK refuses it.
            self.s3.get_object(Bucket="ckpt", Key="flip/k")["Body"].read()
        self.assertEqual(self.catalog("flip/k"), (2, 0))
        got = self.s3.get_object(Bucket="ckpt", Key="flip/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(self.catalog("flip/k")[0], 1)

    def test_an_evicted_object_whose_upstream_fails_answers_503_and_stays_described(self):
        body = data(1 * MiB, 7)
        self.s3.put_object(Bucket="ckpt", Key="down/k", Body=body)
        self.flush_and_evict("down/")
        self.proxy.slowdown = 1.0
        try:
            self.get_unavailable("down/k")
            self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="down/k")["ContentLength"], len(body))
        finally:
            self.proxy.slowdown = 0.0
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="down/k")["Body"].read(), body)

    def test_a_delete_not_yet_upstream_hides_the_key_without_asking(self):
        self.s3.put_object(Bucket="ckpt", Key="hidden/k", Body=b"upstream until the delete lands")
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "hidden/", "--wait")
        self.assertEqual(rc, 0, out + err)
        self.proxy.slowdown = 1.0  # the upstream is out of reach: the delete stays queued
        try:
            self.s3.delete_object(Bucket="ckpt", Key="hidden/k")
            before = len(self.proxy.lines)
            for read in (lambda: self.s3.get_object(Bucket="ckpt", Key="hidden/k"),
                         lambda: self.s3.head_object(Bucket="ckpt", Key="hidden/k")):
                with self.assertRaises(ClientError) as refused:
                    read()
                self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)
            asked = [line for line in self.proxy.lines[before:]
                     if line.split()[0] in ("GET", "HEAD") and "hidden" in line]
            self.assertEqual(asked, [])
        finally:
            self.proxy.slowdown = 0.0
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "hidden/", "--wait")
        self.assertEqual(rc, 0, out + err)
        with self.assertRaises(ClientError):
            self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "hidden/k")
        self.assertEqual(self.catalog_rows("SELECT count(*) FROM objects WHERE key = 'hidden/k'"), [(0,)])

    def test_an_object_overwritten_or_deleted_upstream_is_not_mixed_in(self):
        for key in ("theirs/k", "theirs/gone"):
            self.s3.put_object(Bucket="ckpt", Key=key, Body=data(1 * MiB, 8))
        self.flush_and_evict("theirs/")
        self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "theirs/k", Body=b"another writer's version")
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "theirs/gone")
        once = client(self.local.port, botocore.config.Config(retries={"total_max_attempts": 1}))
        for key in ("theirs/k", "theirs/gone"):
            self.get_unavailable(key, once)
            self.assertEqual(self.catalog(key), (2, 0), key)
        # Refused once, each is asked about before it is read again (an SDK's retry): the version
        # there is served whole; one lost there is said to be lost (its bytes were only there),
        # and its record is kept, as this server wrote it.
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="theirs/k")["Body"].read(),
                         b"another writer's version")
        with self.assertRaises(ClientError) as lost:
            once.get_object(Bucket="ckpt", Key="theirs/gone")
        meta = lost.exception.response["ResponseMetadata"]
        self.assertEqual((meta["HTTPStatusCode"], meta["HTTPHeaders"].get("x-hots3-tier")), (500, "lost"))
        self.assertEqual(self.catalog("theirs/gone"), (2, 0))
        # An answer about one key says nothing of the upstream's health (the report is rebuilt
        # every second).
        time.sleep(1.2)
        self.assertEqual(health(self.local.port)[1]["upstreams"][0]["state"], "ok")

    def fetch(self, s3, key):
        """(SHA-256 of the body, x-hots3-cache) of a whole GET of `key`."""
        got = s3.get_object(Bucket="ckpt", Key=key)
        return hashlib.sha256(got["Body"].read()).hexdigest(), got["ResponseMetadata"]["HTTPHeaders"].get(
            "x-hots3-cache")

    def test_concurrent_misses_of_one_object_share_one_fetch(self):
        # Small enough that the first fetch lands well within the others' patience, even on a
        # sanitizer build.
        body = data(8 * MiB + 3, 11)
        self.s3.put_object(Bucket="ckpt", Key="flight/k", Body=body)
        self.flush_and_evict("flight/")
        readers = client(self.local.port, botocore.config.Config(retries={"max_attempts": 1},
                                                                   max_pool_connections=16))
        # The upstream answers late, so that every reader comes while the first one's fetch is under way.
        self.proxy.delay_object_gets = 1.0
        try:
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                got = list(pool.map(lambda _: self.fetch(readers, "flight/k"), range(16)))
        finally:
            self.proxy.delay_object_gets = 0.0
        self.assertEqual([digest for digest, _ in got], [hashlib.sha256(body).hexdigest()] * 16)
        self.assertEqual(sorted(cache for _, cache in got), ["hit"] * 15 + ["miss"])
        self.assertEqual(self.upstream_bytes("flight/k"), len(body))
        self.assertEqual(self.catalog("flight/k")[0], 1)

    def test_a_fetch_whose_client_goes_away_hands_over_to_one_that_waits(self):
        body = data(32 * MiB, 12)
        self.s3.put_object(Bucket="ckpt", Key="handover/k", Body=body)
        self.flush_and_evict("handover/")
        self.proxy.delay_object_gets = 1.0
        try:
            leaver = socket.create_connection(("127.0.0.1", self.local.port))
            try:
                leaver.sendall(s3_support.SignedRequest("GET", "/ckpt/handover/k", port=self.local.port).wire())
                self.until(lambda: self.upstream_reads("handover/k") == 1)  # its fetch leads
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    waiting = pool.submit(self.fetch, self.s3, "handover/k")
                    time.sleep(0.3)  # the second GET waits for the first
                    leaver.close()
                    digest, cache = waiting.result()
            finally:
                leaver.close()
        finally:
            self.proxy.delay_object_gets = 0.0
        self.assertEqual(digest, hashlib.sha256(body).hexdigest())
        # The first fetch was cut off with its client; the one that waited fetched and kept it.
        self.assertEqual(cache, "miss")
        self.assertEqual(self.upstream_reads("handover/k"), 2)
        self.assertEqual(self.catalog("handover/k")[0], 1)

    def test_a_miss_fails_soon_while_the_upstream_does_not_answer_and_then_at_once(self):
        body = data(1 * MiB, 13)
        self.s3.put_object(Bucket="ckpt", Key="silent/k", Body=body)
        self.flush_and_evict("silent/")
        # Only object GETs: a probe of the bucket hung now would mark the upstream silent long
        # after this test.
        self.proxy.hang_object_gets = True
        try:
            started = time.monotonic()
            self.get_unavailable("silent/k")
            # Sooner than an upload's wait for an answer (a minute).
            self.assertLess(time.monotonic() - started, 30)
            # (Once, or twice when the client sent it again on a new connection because the
            # pooled one it took had been closed.)
            asked = len(self.upstream_gets("silent/k"))
            self.assertIn(asked, (1, 2))
            # The next miss does not wait on the silent upstream: it is refused before any request,
            # for 2 s after the failure. A machine slow enough (sanitizers, other tests) to come
            # later makes it the one read that tries the upstream again: it waits out its timeout,
            # and the window after its failure is twice as long; the read after it is refused.
            started = time.monotonic()
            self.get_unavailable("silent/k")
            if len(self.upstream_gets("silent/k")) > asked:
                self.assertEqual(len(self.upstream_gets("silent/k")), asked + 1)
                asked += 1
                started = time.monotonic()
                self.get_unavailable("silent/k")
            self.assertLess(time.monotonic() - started, 2)
            self.assertEqual(len(self.upstream_gets("silent/k")), asked)
            self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="silent/k")["ContentLength"], len(body))
        finally:
            self.proxy.hang_object_gets = False
        # Once it answers again, a trial miss finds out and the misses go through again.
        self.read_back_once_it_answers("silent/k", body, 15)
        self.assertEqual(len(self.upstream_gets("silent/k")), asked + 1)

    def test_misses_one_after_another_while_the_upstream_is_stopped_wait_out_no_more_timeouts(self):
        body = data(256 * KiB, 14)
        self.s3.put_object(Bucket="ckpt", Key="stopped/k", Body=body)
        self.flush_and_evict("stopped/")

        # A client that does not try again: its retry could be the next trial.
        once = client(self.local.port, botocore.config.Config(retries={"total_max_attempts": 1}))

        def miss():
            """Seconds a miss took to be refused with 503."""
            started = time.monotonic()
            with self.assertRaises(ClientError) as refused:
                once.get_object(Bucket="ckpt", Key="stopped/k")
            self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
            return time.monotonic() - started
        # Stopped, the upstream takes connections and never answers any request (its probes'
        # neither): nothing can pass for an answer meanwhile.
        self.upstream.signal(signal.SIGSTOP)
        try:
            # Clients one after another: one waits out the timeout, the others are refused at once.
            times = [miss() for _ in range(6)]
            self.assertLessEqual(sum(t > 2 for t in times), 1, times)
            # A while later one tries it again and waits; those right after its failure do not.
            time.sleep(2.5)
            miss()
            self.assertEqual([t < 2 for t in (miss(), miss(), miss())], [True] * 3)
        finally:
            self.upstream.signal(signal.SIGCONT)
        # Once it answers again, a later trial finds out and the misses go through again.
        self.read_back_once_it_answers("stopped/k", body, 20)

    def test_only_objects_safely_upstream_are_evicted(self):
        # A change still owed (the upstream is refusing) keeps its data here.
        self.proxy.slowdown = 1.0
        try:
            self.s3.put_object(Bucket="ckpt", Key="owed/k", Body=data(256 * KiB, 9))
            rc, out, err = run_hots3("tier", "evict", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                      "--prefix", "owed/")
            self.assertEqual(rc, 0, out + err)
            self.assertIn("0 objects evicted", out)
            self.assertEqual(self.catalog("owed/k")[0], 0)
        finally:
            self.proxy.slowdown = 0.0


class AdmissionTest(TieredTest):
    """Which misses are kept: second-miss for the bucket, never under scratch/, and a size limit
    under big/."""

    binding = """
admit = "second-miss"
[[tier.bucket.admit_prefix]]
prefix = "scratch/"
admit = "never"
[[tier.bucket.admit_prefix]]
prefix = "big/"
admit = "first-miss"
max_object_size = "2MiB"
"""

    def miss(self, key, body):
        got = self.s3.get_object(Bucket="ckpt", Key=key)
        self.assertEqual(got["Body"].read(), body, key)
        return got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache")

    def test_a_rule_decides_which_misses_are_kept(self):
        bodies = {"train/a": data(3 * MiB, 21), "scratch/a": data(3 * MiB, 22),
                  "big/small": data(2 * MiB, 23), "big/large": data(2 * MiB + 1, 24)}
        for key, body in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        for prefix in ("train/", "scratch/", "big/"):
            self.flush_and_evict(prefix)
        # second-miss: the first read streams through and leaves nothing on the device; the next keeps it.
        self.assertEqual(self.miss("train/a", bodies["train/a"]), "miss")
        self.assertEqual(self.catalog("train/a"), (2, 0))
        self.assertEqual(self.miss("train/a", bodies["train/a"]), "miss")
        self.assertEqual(self.catalog("train/a")[0], 1)
        self.assertEqual(self.miss("train/a", bodies["train/a"]), "hit")
        # never, however often it is read.
        for _ in range(3):
            self.assertEqual(self.miss("scratch/a", bodies["scratch/a"]), "miss")
        self.assertEqual(self.catalog("scratch/a"), (2, 0))
        # ... unless asked for by RestoreObject.
        self.s3.restore_object(Bucket="ckpt", Key="scratch/a")
        self.until_here("scratch/a")
        self.assertEqual(self.miss("scratch/a", bodies["scratch/a"]), "hit")
        # ... also when it comes while a fetch that would keep nothing is under way (the one a
        # download in ranges leaves behind it).
        body = data(3 * MiB, 25)
        self.s3.put_object(Bucket="ckpt", Key="scratch/b", Body=body)
        self.flush_and_evict("scratch/")
        self.proxy.delay_object_gets = 1.0
        try:
            got = self.s3.get_object(Bucket="ckpt", Key="scratch/b", Range="bytes=0-%d" % (2 * MiB - 1))
            self.assertEqual(got["Body"].read(), body[:2 * MiB])
            with self.assertRaises(ClientError) as under_way:
                self.s3.restore_object(Bucket="ckpt", Key="scratch/b")
            self.assertEqual(under_way.exception.response["Error"]["Code"], "RestoreAlreadyInProgress")
        finally:
            self.proxy.delay_object_gets = 0.0
        self.until_here("scratch/b")
        self.assertEqual(len(self.upstream_gets("scratch/b")), 2)
        # first-miss up to the size limit.
        self.assertEqual(self.miss("big/small", bodies["big/small"]), "miss")
        self.assertEqual(self.catalog("big/small")[0], 1)
        self.assertEqual(self.miss("big/large", bodies["big/large"]), "miss")
        self.assertEqual(self.catalog("big/large"), (2, 0))


class RestartTest(TieredTest):
    """What was read back is kept: after a kill -9, and after a clean stop, each object read back
    before is a hit, with no request to the upstream."""

    def restart(self, kill):
        if kill:
            self.local.kill()  # SIGKILL
        else:
            self.assertEqual(self.local.stop(), 0)
        self.relaunch()

    def relaunch(self):
        """A new server on the stopped one's store (for the tests after this one too)."""
        self.local.cleanup()
        cls = type(self)
        cls.local = s3_support.hots3_server(self.config, device_size="1GiB", workdir=self.local_dir).start()
        cls.s3 = client(cls.local.port)
        cls.endpoint = "http://127.0.0.1:%d" % cls.local.port

    def read_back_across_restarts(self, bodies, part):
        """Reads each of `bodies` (key: bytes, not here yet: a miss), then after a kill -9 and
        after a clean stop again, each a hit; no request naming `part` reaches the upstream
        after the first reads."""
        for key, body in bodies.items():
            got = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(got["Body"].read(), body)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss", key)
        asked = len(self.proxy.lines)
        for kill in (True, False):
            self.restart(kill)
            for key, body in bodies.items():
                got = self.s3.get_object(Bucket="ckpt", Key=key)
                self.assertEqual(got["Body"].read(), body, key)
                self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit", key)
        self.assertEqual([line for line in self.proxy.lines[asked:] if part in line], [])

    def test_objects_read_back_are_hits_after_a_kill_and_after_a_stop(self):
        bodies = {"kept/%d" % n: data(MiB + n * 333 * KiB, 30 + n) for n in range(6)}
        for key, body in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        self.flush_and_evict("kept/")
        self.read_back_across_restarts(bodies, "/kept/")
        for key in bodies:
            self.assertEqual(self.catalog(key)[0], 1, key)

    def test_a_stop_while_a_fill_runs_behind_a_range_is_prompt_and_leaks_nothing(self):
        body = data(16 * MiB, 40)
        self.s3.put_object(Bucket="ckpt", Key="behind/k", Body=body)
        self.flush_and_evict("behind/")
        # The range is answered; the whole fetch it leaves behind gets the first 4 MiB (written to
        # the device) and then nothing.
        self.proxy.stall_gets_beyond = 4 * MiB
        try:
            got = self.s3.get_object(Bucket="ckpt", Key="behind/k", Range="bytes=0-%d" % (MiB - 1))
            self.assertEqual(got["Body"].read(), body[:MiB])
            deadline = time.monotonic() + 10
            while len(self.upstream_gets("behind/k")) < 2:
                self.assertLess(time.monotonic(), deadline, "no fetch was left behind the range")
                time.sleep(0.02)
            started = time.monotonic()
            self.assertEqual(self.local.stop(), 0)
            self.assertLess(time.monotonic() - started, 20)
        finally:
            self.proxy.stall_gets_beyond = None
        logged = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", self.local.read_stderr())
        self.assertIsNotNone(logged, self.local.read_stderr()[-2000:])
        rc, out, err = run_hots3("check", "--data", os.path.join(self.local_dir, "data"))
        self.assertEqual(rc, 0, out + err)
        referenced = int(re.search(r"referenced .*?\((\d+) bytes\)", out).group(1))
        self.assertEqual(int(logged.group(1)), referenced, "the unfinished fill's space was leaked")
        self.assertEqual(self.catalog("behind/k"), (2, 0))
        self.relaunch()
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="behind/k")["Body"].read(), body)
        self.assertEqual(self.catalog("behind/k")[0], 1)


if __name__ == "__main__":
    unittest.main()
