"""Partial objects: a ranged GET of an evicted object fetches only the 8 MiB chunks its range
covers and keeps them, so that reading the range again is a hit while the rest of the object stays
upstream; a whole GET keeps each chunk as it comes and makes the version whole from them; kept
chunks outlive a kill -9, go with their version, and `hots3 check` accounts for them.

The upstream is a second hots3 behind the fault proxy, whose request lines show what went
upstream; the local store's catalog shows what it keeps."""

import concurrent.futures
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_tier_readthrough as readthrough  # noqa: E402 (its test classes stay out of this module)
from botocore.exceptions import BotoCoreError, ClientError  # noqa: E402
from test_tier_writeback import MiB, data, health, wait_health  # noqa: E402

CHUNK = 8 * MiB


def chunk_range(first, last, size):
    """The Range an upstream GET of chunks [first, last] of an object of `size` bytes names."""
    return "bytes=%d-%d" % (first * CHUNK, min(size, (last + 1) * CHUNK) - 1)


def kept_chunks(test, key):
    """The indexes of the chunks kept of `key`'s current version."""
    return [row[0] for row in test.catalog_rows("SELECT c.chunk FROM tier_chunks c JOIN objects o ON "
                                                 "o.id = c.object_id WHERE o.key = ? ORDER BY c.chunk", (key,))]


def until_kept(test, key, indexes, timeout_s=10):
    """Waits until the chunks kept of `key` are `indexes`: a chunk is read to its end and kept
    after the client's last byte went out."""
    deadline = time.monotonic() + timeout_s
    while kept_chunks(test, key) != indexes:
        test.assertLess(time.monotonic(), deadline, "kept: %s, not %s" % (kept_chunks(test, key), indexes))
        time.sleep(0.02)


class PartialTest(readthrough.TieredTest):
    """Ranged GETs of evicted objects keep the chunks they cover."""

    binding = """
[[tier.bucket.admit_prefix]]
prefix = "scratch/"
admit = "never"
"""

    def chunks(self, key):
        return kept_chunks(self, key)

    def ranged(self, key, first, last):
        """GET of bytes [first, last] of `key`: (body, x-hots3-cache)."""
        got = self.s3.get_object(Bucket="ckpt", Key=key, Range="bytes=%d-%d" % (first, last))
        return got["Body"].read(), got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache")

    def test_a_cold_range_fetches_only_its_chunks_and_reading_it_again_is_a_hit(self):
        body = data(5 * CHUNK + 5, 61)
        self.s3.put_object(Bucket="ckpt", Key="part/k", Body=body)
        self.flush_and_evict("part/")
        self.assertEqual(self.chunks("part/k"), [])

        # 1 MiB inside chunk 3: that chunk comes, whole, and nothing else.
        at = 3 * CHUNK + 100
        got, cache = self.ranged("part/k", at, at + MiB - 1)
        self.assertEqual(got, body[at:at + MiB])
        self.assertEqual(cache, "miss")
        self.assertEqual(self.upstream_ranges("part/k"), [chunk_range(3, 3, len(body))])
        until_kept(self, "part/k", [3])
        self.assertEqual(self.catalog("part/k"), (2, 0))  # the version itself stays evicted
        head = self.s3.head_object(Bucket="ckpt", Key="part/k")["ResponseMetadata"]["HTTPHeaders"]
        self.assertEqual(head.get("x-hots3-tier"), "partial")

        # Again, and elsewhere in the same chunk: from the device.
        for first, last in ((at, at + MiB - 1), (3 * CHUNK, 4 * CHUNK - 1), (4 * CHUNK - 10, 4 * CHUNK - 1)):
            got, cache = self.ranged("part/k", first, last)
            self.assertEqual(got, body[first:last + 1])
            self.assertEqual(cache, "hit")
        self.assertEqual(len(self.upstream_ranges("part/k")), 1)

        # Across chunks 2 to 4: only 2 and 4 come, each as a GET of its own.
        first, last = 2 * CHUNK + 7, 4 * CHUNK + 9
        got, cache = self.ranged("part/k", first, last)
        self.assertEqual(got, body[first:last + 1])
        self.assertEqual(cache, "partial")
        self.assertEqual(self.upstream_ranges("part/k")[1:],
                         [chunk_range(2, 2, len(body)), chunk_range(4, 4, len(body))])
        until_kept(self, "part/k", [2, 3, 4])

        # The short last chunk, by a suffix range; then chunks 0 and 1 in one read of two chunks.
        got = self.s3.get_object(Bucket="ckpt", Key="part/k", Range="bytes=-3")["Body"].read()
        self.assertEqual(got, body[-3:])
        first, last = 100, 2 * CHUNK - 100
        got, cache = self.ranged("part/k", first, last)
        self.assertEqual(got, body[first:last + 1])
        self.assertEqual(cache, "miss")
        until_kept(self, "part/k", [0, 1, 2, 3, 4, 5])
        self.assertEqual(self.upstream_bytes("part/k"), len(body))

        # Every chunk is kept now: any range is a hit, with no upstream request.
        asked = len(self.upstream_ranges("part/k"))
        got, cache = self.ranged("part/k", 1, len(body) - 1)
        self.assertEqual((got, cache), (body[1:], "hit"))
        self.assertEqual(len(self.upstream_ranges("part/k")), asked)

        # A whole GET makes the version local; its chunks go.
        got = self.s3.get_object(Bucket="ckpt", Key="part/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(self.catalog("part/k")[0], 1)
        self.assertEqual(self.chunks("part/k"), [])

    def test_kept_chunks_go_with_their_version(self):
        body = data(2 * CHUNK + MiB, 62)
        self.s3.put_object(Bucket="ckpt", Key="gone/k", Body=body)
        self.flush_and_evict("gone/")
        got, _ = self.ranged("gone/k", CHUNK, CHUNK + 99)
        self.assertEqual(got, body[CHUNK:CHUNK + 100])
        until_kept(self, "gone/k", [1])
        # `tier evict` of the prefix frees them.
        self.assertIn("0 objects evicted, %d bytes freed" % CHUNK, self.flush_and_evict("gone/"))
        self.assertEqual(self.chunks("gone/k"), [])
        got, cache = self.ranged("gone/k", CHUNK, CHUNK + 99)
        self.assertEqual((got, cache), (body[CHUNK:CHUNK + 100], "miss"))
        until_kept(self, "gone/k", [1])
        # An overwrite replaces the version, and its chunks with it.
        newer = data(3 * MiB, 63)
        self.s3.put_object(Bucket="ckpt", Key="gone/k", Body=newer)
        self.assertEqual(self.chunks("gone/k"), [])
        got, _ = self.ranged("gone/k", MiB, MiB + 99)
        self.assertEqual(got, newer[MiB:MiB + 100])
        self.assertEqual(self.catalog_rows("SELECT count(*) FROM tier_chunks c LEFT JOIN objects o ON "
                                            "o.id = c.object_id WHERE o.id IS NULL"), [(0,)])

    def test_a_prefix_that_admits_nothing_keeps_no_chunk_and_reads_no_further_than_the_range(self):
        body = data(2 * CHUNK, 64)
        self.s3.put_object(Bucket="ckpt", Key="scratch/k", Body=body)
        self.flush_and_evict("scratch/")
        for _ in range(2):
            got, cache = self.ranged("scratch/k", CHUNK + 10, CHUNK + 10 + MiB)
            self.assertEqual(got, body[CHUNK + 10:CHUNK + 11 + MiB])
            self.assertEqual(cache, "miss")
        self.assertEqual(self.chunks("scratch/k"), [])
        # Not kept: the range passes through, no byte more.
        self.assertEqual(self.upstream_ranges("scratch/k"), ["bytes=%d-%d" % (CHUNK + 10, CHUNK + 10 + MiB)] * 2)
        self.assertEqual(self.upstream_bytes("scratch/k"), 2 * (MiB + 1))

    def test_a_range_whose_upstream_refuses_answers_503_and_keeps_nothing(self):
        body = data(2 * CHUNK + 5, 69)
        self.s3.put_object(Bucket="ckpt", Key="refused/k", Body=body)
        self.flush_and_evict("refused/")
        self.proxy.slowdown = 1.0
        try:
            with self.assertRaises(ClientError) as refused:
                self.ranged("refused/k", CHUNK + 1, CHUNK + 1000)
            self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        finally:
            self.proxy.slowdown = 0.0
        self.assertEqual(self.chunks("refused/k"), [])
        # Its flight landed: the next read leads one of its own, and keeps the chunk.
        got, cache = self.ranged("refused/k", CHUNK + 1, CHUNK + 1000)
        self.assertEqual((got, cache), (body[CHUNK + 1:CHUNK + 1001], "miss"))
        until_kept(self, "refused/k", [1])

    def test_a_whole_get_of_a_partly_kept_object_is_refused_before_its_head_while_the_upstream_is_down(self):
        body = data(3 * CHUNK + 7, 73)
        self.s3.put_object(Bucket="ckpt", Key="down/k", Body=body)
        self.flush_and_evict("down/")
        self.assertEqual(self.ranged("down/k", 5, 99), (body[5:100], "miss"))
        until_kept(self, "down/k", [0])
        self.proxy.down = True
        try:
            # A read of a chunk not kept finds that the upstream does not answer...
            with self.assertRaises(ClientError) as refused:
                self.ranged("down/k", 2 * CHUNK, 2 * CHUNK + 9)
            self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
            # ...and a whole GET, whose first chunk is here, is refused at once: not a 200 whose
            # body stops after that chunk.
            with self.assertRaises(ClientError) as refused:
                self.s3.get_object(Bucket="ckpt", Key="down/k")
            self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        finally:
            self.proxy.down = False
            # While it was down a read tried it once every 2 s: the next such try finds it back
            # (before the other tests, which share this server).
            deadline = time.monotonic() + 10
            while True:
                try:
                    got = self.s3.get_object(Bucket="ckpt", Key="down/k")
                    break
                except ClientError as e:
                    self.assertEqual(e.response["ResponseMetadata"]["HTTPStatusCode"], 503)
                    self.assertLess(time.monotonic(), deadline, "the upstream is still refused")
                    time.sleep(0.2)
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "partial")

    def test_concurrent_misses_of_one_chunk_share_one_fetch(self):
        body = data(3 * CHUNK, 67)
        self.s3.put_object(Bucket="ckpt", Key="many/k", Body=body)
        self.flush_and_evict("many/")
        # Slow enough that all of them miss while the first fetch runs.
        self.proxy.delay_object_gets = 0.5
        try:
            ranges = [(CHUNK + n * MiB + n, CHUNK + n * MiB + n + 99_999) for n in range(8)]
            with concurrent.futures.ThreadPoolExecutor(len(ranges)) as pool:
                got = list(pool.map(lambda r: self.ranged("many/k", *r)[0], ranges))
        finally:
            self.proxy.delay_object_gets = 0
        self.assertEqual(got, [body[first:last + 1] for first, last in ranges])
        self.assertEqual(self.upstream_ranges("many/k"), [chunk_range(1, 1, len(body))])
        until_kept(self, "many/k", [1])

    def test_a_sequential_reader_finds_the_next_chunks_fetched_ahead(self):
        body = data(6 * CHUNK, 68)
        self.s3.put_object(Bucket="ckpt", Key="seq/k", Body=body)
        self.flush_and_evict("seq/")
        step = 3 * MiB
        at = 100
        # The first range fetches its chunk; the second follows it, so the two chunks after it
        # come too (one read, in two ranged GETs); reading on to the end of them asks the upstream
        # for nothing of theirs.
        for n in range(2):
            got, _ = self.ranged("seq/k", at, at + step - 1)
            self.assertEqual(got, body[at:at + step])
            at += step
        until_kept(self, "seq/k", [0, 1, 2])
        self.assertEqual(sorted(self.upstream_ranges("seq/k")), sorted(chunk_range(n, n, len(body)) for n in range(3)))
        while at + step <= 3 * CHUNK:
            got, cache = self.ranged("seq/k", at, at + step - 1)
            self.assertEqual(got, body[at:at + step])
            at += step
        # Each of those read ahead in turn, up to two chunks past the last range.
        until_kept(self, "seq/k", [0, 1, 2, 3, 4])
        self.assertNotIn(chunk_range(5, 5, len(body)), self.upstream_ranges("seq/k"))
        self.assertEqual(self.upstream_bytes("seq/k"), 5 * CHUNK)

    def test_a_download_from_byte_0_restores_the_object_even_when_its_first_chunk_is_kept(self):
        body = data(2 * CHUNK + 3, 66)
        self.s3.put_object(Bucket="ckpt", Key="peek/k", Body=body)
        self.flush_and_evict("peek/")
        # A look at the file's head keeps its first chunk.
        got, cache = self.ranged("peek/k", 0, 1023)
        self.assertEqual((got, cache), (body[:1024], "miss"))
        until_kept(self, "peek/k", [0])
        # A download in ranges begins: its first range is read from the chunk, and the whole
        # object comes back behind it, taking the chunk's place.
        got, cache = self.ranged("peek/k", 0, CHUNK - 1)
        self.assertEqual((got, cache), (body[:CHUNK], "hit"))
        self.until_here("peek/k")
        self.assertEqual(self.chunks("peek/k"), [])
        got = self.s3.get_object(Bucket="ckpt", Key="peek/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")

    def test_a_whole_get_reads_the_kept_chunks_here_and_fetches_only_the_others(self):
        body = data(4 * CHUNK + 77, 70)
        self.s3.put_object(Bucket="ckpt", Key="whole/k", Body=body)
        self.flush_and_evict("whole/")
        got, _ = self.ranged("whole/k", 2 * CHUNK + 5, 2 * CHUNK + 99)
        until_kept(self, "whole/k", [2])
        asked = len(self.upstream_ranges("whole/k"))
        before = self.upstream_bytes("whole/k")
        got = self.s3.get_object(Bucket="ckpt", Key="whole/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "partial")
        self.assertEqual(self.upstream_bytes("whole/k") - before, len(body) - CHUNK)
        self.assertNotIn(chunk_range(2, 2, len(body)), self.upstream_ranges("whole/k")[asked:])
        # The version is whole again, from its chunks: the next GET is a hit.
        self.assertEqual(self.catalog("whole/k")[0], 1)
        self.assertEqual(self.chunks("whole/k"), [])
        asked = len(self.upstream_ranges("whole/k"))
        got = self.s3.get_object(Bucket="ckpt", Key="whole/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(len(self.upstream_ranges("whole/k")), asked)

    def test_a_whole_get_of_a_version_whose_chunks_are_all_kept_counts_as_a_hit(self):
        body = data(3 * CHUNK - 9, 74)
        self.s3.put_object(Bucket="ckpt", Key="all/k", Body=body)
        self.flush_and_evict("all/")
        # Every chunk kept by ranges out of order, none from byte 0 (which would restore it whole).
        for first in (2 * CHUNK + 1, 1, CHUNK + 1):
            self.assertEqual(self.ranged("all/k", first, first + 9)[0], body[first:first + 10])
        until_kept(self, "all/k", [0, 1, 2])
        time.sleep(1.2)  # the report is rebuilt every second: it has counted those reads
        before = health(self.local.port)[1]["buckets"][0]["reads"]
        got = self.s3.get_object(Bucket="ckpt", Key="all/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        after = wait_health(self.local.port, lambda _, r: r["buckets"][0]["reads"] != before)
        after = after["buckets"][0]["reads"]
        self.assertEqual((after["hits"], after["hit_bytes"], after["misses"], after["miss_bytes"]),
                         (before["hits"] + 1, before["hit_bytes"] + len(body), before["misses"], before["miss_bytes"]))
        self.assertEqual(self.catalog("all/k")[0], 1)  # and it is whole again

    def test_a_whole_get_whose_bytes_fail_the_check_is_cut_off_and_keeps_no_chunk(self):
        body = data(3 * CHUNK, 71)
        self.s3.put_object(Bucket="ckpt", Key="flip/k", Body=body)
        self.flush_and_evict("flip/")
        self.proxy.flip_answer_byte = MiB  # in the answer of whichever chunk's GET comes first
        with self.assertRaises((BotoCoreError, ClientError)):
            # The body ends short of its Content-Length: the SDK refuses it.
            self.s3.get_object(Bucket="ckpt", Key="flip/k")["Body"].read()
        self.assertEqual(self.catalog("flip/k"), (2, 0))
        self.assertEqual(self.chunks("flip/k"), [])
        got = self.s3.get_object(Bucket="ckpt", Key="flip/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss")
        self.assertEqual(self.catalog("flip/k")[0], 1)


class PartialRestartTest(readthrough.TieredTest):
    """Kept chunks are committed: a kill -9 keeps them, and `hots3 check` finds them whole."""

    restart = readthrough.RestartTest.restart
    relaunch = readthrough.RestartTest.relaunch
    settled = readthrough.ReadThroughTest.settled
    until = readthrough.ReadThroughTest.until

    def test_kept_chunks_outlive_a_kill_and_pass_the_check(self):
        body = data(3 * CHUNK + 11, 65)
        self.s3.put_object(Bucket="ckpt", Key="crash/k", Body=body)
        self.flush_and_evict("crash/")
        first, last = CHUNK - 5, 2 * CHUNK + 5
        got = self.s3.get_object(Bucket="ckpt", Key="crash/k", Range="bytes=%d-%d" % (first, last))
        self.assertEqual(got["Body"].read(), body[first:last + 1])
        until_kept(self, "crash/k", [0, 1, 2])
        asked = len(self.upstream_ranges("crash/k"))
        self.restart(kill=True)
        got = self.s3.get_object(Bucket="ckpt", Key="crash/k", Range="bytes=%d-%d" % (first, last))
        self.assertEqual(got["Body"].read(), body[first:last + 1])
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(len(self.upstream_ranges("crash/k")), asked)

        # `hots3 check` reads and verifies the three chunks' extents.
        self.assertEqual(self.local.stop(), 0)
        check = self.check()
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertRegex(check.stdout, r"\b3 extents")
        self.assertIn("referenced 24 MiB", check.stdout)

        # A damaged chunk is found by check, and by a read: it is dropped, fetched and kept again,
        # and the client gets the right bytes.
        [(offset,)] = self.catalog_rows("SELECT e.device_offset FROM extents e JOIN tier_chunks c ON c.id = "
                                         "e.owner_id WHERE c.chunk = 1 ORDER BY e.logical_offset LIMIT 1")
        with open(os.path.join(self.local_dir, "data", "device.img"), "r+b") as device:
            device.seek(offset + 100)
            device.write(b"\xff" * 16)
        check = self.check()
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn("checksum mismatch", check.stdout + check.stderr)
        self.relaunch()
        got = self.s3.get_object(Bucket="ckpt", Key="crash/k", Range="bytes=%d-%d" % (first, last))
        self.assertEqual(got["Body"].read(), body[first:last + 1])
        self.assertEqual(self.upstream_ranges("crash/k")[asked:], ["bytes=%d-%d" % (CHUNK, 2 * CHUNK - 1)])
        until_kept(self, "crash/k", [0, 1, 2])
        self.assertEqual(self.local.stop(), 0)
        check = self.check()
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.relaunch()

    def test_a_whole_get_killed_midway_keeps_its_chunks_and_the_next_fetches_only_the_rest(self):
        body = data(8 * CHUNK + 13, 72)
        self.s3.put_object(Bucket="ckpt", Key="long/k", Body=body)
        self.flush_and_evict("long/")
        reader = socket.socket()
        try:
            # A small window: the server is held up soon after the client stops reading.
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
            reader.connect(("127.0.0.1", self.local.port))
            reader.sendall(readthrough.s3_support.SignedRequest("GET", "/ckpt/long/k", port=self.local.port).wire())
            received = 0
            while received < 3 * CHUNK:
                piece = reader.recv(1 << 20)
                self.assertTrue(piece)
                received += len(piece)
            # The client stops reading, so the server stops a little further on: the chunks that
            # went out are kept, each as it came; then the server is killed.
            deadline = time.monotonic() + 10
            while not {0, 1, 2} <= set(kept_chunks(self, "long/k")):
                self.assertLess(time.monotonic(), deadline, "kept: %s" % kept_chunks(self, "long/k"))
                time.sleep(0.02)
            self.restart(kill=True)
        finally:
            reader.close()
        self.settled()
        kept = kept_chunks(self, "long/k")
        self.assertLess(len(kept), 9)
        self.assertEqual(self.catalog("long/k"), (2, 0))
        before = self.upstream_bytes("long/k")
        got = self.s3.get_object(Bucket="ckpt", Key="long/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "partial")
        rest = sum(min(CHUNK, len(body) - n * CHUNK) for n in range(9) if n not in kept)
        self.assertEqual(self.upstream_bytes("long/k") - before, rest)
        self.assertEqual(self.catalog("long/k")[0], 1)
        self.assertEqual(kept_chunks(self, "long/k"), [])

        # The version made of the chunks passes the check, and is read back from here.
        self.assertEqual(self.local.stop(), 0)
        check = self.check()
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.relaunch()
        asked = len(self.upstream_ranges("long/k"))
        got = self.s3.get_object(Bucket="ckpt", Key="long/k")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit")
        self.assertEqual(len(self.upstream_ranges("long/k")), asked)
        self.s3.delete_object(Bucket="ckpt", Key="long/k")  # (the other test counts what is stored)

    def check(self):
        return subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), "check", "--data",
                               os.path.join(self.local_dir, "data")], capture_output=True, text=True, timeout=300)


if __name__ == "__main__":
    unittest.main()
