"""What an operator does to a running hots3 without stopping it: `hots3 admin` (status, users,
buckets, the tier commands) over the admin endpoint, as tables and as JSON, admins only; and
SIGHUP, which reloads users, grants, log settings and limits from the configuration file, says
which changes wait for a restart, and keeps the running configuration when the new one is bad."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
READER = ("HOTS3READERACCESSKEY", "reader-secret-key-0123456789")


def client(port, access=s3.ACCESS_KEY, secret=s3.SECRET_KEY):
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=access,
                        aws_secret_access_key=secret, region_name=s3.REGION,
                        config=Config(retries={"max_attempts": 1}))


def admin(port, *args, env=None, access=s3.ACCESS_KEY, secret=s3.SECRET_KEY):
    """`hots3 admin --endpoint ... ARGS` with the given keys in HOTS3_*; (exit code, out, err)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HOTS3_"))}
    if access is not None:
        e.update({"HOTS3_ACCESS_KEY": access, "HOTS3_SECRET_KEY": secret})
    e.update(env or {})
    r = subprocess.run([HOTS3, "admin", "--endpoint", "http://127.0.0.1:%d" % port, *args],
                       capture_output=True, text=True, env=e, timeout=60)
    return r.returncode, r.stdout, r.stderr


class AdminCommandTest(s3.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = client(cls.port)
        c.create_bucket(Bucket="shared-data")
        for i in range(3):
            c.put_object(Bucket="shared-data", Key="k%d" % i, Body=b"x" * (1000 * (i + 1)))
        c.create_bucket(Bucket="empty-one")
        w = client(cls.port, "HOTS3WRITERACCESSKEY", "writer-secret-key-0123456789")
        w.create_bucket(Bucket="lifecycle-w")
        w.put_object(Bucket="lifecycle-w", Key="a", Body=b"y" * 70000)

    def json_of(self, *args):
        code, out, err = admin(self.port, "--json", *args)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def test_status_says_what_the_server_is_and_holds(self):
        s = self.json_of("status")
        self.assertRegex(s["version"], r"^\d+\.\d+")
        self.assertEqual(s["listen"], "http://127.0.0.1:%d" % self.port)
        self.assertEqual(s["threads"], 2)
        self.assertEqual(s["pid"], self.server.proc.pid)
        self.assertGreaterEqual(s["uptime_s"], 0)
        self.assertTrue(s["catalog_path"].endswith("catalog.db"), s["catalog_path"])
        self.assertGreaterEqual(s["connections"]["open"], 1)  # this request's
        self.assertEqual(s["connections"]["max"], 4096)
        self.assertEqual(s["device"]["bytes"], s["device"]["used_bytes"] + s["device"]["free_bytes"])
        self.assertGreater(s["device"]["used_bytes"], 0)  # the 70,000-byte object is not inline
        self.assertEqual(s["cache"]["capacity_bytes"], 64 * 1024 * 1024)
        usage = {b["name"]: b for b in s["buckets"]}
        self.assertEqual((usage["shared-data"]["objects"], usage["shared-data"]["bytes"]), (3, 6000))
        self.assertEqual((usage["empty-one"]["objects"], usage["empty-one"]["bytes"]), (0, 0))
        self.assertEqual((usage["lifecycle-w"]["objects"], usage["lifecycle-w"]["bytes"]), (1, 70000))
        self.assertEqual(usage["shared-data"]["tier"], "none")
        self.assertEqual((s["objects"], s["bytes"]), (4, 76000))

        code, out, err = admin(self.port, "status")
        self.assertEqual(code, 0, err)
        self.assertIn("listen       http://127.0.0.1:%d" % self.port, out)
        self.assertIn("usage        3 buckets, 4 objects, 74.2 KiB", out)
        self.assertRegex(out, r"(?m)^shared-data\s+none\s+3\s+5\.86 KiB\s+-\s+-\s+-$")

    def test_users_lists_grants_and_never_a_secret(self):
        u = self.json_of("users")
        users = {x["name"]: x for x in u["users"]}
        self.assertEqual(set(users), {"admin", "reader", "writer"})
        self.assertTrue(users["admin"]["admin"])
        self.assertFalse(users["reader"]["admin"])
        self.assertEqual(users["reader"]["access_key"], READER[0])
        self.assertEqual(users["reader"]["grants"],
                         [{"bucket": "shared-*", "owner": "", "read": True, "write": False}])
        self.assertEqual(users["writer"]["create_buckets"], ["lifecycle-*"])
        code, out, err = admin(self.port, "users")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"(?m)^reader\s+HOTS3READERACCESSKEY\s+no\s+shared-\*:r\s+readers-\*$")
        for secret in (s3.SECRET_KEY, READER[1], "writer-secret-key-0123456789"):
            self.assertNotIn(secret, out)
            self.assertNotIn(secret, json.dumps(u))

    def test_buckets_show_owner_grants_and_usage(self):
        b = {x["name"]: x for x in self.json_of("buckets")["buckets"]}
        self.assertEqual(b["shared-data"]["owner"], "admin")
        self.assertEqual(b["lifecycle-w"]["owner"], "writer")
        self.assertIsNone(b["shared-data"]["upstream"])
        # The reader reads and the writer writes shared-*; nobody else is granted anything.
        self.assertEqual(b["shared-data"]["grants"], [
            {"user": "reader", "read": True, "write": False},
            {"user": "writer", "read": True, "write": True}])
        self.assertEqual(b["empty-one"]["grants"], [])
        self.assertEqual(b["lifecycle-w"]["objects"], 1)
        code, out, err = admin(self.port, "buckets")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"(?m)^shared-data\s+admin\s+none\s+-\s+3\s+5\.86 KiB\s+reader:r, writer:rw$")

    def test_only_admins_may_ask(self):
        for report in ("status", "users", "buckets"):
            code, out, err = admin(self.port, report, access=READER[0], secret=READER[1])
            self.assertEqual(code, 1, out)
            self.assertIn("HTTP 403 AccessDenied", err)
            self.assertEqual(out, "")
        code, _, err = admin(self.port, "status", access="NOSUCHKEY", secret="x" * 40)
        self.assertEqual(code, 1)
        self.assertIn("InvalidAccessKeyId", err)

    def test_without_credentials_it_says_where_they_come_from(self):
        code, _, err = admin(self.port, "--data", os.path.join(self.server.dir, "nowhere"), "status",
                             access=None)
        self.assertEqual(code, 1)
        self.assertIn("HOTS3_ACCESS_KEY", err)
        self.assertIn("--data", err)

    def test_tier_commands_run_under_admin(self):
        code, out, err = admin(self.port, "tier", "status")
        self.assertEqual((code, out), (0, "status: ok\nno bucket is bound\n"), err)
        # A tier command on an unbound bucket is refused by the server, not by the command line.
        code, _, err = admin(self.port, "tier", "evict", "--bucket", "shared-data")
        self.assertEqual(code, 1)
        self.assertIn("HTTP 400", err)

    def test_the_endpoint_is_required(self):
        r = subprocess.run([HOTS3, "admin", "status"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--endpoint", r.stderr)


class DevelopmentCredentialsTest(unittest.TestCase):
    """With no users configured, `hots3 admin --data DIR` signs with the data directory's
    development key pair, as the server printed it."""

    def test_admin_uses_the_data_directory_credentials(self):
        server = harness.ServerProcess(HOTS3, ["serve", "--device-size", "256MiB"]).start()
        try:
            code, out, err = admin(server.port, "--data", os.path.join(server.dir, "data"), "users",
                                   access=None)
            self.assertEqual(code, 0, err)
            self.assertRegex(out, r"(?m)^dev\s+H3DEV[A-Z2-7]{15}\s+yes\s+-\s+-$")
        finally:
            self.assertEqual(server.stop(), 0)
            server.cleanup()


class ReloadTest(unittest.TestCase):
    """SIGHUP with a changed configuration file, against one server per test."""

    def setUp(self):
        self.server = s3.hots3_server().start()
        self.config_path = os.path.join(self.server.dir, "test.toml")
        with open(self.config_path) as f:
            self.original = f.read()
        self.signals = 0

    def tearDown(self):
        try:
            self.assertEqual(self.server.stop(), 0)
        finally:
            self.server.cleanup()

    def reload(self, text):
        """Writes the configuration file (whole, as an editor or a deploy tool does) and sends
        SIGHUP; returns what the server logged for it once it says the reload is done."""
        before = self.server.read_stderr()
        tmp = self.config_path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config_path)
        self.server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 15
        while True:
            logged = self.server.read_stderr()[len(before):]
            if "SIGHUP: reload finished" in logged:
                self.assertIsNone(self.server.proc.poll(), "SIGHUP must not stop the server")
                return logged
            self.assertLess(time.monotonic(), deadline, "no end of reload in the log:\n" + logged)
            time.sleep(0.05)

    def test_users_added_removed_and_rekeyed_apply_at_once(self):
        port = self.server.port
        c = client(port)
        c.create_bucket(Bucket="shared-x")
        c.put_object(Bucket="shared-x", Key="k", Body=b"data")
        reader = client(port, *READER)
        self.assertEqual(reader.get_object(Bucket="shared-x", Key="k")["Body"].read(), b"data")

        # The reader goes, a new user comes with a write grant, the writer gets a new secret.
        text = self.original.replace('name = "reader"', 'name = "auditor"') \
            .replace('access_key = "HOTS3READERACCESSKEY"', 'access_key = "HOTS3AUDITORACCESSKY"') \
            .replace('grants = [{ bucket = "shared-*", access = "read" }]',
                     'grants = [{ bucket = "shared-*", access = "readwrite" }]') \
            .replace("writer-secret-key-0123456789", "writer-new-secret-0123456789")
        self.assertNotEqual(text, self.original)
        logged = self.reload(text)
        self.assertIn("users and grants reloaded (3 user(s))", logged)

        with self.assertRaises(ClientError) as e:
            reader.get_object(Bucket="shared-x", Key="k")
        self.assertEqual(e.exception.response["Error"]["Code"], "InvalidAccessKeyId")
        auditor = client(port, "HOTS3AUDITORACCESSKY", READER[1])
        auditor.put_object(Bucket="shared-x", Key="by-auditor", Body=b"a")
        old_writer = client(port, "HOTS3WRITERACCESSKEY", "writer-secret-key-0123456789")
        with self.assertRaises(ClientError) as e:
            old_writer.list_objects_v2(Bucket="shared-x")
        self.assertEqual(e.exception.response["Error"]["Code"], "SignatureDoesNotMatch")
        new_writer = client(port, "HOTS3WRITERACCESSKEY", "writer-new-secret-0123456789")
        self.assertEqual(new_writer.list_objects_v2(Bucket="shared-x")["KeyCount"], 2)
        # The admin endpoint sees the same users.
        code, out, err = admin(port, "--json", "users")
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(u["name"] for u in json.loads(out)["users"]), ["admin", "auditor", "writer"])

    def test_a_bad_configuration_changes_nothing(self):
        port = self.server.port
        reader = client(port, *READER)
        reader.list_buckets()
        # An unknown key in [http], and a user removed: the file is refused whole.
        text = self.original.replace("threads = 2", "threads = 2\nconections_max = 10") \
            .replace('name = "reader"', 'name = "gone"').replace("HOTS3READERACCESSKEY", "HOTS3GONEACCESSKEY00")
        logged = self.reload(text)
        self.assertRegex(logged, r"configuration not reloaded, the running one stays: .*test\.toml:\d+: "
                                 r"http\.conections_max")
        self.assertNotIn("users and grants reloaded", logged)
        reader.list_buckets()  # the old users stay
        # A file that is not TOML at all.
        logged = self.reload("[http\nthreads = ")
        self.assertIn("configuration not reloaded", logged)
        self.assertIn("test.toml", logged)
        reader.list_buckets()
        # Then a good one applies.
        logged = self.reload(self.original.replace("HOTS3READERACCESSKEY", "HOTS3READER2CCESSKEY"))
        self.assertIn("users and grants reloaded", logged)
        with self.assertRaises(ClientError):
            reader.list_buckets()

    def test_limits_and_log_level_apply_and_the_rest_waits_for_a_restart(self):
        port = self.server.port
        text = self.original.replace("threads = 2", "threads = 2\nconnections_max = 3") \
            .replace('cache_size = "64MiB"', 'cache_size = "32MiB"') \
            .replace('[log]', '[log]\nlevel = "debug"')
        logged = self.reload(text)
        self.assertIn("http.connections_max 4096 -> 3", logged)
        self.assertRegex(logged, r"storage\.cache_size changed in .*test\.toml; it takes effect at the next "
                                 r"start, until then the running value stays")
        self.assertNotIn("http.connections_max changed", logged)
        code, out, err = admin(port, "--json", "status")
        self.assertEqual(code, 0, err)
        status = json.loads(out)
        self.assertEqual(status["connections"]["max"], 3)
        self.assertEqual(status["cache"]["capacity_bytes"], 64 * 1024 * 1024)  # unchanged
        # The new limit holds: three connections open, the fourth is refused with 503.
        conns = [harness.connect(port) for _ in range(3)]
        try:
            time.sleep(0.2)
            extra = harness.connect(port)
            extra.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertIn(b" 503 ", extra.recv(4096))
            extra.close()
        finally:
            for c in conns:
                c.close()
        # Debug now: a refused signature is logged, which it was not at info.
        before = self.server.read_stderr()
        self.assertNotRegex(before, r"debug .*authentication failed")
        with self.assertRaises(ClientError):
            client(port, s3.ACCESS_KEY, "not-the-secret").list_buckets()
        deadline = time.monotonic() + 10
        while not re.search(r"debug .*authentication failed", self.server.read_stderr()[len(before):]):
            self.assertLess(time.monotonic(), deadline, "no debug line after the reload")
            time.sleep(0.1)

if __name__ == "__main__":
    unittest.main()
