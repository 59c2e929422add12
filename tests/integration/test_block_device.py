"""hots3 on a real block device: a loop device with direct I/O over a file (`losetup
--direct-io=on`), so the BLKGETSIZE64 / BLKSSZGET path and O_DIRECT on a block device run.
Needs root for losetup; skipped with a clear message otherwise."""

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


def can_use_loop_devices():
    if os.geteuid() != 0:
        return "needs root to attach a loop device"
    if shutil.which("losetup") is None:
        return "losetup is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "this machine has no loop devices (/dev/loop-control)"
    return None


@unittest.skipIf(can_use_loop_devices() is not None, "block device test skipped: %s" % can_use_loop_devices())
class BlockDeviceTest(unittest.TestCase):
    def test_store_on_a_loop_device(self):
        workdir = tempfile.mkdtemp(prefix="hots3-blk-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        backing = os.path.join(workdir, "backing.img")
        with open(backing, "wb") as f:
            f.truncate(512 * 1024 * 1024)
        loop = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", backing],
                              check=True, capture_output=True, text=True).stdout.strip()
        try:
            server = s3.hots3_server(args=("--device", loop), workdir=workdir)
            body = hashlib.sha256(b"block").digest() * (3 * 1024 * 1024 // 32 + 7)
            with server:
                port = server.port
                self.assertIn("(512 MiB, block size", server.read_stderr())
                for req in (s3.SignedRequest("PUT", "/blk", port=port),
                            s3.SignedRequest("PUT", "/blk/object", body=body, port=port)):
                    self.assertEqual(s3.send(port, req.wire()).status, 200)
                r = s3.send(port, s3.SignedRequest("GET", "/blk/object", port=port).wire())
                self.assertEqual(r.body, body)
            # The data survives a restart on the same device, and check agrees.
            with s3.hots3_server(args=("--device", loop), workdir=workdir) as server:
                r = s3.send(server.port, s3.SignedRequest("GET", "/blk/object", port=server.port).wire())
                self.assertEqual(r.body, body)
            check = subprocess.run([HOTS3, "check", "--data", os.path.join(workdir, "data"), "--device", loop],
                                   capture_output=True, text=True, timeout=300)
            self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        finally:
            subprocess.run(["losetup", "-d", loop], check=False)
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
