"""The real `hots3 serve` where io_uring_setup is refused: some container runtimes'
seccomp profiles refuse it, and tests/support/no_io_uring.cc refuses it the same way (EPERM from
a seccomp filter) before it execs the server.

With storage.io_engine = "auto" the server says at start that io_uring is unavailable, falls
back to the thread-pool pread/pwrite device, and serves PUT / GET / ranged GET byte-exact, also
after a restart. With io_engine = "io_uring" it refuses to start, saying why."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
NO_IO_URING = harness.find_binary("HOTS3_NO_IO_URING", "hots3-no-io-uring")
MiB = 1024 * 1024
FALLBACK_LINE = "io_uring is not available here (io_uring_setup refused"
REFUSAL_LINE = 'storage.io_engine = "io_uring" was asked for'


def payload(tag, size):
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (size // 32 + 1))[:size]


def config(engine):
    text = s3.SERVER_CONFIG.format(device_size="256MiB", cache_size="0", access=s3.ACCESS_KEY,
                                   secret=s3.SECRET_KEY, http="")
    return text.replace("io_buffers = 16", 'io_buffers = 16\nio_engine = "%s"' % engine)


def server_without_io_uring(workdir, engine="auto"):
    return harness.ServerProcess(NO_IO_URING, [HOTS3, "serve", "--data", os.path.join(workdir, "data")],
                                 config=config(engine), workdir=workdir)


class IoUringRefusedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        probe = subprocess.run([NO_IO_URING, "true"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 77:
            raise unittest.SkipTest("this kernel refuses unprivileged seccomp filters: " + probe.stderr.strip())
        assert probe.returncode == 0, probe.stderr

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hots3-no-uring-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def request(self, port, method, path, body=b"", headers=None):
        return s3.send(port, s3.SignedRequest(method, path, headers=headers, body=body, port=port).wire())

    def test_auto_falls_back_to_the_thread_pool_device_and_serves(self):
        big = payload("big", 9 * MiB + 12345)  # several device I/Os of 1 MiB, an unaligned end
        small = payload("small", 100)           # inline, in the catalog
        server = server_without_io_uring(self.dir)
        server.owned_dir = False
        with server:
            log = server.read_stderr() + server.read_stdout()
            self.assertIn(FALLBACK_LINE, log)
            self.assertIn("using the thread-pool pread/pwrite device instead", log)
            self.assertIn("(posix engine)", log)
            self.assertEqual(self.request(server.port, "PUT", "/fallback").status, 200)
            self.assertEqual(self.request(server.port, "PUT", "/fallback/big", big).status, 200)
            self.assertEqual(self.request(server.port, "PUT", "/fallback/small", small).status, 200)
            got = self.request(server.port, "GET", "/fallback/big")
            self.assertEqual(got.status, 200)
            self.assertEqual(hashlib.sha256(got.body).hexdigest(), hashlib.sha256(big).hexdigest())
            ranged = self.request(server.port, "GET", "/fallback/big", headers={"Range": "bytes=4194000-5243000"})
            self.assertEqual(ranged.status, 206)
            self.assertEqual(ranged.body, big[4194000:5243001])
            self.assertEqual(self.request(server.port, "GET", "/fallback/small").body, small)
        self.assertEqual(server.returncode, 0, server.read_stderr())
        # The data went through the fallback device to the file: a restart reads it back.
        again = server_without_io_uring(self.dir)
        again.owned_dir = False
        with again:
            got = self.request(again.port, "GET", "/fallback/big")
            self.assertEqual(got.status, 200)
            self.assertEqual(got.body, big)
        self.assertEqual(again.returncode, 0, again.read_stderr())

    def test_io_uring_required_refuses_to_start(self):
        with open(os.path.join(self.dir, "test.toml"), "w") as f:
            f.write(config("io_uring"))
        r = subprocess.run([NO_IO_URING, HOTS3, "serve", "--data", os.path.join(self.dir, "data"),
                            "--config", os.path.join(self.dir, "test.toml"), "--listen", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=60, cwd=self.dir)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("io_uring is not available here (io_uring_setup refused)", r.stderr)
        self.assertIn(REFUSAL_LINE, r.stderr)
        self.assertNotIn(FALLBACK_LINE + ", e.g.", r.stdout + r.stderr)  # no fallback taken


if __name__ == "__main__":
    unittest.main()
