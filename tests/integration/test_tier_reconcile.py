"""`hots3 tier reconcile` (also `hots3 admin tier reconcile`): the catalog of a bound bucket held
against what its upstream holds. An object uploaded and then deleted straight from the upstream
(lost there, as a careless lifecycle rule or another tool loses it) is reported and sent up
again in a write-back bucket; another writer's newer version is followed. In cache mode the
bucket follows the upstream: the stub of a key deleted there is removed.

The upstream is a second hots3 behind the fault proxy."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tier_cache import CacheBucket  # noqa: E402
from test_tier_readthrough import TieredTest  # noqa: E402
from test_tier_writeback import PREFIX, data, run_hots3  # noqa: E402

from botocore.exceptions import ClientError  # noqa: E402


class WriteBackReconcileTest(TieredTest):
    def reconcile(self, prefix):
        rc, out, err = run_hots3("tier", "reconcile", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", prefix)
        self.assertEqual(rc, 0, out + err)
        return out

    def test_what_the_upstream_lost_goes_up_again_and_what_changed_there_is_followed(self):
        bodies = {"rec/%d" % i: data(10000 + i, 500 + i) for i in range(4)}
        for key, body in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=key, Body=body)
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "rec/", "--wait")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.reconcile("rec/"), "ckpt/rec/: 4 objects, 4 current\n")

        # Lost upstream: rec/0 deleted there. Changed by another writer: rec/1.
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "rec/0")
        newer = data(777, 999)
        self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "rec/1", Body=newer)
        out = self.reconcile("rec/")
        self.assertIn("requeued  rec/0\n", out)
        self.assertIn("replaced  rec/1\n", out)
        self.assertTrue(out.endswith("ckpt/rec/: 4 objects, 2 current, 1 replaced, 1 requeued\n"), out)
        # rec/0 is upstream again, with its bytes; rec/1 here is the other writer's.
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "rec/", "--wait")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "rec/0")["Body"].read(),
                         bodies["rec/0"])
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="rec/1")["Body"].read(), newer)
        # Nothing left to reconcile; and the admin spelling runs the same command.
        rc, out, err = run_hots3("admin", "--endpoint", self.endpoint, "tier", "reconcile", "--bucket", "ckpt",
                                 "--prefix", "rec/")
        self.assertEqual((rc, out), (0, "ckpt/rec/: 4 objects, 4 current\n"), err)

    def test_an_object_evicted_here_and_lost_upstream_is_reported_lost_not_requeued(self):
        body = data(20000, 501)
        self.s3.put_object(Bucket="ckpt", Key="gone/x", Body=body)
        for command in ("flush", "evict"):
            rc, out, err = run_hots3("tier", command, "--endpoint", self.endpoint, "--bucket", "ckpt",
                                     "--prefix", "gone/", *(["--wait"] if command == "flush" else []))
            self.assertEqual(rc, 0, out + err)
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "gone/x")
        out = self.reconcile("gone/")
        self.assertEqual(out, "lost      gone/x\nckpt/gone/: 1 objects, 1 lost\n")
        # Nothing has the bytes: a read says so (never 200, never the upstream's 404 as a missing
        # key), and nothing was queued to go up.
        def revalidate(request, **_):
            request.headers["x-hots3-revalidate"] = "1"
        self.s3.meta.events.register("before-sign.s3.GetObject", revalidate)
        try:
            with self.assertRaises(ClientError) as caught:
                self.s3.get_object(Bucket="ckpt", Key="gone/x")
        finally:
            self.s3.meta.events.unregister("before-sign.s3.GetObject", revalidate)
        meta = caught.exception.response["ResponseMetadata"]
        self.assertEqual(meta["HTTPStatusCode"], 500)
        self.assertEqual((meta["HTTPHeaders"].get("x-hots3-tier"), meta["HTTPHeaders"].get("x-hots3-revalidation")),
                         ("lost", "lost"))
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "gone/", "--wait")
        self.assertEqual(rc, 0, out + err)
        with self.assertRaises(ClientError):
            self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "gone/x")

    def test_an_unbound_bucket_is_refused(self):
        self.s3.create_bucket(Bucket="plain")
        rc, _, err = run_hots3("tier", "reconcile", "--endpoint", self.endpoint, "--bucket", "plain")
        self.assertEqual(rc, 1)
        self.assertIn("not a bound bucket", err)


class CacheReconcileTest(CacheBucket):
    def test_the_stub_of_a_key_deleted_upstream_goes(self):
        self.others_put("rec/a", b"a" * 100)
        self.others_put("rec/b", b"b" * 100)
        for key in ("rec/a", "rec/b"):  # read through once: stubs here
            self.s3.get_object(Bucket="ckpt", Key=key)["Body"].read()
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "rec/a")
        rc, out, err = run_hots3("tier", "reconcile", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                 "--prefix", "rec/")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"\b1 removed\n$")
        rows = self.catalog_rows("SELECT key FROM objects WHERE key LIKE 'rec/%' ORDER BY key")
        self.assertEqual(rows, [("rec/b",)])
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="ckpt", Key="rec/a")


if __name__ == "__main__":
    unittest.main()
