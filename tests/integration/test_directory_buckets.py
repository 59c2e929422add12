"""Directory buckets as S3 Express One Zone's SDKs use them: boto3 1.43 at its defaults (no
signature version forced) creates a session for a `--x-s3` bucket (GET /bucket?session, signed for
s3express with the user's keys) and signs every later request of that bucket with the session's
credentials and its token. Every test looks at the wire (a before-send hook) as well as at the
result. The session clock is moved with the server's test hook (s3.test_hooks)."""

import io
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402
sys.path.insert(0, os.path.dirname(__file__))
import test_tier_writeback as tier  # noqa: E402 (its test classes stay out of this module)

import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

MiB = 1024 * 1024
ZONE = "use1-az4"
CONFIGURATION = {"Location": {"Type": "AvailabilityZone", "Name": ZONE},
                 "Bucket": {"DataRedundancy": "SingleAvailabilityZone", "Type": "Directory"}}
READER = ("HOTS3READERACCESSKEY", "reader-secret-key-0123456789")


def code(e):
    return e.exception.response["Error"]["Code"]


class Wire:
    """What a client sent: (method, path and query, session token or None, credential scope's
    service, access key) per request."""

    def __init__(self, client):
        self.requests = []
        client.meta.events.register("before-send.s3", self.note)

    def note(self, request, **_):
        auth = request.headers.get("Authorization")
        auth = auth.decode() if isinstance(auth, bytes) else (auth or "")
        credential = auth.split("Credential=")[1].split(",")[0].split("/") if "Credential=" in auth else [""] * 4
        token = request.headers.get("x-amz-s3session-token")
        token = token.decode() if isinstance(token, bytes) else token
        target = request.url.split("://", 1)[1].split("/", 1)[1]
        self.requests.append((request.method, "/" + target, token, credential[3], credential[0]))

    def sessions(self):
        return [r for r in self.requests if r[1].endswith("?session")]


def client(port, keys=(s3.ACCESS_KEY, s3.SECRET_KEY), **config):
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=keys[0],
                        aws_secret_access_key=keys[1], region_name=s3.REGION,
                        config=Config(retries={"total_max_attempts": 1}, **config))


class SessionTest(s3.ServerTestCase):
    server_config = "[s3]\ntest_hooks = true\n"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # (Each test makes its own clients: one test moves the clock past the sessions of others.)
        cls.admin = client(cls.port)
        cls.admin.create_bucket(Bucket="ckpt--%s--x-s3" % ZONE, CreateBucketConfiguration=CONFIGURATION)
        cls.admin.create_bucket(Bucket="other--%s--x-s3" % ZONE, CreateBucketConfiguration=CONFIGURATION)
        cls.admin.create_bucket(Bucket="shared-ro--%s--x-s3" % ZONE, CreateBucketConfiguration=CONFIGURATION)
        cls.admin.put_object(Bucket="shared-ro--%s--x-s3" % ZONE, Key="data", Body=b"shared")
        cls.admin.create_bucket(Bucket="general")

    def session(self, bucket, mode=None, keys=(s3.ACCESS_KEY, s3.SECRET_KEY)):
        """Credentials of a new session: (access key, secret, token)."""
        extra = {"SessionMode": mode} if mode else {}
        c = client(self.port, keys)
        creds = c.create_session(Bucket=bucket, **extra)["Credentials"]
        return creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]

    def with_session(self, method, path, credentials, headers=None, body=b"", service="s3express",
                     unsigned=(), query=()):
        """A request signed by hand with session credentials."""
        access, secret, token = credentials
        h = {"x-amz-s3session-token": token}
        h.update(headers or {})
        return self.signed(method, path, query=query, headers=h, body=body, access=access, secret=secret,
                           service=service, unsigned=unsigned)

    def advance_clock(self, seconds):
        r = self.signed("POST", "/", query=[("x-hots3-clock", ""), ("advance-seconds", str(seconds))])
        self.assertEqual(r.status, 204, r.body)

    def test_the_sdk_signs_a_new_bucket_and_its_objects_with_one_session(self):
        c = client(self.port)
        wire = Wire(c)
        bucket = "train--%s--x-s3" % ZONE
        c.create_bucket(Bucket=bucket, CreateBucketConfiguration=CONFIGURATION)
        head = c.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPHeaders"]
        self.assertEqual((head["x-amz-bucket-location-type"], head["x-amz-bucket-location-name"]),
                         ("AvailabilityZone", ZONE))
        body = os.urandom(3 * MiB + 5)
        c.put_object(Bucket=bucket, Key="shards/0", Body=body)
        self.assertEqual(c.get_object(Bucket=bucket, Key="shards/0")["Body"].read(), body)
        ranged = c.get_object(Bucket=bucket, Key="shards/0", Range="bytes=1048576-2097151")
        self.assertEqual(ranged["Body"].read(), body[MiB:2 * MiB])
        self.assertEqual(c.head_object(Bucket=bucket, Key="shards/0")["ContentLength"], len(body))
        c.copy_object(Bucket=bucket, Key="shards/1", CopySource={"Bucket": bucket, "Key": "shards/0"})
        listed = c.list_objects_v2(Bucket=bucket, Delimiter="/")
        self.assertEqual([p["Prefix"] for p in listed["CommonPrefixes"]], ["shards/"])
        c.delete_object(Bucket=bucket, Key="shards/0")
        c.delete_object(Bucket=bucket, Key="shards/1")
        c.delete_bucket(Bucket=bucket)

        # One session, made first with the user's keys for s3express; every request of the bucket
        # after it carries its token, except CopyObject, which S3 signs with the user's keys.
        sessions = wire.sessions()
        self.assertEqual(len(sessions), 1, wire.requests)
        self.assertEqual(wire.requests[0], sessions[0])
        self.assertEqual(sessions[0][2:], (None, "s3express", s3.ACCESS_KEY))
        for method, target, token, service, access in wire.requests[1:]:
            copy = method == "PUT" and target.endswith("/shards/1")
            self.assertEqual(service, "s3express", target)
            self.assertEqual(token is None, copy, (method, target))
            self.assertEqual(access == s3.ACCESS_KEY, copy, (method, target))

    def test_directory_buckets_are_listed_apart_from_general_purpose_ones(self):
        c = client(self.port)
        wire = Wire(c)
        directory = [b["Name"] for b in c.list_directory_buckets()["Buckets"]]
        self.assertIn("ckpt--%s--x-s3" % ZONE, directory)
        self.assertNotIn("general", directory)
        self.assertEqual(wire.requests[-1][:4], ("GET", "/", None, "s3express"))
        general = [b["Name"] for b in c.list_buckets()["Buckets"]]
        self.assertIn("general", general)
        self.assertFalse([b for b in general if b.endswith("--x-s3")], general)
        # Pages of one, each naming where the next begins.
        names, token = [], None
        while True:
            page = c.list_directory_buckets(MaxDirectoryBuckets=1, **({"ContinuationToken": token} if token else {}))
            names += [b["Name"] for b in page["Buckets"]]
            self.assertLessEqual(len(page["Buckets"]), 1)
            token = page.get("ContinuationToken")
            if not token:
                break
        self.assertEqual(names, directory)
        # A user sees the directory buckets it may read.
        self.assertEqual([b["Name"] for b in client(self.port, READER).list_directory_buckets()["Buckets"]],
                         ["shared-ro--%s--x-s3" % ZONE])

    def test_multipart_rename_and_append_go_through_the_session(self):
        c = client(self.port)
        wire = Wire(c)
        bucket = "ckpt--%s--x-s3" % ZONE
        body = os.urandom(12 * MiB + 3)
        c.upload_fileobj(io.BytesIO(body), bucket, "step-1.tmp",
                         Config=TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB))
        c.rename_object(Bucket=bucket, Key="step-1", RenameSource="%s/step-1.tmp" % bucket)
        self.assertEqual(c.get_object(Bucket=bucket, Key="step-1")["Body"].read(), body)
        c.put_object(Bucket=bucket, Key="log", Body=b"first ")
        c.put_object(Bucket=bucket, Key="log", Body=b"second", WriteOffsetBytes=6)
        self.assertEqual(c.get_object(Bucket=bucket, Key="log")["Body"].read(), b"first second")
        self.assertEqual(len(wire.sessions()), 1)
        for method, target, token, _, _ in wire.requests[1:]:
            self.assertIsNotNone(token, (method, target))

    def test_a_read_only_session_reads_and_never_writes(self):
        bucket = "shared-ro--%s--x-s3" % ZONE
        # The reader's grant is read: the SDK's session is ReadOnly, which reads and cannot write.
        reader = client(self.port, READER)
        wire = Wire(reader)
        self.assertEqual(reader.get_object(Bucket=bucket, Key="data")["Body"].read(), b"shared")
        with self.assertRaises(ClientError) as refused:
            reader.put_object(Bucket=bucket, Key="data", Body=b"mine")
        self.assertEqual(code(refused), "AccessDenied")
        self.assertIsNotNone(wire.requests[-1][2])  # refused for the session, not for want of one
        with self.assertRaises(ClientError) as refused:
            client(self.port, READER).create_session(Bucket=bucket, SessionMode="ReadWrite")
        self.assertEqual(code(refused), "AccessDenied")
        # The admin may write, but asked for a ReadOnly session: its credentials read only.
        read_only = self.session(bucket, "ReadOnly")
        self.assertEqual(self.with_session("GET", "/%s/data" % bucket, read_only).body, b"shared")
        for method, path in (("PUT", "/%s/data" % bucket), ("DELETE", "/%s/data" % bucket),
                             ("POST", "/%s/data" % bucket)):
            r = self.with_session(method, path, read_only, body=b"x" if method == "PUT" else b"")
            self.assertEqual(r.status, 403, (method, r.body))
            self.assertIn(b"<Code>AccessDenied</Code>", r.body)
        self.assertEqual(client(self.port).get_object(Bucket=bucket, Key="data")["Body"].read(), b"shared")

    def test_a_session_is_good_for_its_bucket_only_and_as_issued(self):
        a, b = "ckpt--%s--x-s3" % ZONE, "other--%s--x-s3" % ZONE
        client(self.port).put_object(Bucket=b, Key="k", Body=b"of b")
        mine = self.session(a)
        self.assertEqual(self.with_session("PUT", "/%s/k" % a, mine, body=b"of a").status, 200)
        for path in ("/%s/k" % b, "/"):
            r = self.with_session("GET", path, mine)
            self.assertEqual(r.status, 403, path)
            self.assertIn(b"<Code>AccessDenied</Code>", r.body)
        access, secret, token = mine
        flipped = token[:20] + ("A" if token[20] != "A" else "B") + token[21:]
        for credentials, expected in (((access, secret, flipped), b"InvalidToken"),
                                      ((access, secret, "bm90IGEgdG9rZW4="), b"InvalidToken"),
                                      (self.session(a)[:2] + (token,), b"InvalidToken"),
                                      ((access, "wrong" + secret[5:], token), b"SignatureDoesNotMatch")):
            r = self.with_session("GET", "/%s/k" % a, credentials)
            self.assertIn(b"<Code>" + expected + b"</Code>", r.body, credentials)
        # Signed for s3 rather than s3express, or with the token left unsigned: refused.
        self.assertIn(b"AuthorizationHeaderMalformed", self.with_session("GET", "/%s/k" % a, mine, service="s3").body)
        r = self.with_session("GET", "/%s/k" % a, mine, unsigned=("x-amz-s3session-token",))
        self.assertEqual(r.status, 403)
        self.assertIn(b"x-amz-s3session-token", r.body)
        # A session cannot make another, and exists only for directory buckets.
        self.assertEqual(self.with_session("GET", "/%s" % a, mine, query=[("list-type", "2")]).status, 200)
        r = self.signed("GET", "/%s" % a, query=[("session", "")], headers={"x-amz-s3session-token": token},
                        access=access, secret=secret, service="s3express")
        self.assertIn(b"AccessDenied", r.body)
        with self.assertRaises(ClientError) as refused:
            client(self.port).create_session(Bucket="general")
        self.assertEqual(code(refused), "InvalidRequest")
        with self.assertRaises(ClientError) as refused:
            client(self.port, READER).create_session(Bucket="missing--%s--x-s3" % ZONE)
        self.assertEqual(code(refused), "NoSuchBucket")

    def test_a_session_expires_after_five_minutes_and_the_next_one_works(self):
        bucket = "ckpt--%s--x-s3" % ZONE
        c = client(self.port)
        c.put_object(Bucket=bucket, Key="clock", Body=b"tick")
        expiration = c.create_session(Bucket=bucket)["Credentials"]["Expiration"]
        self.assertAlmostEqual(
            (expiration - __import__("datetime").datetime.now(expiration.tzinfo)).total_seconds(), 300, delta=30)
        self.advance_clock(240)  # still within the SDK's session
        self.assertEqual(c.get_object(Bucket=bucket, Key="clock")["Body"].read(), b"tick")
        self.advance_clock(61)
        with self.assertRaises(ClientError) as refused:
            c.get_object(Bucket=bucket, Key="clock")
        self.assertEqual(code(refused), "ExpiredToken")
        self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        self.assertEqual(client(self.port).get_object(Bucket=bucket, Key="clock")["Body"].read(), b"tick")

    def test_the_clock_moves_for_admins_only(self):
        r = self.signed("POST", "/", query=[("x-hots3-clock", ""), ("advance-seconds", "1")],
                        access=READER[0], secret=READER[1])
        self.assertEqual(r.status, 403)
        r = self.signed("POST", "/", query=[("x-hots3-clock", ""), ("advance-seconds", "-1")])
        self.assertIn(b"InvalidArgument", r.body)

    def test_a_presigned_url_carries_the_session(self):
        bucket = "ckpt--%s--x-s3" % ZONE
        c = client(self.port)
        c.put_object(Bucket=bucket, Key="shared", Body=b"presigned")
        url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "shared"}, ExpiresIn=60)
        self.assertIn("X-Amz-S3session-Token=", url)
        with urllib.request.urlopen(url, timeout=30) as got:
            self.assertEqual(got.read(), b"presigned")
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url.replace("X-Amz-S3session-Token=", "X-Amz-S3session-Token=A"), timeout=30)
        self.assertIn(refused.exception.code, (400, 403))

    def test_clients_that_opt_out_of_sessions_sign_with_their_keys(self):
        bucket = "ckpt--%s--x-s3" % ZONE
        for config in ({"s3": {"disable_s3_express_session_auth": True}}, {"signature_version": "s3v4"}):
            c = client(self.port, **config)
            wire = Wire(c)
            c.put_object(Bucket=bucket, Key="plain", Body=b"no session")
            self.assertEqual(c.get_object(Bucket=bucket, Key="plain")["Body"].read(), b"no session")
            self.assertEqual(wire.sessions(), [])
            self.assertTrue(all(r[2] is None and r[4] == s3.ACCESS_KEY for r in wire.requests), wire.requests)

    def test_listing_is_what_s3_express_lists(self):
        bucket = "ckpt--%s--x-s3" % ZONE
        c = client(self.port)
        for kwargs, expected in (({"Prefix": "runs"}, "InvalidArgument"),
                                 ({"Delimiter": "-"}, "InvalidArgument"),
                                 ({"Prefix": "runs/", "Delimiter": "|"}, "InvalidArgument")):
            with self.assertRaises(ClientError) as refused:
                c.list_objects_v2(Bucket=bucket, **kwargs)
            self.assertEqual(code(refused), expected, kwargs)
            self.assertEqual(refused.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        with self.assertRaises(ClientError) as refused:
            c.list_objects(Bucket=bucket)
        self.assertEqual(code(refused), "NotSupported")
        # A directory appears with its first object and goes with its last.
        def directories(prefix=""):
            page = c.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
            return [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        self.assertNotIn("runs/", directories())
        c.put_object(Bucket=bucket, Key="runs/7/step-1", Body=b"1")
        c.put_object(Bucket=bucket, Key="runs/7/step-2", Body=b"2")
        self.assertIn("runs/", directories())
        self.assertEqual(directories("runs/"), ["runs/7/"])
        page = c.list_objects_v2(Bucket=bucket, Prefix="runs/7/")
        self.assertEqual([(o["Key"], o["StorageClass"]) for o in page["Contents"]],
                         [("runs/7/step-1", "EXPRESS_ONEZONE"), ("runs/7/step-2", "EXPRESS_ONEZONE")])
        c.delete_object(Bucket=bucket, Key="runs/7/step-1")
        self.assertEqual(directories("runs/"), ["runs/7/"])
        c.delete_object(Bucket=bucket, Key="runs/7/step-2")
        self.assertEqual(directories("runs/"), [])
        self.assertNotIn("runs/", directories())

    def test_every_object_of_a_directory_bucket_is_express_one_zone(self):
        bucket = "ckpt--%s--x-s3" % ZONE
        c = client(self.port)
        c.put_object(Bucket=bucket, Key="classed", Body=b"x", StorageClass="EXPRESS_ONEZONE")
        self.assertEqual(c.head_object(Bucket=bucket, Key="classed")["StorageClass"], "EXPRESS_ONEZONE")
        self.assertEqual(c.get_object(Bucket=bucket, Key="classed")["StorageClass"], "EXPRESS_ONEZONE")
        attributes = c.get_object_attributes(Bucket=bucket, Key="classed", ObjectAttributes=["StorageClass"])
        self.assertEqual(attributes["StorageClass"], "EXPRESS_ONEZONE")
        with self.assertRaises(ClientError) as refused:
            c.put_object(Bucket=bucket, Key="classed", Body=b"y", StorageClass="STANDARD")
        self.assertEqual(code(refused), "InvalidStorageClass")
        upload = c.create_multipart_upload(Bucket=bucket, Key="mpu")["UploadId"]
        uploads = c.list_multipart_uploads(Bucket=bucket)["Uploads"]
        self.assertEqual({u["StorageClass"] for u in uploads}, {"EXPRESS_ONEZONE"})
        self.assertEqual(c.list_parts(Bucket=bucket, Key="mpu", UploadId=upload)["StorageClass"], "EXPRESS_ONEZONE")
        c.abort_multipart_upload(Bucket=bucket, Key="mpu", UploadId=upload)
        # A general purpose bucket's objects are STANDARD, as S3 leaves unsaid.
        c.put_object(Bucket="general", Key="classed", Body=b"x")
        self.assertNotIn("StorageClass", c.head_object(Bucket="general", Key="classed"))
        self.assertEqual(c.list_objects_v2(Bucket="general")["Contents"][0]["StorageClass"], "STANDARD")

    def test_a_directory_buckets_parts_are_numbered_from_one_with_none_left_out(self):
        c = client(self.port)
        for bucket, left_out_ok in (("ckpt--%s--x-s3" % ZONE, False), ("general", True)):
            upload = c.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
            etags = {}
            for number, size in ((1, 5 * MiB), (2, 5 * MiB), (4, 100)):
                etags[number] = c.upload_part(Bucket=bucket, Key="parts", UploadId=upload, PartNumber=number,
                                              Body=os.urandom(size))["ETag"]

            def complete(numbers):
                return c.complete_multipart_upload(
                    Bucket=bucket, Key="parts", UploadId=upload,
                    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in numbers]})
            if left_out_ok:
                complete([1, 2, 4])
                continue
            for numbers in ([1, 2, 4], [2, 4]):
                with self.assertRaises(ClientError) as refused:
                    complete(numbers)
                self.assertEqual(code(refused), "InvalidPartOrder", numbers)
            complete([1, 2])
            self.assertEqual(c.head_object(Bucket=bucket, Key="parts")["ContentLength"], 10 * MiB)

    def test_clients_older_than_s3_express_use_directory_buckets_with_their_keys(self):
        # Debian's boto3 1.26 (and AWS CLI v2.9) predate S3 Express: a --x-s3 bucket is a bucket
        # to them, signed for s3 with the user's keys. They cannot make one (CreateBucket's
        # configuration has no Location or Bucket there), but use one made by a newer client.
        bucket = "ckpt--%s--x-s3" % ZONE
        script = """
import sys, boto3, botocore
from botocore.config import Config
assert botocore.__version__.startswith("1.29."), botocore.__version__
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
                 region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
c.put_object(Bucket=sys.argv[4], Key="old/client", Body=b"from 1.26")
print(c.get_object(Bucket=sys.argv[4], Key="old/client")["Body"].read().decode())
print(c.list_objects_v2(Bucket=sys.argv[4], Prefix="old/", Delimiter="/")["Contents"][0]["StorageClass"])
"""
        run = subprocess.run(["/usr/bin/python3", "-c", script, "http://127.0.0.1:%d" % self.port, s3.ACCESS_KEY,
                              s3.SECRET_KEY, bucket], capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), ["from", "1.26", "EXPRESS_ONEZONE"])
        self.assertEqual(client(self.port).get_object(Bucket=bucket, Key="old/client")["Body"].read(), b"from 1.26")

    def test_aws_cli_v1(self):
        bucket = "cli--%s--x-s3" % ZONE
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3.SECRET_KEY,
                   AWS_DEFAULT_REGION=s3.REGION, AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")

        def aws(*args):
            run = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", "http://127.0.0.1:%d" % self.port,
                                  *args], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 0, (args, run.stderr))
            return run.stdout

        aws("s3api", "create-bucket", "--bucket", bucket, "--create-bucket-configuration",
            "Location={Type=AvailabilityZone,Name=%s},Bucket={DataRedundancy=SingleAvailabilityZone,Type=Directory}" % ZONE)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "file")
            with open(path, "wb") as f:
                f.write(os.urandom(9 * MiB))
            aws("s3", "cp", path, "s3://%s/dir/file" % bucket)
            aws("s3", "cp", "s3://%s/dir/file" % bucket, path + ".back")
            with open(path, "rb") as a, open(path + ".back", "rb") as b:
                self.assertEqual(a.read(), b.read())
        self.assertIn("PRE dir/", aws("s3", "ls", "s3://%s/" % bucket))
        self.assertIn(bucket, aws("s3api", "list-directory-buckets"))
        self.assertIn("SessionToken", aws("s3api", "create-session", "--bucket", bucket))


class TieredDirectoryBucketTest(unittest.TestCase):
    """S3 Express's pattern, hot tier in a directory bucket, golden copy in a general purpose bucket:
    a directory bucket bound write-back to a general purpose bucket of an upstream (a second hots3)."""

    BUCKET = "ckpt--%s--x-s3" % ZONE

    @classmethod
    def setUpClass(cls):
        tier.start_upstream(cls)
        tier.start_local(cls, tier.tier_config("http://127.0.0.1:%d" % cls.upstream.port, cls.credentials,
                                               bucket=cls.BUCKET), "1GiB")

    @classmethod
    def tearDownClass(cls):
        tier.stop_servers(cls)

    def test_what_a_session_writes_goes_upstream_and_reads_back_once_evicted(self):
        c = client(self.local.port)
        wire = Wire(c)
        body = os.urandom(2 * MiB + 1)
        c.put_object(Bucket=self.BUCKET, Key="step-1/shard-0", Body=body)
        upstream_key = tier.PREFIX + "step-1/shard-0"
        deadline = time.monotonic() + 30
        while True:
            try:
                got = self.up.get_object(Bucket="team-ckpt", Key=upstream_key)["Body"].read()
                break
            except ClientError:
                self.assertLess(time.monotonic(), deadline, "not uploaded")
                time.sleep(0.1)
        self.assertEqual(got, body)
        rc, out, err = tier.run_hots3("tier", "evict", "--endpoint", "http://127.0.0.1:%d" % self.local.port,
                                      "--bucket", self.BUCKET, "--prefix", "step-1/")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("1 objects evicted", out)
        self.assertEqual(c.get_object(Bucket=self.BUCKET, Key="step-1/shard-0")["Body"].read(), body)
        self.assertEqual(len(wire.sessions()), 1)
        self.assertTrue(all(r[2] for r in wire.requests[1:]), wire.requests)


class RestartTest(unittest.TestCase):
    def test_a_session_outlives_a_restart(self):
        # SDKs keep a session until it expires, whatever the server answers: a restart must not
        # turn it into errors for its last minutes.
        bucket = "ckpt--%s--x-s3" % ZONE
        with tempfile.TemporaryDirectory(dir=os.environ.get("HOTS3_TEST_TMPDIR")) as workdir:
            server = s3.hots3_server(workdir=workdir).start()
            try:
                c = client(server.port)
                c.create_bucket(Bucket=bucket, CreateBucketConfiguration=CONFIGURATION)
                c.put_object(Bucket=bucket, Key="before", Body=b"before")
                creds = c.create_session(Bucket=bucket)["Credentials"]
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()
            key_file = os.path.join(workdir, "data", "session.key")
            self.assertEqual(os.stat(key_file).st_mode & 0o777, 0o600)
            server = s3.hots3_server(workdir=workdir).start()
            try:
                got = s3.send(server.port, s3.SignedRequest(
                    "GET", "/%s/before" % bucket, headers={"x-amz-s3session-token": creds["SessionToken"]},
                    access=creds["AccessKeyId"], secret=creds["SecretAccessKey"], service="s3express",
                    port=server.port).wire())
                self.assertEqual((got.status, got.body), (200, b"before"))
            finally:
                self.assertEqual(server.stop(), 0)
                server.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
