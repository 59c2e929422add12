"""kill -9 of a write-back hots3 during storms of writes: a hots3 whose bucket is bound to an
upstream (a second hots3) is killed, round after round, while writer threads overwrite and delete
a small key space with small objects, large single PUTs (above multipart_threshold: they go up in
5 MiB parts) and multipart uploads, and while its uploader has such uploads under way.

After each restart every key holds the state of its last acknowledged operation, or of an
operation in flight at the kill. Once the queue has drained, the upstream holds exactly what the
local server holds, key by key (SHA-256 and ETag), nothing else under the binding's prefix, and
no multipart upload left open. No run parked a job or met a conflict (the uploader never takes
its own earlier upload for another writer's), and the last run sent at most what it owed, less
the parts confirmed before the kill: nothing goes up twice but what was in flight."""

import hashlib
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3_support  # noqa: E402
from test_tier_writeback import KiB, MiB, client, health, tier_config, wait_health  # noqa: E402

from botocore.exceptions import BotoCoreError, ClientError  # noqa: E402

ROUNDS = 4
WRITERS = 4
KEYS = ["key-%02d" % i for i in range(30)]
BUCKET = "storm"
PREFIX = "storm/"
UPSTREAM_BUCKET = "team-ckpt"  # tier_config's
PART = 5 * MiB  # part_size, and multipart_threshold: a single PUT above it goes up in parts
WRITEBACK = 'multipart_threshold = "5MiB"\npart_size = "5MiB"'
# Uploads slow enough that a kill finds some of them half done.
UPSTREAM = 'write_bytes_per_s = "32MiB"'
STATS = re.compile(r"tier: this run uploaded (\d+) objects \((\d+) bytes\) and (\d+) deletes; (\d+) retries, "
                   r"(\d+) parked, (\d+) slow-downs, (\d+) conflicts; (\d+) bytes sent")


def quoted_md5(body):
    return '"%s"' % hashlib.md5(body).hexdigest()


def multipart_etag(parts):
    """S3's ETag of an object made of `parts`: the MD5 of their MD5s, and their count."""
    return '"%s-%d"' % (hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest(), len(parts))


class Version:
    """What a key holds after a PUT or a Complete: the bytes' SHA-256 and size, the ETag the
    local server gives it, and the one the upstream gives it (a single PUT above the threshold
    goes up in parts of PART, so its upstream ETag is a multipart one)."""

    def __init__(self, body, parts=None):
        self.sha256 = hashlib.sha256(body).hexdigest()
        self.size = len(body)
        if parts is not None:
            self.etag = self.upstream_etag = multipart_etag(parts)
        else:
            self.etag = quoted_md5(body)
            self.upstream_etag = self.etag
            if len(body) > PART:
                self.upstream_etag = multipart_etag([body[i:i + PART] for i in range(0, len(body), PART)])

    def __repr__(self):
        return "<%d bytes, sha256 %s..., etag %s>" % (self.size, self.sha256[:12], self.etag)


def describe(version):
    return "absent" if version is None else repr(version)


class Writer(threading.Thread):
    """Owns its keys, so that what it was told about each of them is in acknowledgement order:
    `ops[key]` is a list of [Version or None (a DELETE), acknowledged]. It stops at its first
    failed request (the server was killed under it): that operation is in flight, it may or may
    not have happened."""

    def __init__(self, index, port, keys, stop, seed):
        super().__init__(daemon=True)
        self.port = port
        self.keys = keys
        self.stop_flag = stop
        self.random = random.Random(seed)
        self.seed = seed
        self.ops = {key: [] for key in keys}
        self.errors = []  # error answers, wrong ETags: none is expected
        self.failure = None  # an exception of the test itself

    def body(self, size):
        # Distinct for each operation and reproducible from the seed; randbytes because a SHA-256
        # chain (data()) would take a large part of a round to make 12 MiB.
        self.seed += 1
        return random.Random(self.seed).randbytes(size)

    def run(self):
        c = client(self.port)  # no retries: a request is never silently repeated
        try:
            while not self.stop_flag.is_set():
                key = self.random.choice(self.keys)
                op = self.random.random()
                if op < 0.4:
                    self.put(c, key, self.body(self.random.randint(1 * KiB, 64 * KiB)))
                elif op < 0.6:
                    self.put(c, key, self.body(self.random.randint(6 * MiB, 12 * MiB)))
                elif op < 0.75:
                    self.multipart(c, key)
                else:
                    self.record(key, None)
                    c.delete_object(Bucket=BUCKET, Key=key)
                    self.ops[key][-1][1] = True
        except ClientError as e:
            self.errors.append("%s: %s" % (e.operation_name, e.response.get("Error")))
        except (BotoCoreError, OSError):
            pass  # the server was killed under us
        except Exception:  # noqa: BLE001 - reported by the test
            self.failure = traceback.format_exc()

    def record(self, key, version):
        self.ops[key].append([version, False])

    def put(self, c, key, body):
        self.record(key, Version(body))
        etag = c.put_object(Bucket=BUCKET, Key=key, Body=body)["ETag"]
        self.ops[key][-1][1] = True
        if etag != self.ops[key][-1][0].etag:
            self.errors.append("PUT %s answered ETag %s for %r" % (key, etag, self.ops[key][-1][0]))

    def multipart(self, c, key):
        # Two or three parts of 5 MiB and a shorter last one: the upstream gets these boundaries.
        body = self.body(self.random.choice([2, 3]) * PART + self.random.randint(1, MiB))
        parts = [body[i:i + PART] for i in range(0, len(body), PART)]
        upload = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        listed = [{"PartNumber": n + 1,
                   "ETag": c.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=n + 1,
                                         Body=p)["ETag"]} for n, p in enumerate(parts)]
        # Only the Complete changes what the key holds.
        self.record(key, Version(body, parts))
        etag = c.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                           MultipartUpload={"Parts": listed})["ETag"]
        self.ops[key][-1][1] = True
        if etag != self.ops[key][-1][0].etag:
            self.errors.append("Complete %s answered ETag %s for %r" % (key, etag, self.ops[key][-1][0]))


class TierCrashTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hots3-tier-crash-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        self.credentials = os.path.join(self.dir, "golden.toml")
        with open(self.credentials, "w") as f:
            f.write('access_key = "%s"\nsecret_key = "%s"\n' % (s3_support.ACCESS_KEY, s3_support.SECRET_KEY))
        self.local = None
        self.logs = []  # the local server's stderr, one per run (each start writes it anew)
        self.history = {}  # key -> what the writers did to it, for failures' messages
        self.upstream = s3_support.hots3_server(device_size="2GiB")
        self.upstream.start()
        self.up = client(self.upstream.port)
        self.up.create_bucket(Bucket=UPSTREAM_BUCKET)
        self.local_dir = os.path.join(self.dir, "local")
        os.makedirs(self.local_dir)
        self.catalog = os.path.join(self.local_dir, "data", "catalog.db")

    def tearDown(self):
        try:
            for server in (self.local, self.upstream):
                if server is not None:
                    server.kill()
                    server.cleanup()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start_local(self):
        config = tier_config("http://127.0.0.1:%d" % self.upstream.port, self.credentials, PREFIX, BUCKET,
                             WRITEBACK)
        config = config.replace("[[tier.bucket]]", UPSTREAM + "\n[[tier.bucket]]", 1)
        self.local = s3_support.hots3_server(config, device_size="2GiB", workdir=self.local_dir)
        self.local.start()
        return client(self.local.port)

    def kill_local(self):
        self.local.proc.send_signal(signal.SIGKILL)
        self.local.proc.wait()
        self.logs.append(self.local.read_stderr())
        self.local.cleanup()
        self.local = None

    def query_catalog(self, sql):
        """Rows of `sql` on the local catalog, read-only (the server may be running)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                db = sqlite3.connect("file:%s?mode=ro" % self.catalog, uri=True, timeout=5)
                try:
                    return db.execute(sql).fetchall()
                finally:
                    db.close()
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def upload_half_done(self):
        """Whether an upstream multipart upload has confirmed parts and is not complete yet."""
        return self.query_catalog("SELECT count(*) FROM tier_jobs j JOIN tier_parts p ON p.seq = j.seq "
                                  "WHERE j.upload_id IS NOT NULL")[0][0] > 0

    def owed_at_kill(self):
        """(object jobs, delete jobs, bytes still to send): what the catalog owes the upstream,
        less the parts it confirmed, which a restart must not send again."""
        jobs = self.query_catalog("SELECT object_id IS NOT NULL, size FROM tier_jobs UNION ALL "
                                  "SELECT 1, size FROM objects WHERE tier_implied = 1 AND tier_state = 0")
        confirmed = self.query_catalog("SELECT coalesce(sum(p.size), 0) FROM tier_parts p JOIN tier_jobs j "
                                       "ON p.seq = j.seq WHERE j.upload_id IS NOT NULL")[0][0]
        puts = [size for is_put, size in jobs if is_put]
        return len(puts), len(jobs) - len(puts), sum(puts) - confirmed

    def evidence(self, key):
        """For a failure's message: what the writers did to `key`, and the lines of every run's
        log that name it."""
        lines = ["written: " + h for h in self.history.get(key, [])]
        for run, log in enumerate(self.logs + ([self.local.read_stderr()] if self.local else [])):
            lines += ["run %d: %s" % (run, line) for line in log.splitlines() if key in line]
        return "\n".join(lines[-60:])

    def flush(self):
        """`hots3 tier flush --wait` on the local server: everything acknowledged goes up now."""
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3_support.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3_support.SECRET_KEY)
        try:
            done = subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), "tier", "flush", "--endpoint",
                                   "http://127.0.0.1:%d" % self.local.port, "--bucket", BUCKET, "--wait"],
                                  env=env, capture_output=True, text=True, timeout=60)
            if done.returncode == 0:
                return
            said = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            said = "(no answer within 60 s)"
        log = [line for line in self.local.read_stderr().splitlines() if "tier:" in line]
        self.fail("the flush failed: %s\n%s\n%s" % (said, health(self.local.port, text=True)[1],
                                                      "\n".join(log[-40:])))

    def read_local(self, c, key):
        """(SHA-256, ETag) of what the local server holds under `key`, or None."""
        try:
            got = c.get_object(Bucket=BUCKET, Key=key)
        except ClientError as e:
            self.assertEqual(e.response["Error"]["Code"], "NoSuchKey", key)
            return None
        return hashlib.sha256(got["Body"].read()).hexdigest(), got["ETag"]

    @staticmethod
    def acked(writers):
        return sum(1 for w in writers for ops in list(w.ops.values()) for _, ok in list(ops) if ok)

    def storm(self, round_number, wait_for_upload):
        """Writers on the local server for 1 to 3 s, then a kill -9 (with `wait_for_upload`, not
        before an upstream multipart upload is half done, up to 3 s more; and not before a write
        was acknowledged, which a sanitizer build beside other tests may take longer for).
        Returns the writers."""
        stop = threading.Event()
        writers = [Writer(i, self.local.port, KEYS[i::WRITERS], stop, (round_number * WRITERS + i) * 1000000)
                   for i in range(WRITERS)]
        for w in writers:
            w.start()
        time.sleep(random.uniform(1.0, 3.0))
        deadline = time.monotonic() + 30
        while self.acked(writers) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        half_done = False
        if wait_for_upload:
            deadline = time.monotonic() + 3
            while not half_done and time.monotonic() < deadline:
                half_done = self.upload_half_done()
                time.sleep(0.02)
        alive = sum(w.is_alive() for w in writers)
        self.kill_local()
        stop.set()
        for w in writers:
            w.join(timeout=30)
            self.assertFalse(w.is_alive(), "a writer never noticed the kill")
            self.assertIsNone(w.failure)
            self.assertEqual(w.errors, [], "round %d: the server refused or mangled writes" % round_number)
        acked = self.acked(writers)
        in_flight = sum(1 for w in writers for ops in w.ops.values() for _, ok in ops if not ok)
        sys.stderr.write("round %d: %d writes acknowledged, %d in flight at the kill (%d writers active)%s\n"
                         % (round_number, acked, in_flight, alive,
                            ", an upstream upload half done" if half_done else ""))
        self.assertGreater(acked, 0, "round %d: no write was acknowledged" % round_number)
        self.assertEqual(alive, WRITERS, "round %d: the kill came after the writers had stopped" % round_number)
        return writers

    def test_kill_9_during_write_back_storms_loses_nothing_and_sends_nothing_twice(self):
        state = {key: None for key in KEYS}  # what each key holds, as the last restart showed
        c = self.start_local()
        for round_number in range(ROUNDS):
            writers = self.storm(round_number, wait_for_upload=round_number % 2 == 1)
            owed = self.owed_at_kill()
            sys.stderr.write("round %d: the catalog owes %d uploads (%d bytes to send) and %d deletes\n"
                             % (round_number, owed[0], owed[2], owed[1]))
            c = self.start_local()
            # Every key: its last acknowledged state, or the state an operation in flight after it
            # would have made.
            for w in writers:
                for key, ops in w.ops.items():
                    self.history.setdefault(key, []).extend(
                        "round %d: %s %s" % (round_number, describe(v), "acknowledged" if ok else "in flight")
                        for v, ok in ops)
                    acked = [i for i, (_, ok) in enumerate(ops) if ok]
                    last = acked[-1] if acked else -1
                    allowed = [ops[last][0] if last >= 0 else state[key]] + [v for v, _ in ops[last + 1:]]
                    found = self.read_local(c, key)
                    match = [v for v in allowed if (v is None and found is None) or
                             (v is not None and found is not None and found[0] == v.sha256)]
                    self.assertTrue(match, "round %d: %s holds %s, expected one of %s\n%s" % (
                        round_number, key, found, [describe(v) for v in allowed], self.evidence(key)))
                    if found is not None:
                        self.assertEqual(found[1], match[0].etag, "round %d: %s" % (round_number, key))
                    state[key] = match[0]
            listed = {o["Key"] for o in c.list_objects_v2(Bucket=BUCKET).get("Contents", [])}
            self.assertEqual(listed, {k for k, v in state.items() if v is not None}, "round %d" % round_number)

        # The last run: everything owed goes up, and then the upstream is the local store's copy.
        self.flush()
        report = wait_health(self.local.port, lambda status, r: r["buckets"][0]["queued"] == 0)
        for key in KEYS:
            want = state[key]
            try:
                got = self.up.get_object(Bucket=UPSTREAM_BUCKET, Key=PREFIX + key)
                found = hashlib.sha256(got["Body"].read()).hexdigest(), got["ETag"]
            except ClientError as e:
                self.assertEqual(e.response["Error"]["Code"], "NoSuchKey", key)
                found = None
            expected = None if want is None else (want.sha256, want.upstream_etag)
            self.assertEqual(found, expected, "upstream %s%s holds %s, the local server %s\n%s" % (
                PREFIX, key, found, describe(want), self.evidence(key)))
        listed = set()
        for page in self.up.get_paginator("list_objects_v2").paginate(Bucket=UPSTREAM_BUCKET, Prefix=PREFIX):
            listed |= {o["Key"] for o in page.get("Contents", [])}
        # (A side copy of a conflict, "<key>.hots3-conflict-<ms>", is such a key.)
        extra = sorted(listed - {PREFIX + k for k, v in state.items() if v is not None})
        self.assertEqual(extra, [], "the upstream holds keys the local server does not\n%s" % "\n".join(
            self.evidence(k[len(PREFIX):].split(".hots3-conflict-")[0]) for k in extra))
        # An upload a killed run left open upstream is aborted by the sweep at the next start;
        # the sweep runs beside the uploader, so it may still be under way.
        deadline = time.monotonic() + 10
        while True:
            left = self.up.list_multipart_uploads(Bucket=UPSTREAM_BUCKET, Prefix=PREFIX).get("Uploads", [])
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual([(u["Key"], u["UploadId"]) for u in left], [], "uploads left open upstream")
        self.assertEqual(report["buckets"][0]["parked"], 0, report)
        self.assertEqual(report["buckets"][0]["conflicts"], 0, report)

        self.assertEqual(self.local.stop(), 0)
        self.logs.append(self.local.read_stderr())
        self.local.cleanup()
        self.local = None
        for run, log in enumerate(self.logs):
            for what in ("tier: conflict", "tier: parked"):
                self.assertNotIn(what, log, "run %d:\n%s" % (run, "\n".join(
                    line for line in log.splitlines() if what in line)))
        stats = STATS.search(self.logs[-1])
        self.assertIsNotNone(stats, self.logs[-1][-3000:])
        uploaded, _, deleted, _, parked, _, conflicts, sent = (int(g) for g in stats.groups())
        self.assertEqual((parked, conflicts), (0, 0))
        # The last run had nothing to do but what the catalog owed at the last kill, once each.
        self.assertEqual((uploaded, deleted), owed[:2], stats.group(0))
        self.assertLessEqual(sent, owed[2], "the last run sent more than it owed: %s" % stats.group(0))
        sys.stderr.write("last run: %s\n" % stats.group(0))


if __name__ == "__main__":
    unittest.main()
