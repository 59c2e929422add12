"""Write-back to an upstream S3, end to end: a hots3 whose bucket is bound ([[tier.bucket]],
mode "writeback") to a second hots3 used as the upstream. What a client writes reaches the
upstream under upstream_prefix + key with the same bytes, ETag, content headers and metadata;
deletes and renames follow; the binding is in the catalog without its secret; an unreachable
upstream stops nothing and loses nothing; a kill -9 after the 200 loses no upload."""

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402

import boto3  # noqa: E402
import botocore.config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

KiB = 1024
MiB = 1024 * KiB
PREFIX = "rack7/"
AWKWARD = "a b+c%d/ü"


# The write-back jobs a catalog holds: its job rows, and the new versions whose rows are their
# jobs (marked tier_implied while only here).
OWED_JOBS = ("SELECT (SELECT count(*) FROM tier_jobs) + "
             "(SELECT count(*) FROM objects WHERE tier_implied = 1 AND tier_state = 0)")


def data(n, seed):
    out = bytearray()
    block = hashlib.sha256(b"%d" % seed).digest()
    while len(out) < n:
        out += block
        block = hashlib.sha256(block).digest()
    return bytes(out[:n])


def client(port, config=None):
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port,
                        aws_access_key_id=s3_support.ACCESS_KEY,
                        aws_secret_access_key=s3_support.SECRET_KEY, region_name=s3_support.REGION,
                        config=config or botocore.config.Config(retries={"max_attempts": 1}))


def tier_config(endpoint, credentials_file, prefix=PREFIX, bucket="ckpt", writeback="",
                mode="writeback", delay="500ms", binding="", upstream="", upstream_bucket="team-ckpt"):
    """`writeback`: more keys of [tier.writeback], one per line (retry_base and retry_cap there
    replace the tests' quick ones). `binding`: more of the [[tier.bucket]] entry; `upstream`:
    more of the [[tier.upstream]] one."""
    retries = "" if "retry_base" in writeback else 'retry_base = "50ms"\nretry_cap = "500ms"'
    return """
[[tier.upstream]]
name = "golden"
endpoint = "%s"
credentials_file = "%s"
%s

[[tier.bucket]]
bucket = "%s"
upstream = "golden"
upstream_bucket = "%s"
upstream_prefix = "%s"
mode = "%s"
%s

[tier.writeback]
delay = "%s"
%s
%s
""" % (endpoint, credentials_file, upstream, bucket, upstream_bucket, prefix, mode, binding, delay, retries,
       writeback)


def write_credentials(directory):
    """A credentials file for the upstream (the test user's keys) in `directory`; its path."""
    path = os.path.join(directory, "golden.toml")
    with open(path, "w") as f:
        f.write('access_key = "%s"\nsecret_key = "%s"\n' % (s3_support.ACCESS_KEY, s3_support.SECRET_KEY))
    return path


def start_upstream(cls, config=""):
    """On `cls`: a working directory `cls.dir` holding the upstream's credentials file
    (`cls.credentials`) and `cls.local_dir` (for the local server's data), and an upstream hots3
    (`config`: more of its configuration) holding the bucket team-ckpt (`cls.upstream`, `cls.up`)."""
    cls.dir = tempfile.mkdtemp(prefix="hots3-tier-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
    cls.credentials = write_credentials(cls.dir)
    cls.upstream = s3_support.hots3_server(config, device_size="1GiB").start()
    cls.up = client(cls.upstream.port)
    cls.up.create_bucket(Bucket="team-ckpt")
    cls.local_dir = os.path.join(cls.dir, "local")
    os.makedirs(cls.local_dir)


def start_local(cls, config, device_size):
    """On `cls`: the local hots3 (`cls.local`, its data in `cls.local_dir`) with `config` and a
    device of `device_size`, a client of it (`cls.s3`) and its endpoint (`cls.endpoint`)."""
    cls.local = s3_support.hots3_server(config, device_size=device_size, workdir=cls.local_dir).start()
    cls.s3 = client(cls.local.port)
    cls.endpoint = "http://127.0.0.1:%d" % cls.local.port


def stop_servers(cls):
    """Stops `cls.local` and `cls.upstream` (each must exit 0) and `cls.proxy` if there is one, and
    removes what start_upstream made."""
    try:
        for server in (cls.local, cls.upstream):
            if server.proc is not None and server.proc.poll() is None:
                assert server.stop() == 0
    finally:
        if getattr(cls, "proxy", None) is not None:
            cls.proxy.stop()
        cls.local.cleanup()
        cls.upstream.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)


def run_hots3(*args, timeout=120):
    """Runs the hots3 binary with `args` and the test user's keys; (exit status, stdout, stderr)."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=s3_support.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3_support.SECRET_KEY)
    done = subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def health(port, text=False):
    """/health/upstream: (HTTP status, body as JSON, or as text with `text`)."""
    url = "http://127.0.0.1:%d/health/upstream%s" % (port, "?format=text" if text else "")
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            status, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode()
    return status, body if text else json.loads(body)


def wait_health(port, check, timeout=20):
    """The /health/upstream report once `check(status, report)` holds (fails after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        status, report = health(port)
        # Before its first report (a server just started) there is only {"status": "starting"}.
        if report.get("status") != "starting" and check(status, report):
            return report
        if time.monotonic() > deadline:
            raise AssertionError("the health report never came to pass: %d %r" % (status, report))
        time.sleep(0.1)


class WriteBackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The upstream takes less user metadata than hots3 does: an object it refuses.
        start_upstream(cls, '[s3]\nmetadata_max = "1KiB"\n')
        cls.local = cls.start_local()
        cls.s3 = client(cls.local.port)

    @classmethod
    def start_local(cls, endpoint=None, prefix=PREFIX, args=()):
        endpoint = endpoint or "http://127.0.0.1:%d" % cls.upstream.port
        server = s3_support.hots3_server(tier_config(endpoint, cls.credentials, prefix), device_size="1GiB",
                                         workdir=cls.local_dir, args=args)
        try:
            return server.start()
        except RuntimeError:
            server.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        stop_servers(cls)

    def restart_local(self, endpoint=None, kill=False):
        """Stops the local server (SIGTERM, or SIGKILL with `kill`) and starts it again; returns
        how many write-back jobs its catalog held in between."""
        if kill:
            self.local.proc.send_signal(signal.SIGKILL)
            self.local.proc.wait()
        else:
            self.assertEqual(self.local.stop(), 0)
        self.local.cleanup()
        db = sqlite3.connect(os.path.join(self.local_dir, "data", "catalog.db"))
        try:
            pending = db.execute(OWED_JOBS).fetchone()[0]
        finally:
            db.close()
        type(self).local = self.start_local(endpoint)
        type(self).s3 = client(self.local.port)
        return pending

    def upstream_object(self, key, timeout=20, prefix=PREFIX):
        """The upstream's GET of prefix + key once it has the object (or fails after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.up.get_object(Bucket="team-ckpt", Key=prefix + key)
            except ClientError as e:
                if e.response["Error"]["Code"] != "NoSuchKey" or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def wait_upstream_gone(self, key, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.up.head_object(Bucket="team-ckpt", Key=PREFIX + key)
            except ClientError as e:
                if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                    return
                raise
            self.assertLess(time.monotonic(), deadline, "%s is still upstream" % key)
            time.sleep(0.05)

    def test_objects_reach_the_upstream_with_their_bytes_etag_and_headers(self):
        small = data(100, 1)
        one = data(1 * MiB + 3, 2)
        r_small = self.s3.put_object(Bucket="ckpt", Key="wb/small", Body=small)
        r_one = self.s3.put_object(Bucket="ckpt", Key="wb/one.bin", Body=one, ContentType="application/x-test",
                                   ContentDisposition="attachment", CacheControl="no-cache",
                                   Metadata={"step": "42", "owner": "rank-0"})
        parts = [data(5 * MiB, 10 + i) for i in range(2)] + [data(1000, 12)]
        up = self.s3.create_multipart_upload(Bucket="ckpt", Key="wb/three-parts", ContentType="application/x-ckpt")
        etags = [self.s3.upload_part(Bucket="ckpt", Key="wb/three-parts", UploadId=up["UploadId"], PartNumber=n + 1,
                                     Body=p)["ETag"] for n, p in enumerate(parts)]
        done = self.s3.complete_multipart_upload(
            Bucket="ckpt", Key="wb/three-parts", UploadId=up["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
        self.s3.put_object(Bucket="ckpt", Key="wb/dir/", Body=b"")  # a "directory marker"
        got = self.upstream_object("wb/small")
        self.assertEqual((got["Body"].read(), got["ETag"]), (small, r_small["ETag"]))
        self.assertEqual(self.upstream_object("wb/dir/")["ContentLength"], 0)
        got = self.upstream_object("wb/one.bin")
        self.assertEqual((got["Body"].read(), got["ETag"]), (one, r_one["ETag"]))
        self.assertEqual((got["ContentType"], got["ContentDisposition"], got["CacheControl"], got["Metadata"]),
                         ("application/x-test", "attachment", "no-cache", {"step": "42", "owner": "rank-0"}))
        got = self.upstream_object("wb/three-parts")
        self.assertEqual(got["Body"].read(), b"".join(parts))
        self.assertEqual(got["ETag"], done["ETag"], "a multipart object keeps its parts, so its ETag")
        self.assertEqual(got["ContentType"], "application/x-ckpt")
        self.assertEqual(self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "wb/three-parts", PartNumber=2)
                         ["ContentLength"], 5 * MiB)

    def test_checksums_go_up_once_the_upstream_echoes_them_and_requests_keep_their_rate(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            for checksums in ("auto", "off"):
                name = "sums-" + checksums
                server = self.bound_server(name, "http://127.0.0.1:%d" % proxy.port,
                                           upstream='checksums = "%s"\nrequests_per_s = 20' % checksums)
                try:
                    c = client(server.port)
                    # The first upload's answer tells whether the upstream keeps checksums.
                    c.put_object(Bucket=name, Key="first", Body=b"tells")
                    self.upstream_object("first", prefix=name + "/")
                    # Counted from before the 31 uploads: the uploader may send some while the
                    # others are still coming in.
                    requests, started = proxy.requests, time.monotonic()
                    body = data(200 * KiB, 5)
                    sha = c.put_object(Bucket=name, Key="summed", Body=body,
                                       ChecksumAlgorithm="SHA256")["ChecksumSHA256"]
                    # 31 uploads at 20 requests a second take at least 30 gaps of 1/20 s.
                    for i in range(30):
                        c.put_object(Bucket=name, Key="many/%02d" % i, Body=b"%d" % i)
                    self.flush(server, name)
                    self.assertGreaterEqual(proxy.requests - requests, 31)
                    self.assertGreaterEqual(time.monotonic() - started, 30 / 20.0)
                    got = self.up.head_object(Bucket="team-ckpt", Key=name + "/summed", ChecksumMode="ENABLED")
                    self.assertEqual(got.get("ChecksumSHA256"), sha if checksums == "auto" else None, checksums)
                    self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=name + "/summed")["Body"].read(), body)
                finally:
                    self.assertEqual(server.stop(), 0)
                    server.cleanup()

    def test_appended_objects_go_up_whole(self):
        # Each append is a part, far under S3's 5 MiB minimum: the upstream gets the object in
        # parts of its own (its ETag then differs from ours, which clients keep seeing).
        self.s3.put_object(Bucket="ckpt", Key="log/train.log", Body=b"epoch 1\n", WriteOffsetBytes=0)
        self.s3.put_object(Bucket="ckpt", Key="log/train.log", Body=b"epoch 2\n", WriteOffsetBytes=8)
        ours = self.s3.head_object(Bucket="ckpt", Key="log/train.log")["ETag"]
        deadline = time.monotonic() + 20
        while self.upstream_object("log/train.log")["Body"].read() != b"epoch 1\nepoch 2\n":
            self.assertLess(time.monotonic(), deadline, "the appended object never went up whole")
            time.sleep(0.05)
        self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="log/train.log")["ETag"], ours)

    def test_awkward_keys_keep_their_bytes_upstream(self):
        keys = ["odd/space name", "odd/plus+sign", "odd/percent%41%2F", "odd/double//slash", "odd/unicodé/ファイル",
                "odd/xml<&>'\""]
        for i, k in enumerate(keys):
            self.s3.put_object(Bucket="ckpt", Key=k, Body=b"body %d" % i)
        for i, k in enumerate(keys):
            self.assertEqual(self.upstream_object(k)["Body"].read(), b"body %d" % i, k)

    def test_a_key_too_long_for_the_upstream_is_refused_before_its_200(self):
        # rack7/ takes 6 of the upstream's 1,024 bytes.
        fits = "long/" + "k" * (1024 - len(PREFIX) - 5)
        self.s3.put_object(Bucket="ckpt", Key=fits, Body=b"fits")
        self.assertEqual(self.upstream_object(fits)["Body"].read(), b"fits")
        for attempt in (lambda: self.s3.put_object(Bucket="ckpt", Key=fits + "x", Body=b"no"),
                        lambda: self.s3.create_multipart_upload(Bucket="ckpt", Key=fits + "x"),
                        lambda: self.s3.copy_object(Bucket="ckpt", Key=fits + "x",
                                                    CopySource={"Bucket": "ckpt", "Key": fits})):
            with self.assertRaises(ClientError) as refused:
                attempt()
            self.assertEqual(refused.exception.response["Error"]["Code"], "KeyTooLongError")
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="ckpt", Key=fits + "x")

    def test_overwrites_deletes_and_renames_reach_the_upstream_in_order(self):
        for v in range(5):
            self.s3.put_object(Bucket="ckpt", Key="order/k", Body=b"version %d" % v)
        deadline = time.monotonic() + 20
        while self.upstream_object("order/k")["Body"].read() != b"version 4":
            self.assertLess(time.monotonic(), deadline, "the last version never went up")
            time.sleep(0.05)
        self.s3.delete_object(Bucket="ckpt", Key="order/k")
        self.wait_upstream_gone("order/k")
        # A temporary name renamed before it goes up is never uploaded under it (S3 Express's
        # RenameObject: PUT /bucket/final?renameObject with x-amz-rename-source).
        self.s3.put_object(Bucket="ckpt", Key="order/tmp", Body=b"checkpoint")
        r = s3_support.send(self.local.port, s3_support.SignedRequest(
            "PUT", "/ckpt/order/final", [("renameObject", "")], {"x-amz-rename-source": "ckpt/order/tmp"},
            port=self.local.port).wire())
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(self.upstream_object("order/final")["Body"].read(), b"checkpoint")
        self.wait_upstream_gone("order/tmp")

    def listed_upstream(self, prefix):
        return {o["Key"][len(PREFIX):] for o in self.up.list_objects_v2(
            Bucket="team-ckpt", Prefix=PREFIX + prefix).get("Contents", [])}

    def test_a_commit_marker_waits_for_every_shard_acknowledged_before_it(self):
        # A distributed checkpoint whose first shard the upstream refuses (its metadata is over
        # the upstream's limit): the shard is parked, and the marker must not go up without it.
        self.s3.put_object(Bucket="ckpt", Key="dcp/step-1/__0_0.distcp", Body=data(1000, 59),
                           Metadata={"big": "x" * 1500})
        shards = ["dcp/step-1/__%d_0.distcp" % i for i in range(1, 24)]
        for i, k in enumerate(shards):
            self.s3.put_object(Bucket="ckpt", Key=k, Body=data(256 * KiB, 60 + i))
        self.s3.put_object(Bucket="ckpt", Key="dcp/step-1/.metadata", Body=b"{}")
        # Under another prefix, a marker does not wait for step-1's shards.
        self.s3.put_object(Bucket="ckpt", Key="dcp/step-2/__0_0.distcp", Body=data(1000, 90))
        self.s3.put_object(Bucket="ckpt", Key="dcp/step-2/.metadata", Body=b"{}")
        deadline = time.monotonic() + 30
        while not set(shards) <= self.listed_upstream("dcp/step-1/"):
            self.assertLess(time.monotonic(), deadline, "the shards never went up")
            time.sleep(0.05)
        self.upstream_object("dcp/step-2/.metadata")
        time.sleep(1.5)  # three coalescing delays: the marker had every chance to go up
        self.assertEqual(self.listed_upstream("dcp/step-1/"), set(shards),
                         "the marker went up without its parked shard")

    def back_to_the_upstream(self):
        """The local server bound to the upstream again, if a test ended elsewhere: one failure
        is not every later test's."""
        if self.local.proc.poll() is not None:
            self.local.cleanup()
            type(self).local = self.start_local()
            type(self).s3 = client(self.local.port)
        elif not all(part in self.binding()[1] for part in ('"endpoint":"http://127.0.0.1:%d"' % self.upstream.port,
                                                          '"upstream_prefix":"%s"' % PREFIX)):
            self.restart_local()

    def binding(self):
        """(tier mode, upstream binding as JSON) of the bucket in the local catalog."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.local_dir, "data", "catalog.db"), uri=True)
        try:
            return db.execute("SELECT tier_mode, upstream FROM buckets WHERE name = 'ckpt'").fetchone()
        finally:
            db.close()

    def test_a_changed_binding_that_still_owes_changes_is_refused_unless_forced(self):
        self.restart_local("http://127.0.0.1:%d" % socket_port_closed())  # nothing gets through
        self.addCleanup(self.back_to_the_upstream)
        self.s3.put_object(Bucket="ckpt", Key="rebind/k", Body=b"owed to rack7/")
        self.assertEqual(self.local.stop(), 0)
        self.local.cleanup()
        with self.assertRaises(RuntimeError) as refused:
            self.start_local(prefix="rack8/")
        self.assertRegex(str(refused.exception), r"tier\.bucket ckpt: its binding changed while changes are "
                         r"still owed to the old binding \(\d+ of them")
        # Forced, the owed change goes to the new binding; back to the old one, nothing is owed.
        type(self).local = self.start_local(prefix="rack8/", args=("--tier-rebind",))
        self.assertEqual(self.upstream_object("rebind/k", prefix="rack8/")["Body"].read(), b"owed to rack7/")
        self.restart_local()

    def test_binding_a_bucket_sends_up_what_it_already_holds(self):
        workdir = os.path.join(self.dir, "late")
        os.makedirs(workdir)
        plain = s3_support.hots3_server(device_size="256MiB", workdir=workdir).start()
        try:
            c = client(plain.port)
            c.create_bucket(Bucket="late")
            for i in range(5):
                c.put_object(Bucket="late", Key="old/%d" % i, Body=data(1000 + i, 70 + i))
        finally:
            self.assertEqual(plain.stop(), 0)
            plain.cleanup()
        bound = s3_support.hots3_server(
            tier_config("http://127.0.0.1:%d" % self.upstream.port, self.credentials, "late/", "late"),
            device_size="256MiB", workdir=workdir).start()
        try:
            for i in range(5):
                got = self.upstream_object("old/%d" % i, prefix="late/")["Body"].read()
                self.assertEqual(got, data(1000 + i, 70 + i))
            self.assertEqual(bound.stop(), 0)
            self.assertIn("tier: this run uploaded 5 objects (5010 bytes)", bound.read_stderr())
        finally:
            bound.cleanup()

    def test_each_change_goes_up_once_while_jobs_end_during_readings_of_the_queue(self):
        # Hundreds of small jobs at once: attempts end while the uploader reads the queue for the
        # next ones, and a reading taken before an attempt recorded its end must not send it again.
        server = self.bound_server("once", "http://127.0.0.1:%d" % self.upstream.port,
                                   writeback="parallelism = 16")
        try:
            c = client(server.port)
            c.create_bucket(Bucket="once")
            keys = ["k/%03d" % i for i in range(300)]
            endpoint = "http://127.0.0.1:%d" % server.port
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda k: c.put_object(Bucket="once", Key=k, Body=k.encode()), keys))
                rc, _, err = self.hots3("tier", "flush", "--endpoint", endpoint, "--bucket", "once", "--wait")
                self.assertEqual(rc, 0, err)
                list(pool.map(lambda k: c.delete_object(Bucket="once", Key=k), keys))
            rc, _, err = self.hots3("tier", "flush", "--endpoint", endpoint, "--bucket", "once", "--wait")
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.up.list_objects_v2(Bucket="team-ckpt", Prefix="once/")["KeyCount"], 0)
            self.assertEqual(server.stop(), 0)
            self.assertIn("tier: this run uploaded 300 objects (1500 bytes) and 300 deletes; 0 retries",
                          server.read_stderr())
        finally:
            server.cleanup()

    def test_the_binding_is_in_the_catalog_without_its_secret(self):
        mode, upstream = self.binding()
        self.assertEqual(mode, 1)
        self.assertIn('"upstream_bucket":"team-ckpt"', upstream)
        self.assertIn('"upstream_prefix":"%s"' % PREFIX, upstream)
        self.assertIn('"endpoint":"http://127.0.0.1:%d"' % self.upstream.port, upstream)
        for name in os.listdir(os.path.join(self.local_dir, "data")):
            path = os.path.join(self.local_dir, "data", name)
            if os.path.isfile(path) and name != "device.img":
                with open(path, "rb") as f:
                    self.assertNotIn(s3_support.SECRET_KEY.encode(), f.read(), name)

    def test_an_unreachable_upstream_stops_nothing_and_loses_nothing(self):
        # Bound to a port where nothing listens: the server starts, serves, and keeps the jobs.
        closed = socket_port_closed()
        self.restart_local("http://127.0.0.1:%d" % closed)
        self.addCleanup(self.back_to_the_upstream)
        body = data(300 * KiB, 30)
        self.s3.put_object(Bucket="ckpt", Key="outage/k", Body=body)
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="outage/k")["Body"].read(), body)
        time.sleep(1.0)  # several attempts, all refused
        # The probe names the cause; the server itself stays ready.
        report = wait_health(self.local.port, lambda status, r: r["buckets"][0]["queued"] >= 1)
        self.assertEqual(report["status"], "degraded")
        self.assertEqual(health(self.local.port)[0], 503)
        self.assertEqual(report["upstreams"][0]["state"], "unreachable")
        self.assertRegex(report["upstreams"][0]["error"], "(?i)connection refused")
        self.assertEqual(report["buckets"][0]["bucket"], "ckpt")
        self.assertGreaterEqual(report["buckets"][0]["queued_bytes"], len(body))
        self.assertGreaterEqual(report["owed_bytes"], len(body))
        status, text = health(self.local.port, text=True)
        self.assertEqual(status, 503)
        self.assertIn("upstream golden http://127.0.0.1:%d: unreachable" % closed, text)
        self.assertIn("bucket ckpt -> golden:team-ckpt/rack7/ (writeback): degraded", text)
        with urllib.request.urlopen("http://127.0.0.1:%d/health/ready" % self.local.port) as r:
            self.assertEqual(r.status, 200)
        for shown in (json.dumps(report), text):
            self.assertNotIn("outage", shown)  # keys are not status
        for shown in (json.dumps(report), text, self.local.read_stderr()):
            self.assertNotIn(s3_support.SECRET_KEY, shown)
        # kill -9: the acknowledged write's job is in the catalog, whatever the uploader did.
        self.assertGreaterEqual(self.restart_local(kill=True), 1)
        self.assertEqual(self.upstream_object("outage/k")["Body"].read(), body)
        # (A job another test parked on purpose may be left, and the marker waiting behind it.)
        report = wait_health(self.local.port, lambda status, r: r["upstreams"][0]["state"] == "ok")
        self.assertEqual(report["buckets"][0]["state"], "ok" if report["buckets"][0]["parked"] == 0 else "degraded")

    def durable_upstream(self, c):
        """`c` sends x-hots3-durability: upstream on every PUT and Complete."""
        def add(request, **_):
            request.headers["x-hots3-durability"] = "upstream"
        for op in ("PutObject", "CompleteMultipartUpload"):
            c.meta.events.register("before-sign.s3.%s" % op, add)
        return c

    def test_a_write_that_asks_for_upstream_durability_is_upstream_at_its_200(self):
        c = self.durable_upstream(client(self.local.port))
        body = data(200 * KiB, 60)
        etag = c.put_object(Bucket="ckpt", Key="durable/one", Body=body)["ETag"]
        # No waiting: at the 200 the upstream has it (the coalescing delay was skipped).
        got = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "durable/one")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ETag"], etag)
        parts = [data(5 * MiB, 61), data(MiB, 62)]
        upload = c.create_multipart_upload(Bucket="ckpt", Key="durable/mp")["UploadId"]
        listed = [{"PartNumber": i + 1, "ETag": c.upload_part(Bucket="ckpt", Key="durable/mp", UploadId=upload,
                                                             PartNumber=i + 1, Body=p)["ETag"]}
                  for i, p in enumerate(parts)]
        etag = c.complete_multipart_upload(Bucket="ckpt", Key="durable/mp", UploadId=upload,
                                           MultipartUpload={"Parts": listed})["ETag"]
        self.assertEqual(self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "durable/mp")["ETag"], etag)
        # A value it does not know, or a bucket with no upstream: refused before the body.
        plain = client(self.local.port)
        plain.create_bucket(Bucket="unbound")
        for bucket, header, code in (("ckpt", "somewhere", "InvalidArgument"),
                                     ("unbound", "upstream", "InvalidRequest")):
            def add(request, header=header, **_):
                request.headers["x-hots3-durability"] = header
            plain.meta.events.register("before-sign.s3.PutObject", add)
            with self.assertRaises(ClientError) as refused:
                plain.put_object(Bucket=bucket, Key="k", Body=b"x")
            self.assertEqual(refused.exception.response["Error"]["Code"], code)
            plain.meta.events.unregister("before-sign.s3.PutObject", add)
        plain.delete_bucket(Bucket="unbound")

    def hots3(self, *args):
        return run_hots3(*args)

    def test_tier_flush_returns_once_the_prefix_is_upstream_and_status_reports(self):
        endpoint = "http://127.0.0.1:%d" % self.local.port
        for i in range(6):
            self.s3.put_object(Bucket="ckpt", Key="flush/%d" % i, Body=data(50 * KiB + i, 80 + i))
        self.s3.put_object(Bucket="ckpt", Key="elsewhere/k", Body=b"not flushed")
        rc, out, err = self.hots3("tier", "flush", "--endpoint", endpoint, "--bucket", "ckpt",
                                  "--prefix", "flush/", "--wait")
        self.assertEqual(rc, 0, err)
        self.assertIn("ckpt/flush/: everything acknowledged before the flush is upstream", out)
        for i in range(6):  # at once, not after waiting
            got = self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "flush/%d" % i)["Body"].read()
            self.assertEqual(got, data(50 * KiB + i, 80 + i))
        # (Other tests of the class may have left a parked job: "degraded", exit 1.) The report is
        # rebuilt every second: the one after the uploads has heard the upstream answer.
        wait_health(self.local.port, lambda status, r: r["upstreams"][0]["state"] == "ok")
        rc, out, err = self.hots3("tier", "status", "--endpoint", endpoint)
        self.assertRegex(out, r"^status: (ok|degraded)\n")
        self.assertEqual(rc, 0 if out.startswith("status: ok") else 1, out + err)
        self.assertIn("upstream golden http://127.0.0.1:%d: ok" % self.upstream.port, out)
        rc, out, _ = self.hots3("tier", "status", "--endpoint", endpoint, "--json")
        report = json.loads(out)
        self.assertEqual(report["buckets"][0]["bucket"], "ckpt")
        self.assertEqual(rc, 0 if report["status"] == "ok" else 1)
        # Not a write-back bucket, or no keys: the server's error, exit 1.
        self.s3.create_bucket(Bucket="unbound-flush")
        rc, _, err = self.hots3("tier", "flush", "--endpoint", endpoint, "--bucket", "unbound-flush")
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 400 InvalidRequest", err)
        self.s3.delete_bucket(Bucket="unbound-flush")
        env_less = subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), "tier", "flush", "--endpoint", endpoint,
                                   "--bucket", "ckpt"], capture_output=True, text=True, timeout=60,
                                  env={k: v for k, v in os.environ.items() if "ACCESS" not in k and "SECRET" not in k})
        self.assertNotEqual(env_less.returncode, 0)
        self.assertIn("no credentials", env_less.stderr)

    def bound_server(self, name, endpoint, writeback="", credentials=None, upstream=""):
        """Another bound hots3 with a store of its own in self.dir/name (kept across restarts).
        `upstream`: more keys of its [[tier.upstream]]."""
        workdir = os.path.join(self.dir, name)
        os.makedirs(workdir, exist_ok=True)
        config = tier_config(endpoint, credentials or self.credentials, name + "/", name, writeback)
        config = config.replace("[[tier.bucket]]", upstream + "\n[[tier.bucket]]", 1)
        return s3_support.hots3_server(config, device_size="256MiB", workdir=workdir).start()

    def test_a_kill_during_a_large_upload_resends_only_the_parts_in_flight(self):
        upstream = "http://127.0.0.1:%d" % self.upstream.port
        # 48 MiB in 5 MiB parts at 16 MiB/s: three seconds of upload to kill in the middle of.
        writeback = 'multipart_threshold = "5MiB"\npart_size = "5MiB"'
        server = self.bound_server("resume", upstream, writeback, upstream='write_bytes_per_s = "16MiB"')
        catalog = os.path.join(self.dir, "resume", "data", "catalog.db")
        body = data(48 * MiB, 50)
        try:
            # As SDKs save a large checkpoint: a multipart upload, whose part boundaries (and so
            # whose ETag) the upstream keeps.
            c = client(server.port)
            upload = c.create_multipart_upload(Bucket="resume", Key="ckpt/model.bin")["UploadId"]
            parts = [{"PartNumber": n + 1,
                      "ETag": c.upload_part(Bucket="resume", Key="ckpt/model.bin", UploadId=upload,
                                            PartNumber=n + 1, Body=body[n * 5 * MiB:(n + 1) * 5 * MiB])["ETag"]}
                     for n in range((len(body) + 5 * MiB - 1) // (5 * MiB))]
            etag = c.complete_multipart_upload(Bucket="resume", Key="ckpt/model.bin", UploadId=upload,
                                               MultipartUpload={"Parts": parts})["ETag"]
            deadline = time.monotonic() + 30
            while True:
                db = sqlite3.connect("file:%s?mode=ro" % catalog, uri=True)
                try:
                    done = db.execute("SELECT count(*) FROM tier_parts").fetchone()[0]
                finally:
                    db.close()
                if done >= 3:
                    break
                self.assertLess(time.monotonic(), deadline, "no part was ever confirmed")
                time.sleep(0.02)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
        finally:
            server.cleanup()
        db = sqlite3.connect(catalog)
        try:
            confirmed = db.execute("SELECT count(*) FROM tier_parts").fetchone()[0]
            self.assertIsNotNone(db.execute("SELECT upload_id FROM tier_jobs").fetchone()[0])
        finally:
            db.close()
        server = self.bound_server("resume", upstream, writeback)
        try:
            got = self.upstream_object("ckpt/model.bin", timeout=30, prefix="resume/")
            self.assertEqual(got["ETag"], etag)
            got = got["Body"].read()
            self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(body).hexdigest())
            # No upload is left open upstream.
            self.assertEqual(self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix="resume/").get("Uploads", []), [])
        finally:
            self.assertEqual(server.stop(), 0)
            log = server.read_stderr()
            server.cleanup()
        sent = int(re.search(r"; (\d+) bytes sent", log).group(1))
        self.assertGreaterEqual(confirmed, 3)
        self.assertLessEqual(sent, len(body) - confirmed * 5 * MiB, "more than the unconfirmed parts were sent again")

    def test_an_upload_aborted_upstream_during_a_kill_starts_over(self):
        upstream = "http://127.0.0.1:%d" % self.upstream.port
        writeback = 'multipart_threshold = "5MiB"\npart_size = "5MiB"'
        server = self.bound_server("restart", upstream, writeback, upstream='write_bytes_per_s = "16MiB"')
        catalog = os.path.join(self.dir, "restart", "data", "catalog.db")
        body = data(32 * MiB, 52)
        try:
            client(server.port).put_object(Bucket="restart", Key="ckpt/model.bin", Body=body)
            deadline = time.monotonic() + 30
            while True:
                db = sqlite3.connect("file:%s?mode=ro" % catalog, uri=True)
                try:
                    done = db.execute("SELECT count(*) FROM tier_parts").fetchone()[0]
                finally:
                    db.close()
                if done >= 2:
                    break
                self.assertLess(time.monotonic(), deadline, "no part was ever confirmed")
                time.sleep(0.02)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
        finally:
            server.cleanup()
        # While hots3 is down, the upstream upload it kept the id of goes (an operator's abort,
        # or a lifecycle rule on incomplete uploads).
        db = sqlite3.connect(catalog)
        try:
            kept = db.execute("SELECT upload_id FROM tier_jobs").fetchone()[0]
        finally:
            db.close()
        self.assertIsNotNone(kept)
        self.up.abort_multipart_upload(Bucket="team-ckpt", Key="restart/ckpt/model.bin", UploadId=kept)
        server = self.bound_server("restart", upstream, writeback)
        try:
            got = self.upstream_object("ckpt/model.bin", timeout=30, prefix="restart/")
            self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest())
            self.assertEqual(self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix="restart/").get("Uploads", []), [])
            report = wait_health(server.port, lambda status, r: r["buckets"][0]["queued"] == 0)
            self.assertEqual(report["buckets"][0]["parked"], 0)
        finally:
            self.assertEqual(server.stop(), 0)
            log = server.read_stderr()
            server.cleanup()
        # Every part went again, into a new upload.
        sent = int(re.search(r"; (\d+) bytes sent", log).group(1))
        self.assertGreaterEqual(sent, len(body))

    def test_a_stop_amid_a_large_upload_exits_cleanly_and_the_next_run_finishes_it(self):
        # A part's answer never comes: the upload attempt, which holds its upstream upload's id,
        # is abandoned at stop after the grace, and ended with the uploader's thread.
        writeback = 'multipart_threshold = "5MiB"\npart_size = "5MiB"'
        body = data(20 * MiB, 51)
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            proxy.withhold_answer = True  # the first request with a body: the first part
            server = self.bound_server("stopmid", "http://127.0.0.1:%d" % proxy.port, writeback)
            try:
                client(server.port).put_object(Bucket="stopmid", Key="ckpt/model.bin", Body=body)
                deadline = time.monotonic() + 30
                while proxy.withhold_answer:
                    self.assertLess(time.monotonic(), deadline, "no part went upstream")
                    time.sleep(0.02)
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()
        server = self.bound_server("stopmid", "http://127.0.0.1:%d" % self.upstream.port, writeback)
        try:
            got = self.upstream_object("ckpt/model.bin", timeout=30, prefix="stopmid/")["Body"].read()
            self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(body).hexdigest())
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()

    def test_slowdowns_halve_the_concurrency_and_a_reset_loses_nothing(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            proxy.slowdown = 0.3  # 30% of requests answered 503 SlowDown by the proxy
            proxy.reset_after = 100 * KiB  # and the first body cut off by a reset
            server = self.bound_server("faults", "http://127.0.0.1:%d" % proxy.port)
            try:
                c = client(server.port)
                bodies = {"k%02d" % i: data(200 * KiB + i, 300 + i) for i in range(24)}
                for key, body in bodies.items():
                    c.put_object(Bucket="faults", Key=key, Body=body)
                rc, out, err = self.hots3("tier", "flush", "--endpoint", "http://127.0.0.1:%d" % server.port,
                                          "--bucket", "faults", "--wait")
                self.assertEqual(rc, 0, out + err)
                for key, body in bodies.items():
                    got = self.up.get_object(Bucket="team-ckpt", Key="faults/" + key)["Body"].read()
                    self.assertEqual(got, body, key)
                refused, resets = proxy.refused, proxy.resets
            finally:
                self.assertEqual(server.stop(), 0)
                log = server.read_stderr()
                server.cleanup()
        self.assertGreater(refused, 0)
        self.assertEqual(resets, 1)
        self.assertRegex(log, r"tier: upstream golden asks to slow down \(HTTP 503\): 4 attempts at once, from 8")
        stats = re.search(r"this run uploaded (\d+) objects .* (\d+) retries, (\d+) parked, (\d+) slow-downs", log)
        self.assertEqual(int(stats.group(1)), len(bodies))
        self.assertGreater(int(stats.group(2)), 0)
        self.assertEqual(int(stats.group(3)), 0)  # no job is lost, none parked
        self.assertGreater(int(stats.group(4)), 0)

    def test_deletes_waiting_for_retried_uploads_do_not_stall_the_queue(self):
        # A checkpoint saved under a temporary name and renamed before it went up: each old name's
        # delete waits for the upload under the new name. While the upstream is down those
        # uploads fail and come due later and later, behind the deletes; with parallelism 1 the
        # uploader reads five due jobs at a time. Once the upstream is back, everything drains.
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            proxy.down = True
            server = self.bound_server("renames", "http://127.0.0.1:%d" % proxy.port, "parallelism = 1")
            try:
                c = client(server.port)
                for i in range(8):
                    c.put_object(Bucket="renames", Key="tmp/%d" % i, Body=b"shard %d" % i)
                    r = s3_support.send(server.port, s3_support.SignedRequest(
                        "PUT", "/renames/step/%d" % i, [("renameObject", "")],
                        {"x-amz-rename-source": "renames/tmp/%d" % i}, port=server.port).wire())
                    self.assertEqual(r.status, 200, r.body)
                time.sleep(3)  # retries move the uploads' due times past the deletes'
                proxy.down = False
                rc, out, err = self.hots3("tier", "flush", "--endpoint", "http://127.0.0.1:%d" % server.port,
                                          "--bucket", "renames", "--wait")
                self.assertEqual(rc, 0, out + err)
                self.assertEqual({o["Key"] for o in self.up.list_objects_v2(
                    Bucket="team-ckpt", Prefix="renames/").get("Contents", [])},
                    {"renames/step/%d" % i for i in range(8)})
                for i in range(8):
                    got = self.up.get_object(Bucket="team-ckpt", Key="renames/step/%d" % i)["Body"].read()
                    self.assertEqual(got, b"shard %d" % i)
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()

    def test_a_hanging_upstream_holds_back_neither_writes_nor_the_report_nor_the_stop(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            proxy.hang = True  # connections accepted, requests read, never an answer
            server = self.bound_server("hang", "http://127.0.0.1:%d" % proxy.port)
            try:
                c = client(server.port)
                c.put_object(Bucket="hang", Key="k", Body=b"waits for an answer")
                self.assertEqual(c.get_object(Bucket="hang", Key="k")["Body"].read(), b"waits for an answer")
                started = time.monotonic()
                report = wait_health(server.port, lambda status, r: r["buckets"][0]["queued"] == 1)
                self.assertLess(time.monotonic() - started, 5)
                # Nothing has answered: not known to be well.
                self.assertEqual(report["upstreams"][0]["state"], "unknown")
                self.assertEqual(report["status"], "degraded")
            finally:
                started = time.monotonic()
                self.assertEqual(server.stop(), 0)
                stopped_in = time.monotonic() - started
                server.cleanup()
        self.assertLess(stopped_in, 8)  # the uploader's grace, not the upstream's timeouts

    def test_upstream_uploads_no_job_uses_are_aborted(self):
        # An upload under the bucket's prefix that nothing will complete (a server gone, a version
        # replaced before a restart): aborted at start.
        orphan = self.up.create_multipart_upload(Bucket="team-ckpt", Key="orphans/left")["UploadId"]
        elsewhere = self.up.create_multipart_upload(Bucket="team-ckpt", Key="not-ours/k")["UploadId"]
        server = self.bound_server("orphans", "http://127.0.0.1:%d" % self.upstream.port)
        try:
            deadline = time.monotonic() + 20
            while self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix="orphans/").get("Uploads"):
                self.assertLess(time.monotonic(), deadline, "the orphan is still there")
                time.sleep(0.05)
            left = self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix="not-ours/")["Uploads"]
            self.assertEqual([u["UploadId"] for u in left], [elsewhere])
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()
            self.up.abort_multipart_upload(Bucket="team-ckpt", Key="not-ours/k", UploadId=elsewhere)
        with self.assertRaises(ClientError):
            self.up.list_parts(Bucket="team-ckpt", Key="orphans/left", UploadId=orphan)

    def test_an_orphan_of_a_key_being_uploaded_at_start_is_aborted_too(self):
        # A run killed while it uploaded the key left an upload of it open upstream; the next run
        # sends the key again at once, while its sweep looks for orphans.
        closed = "http://127.0.0.1:%d" % socket_port_closed()
        server = self.bound_server("busy", closed)
        try:
            client(server.port).put_object(Bucket="busy", Key="k", Body=data(2 * MiB, 61))
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()
        orphan = self.up.create_multipart_upload(Bucket="team-ckpt", Key="busy/k")["UploadId"]
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            # The sweep's listing is answered a second after the start, while the key, paced to
            # take four, is under way.
            proxy.delay_listings = 1.0
            server = self.bound_server("busy", "http://127.0.0.1:%d" % proxy.port,
                                       upstream='write_bytes_per_s = "512KiB"')
            try:
                got = self.upstream_object("k", timeout=30, prefix="busy/")
                self.assertEqual(got["Body"].read(), data(2 * MiB, 61))
                deadline = time.monotonic() + 10
                while self.up.list_multipart_uploads(Bucket="team-ckpt", Prefix="busy/").get("Uploads"):
                    self.assertLess(time.monotonic(), deadline, "the orphan is still there")
                    time.sleep(0.05)
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()
        with self.assertRaises(ClientError):
            self.up.list_parts(Bucket="team-ckpt", Key="busy/k", UploadId=orphan)

    def test_writes_past_the_owed_budget_slow_down_and_deletes_make_room(self):
        closed = "http://127.0.0.1:%d" % socket_port_closed()
        server = self.bound_server("budget", closed, 'max_dirty = "1MiB"\nmax_dirty_age = "1s"')
        try:
            c = client(server.port)
            # 256 KiB each: four fit the 1 MiB that may be owed, the fifth would not.
            for i in range(4):
                c.put_object(Bucket="budget", Key="k%d" % i, Body=data(256 * KiB, 90 + i))
            for attempt in (lambda: c.put_object(Bucket="budget", Key="k4", Body=b"x" * 1024),
                            lambda: c.copy_object(Bucket="budget", Key="k5",
                                                  CopySource={"Bucket": "budget", "Key": "k0"})):
                with self.assertRaises(ClientError) as refused:
                    attempt()
                self.assertEqual(refused.exception.response["Error"]["Code"], "SlowDown")
                self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
            upload = c.create_multipart_upload(Bucket="budget", Key="mp")["UploadId"]
            with self.assertRaises(ClientError) as refused:
                c.upload_part(Bucket="budget", Key="mp", UploadId=upload, PartNumber=1, Body=b"p")
            self.assertEqual(refused.exception.response["Error"]["Code"], "SlowDown")
            c.abort_multipart_upload(Bucket="budget", Key="mp", UploadId=upload)
            # Reads go on; the report shows what is owed, and its age past max_dirty_age.
            self.assertEqual(c.get_object(Bucket="budget", Key="k1")["Body"].read(), data(256 * KiB, 91))
            report = wait_health(server.port, lambda status, r: r["buckets"][0]["state"] == "behind")
            self.assertEqual(report["status"], "behind")
            self.assertEqual(report["owed_bytes"], 4 * 256 * KiB)
            self.assertEqual(report["owed_max_bytes"], MiB)
            self.assertEqual(report["buckets"][0]["queued"], 4)
            self.assertGreaterEqual(report["buckets"][0]["oldest_owed_age_s"], 1)
            # A delete is never refused, and what it replaces is no longer owed.
            c.delete_object(Bucket="budget", Key="k3")
            c.put_object(Bucket="budget", Key="k4", Body=data(256 * KiB, 94))
            with self.assertRaises(ClientError):
                c.put_object(Bucket="budget", Key="k5", Body=b"x")
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()
        # Bound to a working upstream, the owed data drains and writes are let in again.
        server = self.bound_server("budget", "http://127.0.0.1:%d" % self.upstream.port,
                                   'max_dirty = "1MiB"')
        try:
            report = wait_health(server.port, lambda status, r: r["owed_bytes"] == 0)
            self.assertEqual(report["status"], "ok")
            self.assertEqual(report["buckets"][0]["oldest_owed_age_s"], 0)
            client(server.port).put_object(Bucket="budget", Key="k5", Body=data(256 * KiB, 95))
            for i in (0, 1, 2, 4):
                got = self.up.get_object(Bucket="team-ckpt", Key="budget/k%d" % i)["Body"].read()
                self.assertEqual(got, data(256 * KiB, 90 + i))
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()

    def test_sighup_rereads_the_credentials_and_retries_what_they_refused(self):
        keys = os.path.join(self.dir, "rotated.toml")
        with open(keys, "w") as f:
            f.write('access_key = "%s"\nsecret_key = "not-the-secret-any-more"\n' % s3_support.ACCESS_KEY)
        server = self.bound_server("rotate", "http://127.0.0.1:%d" % self.upstream.port, credentials=keys)
        try:
            c = client(server.port)
            # Asked for upstream durability, the refusal is the client's answer (503), and the
            # object stays here, parked.
            with self.assertRaises(ClientError) as refused:
                self.durable_upstream(client(server.port)).put_object(Bucket="rotate", Key="k",
                                                                      Body=b"first")
            self.assertEqual(refused.exception.response["Error"]["Code"], "ServiceUnavailable")
            self.assertIn("HTTP 403", refused.exception.response["Error"]["Message"])
            self.assertEqual(c.get_object(Bucket="rotate", Key="k")["Body"].read(), b"first")
            c.put_object(Bucket="rotate", Key="k", Body=b"signed with the new key")
            # Refused by the upstream (403): parked, and named in the report.
            report = wait_health(server.port, lambda status, r: r["buckets"][0]["parked"] == 1)
            self.assertEqual(report["status"], "degraded")
            self.assertRegex(report["upstreams"][0]["error"], "HTTP 403")
            with open(keys, "w") as f:
                f.write('access_key = "%s"\nsecret_key = "%s"\n' % (s3_support.ACCESS_KEY,
                                                                     s3_support.SECRET_KEY))
            server.proc.send_signal(signal.SIGHUP)
            self.assertEqual(self.upstream_object("k", prefix="rotate/")["Body"].read(), b"signed with the new key")
            self.assertEqual(server.proc.poll(), None)  # SIGHUP reloads; it does not stop
            report = wait_health(server.port, lambda status, r: status == 200)
            self.assertEqual(report["buckets"][0]["parked"], 0)
        finally:
            self.assertEqual(server.stop(), 0)
            log = server.read_stderr()
            server.cleanup()
        self.assertIn("tier: credentials of 1 upstream(s) reloaded", log)
        for secret in (s3_support.SECRET_KEY, "not-the-secret-any-more"):
            self.assertNotIn(secret, log)

    def flush(self, server, bucket, prefix=""):
        rc, out, err = self.hots3("tier", "flush", "--endpoint", "http://127.0.0.1:%d" % server.port,
                                  "--bucket", bucket, "--prefix", prefix, "--wait")
        self.assertEqual(rc, 0, out + err)

    def upstream_keys(self, prefix):
        return sorted(o["Key"] for o in self.up.list_objects_v2(Bucket="team-ckpt", Prefix=prefix).get("Contents", []))

    def test_another_writers_version_upstream_is_kept_and_ours_goes_beside_it(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            server = self.bound_server("conflict", "http://127.0.0.1:%d" % proxy.port)
            try:
                c = client(server.port)
                # A key known upstream: the next upload is conditional on the ETag it had there.
                c.put_object(Bucket="conflict", Key="known", Body=b"ours, first")
                self.assertEqual(self.upstream_object("known", prefix="conflict/")["Body"].read(), b"ours, first")
                proxy.slowdown = 1.0  # the upstream is out of reach for hots3 ...
                ours = data(11 * MiB, 70)
                upload = c.create_multipart_upload(Bucket="conflict", Key="new")["UploadId"]
                parts = [{"PartNumber": n + 1, "ETag": c.upload_part(
                    Bucket="conflict", Key="new", UploadId=upload, PartNumber=n + 1,
                    Body=ours[n * 6 * MiB:(n + 1) * 6 * MiB])["ETag"]} for n in range(2)]
                c.complete_multipart_upload(Bucket="conflict", Key="new", UploadId=upload,
                                            MultipartUpload={"Parts": parts})
                c.put_object(Bucket="conflict", Key="known", Body=b"ours, second")
                # ... while another writer writes both keys there directly.
                self.up.put_object(Bucket="team-ckpt", Key="conflict/new", Body=b"theirs, new")
                self.up.put_object(Bucket="team-ckpt", Key="conflict/known", Body=b"theirs, known")
                proxy.slowdown = 0.0
                self.flush(server, "conflict")
                # Theirs stay; ours go beside them, whole; the report counts both conflicts.
                for key, theirs, body in (("new", b"theirs, new", ours), ("known", b"theirs, known", b"ours, second")):
                    self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key="conflict/" + key)["Body"].read(), theirs)
                    side = [k for k in self.upstream_keys("conflict/" + key + ".hots3-conflict-")]
                    self.assertEqual(len(side), 1, side)
                    self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=side[0])["Body"].read(), body)
                    self.assertEqual(c.get_object(Bucket="conflict", Key=key)["Body"].read(), body)
                report = wait_health(server.port, lambda status, r: r["buckets"][0]["conflicts"] == 2)
                self.assertIn("conflicts 2", health(server.port, text=True)[1])
                # An answer lost on the way back: the retry finds our own version there, which
                # is no conflict, and nothing goes beside it.
                proxy.lose_answer = True
                c.put_object(Bucket="conflict", Key="lost", Body=b"ours, answer lost")
                self.flush(server, "conflict", "lost")
                self.assertEqual(proxy.lost, 1)
                self.assertEqual(self.upstream_keys("conflict/lost"), ["conflict/lost"])
                self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key="conflict/lost")["Body"].read(),
                                 b"ours, answer lost")
                # Once the conflict is settled, the key is ours to write again.
                c.put_object(Bucket="conflict", Key="known", Body=b"ours, third")
                self.flush(server, "conflict", "known")
                self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key="conflict/known")["Body"].read(),
                                 b"ours, third")
                report = health(server.port)[1]
                self.assertEqual(report["buckets"][0]["conflicts"], 2)
                self.assertEqual(report["buckets"][0]["parked"], 0)
            finally:
                self.assertEqual(server.stop(), 0)
                log = server.read_stderr()
                server.cleanup()
        self.assertRegex(log, r"tier: conflict: team-ckpt/conflict/known was written upstream by another writer")
        self.assertRegex(log, r", 2 conflicts")

    def test_an_unconfirmed_upload_of_ours_replaced_before_its_retry_is_no_conflict(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            # A long back-off: the lost answer's retry comes after the newer version is written.
            server = self.bound_server("unconfirmed", "http://127.0.0.1:%d" % proxy.port,
                                       'retry_base = "3s"\nretry_cap = "3s"')
            try:
                c = client(server.port)
                proxy.lose_answer = True  # the first upload lands; its answer does not come back
                c.put_object(Bucket="unconfirmed", Key="k", Body=b"version 1")
                deadline = time.monotonic() + 10
                while proxy.lost == 0:
                    self.assertLess(time.monotonic(), deadline, "the upload was never sent")
                    time.sleep(0.02)
                c.put_object(Bucket="unconfirmed", Key="k", Body=b"version 2")
                self.flush(server, "unconfirmed")
                self.assertEqual(self.upstream_keys("unconfirmed/"), ["unconfirmed/k"])
                self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key="unconfirmed/k")["Body"].read(),
                                 b"version 2")
            finally:
                self.assertEqual(server.stop(), 0)
                log = server.read_stderr()
                server.cleanup()
        self.assertNotIn("tier: conflict", log)
        self.assertRegex(log, r", 0 conflicts")

    def test_an_upstream_that_reads_if_match_as_text_gets_it_unquoted_then_none(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            server = self.bound_server("textual", "http://127.0.0.1:%d" % proxy.port)
            try:
                c = client(server.port)

                def write(body):
                    c.put_object(Bucket="textual", Key="k", Body=body)
                    self.flush(server, "textual")
                    self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key="textual/k")["Body"].read(), body)

                write(b"version 1")  # a new key: If-None-Match, no If-Match
                # An upstream that compares If-Match's text with its ETag refuses it quoted, as
                # HTTP writes it: the write goes again with the ETag unquoted, and so do the next.
                proxy.refuse_if_match = "quoted"
                write(b"version 2")
                self.assertEqual(proxy.if_match_refused, 1)
                write(b"version 3")
                self.assertEqual(proxy.if_match_refused, 1)
                # One that refuses it either way: writes to it go on, no longer conditional.
                proxy.refuse_if_match = "any"
                write(b"version 4")
                self.assertEqual(proxy.if_match_refused, 2)
                write(b"version 5")
                self.assertEqual(proxy.if_match_refused, 2)
                # None of it was another writer's: no conflict, nothing beside the key.
                self.assertEqual(self.upstream_keys("textual/"), ["textual/k"])
                self.assertEqual(health(server.port)[1]["buckets"][0]["conflicts"], 0)
            finally:
                self.assertEqual(server.stop(), 0)
                log = server.read_stderr()
                server.cleanup()
        self.assertIn("refused an If-Match of the ETag it holds; it is sent unquoted", log)
        self.assertIn("refuses If-Match of the ETag it holds, quoted or not", log)

    def test_on_conflict_keep_upstream_or_overwrite(self):
        for policy, winner in (("keep-upstream", b"theirs"), ("overwrite", b"ours")):
            with fault_proxy.FaultProxy(self.upstream.port) as proxy:
                server = self.bound_server(policy, "http://127.0.0.1:%d" % proxy.port,
                                           'on_conflict = "%s"' % policy)
                try:
                    c = client(server.port)
                    proxy.slowdown = 1.0
                    c.put_object(Bucket=policy, Key="k", Body=b"ours")
                    self.up.put_object(Bucket="team-ckpt", Key=policy + "/k", Body=b"theirs")
                    proxy.slowdown = 0.0
                    self.flush(server, policy)
                    self.assertEqual(self.upstream_keys(policy + "/"), [policy + "/k"])
                    self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=policy + "/k")["Body"].read(),
                                     winner, policy)
                    self.assertEqual(c.get_object(Bucket=policy, Key="k")["Body"].read(), b"ours")
                    wait_health(server.port, lambda status, r: r["buckets"][0]["conflicts"] == 1)
                finally:
                    self.assertEqual(server.stop(), 0)
                    server.cleanup()

    def test_renames_and_copies_of_uploaded_objects_are_copied_upstream(self):
        with fault_proxy.FaultProxy(self.upstream.port) as proxy:
            server = self.bound_server("moves", "http://127.0.0.1:%d" % proxy.port)
            try:
                c = client(server.port)
                single = data(4 * MiB, 80)
                # (A key that must be encoded in x-amz-copy-source.)
                etag = c.put_object(Bucket="moves", Key=AWKWARD, Body=single, ContentType="application/x-ckpt",
                                    Metadata={"step": "100"})["ETag"]
                multi = data(13 * MiB, 81)
                upload = c.create_multipart_upload(Bucket="moves", Key="mp")["UploadId"]
                parts = [{"PartNumber": n + 1, "ETag": c.upload_part(
                    Bucket="moves", Key="mp", UploadId=upload, PartNumber=n + 1,
                    Body=multi[n * 5 * MiB:(n + 1) * 5 * MiB])["ETag"]} for n in range(3)]
                mp_etag = c.complete_multipart_upload(Bucket="moves", Key="mp", UploadId=upload,
                                                      MultipartUpload={"Parts": parts})["ETag"]
                self.flush(server, "moves")
                sent = proxy.body_bytes
                self.assertGreaterEqual(sent, len(single) + len(multi))
                # Within one coalescing delay: a copy with new metadata, then renames of both.
                c.copy_object(Bucket="moves", Key="a-copy", CopySource={"Bucket": "moves", "Key": AWKWARD},
                              MetadataDirective="REPLACE", Metadata={"step": "200"})
                for source, target in ((AWKWARD, "b"), ("mp", "mp2")):
                    r = s3_support.send(server.port, s3_support.SignedRequest(
                        "PUT", "/moves/" + target, [("renameObject", "")],
                        {"x-amz-rename-source": urllib.parse.quote("moves/" + source)}, port=server.port).wire())
                    self.assertEqual(r.status, 200, r.body)
                self.flush(server, "moves")
                # No data went up again: only XML (the Complete of the copied parts).
                self.assertLess(proxy.body_bytes - sent, MiB)
                self.assertEqual(self.upstream_keys("moves/"), ["moves/a-copy", "moves/b", "moves/mp2"])
                for key, body, tag, meta in (("b", single, etag, {"step": "100"}),
                                             ("a-copy", single, etag, {"step": "200"}),
                                             ("mp2", multi, mp_etag, {})):
                    got = self.up.get_object(Bucket="team-ckpt", Key="moves/" + key)
                    self.assertEqual(got["ETag"], tag, key)
                    self.assertEqual(got["Metadata"], meta, key)
                    self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(),
                                     hashlib.sha256(body).hexdigest(), key)
                self.assertEqual(self.up.head_object(Bucket="team-ckpt", Key="moves/b")["ContentType"],
                                 "application/x-ckpt")
                # A rename whose source went away upstream meanwhile sends the data instead.
                self.up.delete_object(Bucket="team-ckpt", Key="moves/b")
                sent = proxy.body_bytes
                r = s3_support.send(server.port, s3_support.SignedRequest(
                    "PUT", "/moves/c", [("renameObject", "")], {"x-amz-rename-source": "moves/b"},
                    port=server.port).wire())
                self.assertEqual(r.status, 200, r.body)
                self.flush(server, "moves")
                self.assertGreaterEqual(proxy.body_bytes - sent, len(single))
                got = self.up.get_object(Bucket="team-ckpt", Key="moves/c")
                self.assertEqual(got["ETag"], etag)
                self.assertEqual(got["Body"].read(), single)
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()

    def test_a_kill_after_the_200_loses_no_upload(self):
        keys = ["kill/%03d" % i for i in range(40)]
        for i, k in enumerate(keys):
            self.s3.put_object(Bucket="ckpt", Key=k, Body=data(10 * KiB + i, 40 + i))
        # Killed within the coalescing delay: the uploads are still to be made, from the catalog.
        self.assertGreater(self.restart_local(kill=True), 0)
        for i, k in enumerate(keys):
            self.assertEqual(self.upstream_object(k)["Body"].read(), data(10 * KiB + i, 40 + i), k)


def socket_port_closed():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    unittest.main()
