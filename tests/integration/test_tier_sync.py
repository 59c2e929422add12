"""A bucket in cache mode in front of an upstream bucket too large to list through at every
request: with `list = "local"` ListObjects answers from the catalog alone, which `hots3 tier sync`
fills from the upstream's listing and keeps in line with it (what is new there is adopted, what
changed there replaced, what went there removed). Beside it, a bucket bound to the same upstream
bucket with `list = "upstream"` lists through; both list exactly what the upstream holds.

The upstream is a second hots3 behind the fault proxy, holding 10,000 keys (HOTS3_SYNC_KEYS) under
the bindings' prefix, written there directly as other writers would: `ckpt` lists the upstream,
`flat` its catalog."""

import concurrent.futures
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from test_tier_cache import CacheBucket  # noqa: E402
from test_tier_writeback import PREFIX, run_hots3  # noqa: E402

from botocore.exceptions import ClientError  # noqa: E402

# Fewer in the sanitizer build (CTest sets HOTS3_SYNC_KEYS there): its servers are several times
# slower, and the paths are the same.
N = int(os.environ.get("HOTS3_SYNC_KEYS", "10000"))
KEYS = ["big/k%05d" % i for i in range(N)]

# A second binding of the same upstream bucket and prefix, listing its catalog.
FLAT = """list = "upstream"

[[tier.bucket]]
bucket = "flat"
upstream = "golden"
upstream_bucket = "team-ckpt"
upstream_prefix = "%s"
mode = "cache"
list = "local"
""" % PREFIX


class SyncTest(CacheBucket):
    binding = FLAT

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: cls.up.put_object(Bucket="team-ckpt", Key=PREFIX + k, Body=k.encode()),
                          KEYS))

    def sync(self, bucket="flat"):
        # (The first looks up every key, one HEAD and one commit each: minutes on a slow machine.)
        return run_hots3("tier", "sync", "--endpoint", self.endpoint, "--bucket", bucket, "--prefix", "big/",
                         timeout=900)

    def listing(self, bucket, v2=True):
        """Every key under big/ with its size, by pages of at most 1,000 with the delimiter /."""
        keys, pages = {}, []
        paginator = self.s3.get_paginator("list_objects_v2" if v2 else "list_objects")
        for page in paginator.paginate(Bucket=bucket, Prefix="big/", Delimiter="/",
                                       PaginationConfig={"PageSize": 1000}):
            contents = page.get("Contents", [])
            self.assertEqual(page.get("CommonPrefixes", []), [])
            pages.append(len(contents))
            for o in contents:
                self.assertNotIn(o["Key"], keys)
                keys[o["Key"]] = o["Size"]
        self.assertLessEqual(max(pages), 1000)
        return keys

    def counts(self, out):
        """The sync's last line as {what: count}."""
        last = out.strip().splitlines()[-1]
        found = dict((what, int(n)) for n, what in re.findall(
            r"(\d+) (objects adopted|already here|skipped|replaced|removed)", last))
        self.assertEqual(len(found), 5, last)
        return found

    def test_both_listings_are_exactly_the_upstreams_and_a_sync_follows_its_changes(self):
        # Before a sync, the catalog knows none of them.
        self.assertEqual(self.s3.list_objects_v2(Bucket="flat", Prefix="big/")["KeyCount"], 0)
        rc, out, err = self.sync()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), {"objects adopted": N, "already here": 0, "skipped": 0,
                                            "replaced": 0, "removed": 0})
        expected = {k: len(k) for k in KEYS}
        for bucket in ("ckpt", "flat"):
            self.assertEqual(self.listing(bucket), expected, bucket)

        # A key written here is listed and one deleted here is not, at once (each write goes
        # through to the upstream).
        self.s3.put_object(Bucket="flat", Key="big/zz-ours", Body=b"ours")
        self.s3.delete_object(Bucket="flat", Key="big/k00006")
        expected["big/zz-ours"] = 4
        del expected["big/k00006"]
        for bucket in ("ckpt", "flat"):
            self.assertEqual(self.listing(bucket), expected, bucket)

        # Others change the upstream: a new key, an overwrite, two deletes. The upstream's
        # listing shows them at once, the catalog once synced again.
        before = dict(expected)
        self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "big/zz-theirs", Body=b"theirs")
        self.up.put_object(Bucket="team-ckpt", Key=PREFIX + "big/k00007", Body=b"changed upstream")
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "big/k00005")
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "big/k00009")
        expected.update({"big/zz-theirs": 6, "big/k00007": 16})
        del expected["big/k00005"], expected["big/k00009"]
        self.assertEqual(self.listing("ckpt"), expected)
        self.assertEqual(self.listing("flat"), before)
        rc, out, err = self.sync()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), {"objects adopted": 1, "already here": N - 3, "skipped": 0,
                                            "replaced": 1, "removed": 2})
        for v2 in (True, False):
            self.assertEqual(self.listing("flat", v2), expected, v2)
        self.assertEqual(self.s3.get_object(Bucket="flat", Key="big/k00007")["Body"].read(), b"changed upstream")
        with self.assertRaises(ClientError) as caught:
            self.s3.head_object(Bucket="flat", Key="big/k00005")
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)
        # A second sync finds nothing to do.
        rc, out, err = self.sync()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), {"objects adopted": 0, "already here": N - 1, "skipped": 0,
                                            "replaced": 0, "removed": 0})

        # More gone upstream than a page asks about at once (100): the pages end early and the
        # next ones go on, until all are removed here too.
        gone = ["big/k%05d" % i for i in range(100, 250)]
        self.up.delete_objects(Bucket="team-ckpt", Delete={"Objects": [{"Key": PREFIX + k} for k in gone]})
        for k in gone:
            del expected[k]
        rc, out, err = self.sync()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual((self.counts(out)["removed"], self.counts(out)["objects adopted"]), (150, 0), out)
        self.assertEqual(self.listing("flat"), expected)

        # While the upstream does not answer, the catalog still lists; a sync fails and says so.
        self.proxy.slowdown = 1.0
        try:
            self.assertEqual(self.listing("flat"), expected)
            rc, out, err = self.sync()
            self.assertEqual(rc, 1, out + err)
        finally:
            self.proxy.slowdown = 0.0


if __name__ == "__main__":
    unittest.main(verbosity=2)
