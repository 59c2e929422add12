"""Large objects round trip byte-exact through the clients people move them with: the AWS CLI v1
(`aws s3 cp` up and down), boto3 (`upload_file` / `download_file`) and the AWS SDK for JavaScript
v3 (@aws-sdk/lib-storage `Upload`, then a `GetObject` stream), each comparing the SHA-256 of what
came back with what went up. All of them upload in parallel multipart, so this is also the
checkpoint path at full size.

Sizes: HOTS3_LARGE_GIB (default "5": past the 4 GiB offsets a 32-bit count would wrap at, in
the time CI allows; "2,8" for the longer run the README gives). The data is written for real
(not a sparse file, whose zeros would hide misplaced blocks) but cheaply: a pseudo-random block
of an odd size, repeated. Needs about three times the largest size in free disk space
(HOTS3_TEST_TMPDIR, or the system's temporary directory); every file is removed at the end.
Registered in CTest for release builds only (labels integration;large)."""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402

GiB = 1024 ** 3
MiB = 1024 ** 2
SIZES = [int(x) * GiB for x in os.environ.get("HOTS3_LARGE_GIB", "5").split(",") if x.strip()]
NODE = os.environ.get("HOTS3_NODE", shutil.which("node") or "node")
NODE_SCRIPT = os.path.join(os.path.dirname(__file__), "node", "large_round_trip.mjs")


def make_file(path, size):
    """Writes `size` bytes of a repeated pseudo-random block; returns their SHA-256."""
    block = random.Random(size).randbytes(16 * MiB + 4093)  # odd: never aligned with parts
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = block[:min(left, len(block))]
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(16 * MiB):
            digest.update(chunk)
    return digest.hexdigest()


class LargeRoundTrips(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="hots3-large-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        device = "%dGiB" % (max(SIZES) // GiB + 2)
        os.makedirs(os.path.join(cls.dir, "server"))
        cls.server = s3.hots3_server(device_size=device, cache_size="256MiB",
                                     workdir=os.path.join(cls.dir, "server")).start()
        cls.endpoint = "http://127.0.0.1:%d" % cls.server.port
        cls.s3 = boto3.client("s3", endpoint_url=cls.endpoint, aws_access_key_id=s3.ACCESS_KEY,
                              aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
                              config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
        cls.s3.create_bucket(Bucket="large")
        cls.timings = []

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)
            for what, seconds in cls.timings:
                sys.stderr.write("%-40s %7.1f s\n" % (what, seconds))

    def timed(self, what, fn):
        started = time.monotonic()
        result = fn()
        self.timings.append((what, time.monotonic() - started))
        return result

    def aws(self, *args):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3.SECRET_KEY,
                   AWS_DEFAULT_REGION=s3.REGION, AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        run = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", self.endpoint, "--only-show-errors", *args],
                             env=env, capture_output=True, text=True, timeout=3600)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])

    def check_stored(self, key, size):
        head = self.s3.head_object(Bucket="large", Key=key)
        self.assertEqual(head["ContentLength"], size)
        self.assertRegex(head["ETag"], r'^"[0-9a-f]{32}-\d+"$')  # assembled from parts

    def test_round_trips(self):
        for size in SIZES:
            label = "%d GiB" % (size // GiB)
            source = os.path.join(self.dir, "source")
            back = os.path.join(self.dir, "back")
            expected = self.timed("%s: write the data file" % label, lambda: make_file(source, size))
            try:
                with self.subTest(client="aws s3 cp", size=label):
                    self.timed("%s: aws s3 cp up" % label, lambda: self.aws("s3", "cp", source, "s3://large/cli"))
                    self.check_stored("cli", size)
                    self.timed("%s: aws s3 cp down" % label, lambda: self.aws("s3", "cp", "s3://large/cli", back))
                    self.assertEqual(self.timed("%s: sha256 of the copy" % label, lambda: sha256_file(back)), expected)
                    os.unlink(back)
                    self.s3.delete_object(Bucket="large", Key="cli")
                with self.subTest(client="boto3", size=label):
                    transfer = TransferConfig(multipart_chunksize=16 * MiB)
                    self.timed("%s: boto3 upload_file" % label,
                               lambda: self.s3.upload_file(source, "large", "boto3", Config=transfer))
                    self.check_stored("boto3", size)
                    self.timed("%s: boto3 download_file" % label,
                               lambda: self.s3.download_file("large", "boto3", back, Config=transfer))
                    self.assertEqual(sha256_file(back), expected)
                    os.unlink(back)
                    self.s3.delete_object(Bucket="large", Key="boto3")
                with self.subTest(client="lib-storage", size=label):
                    run = self.timed("%s: lib-storage Upload + GetObject" % label, lambda: subprocess.run(
                        [NODE, NODE_SCRIPT, self.endpoint, s3.ACCESS_KEY, s3.SECRET_KEY, "large", "node", source],
                        capture_output=True, text=True, timeout=3600))
                    self.assertEqual(run.returncode, 0, run.stderr[-3000:])
                    result = json.loads(run.stdout.strip().splitlines()[-1])
                    self.assertEqual((result["size"], result["sha256"]), (size, expected))
                    self.check_stored("node", size)
                    self.s3.delete_object(Bucket="large", Key="node")
            finally:
                for path in (source, back):
                    if os.path.exists(path):
                        os.unlink(path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
