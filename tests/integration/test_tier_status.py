"""`hots3 tier status`: what an operator sees of a bound bucket after a scripted scenario. The
report says what the bucket owes the upstream (by action, parked jobs and their errors), where
its data is (dirty, clean, evicted; pinned and evictable bytes) and its hit ratio, with the
device against the watermarks. Of one bucket (`--bucket`, signed) it names the parked jobs' keys;
the unsigned /health/upstream never names a key.

The local server has a 128 MiB device and evicts from 60% to 45%; the upstream is a second
hots3 whose user metadata is capped at 1 KiB: an object with more is refused for good (parked)."""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from test_tier_eviction import OBJECT, EvictionTestCase  # noqa: E402
from test_tier_writeback import PREFIX, data, health, run_hots3, start_upstream, tier_config, start_local  # noqa: E402

PARKED = "parked/too-much-metadata"


class TierStatusTest(EvictionTestCase):
    @classmethod
    def setUpClass(cls):
        start_upstream(cls, '[s3]\nmetadata_max = "1KiB"\n')
        cls.config = tier_config("http://127.0.0.1:%d" % cls.upstream.port, cls.credentials,
                                 delay="200ms", binding='pin = ["latest/**"]') + \
            '\n[tier.evict]\nhigh = 60\nlow = 45\nfull = 85\nmin_resident = "0s"\n'
        start_local(cls, cls.config, "128MiB")

    def status(self, *args):
        return run_hots3("tier", "status", "--endpoint", self.endpoint, *args)

    def bucket_report(self, check, within=20):
        """The bucket's part of the JSON report once `check` holds of it (the space is read every
        5 s, the rest every second)."""
        deadline = time.monotonic() + within
        while True:
            _, report = health(self.local.port)
            buckets = report.get("buckets") or [{}]
            if check(buckets[0]):
                return buckets[0]
            if time.monotonic() > deadline:
                self.fail("the report does not show it: %s" % buckets[0])
            time.sleep(0.5)

    def test_a_scripted_scenario_is_reported_as_it_is(self):
        for key, seed in (("latest/a", 1), ("data/b", 2), ("data/c", 3)):
            self.s3.put_object(Bucket="ckpt", Key=key, Body=data(OBJECT, seed))
        self.flush("")
        rc, out, err = run_hots3("tier", "evict", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "data/")
        self.assertEqual(rc, 0, out + err)
        # Three reads from here, one read through (which keeps data/b again).
        for _ in range(3):
            got = self.s3.get_object(Bucket="ckpt", Key="latest/a")
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit")
            got["Body"].read()
        got = self.s3.get_object(Bucket="ckpt", Key="data/b")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "miss")
        got["Body"].read()
        self.s3.head_object(Bucket="ckpt", Key="data/c")  # a HEAD reads nothing: not counted
        self.wait_resident(["data/b"])
        # A change the upstream refuses for good: parked.
        self.s3.put_object(Bucket="ckpt", Key=PARKED, Body=b"refused upstream", Metadata={"big": "x" * 1500})

        # (The space is read every 5 s: once it has the parked version and data/b back.)
        b = self.bucket_report(lambda b: b.get("parked") == 1 and b["space"]["dirty_objects"] == 1
                               and b["space"]["clean_objects"] == 2)
        self.assertEqual((b["state"], b["queued"], b["uploads"], b["copies"], b["deletes"]),
                         ("degraded", 1, 1, 0, 0))
        self.assertEqual(b["space"], dict(b["space"], objects=4, bytes=3 * OBJECT + 16,
                                          dirty_objects=1, dirty_bytes=16,
                                          clean_objects=2, clean_bytes=2 * OBJECT,
                                          evicted_objects=1, evicted_bytes=OBJECT,
                                          pinned_bytes=OBJECT, evictable_bytes=OBJECT))
        self.assertEqual(b["reads"], {"hits": 3, "misses": 1, "hit_bytes": 3 * OBJECT,
                                      "miss_bytes": OBJECT, "hit_ratio": 0.75})

        upstream = health(self.local.port)[1]["upstreams"][0]
        self.assertEqual((upstream["bytes_per_s"], upstream["bytes"]["foreground"],
                          upstream["bytes"]["prefetch"], upstream["bytes"]["revalidation"]),
                         (0, OBJECT, 0, 0))
        self.assertGreaterEqual(upstream["bytes"]["writeback"], 3 * OBJECT)

        # For people, of every bucket: no key is named.
        rc, out, err = self.status()
        self.assertEqual(rc, 1, out + err)  # degraded
        self.assertNotIn(PARKED, out)
        lines = out.splitlines()
        self.assertEqual(lines[0], "status: degraded")
        self.assertEqual(lines[1], "upstream golden http://127.0.0.1:%d: ok" % self.upstream.port)
        # The bytes of bodies to and from it, by class: the miss read through, the uploads.
        self.assertRegex(lines.pop(2), r"^  bytes since start: foreground 4 MiB, prefetch 0 B, "
                                       r"writeback [\d.]+ MiB, revalidation 0 B$")
        self.assertRegex(lines[2], r"^bucket ckpt -> golden:team-ckpt/%s \(writeback\): degraded; "
                                   r"queued 1 \(16 B\), parked 1, oldest \d+ s, conflicts 0$" % PREFIX)
        self.assertEqual(lines[3:6], [
            "  queued: 1 uploads, 0 copies, 0 deletes",
            "  data: 4 versions (12 MiB): 1 dirty (16 B), 2 clean (8 MiB), 1 evicted (4 MiB); "
            "pinned 4 MiB, evictable 4 MiB",
            "  reads: 3 hits (12 MiB), 1 misses (4 MiB); hit ratio 0.750"])
        self.assertTrue(lines[6].startswith("owed to upstreams: 16 B of "), lines[6])
        self.assertEqual(lines[7], "reads from upstreams under way: 0")
        self.assertRegex(lines[8], r"^device: [\d.]+ MiB of [\d.]+ MiB allocated, [\d.]+ MiB free "
                                   r"\(peak [\d.]+ MiB; eviction from 60% \([\d.]+ MiB\) to 45% "
                                   r"\([\d.]+ MiB\), full at 85%\); evicted \d+ versions")
        self.assertEqual(health(self.local.port)[0], 503)  # degraded

    def test_one_bucket_names_its_parked_jobs_to_a_signed_caller(self):
        for key in (PARKED, PARKED + "-2"):
            self.s3.put_object(Bucket="ckpt", Key=key, Body=b"refused upstream", Metadata={"big": "x" * 1500})
        self.bucket_report(lambda b: b.get("parked") == 2)
        rc, out, err = self.status("--bucket", "ckpt")
        self.assertEqual(rc, 1, out + err)
        parked = sorted(line for line in out.splitlines() if line.startswith("  parked "))
        self.assertEqual(len(parked), 2, out)
        for line, key in zip(parked, (PARKED, PARKED + "-2")):
            self.assertRegex(line, r"^  parked upload %s \(1 attempts\): .*MetadataTooLarge" % key)
        self.assertIn("\nowed to upstreams: ", out)  # the device's lines after the bucket's
        rc, out, err = self.status("--bucket", "ckpt", "--json")
        self.assertEqual(rc, 1, err)
        report = json.loads(out)
        self.assertEqual(report["status"], "degraded")
        self.assertEqual([b["bucket"] for b in report["buckets"]], ["ckpt"])
        self.assertEqual(sorted((j["key"], j["action"]) for j in report["parked_jobs"]),
                         [(PARKED, "upload"), (PARKED + "-2", "upload")])
        # A bucket that is not bound: said, exit 1.
        rc, out, err = self.status("--bucket", "not-bound")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("no bucket named not-bound is bound to an upstream", err)
        # Without credentials the keys stay hidden: the signed request is refused.
        env = {k: v for k, v in os.environ.items() if "ACCESS" not in k and "SECRET" not in k}
        done = subprocess.run([os.environ.get("HOTS3_BIN", "hots3"), "tier", "status", "--endpoint",
                               self.endpoint, "--bucket", "ckpt"], env=env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(done.returncode, 1)
        self.assertIn("no credentials", done.stderr)
        self.assertNotIn(PARKED, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
