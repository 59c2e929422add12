"""`hots3 tier recover`: a lost device loses exactly what had not reached the upstream, and hots3
names it. The store stops, its device file is replaced by a new sparse one, and recover, run on
the stopped store, goes on with the catalog: the objects the upstream holds read through from it
with their bytes and ETags, small objects (whose data is in the catalog) stay, and the others are
listed as lost before upload. Those answer 500 (never the upstream's older version) until the
operator, with the server running, takes the upstream's version (--accept-older) or forgets the
key (--forget).

The upstream is a second hots3 behind a fault proxy that is down while the dirty objects are
written, so that they stay dirty."""

import hashlib
import os
import sqlite3
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fault_proxy  # noqa: E402
import s3_support  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from test_tier_writeback import (OWED_JOBS, KiB, MiB, PREFIX, client, data, run_hots3, start_upstream,  # noqa: E402
                                 stop_servers, tier_config, wait_health)

CLEAN = ["clean/%02d" % i for i in range(50)]
NEW_DIRTY = ["dirty/%d" % i for i in range(4)]


def size_of(i):
    # Past the inline size (4 KiB): these objects' data is on the device. One is multipart.
    return 8 * KiB + i * 37 * KiB


class RecoverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_upstream(cls)
        cls.proxy = fault_proxy.FaultProxy(cls.upstream.port).start()
        cls.config = tier_config("http://127.0.0.1:%d" % cls.proxy.port, cls.credentials, delay="100ms")
        cls.local = None
        cls.start_local()

    @classmethod
    def start_local(cls):
        server = s3_support.hots3_server(cls.config, device_size="256MiB", workdir=cls.local_dir)
        try:
            cls.local = server.start()
        except RuntimeError:
            server.cleanup()
            raise
        cls.s3 = client(cls.local.port)
        cls.endpoint = "http://127.0.0.1:%d" % cls.local.port

    @classmethod
    def tearDownClass(cls):
        stop_servers(cls)

    def recover(self, *args):
        return run_hots3("tier", "recover", "--endpoint", self.endpoint, "--bucket", "ckpt", *args)

    def lost_error(self, key, bucket="ckpt"):
        with self.assertRaises(ClientError) as caught:
            self.s3.get_object(Bucket=bucket, Key=key)
        e = caught.exception.response
        self.assertEqual((e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]), (500, "InternalError"))
        self.assertIn("lost before upload", e["Error"]["Message"])
        self.assertEqual(e["ResponseMetadata"]["HTTPHeaders"]["x-hots3-tier"], "lost")
        with self.assertRaises(ClientError) as caught:
            self.s3.head_object(Bucket=bucket, Key=key)
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)

    def test_a_lost_device_loses_exactly_the_dirty_set_and_names_it(self):
        s3 = self.s3
        bodies = {}
        for i, key in enumerate(CLEAN):
            bodies[key] = data(size_of(i), i)
            s3.put_object(Bucket="ckpt", Key=key, Body=bodies[key])
        # A checkpoint shard as SDKs save one: multipart, three parts.
        bodies["clean/big"] = data(12 * MiB, 99)
        upload = s3.create_multipart_upload(Bucket="ckpt", Key="clean/big")["UploadId"]
        parts = [{"PartNumber": n + 1,
                  "ETag": s3.upload_part(Bucket="ckpt", Key="clean/big", UploadId=upload, PartNumber=n + 1,
                                         Body=bodies["clean/big"][n * 5 * MiB:(n + 1) * 5 * MiB])["ETag"]}
                 for n in range(3)]
        s3.complete_multipart_upload(Bucket="ckpt", Key="clean/big", UploadId=upload,
                                     MultipartUpload={"Parts": parts})
        old = data(100 * KiB, 1000)
        s3.put_object(Bucket="ckpt", Key="older", Body=old)
        s3.put_object(Bucket="ckpt", Key="small", Body=b"in the catalog")  # inline
        etags = {key: s3.head_object(Bucket="ckpt", Key=key)["ETag"] for key in bodies}
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt", "--wait")
        self.assertEqual(rc, 0, out + err)

        # The upstream out of reach: these stay here only.
        self.proxy.down = True
        for i, key in enumerate(NEW_DIRTY):
            s3.put_object(Bucket="ckpt", Key=key, Body=data(20 * KiB, 200 + i))
        s3.put_object(Bucket="ckpt", Key="older", Body=data(30 * KiB, 300))  # newer than upstream's
        # Renamed: their data is upstream all the same, under the old names (one is multipart).
        for source, target in (("clean/49", "moved/49"), ("clean/big", "moved/big")):
            r = s3_support.send(self.local.port, s3_support.SignedRequest(
                "PUT", "/ckpt/" + target, [("renameObject", "")], {"x-amz-rename-source": "ckpt/" + source},
                port=self.local.port).wire())
            self.assertEqual(r.status, 200, r.body)
            bodies[target] = bodies.pop(source)
            etags[target] = etags.pop(source)
        s3.create_bucket(Bucket="plain")  # bound to nothing: only the device held its data
        s3.put_object(Bucket="plain", Key="file", Body=data(64 * KiB, 400))
        s3.put_object(Bucket="plain", Key="tiny", Body=b"tiny")
        unfinished = s3.create_multipart_upload(Bucket="ckpt", Key="unfinished")["UploadId"]
        s3.upload_part(Bucket="ckpt", Key="unfinished", UploadId=unfinished, PartNumber=1, Body=data(5 * MiB, 500))

        # The device is lost: a new, empty one in its place.
        self.assertEqual(self.local.stop(), 0)
        self.local.cleanup()
        data_dir = os.path.join(self.local_dir, "data")
        device = os.path.join(data_dir, "device.img")
        os.remove(device)
        with open(device, "wb") as f:
            f.truncate(256 * MiB)
        # The server will not start on it by itself.
        with self.assertRaisesRegex(RuntimeError, "tier recover"):
            self.start_local()
        rc, out, err = run_hots3("tier", "recover", "--data", data_dir)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("read through from upstreams from now on: 49 objects (", out)
        self.assertIn("dropped: 1 parts of unfinished multipart uploads", out)
        self.assertIn("lost before upload: 6 objects (", out)
        lost = sorted(line.split()[1] for line in out.splitlines() if line.startswith("LOST "))
        self.assertEqual(lost, sorted(["ckpt/" + k for k in NEW_DIRTY] + ["ckpt/older", "plain/file"]))
        copies = sorted(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("COPY "))
        self.assertEqual([c.split()[0] + " " + c.split()[-1] for c in copies],
                         ["ckpt/moved/49 clean/49", "ckpt/moved/big clean/big"], out)
        # Once is enough: the device is the store's now.
        rc, out, err = run_hots3("tier", "recover", "--data", data_dir)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("nothing was lost", err)
        rc, out, err = run_hots3("check", "--data", data_dir)
        self.assertEqual(rc, 0, out + err)

        self.proxy.down = False
        self.start_local()
        s3 = self.s3
        # The renamed ones are copied upstream from their old names, then read through.
        deadline = time.monotonic() + 30
        for key in ("moved/49", "moved/big"):
            while True:
                try:
                    if s3.head_object(Bucket="ckpt", Key=key)["ResponseMetadata"]["HTTPHeaders"]["x-hots3-tier"] == "remote":
                        break
                except ClientError as e:  # lost until then
                    self.assertEqual(e.response["ResponseMetadata"]["HTTPStatusCode"], 500)
                self.assertLess(time.monotonic(), deadline, key + " was never copied upstream")
                time.sleep(0.1)
        # (Their old names go upstream once the copies are there.)
        while self.up.list_objects_v2(Bucket="team-ckpt", Prefix=PREFIX + "clean/49")["KeyCount"] != 0:
            self.assertLess(time.monotonic(), deadline, "clean/49 was never deleted upstream")
            time.sleep(0.1)
        for key, body in bodies.items():
            got = s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(got["ETag"], etags[key], key)
            self.assertEqual(hashlib.sha256(got["Body"].read()).hexdigest(), hashlib.sha256(body).hexdigest(), key)
        self.assertEqual(s3.get_object(Bucket="ckpt", Key="small")["Body"].read(), b"in the catalog")
        self.assertEqual(s3.get_object(Bucket="plain", Key="tiny")["Body"].read(), b"tiny")
        self.assertEqual(s3.list_parts(Bucket="ckpt", Key="unfinished", UploadId=unfinished).get("Parts", []), [])
        for key in NEW_DIRTY + ["older"]:
            self.lost_error(key)
        self.lost_error("file", "plain")
        # Nothing else reads or takes its data either.
        for attempt in (lambda: s3.copy_object(Bucket="ckpt", Key="copy", CopySource={"Bucket": "ckpt", "Key": "dirty/1"}),
                        lambda: s3.get_object_attributes(Bucket="ckpt", Key="dirty/1", ObjectAttributes=["ETag"]),
                        lambda: s3.restore_object(Bucket="ckpt", Key="dirty/1", RestoreRequest={"Days": 1})):
            with self.assertRaises(ClientError) as caught:
                attempt()
            self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)
        with self.assertRaises(ClientError):
            s3.head_object(Bucket="ckpt", Key="copy")
        rc, out, err = run_hots3("tier", "ls", "--endpoint", self.endpoint, "--bucket", "ckpt", "--prefix", "dirty/")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("dirty/: 4 objects, 4 lost;", out)
        # The health report counts them (the space is read every few seconds).
        report = wait_health(self.local.port, lambda status, r: r["buckets"][0]["space"]["lost_objects"] == 5)
        self.assertEqual(report["buckets"][0]["state"], "degraded")
        self.assertEqual(report["buckets"][0]["space"]["lost_bytes"], 4 * 20 * KiB + 30 * KiB)
        # Nothing lost goes up: its jobs stay parked, and say why.
        lines_before = len(self.proxy.lines)
        rc, out, err = run_hots3("tier", "status", "--endpoint", self.endpoint, "--bucket", "ckpt")
        self.assertIn("lost before upload", out + err)
        with self.assertRaises(ClientError):
            self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "dirty/0")

        # The upstream's older version, by choice.
        rc, out, err = self.recover("--key", "older", "--accept-older")
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"older +ckpt/older %d \"[0-9a-f]+\"" % len(old))
        got = s3.get_object(Bucket="ckpt", Key="older")
        self.assertEqual(got["Body"].read(), old)
        # What the upstream never had stays lost: only forgetting settles it.
        rc, out, err = self.recover("--prefix", "dirty/", "--accept-older")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("ckpt/dirty/*: lost versions: 4 not-upstream\n", out)
        self.lost_error("dirty/0")
        # A new write of a lost key is a write like any other.
        s3.put_object(Bucket="ckpt", Key="dirty/3", Body=b"written again")
        rc, out, err = self.recover("--key", "dirty/0", "--forget")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("forgotten    ckpt/dirty/0", out)
        with self.assertRaises(ClientError) as caught:
            s3.get_object(Bucket="ckpt", Key="dirty/0")
        self.assertEqual(caught.exception.response["Error"]["Code"], "NoSuchKey")
        rc, out, err = self.recover("--prefix", "dirty/", "--forget")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ckpt/dirty/*: lost versions: 2 forgotten\n", out)
        rc, out, err = run_hots3("tier", "recover", "--endpoint", self.endpoint, "--bucket", "plain", "--forget")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(s3.list_objects_v2(Bucket="ckpt", Prefix="dirty/")["KeyCount"], 1)
        rc, out, err = run_hots3("tier", "flush", "--endpoint", self.endpoint, "--bucket", "ckpt", "--wait")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.up.get_object(Bucket="team-ckpt", Key=PREFIX + "dirty/3")["Body"].read(),
                         b"written again")
        # Of the lost ones, nothing ever went up.
        uploaded = [line for line in self.proxy.lines[lines_before:] if line.startswith("PUT ")]
        self.assertEqual([line.split()[1].split("?")[0] for line in uploaded],
                         ["/team-ckpt/" + PREFIX + "dirty/3"], uploaded)
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(data_dir, "catalog.db"), uri=True)
        try:
            self.assertEqual(db.execute("SELECT count(*) FROM objects WHERE tier_state = 3").fetchone()[0], 0)
            self.assertEqual(db.execute(OWED_JOBS).fetchone()[0], 0)
        finally:
            db.close()


if __name__ == "__main__":
    unittest.main()
