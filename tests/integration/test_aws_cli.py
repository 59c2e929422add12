"""The AWS CLI against a real hots3, unmodified: high-level `aws s3` (mb, cp up and down with
multipart, s3-to-s3 copy, sync, ls, rm, rb, presign) and `aws s3api` calls. CTest runs this
file twice: with the image's AWS CLI v1 (botocore 1.43, the 2025 checksum defaults) and with
Debian's AWS CLI v2.9 (the older defaults: Content-MD5, no CRC32). HOTS3_AWS_CLI names the
command (for example "python3 -m awscli" or "/usr/bin/aws")."""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support as s3  # noqa: E402

CLI = shlex.split(os.environ.get("HOTS3_AWS_CLI", "aws"))


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


class AwsCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server().start()
        cls.endpoint = "http://127.0.0.1:%d" % cls.server.port
        cls.tmp = tempfile.mkdtemp(prefix="hots3-awscli-")
        # Only what the test says: no profile, no config file, no credentials file of the caller.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        cls.env.update({
            "AWS_ACCESS_KEY_ID": s3.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": s3.SECRET_KEY,
            "AWS_DEFAULT_REGION": s3.REGION,
            "AWS_CONFIG_FILE": os.path.join(cls.tmp, "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(cls.tmp, "no-credentials"),
            "AWS_MAX_ATTEMPTS": "1",
            "AWS_PAGER": "",
        })
        version = subprocess.run(CLI + ["--version"], capture_output=True, text=True, env=cls.env, check=True)
        print("AWS CLI:", (version.stdout + version.stderr).strip(), file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def aws(self, *args, check=True):
        r = subprocess.run(CLI + ["--endpoint-url", self.endpoint, *args], capture_output=True, text=True,
                           env=self.env, timeout=300)
        if check and r.returncode != 0:
            self.fail("aws %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def api(self, *args):
        out = self.aws("s3api", *args, "--output", "json").stdout
        return json.loads(out) if out.strip() else {}

    def file(self, name, content):
        path = os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
        return path

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_high_level_commands(self):
        self.aws("s3", "mb", "s3://cli-high")
        self.assertIn("cli-high", self.aws("s3", "ls").stdout)

        small = self.file("up/small.txt", b"hello from the aws cli\n")
        large_bytes = data(20 * 1024 * 1024 + 3, seed=1)  # above the 8 MiB multipart threshold
        large = self.file("up/large.bin", large_bytes)
        self.aws("s3", "cp", small, "s3://cli-high/one/small.txt")
        self.aws("s3", "cp", large, "s3://cli-high/one/large.bin")
        head = self.api("head-object", "--bucket", "cli-high", "--key", "one/large.bin")
        self.assertEqual(head["ContentLength"], len(large_bytes))
        self.assertRegex(head["ETag"], r'^"[0-9a-f]{32}-3"$')  # 3 parts of 8 MiB

        down = os.path.join(self.tmp, "down")
        self.aws("s3", "cp", "s3://cli-high/one/large.bin", os.path.join(down, "large.bin"))
        self.assertEqual(self.read(os.path.join(down, "large.bin")), large_bytes)

        self.aws("s3", "cp", "s3://cli-high/one/small.txt", "s3://cli-high/two/copied.txt")
        self.aws("s3", "sync", os.path.join(self.tmp, "up"), "s3://cli-high/synced")
        listing = self.aws("s3", "ls", "--recursive", "s3://cli-high/").stdout
        for key in ("one/small.txt", "one/large.bin", "two/copied.txt", "synced/small.txt", "synced/large.bin"):
            self.assertIn(key, listing)
        # A second sync finds nothing to do (sizes and times match).
        self.assertEqual(self.aws("s3", "sync", os.path.join(self.tmp, "up"), "s3://cli-high/synced").stdout, "")
        self.assertIn("PRE one/", self.aws("s3", "ls", "s3://cli-high/").stdout)

        back = os.path.join(self.tmp, "back")
        self.aws("s3", "sync", "s3://cli-high/synced", back)
        self.assertEqual(self.read(os.path.join(back, "small.txt")), b"hello from the aws cli\n")
        self.assertEqual(self.read(os.path.join(back, "large.bin")), large_bytes)

        url = self.aws("s3", "presign", "s3://cli-high/one/small.txt", "--expires-in", "60").stdout.strip()
        with urllib.request.urlopen(url) as r:
            self.assertEqual(r.read(), b"hello from the aws cli\n")

        missing = self.aws("s3", "cp", "s3://cli-high/nope", os.path.join(self.tmp, "nope"), check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("404", missing.stderr)

        not_empty = self.aws("s3", "rb", "s3://cli-high", check=False)
        self.assertNotEqual(not_empty.returncode, 0)
        self.assertIn("BucketNotEmpty", not_empty.stderr)
        self.aws("s3", "rm", "--recursive", "s3://cli-high/")
        self.assertEqual(self.aws("s3", "ls", "--recursive", "s3://cli-high/", check=False).stdout, "")
        self.aws("s3", "rb", "s3://cli-high")
        self.assertNotIn("cli-high", self.aws("s3", "ls").stdout)

    def test_s3api_calls(self):
        self.api("create-bucket", "--bucket", "cli-api")
        body = self.file("api/body.txt", b"0123456789abcdefghij")
        put = self.api("put-object", "--bucket", "cli-api", "--key", "dir/odd key+1.txt", "--body", body,
                       "--content-type", "text/plain", "--metadata", "color=blue,size=20",
                       "--cache-control", "max-age=60")
        self.assertEqual(put["ETag"], '"%s"' % hashlib.md5(b"0123456789abcdefghij").hexdigest())

        head = self.api("head-object", "--bucket", "cli-api", "--key", "dir/odd key+1.txt")
        self.assertEqual(head["ContentType"], "text/plain")
        self.assertEqual(head["CacheControl"], "max-age=60")
        self.assertEqual(head["Metadata"], {"color": "blue", "size": "20"})

        out = os.path.join(self.tmp, "range.out")
        got = self.api("get-object", "--bucket", "cli-api", "--key", "dir/odd key+1.txt", "--range", "bytes=6-10", out)
        self.assertEqual(got["ContentRange"], "bytes 6-10/20")
        self.assertEqual(self.read(out), b"6789a")

        listed = self.api("list-objects-v2", "--bucket", "cli-api", "--prefix", "dir/", "--delimiter", "/")
        self.assertEqual([o["Key"] for o in listed["Contents"]], ["dir/odd key+1.txt"])

        copy = self.api("copy-object", "--bucket", "cli-api", "--key", "copy.txt",
                        "--copy-source", "cli-api/dir/odd key+1.txt")
        self.assertEqual(copy["CopyObjectResult"]["ETag"], put["ETag"])

        deleted = self.api("delete-objects", "--bucket", "cli-api", "--delete",
                           json.dumps({"Objects": [{"Key": "copy.txt"}, {"Key": "dir/odd key+1.txt"}]}))
        self.assertEqual(sorted(d["Key"] for d in deleted["Deleted"]), ["copy.txt", "dir/odd key+1.txt"])
        self.assertEqual(self.api("list-objects-v2", "--bucket", "cli-api").get("KeyCount", 0), 0)

        # The owner-only ACL that every hots3 bucket has; changing it or versioning is not offered.
        acl = self.api("get-bucket-acl", "--bucket", "cli-api")
        self.assertEqual([g["Permission"] for g in acl["Grants"]], ["FULL_CONTROL"])
        unsupported = self.aws("s3api", "put-bucket-versioning", "--bucket", "cli-api",
                               "--versioning-configuration", "Status=Enabled", check=False)
        self.assertNotEqual(unsupported.returncode, 0)
        self.assertIn("NotImplemented", unsupported.stderr)
        self.api("delete-bucket", "--bucket", "cli-api")

    def test_wrong_credentials(self):
        env = dict(self.env, AWS_SECRET_ACCESS_KEY="not-the-secret")
        r = subprocess.run(CLI + ["--endpoint-url", self.endpoint, "s3", "ls"], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SignatureDoesNotMatch", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
