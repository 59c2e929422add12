"""`hots3 tier adopt`: a fresh data directory bound to an upstream bucket that already holds data
records what is there as evicted versions, a page of the upstream's listing at a time. HEAD and
LIST then answer from here, with the upstream's size, ETag, headers, metadata and part table,
even while the upstream is down; GET reads through. Keys the bucket holds already are left as
they are, and running it again adopts nothing twice.

The upstream is a second hots3 holding 1,000 keys (and a multipart object) under the binding's
prefix, and a key outside it."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from test_tier_writeback import (start_local, AWKWARD, MiB, PREFIX, data, run_hots3, start_upstream,  # noqa: E402
                                 stop_servers, tier_config)

KEYS = ["set/%04d" % i for i in range(1000)]


class AdoptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_upstream(cls)
        for i, key in enumerate(KEYS):
            cls.up.put_object(Bucket="team-ckpt", Key=PREFIX + key, Body=b"%d" % i * (i % 7 + 1),
                              ContentType="text/x-%d" % (i % 3), Metadata={"n": str(i)})
        # A multipart object (two 5 MiB parts and a tail) and an awkward key.
        cls.big = data(11 * MiB, 7)
        mpu = cls.up.create_multipart_upload(Bucket="team-ckpt", Key=PREFIX + "big")
        parts = []
        for n, at in enumerate(range(0, len(cls.big), 5 * MiB), 1):
            got = cls.up.upload_part(Bucket="team-ckpt", Key=PREFIX + "big", UploadId=mpu["UploadId"],
                                     PartNumber=n, Body=cls.big[at:at + 5 * MiB])
            parts.append({"PartNumber": n, "ETag": got["ETag"]})
        cls.up.complete_multipart_upload(Bucket="team-ckpt", Key=PREFIX + "big", UploadId=mpu["UploadId"],
                                         MultipartUpload={"Parts": parts})
        cls.up.put_object(Bucket="team-ckpt", Key=PREFIX + AWKWARD, Body=b"awkward")
        cls.up.put_object(Bucket="team-ckpt", Key="elsewhere/k", Body=b"not under the prefix")
        # (Nothing is sent up during the test: the key written here stays here only.)
        config = tier_config("http://127.0.0.1:%d" % cls.upstream.port, cls.credentials, delay="1h")
        start_local(cls, config, "256MiB")

    @classmethod
    def tearDownClass(cls):
        stop_servers(cls)

    def adopt(self, *args):
        return run_hots3("tier", "adopt", "--endpoint", self.endpoint, "--bucket", "ckpt", *args)

    def listed(self):
        out = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket="ckpt", PaginationConfig={"PageSize": 1000}):
            for o in page.get("Contents", []):
                out[o["Key"]] = (o["Size"], o["ETag"])
        return out

    def test_adopted_keys_answer_head_and_list_from_here_and_read_through(self):
        # Written here before: left as it is (dirty, newer than the upstream's).
        self.s3.put_object(Bucket="ckpt", Key="set/0003", Body=b"mine")
        self.assertEqual(self.listed(), {"set/0003": (4, self.s3.head_object(Bucket="ckpt", Key="set/0003")["ETag"])})

        rc, out, err = self.adopt("--prefix", "set/")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out.splitlines()[-1],
                         r"^ckpt/set/: 999 objects adopted \([\d.]+ KiB\), 1 already here, 0 skipped$")
        rc, out, err = self.adopt()
        self.assertEqual(rc, 0, out + err)
        self.assertIn(" so far\n", out)  # a page of 1,000 at a time
        self.assertTrue(out.endswith(": 2 objects adopted (11 MiB), 1000 already here, 0 skipped\n"), out)

        upstream = {}
        for page in self.up.get_paginator("list_objects_v2").paginate(Bucket="team-ckpt", Prefix=PREFIX):
            for o in page["Contents"]:
                upstream[o["Key"][len(PREFIX):]] = (o["Size"], o["ETag"])
        upstream["set/0003"] = self.listed()["set/0003"]
        self.assertEqual(len(upstream), 1002)
        self.assertEqual(self.listed(), upstream)

        h = self.s3.head_object(Bucket="ckpt", Key="set/0042")["ResponseMetadata"]["HTTPHeaders"]
        self.assertEqual((h["content-type"], h["x-amz-meta-n"], h["x-hots3-tier"]), ("text/x-0", "42", "remote"))
        got = self.s3.get_object(Bucket="ckpt", Key="big", PartNumber=2)
        self.assertEqual(got["ContentLength"], 5 * MiB)
        self.assertEqual(got["PartsCount"], 3)
        self.assertEqual(got["Body"].read(), self.big[5 * MiB:10 * MiB])
        got = self.s3.get_object(Bucket="ckpt", Key="set/0042")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "miss")
        self.assertEqual(got["Body"].read(), b"42")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key=AWKWARD)["Body"].read(), b"awkward")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="set/0003")["Body"].read(), b"mine")
        # A sync is for cache mode: here the upstream changes only through this server.
        rc, out, err = run_hots3("tier", "sync", "--endpoint", self.endpoint, "--bucket", "ckpt")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("cache mode", err)

        # The upstream down: HEAD and LIST still answer, from here.
        self.assertEqual(self.upstream.stop(), 0)
        self.assertEqual(len(self.listed()), 1002)
        h = self.s3.head_object(Bucket="ckpt", Key="set/0999")
        self.assertEqual((h["ContentLength"], h["Metadata"]), (len(b"999" * (999 % 7 + 1)), {"n": "999"}))
        rc, out, err = self.adopt()
        self.assertEqual(rc, 1)
        self.assertIn("run it again to go on", err)


if __name__ == "__main__":
    unittest.main()
