"""`hots3 tier prefetch`: the evicted objects under a prefix, or of a list of keys, are fetched
back by a job that outlives the server. A job cut off by kill -9 goes on after the restart, and
once it ends every read is a hit that asks the upstream nothing. A set larger than the device's
free and evictable space is refused before anything is fetched.

The local server has a 256 MiB device; the upstream is a second hots3 behind a proxy that can
slow object GETs down (so that the kill finds the job half done)."""

import os
import pty
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402
from test_tier_writeback import MiB, PREFIX, client, data, run_hots3, start_upstream, stop_servers, tier_config, start_local  # noqa: E402

# More than two batches of the job (32 versions each), so that the kill comes after one ended.
DATASET = {"ds/%02d" % i: data(MiB, 300 + i) for i in range(80)}


class PrefetchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_upstream(cls)
        cls.proxy = fault_proxy.FaultProxy(cls.upstream.port).start()
        config = tier_config("http://127.0.0.1:%d" % cls.proxy.port, cls.credentials, delay="200ms")
        start_local(cls, config, "256MiB")

    @classmethod
    def tearDownClass(cls):
        stop_servers(cls)

    def tier(self, command, *args):
        return run_hots3("tier", command, "--endpoint", self.endpoint, "--bucket", "ckpt", *args)

    def catalog(self, sql, *args):
        """The first row `sql` reads of the local server's catalog."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.local_dir, "data", "catalog.db"), uri=True)
        try:
            return db.execute(sql, args).fetchone()
        finally:
            db.close()

    def evicted(self, prefix):
        """How many versions under `prefix` are evicted, as the catalog says."""
        return self.catalog("SELECT count(*) FROM objects WHERE key >= ? AND key < ? AND tier_state = 2",
                            prefix, prefix + "\xff")[0]

    def object_gets(self, prefix):
        return [p for p, _ in list(self.proxy.object_gets) if p.startswith("/team-ckpt/" + PREFIX + prefix)]

    def write_and_evict_the_dataset(self):
        for key, body in DATASET.items():
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        for command in (("flush", "--prefix", "ds/", "--wait"), ("evict", "--prefix", "ds/")):
            rc, out, err = self.tier(*command)
            self.assertEqual(rc, 0, out + err)

    def test_a_a_job_cut_off_by_kill_9_goes_on_after_the_restart(self):
        self.write_and_evict_the_dataset()
        self.assertEqual(self.evicted("ds/"), 80)

        self.proxy.delay_object_gets = 0.1  # 80 GETs, 4 at a time: about 2 s in all
        rc, out, err = self.tier("prefetch", "--prefix", "ds/")
        self.assertEqual((rc, out), (0, "ckpt/ds/: prefetch 1 started: 80 objects (80 MiB) to fetch\n"), err)
        # Killed once it has recorded a batch as done, before its end.
        deadline = time.monotonic() + 30
        while not self.catalog("SELECT after FROM prefetches WHERE id = 1")[0]:
            self.assertLess(time.monotonic(), deadline, "the prefetch does not move on")
            time.sleep(0.02)
        self.local.kill()
        done_to = self.catalog("SELECT after FROM prefetches WHERE id = 1")[0]
        self.assertGreater(self.evicted("ds/"), 0, "the job ended before the kill: nothing shows it goes on")

        self.proxy.delay_object_gets = 0
        self.local.start()
        type(self).s3 = client(self.local.port)
        type(self).endpoint = "http://127.0.0.1:%d" % self.local.port
        rc, out, err = self.tier("prefetch", "--job", "1")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out.splitlines()[-1],
                         r"^prefetch 1: 80/80 objects, 80 MiB/80 MiB, [\d.]+ [KMG]?i?B/s, 0 failed, ETA -$")
        self.assertIn("prefetch 1 of ckpt/ds/ goes on after %s" % done_to, self.local.read_stderr())
        self.assertEqual(self.evicted("ds/"), 0)
        gets = len(self.object_gets("ds/"))
        for key, body in DATASET.items():
            got = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit", key)
            self.assertEqual(got["Body"].read(), body, key)
        self.assertEqual(len(self.object_gets("ds/")), gets)  # not a byte from the upstream

    def test_c_on_a_terminal_hots3_admin_draws_a_progress_bar(self):
        self.write_and_evict_the_dataset()
        self.proxy.delay_object_gets = 0.05
        # The command's stdout is a terminal (a pseudo-terminal here), as an operator's is; its
        # keys are the server's admin's, from HOTS3_*.
        controller, terminal = pty.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HOTS3_"))}
        env.update(HOTS3_ACCESS_KEY=s3_support.ACCESS_KEY, HOTS3_SECRET_KEY=s3_support.SECRET_KEY)
        try:
            proc = subprocess.Popen([os.environ.get("HOTS3_BIN", "hots3"), "admin", "--endpoint", self.endpoint,
                                     "tier", "prefetch", "--bucket", "ckpt", "--prefix", "ds/", "--wait"],
                                    stdout=terminal, stderr=subprocess.PIPE, env=env)
            os.close(terminal)
            shown = b""
            while True:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # EIO: the command closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            self.assertEqual(proc.wait(timeout=60), 0, proc.stderr.read())
            proc.stderr.close()
        finally:
            self.proxy.delay_object_gets = 0
            os.close(controller)
        text = shown.decode()
        # One line redrawn in place (carriage returns), a bar that ends full, then the counts.
        self.assertGreaterEqual(text.count("\r"), 2, text)
        self.assertRegex(text, r"\r\[#{24}\] 100% prefetch \d+: 80/80 objects, 80 MiB/80 MiB, .* ETA -\r?\n$")
        self.assertTrue(re.search(r"\[#*\.+\] +\d+% prefetch", text), text)  # and one not yet full
        self.assertEqual(self.evicted("ds/"), 0)

    def test_b_a_set_larger_than_the_room_is_refused_before_any_fetch(self):
        # Written upstream by others: adopted here, evicted versions of 5 × 64 MiB.
        big = data(64 * MiB, 400)
        for i in range(5):
            self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "big/%d" % i, Body=big)
        rc, out, err = self.tier("adopt", "--prefix", "big/")
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.tier("prefetch", "--prefix", "big/", "--wait")
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 409 PrefetchTooLarge: The 5 evicted objects to fetch hold 335544320 bytes", err)
        self.assertEqual(self.object_gets("big/"), [])
        # A list of the keys wanted: those only (what is here already costs nothing).
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("big/3\r\n\nbig/3\nds/00\n")
        try:
            rc, out, err = self.tier("prefetch", "--list", f.name, "--wait")
        finally:
            os.unlink(f.name)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("prefetch 2 started: 1 objects (64 MiB) to fetch\n", out)
        self.assertRegex(out.splitlines()[-1], r"^prefetch 2: 1/1 objects, 64 MiB/64 MiB, .* 0 failed, ETA -$")
        self.assertEqual(self.evicted("big/"), 4)
        self.assertEqual(set(self.object_gets("big/")), {"/team-ckpt/%sbig/3" % PREFIX})

if __name__ == "__main__":
    unittest.main()
