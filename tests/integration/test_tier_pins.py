"""Pins: keys that eviction never takes. A bound bucket pins keys by the globs of its binding
(`pin`), by `x-hots3-pin: true` on a PUT or CreateMultipartUpload, and by `hots3 tier pin`
(one key, or every key under a prefix, also those written later); `hots3 tier unpin` removes
such pins. Pinning an evicted key fetches it back at once. The bytes a bucket's pinned versions
hold are capped (`pin_max`): a pin past the cap changes nothing and answers 409
PinLimitExceeded with the counts. HEAD and GET say where a version's data is (`x-hots3-tier`)
and whether it is pinned (`x-hots3-pinned`).

The local server has a 128 MiB device and evicts above 60%; the upstream is a second hots3."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import s3_support  # noqa: E402
from test_tier_eviction import OBJECT, EvictionTestCase, sha  # noqa: E402
from test_tier_writeback import MiB, client, data, run_hots3, tier_config, start_local  # noqa: E402

from botocore.exceptions import ClientError  # noqa: E402


def with_pin(s3, operation, call, pin="true"):
    """`call`() with x-hots3-pin on `operation`'s request (boto3 has no parameter for hots3's own
    header)."""
    def add_header(request, **_):
        request.headers["x-hots3-pin"] = pin
    s3.meta.events.register("before-sign.s3.%s" % operation, add_header)
    try:
        return call()
    finally:
        s3.meta.events.unregister("before-sign.s3.%s" % operation, add_header)


def pinning_put(s3, pin="true", **kwargs):
    return with_pin(s3, "PutObject", lambda: s3.put_object(**kwargs), pin)


class PinTest(EvictionTestCase):
    evict = 'high = 60\nlow = 45\nfull = 85\nmin_resident = "0s"\n'
    binding = 'pin = ["latest/**"]\npin_max = "40MiB"\n'

    @classmethod
    def setUpClass(cls):
        from test_tier_writeback import start_upstream
        start_upstream(cls)
        cls.config = tier_config("http://127.0.0.1:%d" % cls.upstream.port, cls.credentials,
                                 delay="30s", binding=cls.binding) + "\n[tier.evict]\n" + cls.evict
        start_local(cls, cls.config, "128MiB")

    def tier(self, *args):
        return run_hots3("tier", args[0], "--endpoint", self.endpoint, "--bucket", "ckpt", *args[1:])

    def head(self, key):
        return self.s3.head_object(Bucket="ckpt", Key=key)["ResponseMetadata"]["HTTPHeaders"]

    def evict_all(self, prefix):
        rc, out, err = self.tier("evict", "--prefix", prefix)
        self.assertEqual(rc, 0, out + err)

    def test_a_pinned_key_stays_a_hit_while_a_flood_evicts_the_rest(self):
        pinned = {"latest/shard-%d" % i: data(OBJECT, 10 + i) for i in range(3)}
        pinned["manual/a"] = data(OBJECT, 20)
        for k, body in pinned.items():
            if k.startswith("manual/"):
                pinning_put(self.s3, Bucket="ckpt", Key=k, Body=body)
            else:
                self.s3.put_object(Bucket="ckpt", Key=k, Body=body)
        self.s3.put_object(Bucket="ckpt", Key="other", Body=b"x" * OBJECT)
        self.assertEqual(self.head("latest/shard-0")["x-hots3-tier"], "dirty")
        self.flush("")
        for k in pinned:
            h = self.head(k)
            self.assertEqual((h["x-hots3-pinned"], h["x-hots3-tier"]), ("true", "clean"), k)
        self.assertEqual(self.head("other")["x-hots3-pinned"], "false")
        # Evicting by command takes what is not pinned only.
        self.evict_all("")
        self.assertEqual(self.head("other")["x-hots3-tier"], "remote")
        self.assertEqual([k for k in pinned if self.tier_state(k) != 1], [])
        # A flood of 160 MiB on a 128 MiB device, written and read back: eviction by watermark
        # runs all along and leaves the pins.
        flood = {"flood/%02d" % i: data(OBJECT, 100 + i) for i in range(40)}
        keys = list(flood)
        for wave in range(0, len(keys), 8):
            for k in keys[wave:wave + 8]:
                self.s3.put_object(Bucket="ckpt", Key=k, Body=flood[k])
            self.flush("flood/")
        for k in keys:
            self.assertEqual(sha(self.s3.get_object(Bucket="ckpt", Key=k)["Body"].read()), sha(flood[k]), k)
        self.assertGreater(self.settled_device(60)["evicted"], 0)
        for k, body in pinned.items():
            got = self.s3.get_object(Bucket="ckpt", Key=k)
            self.assertEqual(sha(got["Body"].read()), sha(body), k)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit", k)
        # An overwrite of a pinned key is pinned too: the pin is on the key.
        pinned["latest/shard-0"] = data(OBJECT, 30)
        self.s3.put_object(Bucket="ckpt", Key="latest/shard-0", Body=pinned["latest/shard-0"])
        self.flush("latest/")
        self.evict_all("")
        self.assertEqual([k for k in pinned if self.tier_state(k) != 1], [])

    def test_tier_ls_says_where_each_object_is_and_what_is_pinned(self):
        self.s3.put_object(Bucket="ckpt", Key="ls/evicted", Body=data(MiB, 40))
        # (Small: whatever other tests pinned, a pin of it stays within the cap.)
        self.s3.put_object(Bucket="ckpt", Key="ls/kept", Body=b"kept")
        self.flush("ls/")
        self.s3.put_object(Bucket="ckpt", Key="ls/new", Body=b"not upstream yet")
        rc, out, err = self.tier("evict", "--prefix", "ls/evicted")
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.tier("pin", "--key", "ls/kept")
        self.assertEqual(rc, 0, out + err)
        rc, out, err = self.tier("ls", "--prefix", "ls/")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([line.split() for line in out.splitlines()],
                         [["remote", "-", str(MiB), "ls/evicted"],
                          ["clean", "pinned", "4", "ls/kept"],
                          ["dirty", "-", "16", "ls/new"],
                          ["ckpt/ls/:", "3", "objects,", "1", "clean,", "1", "dirty,", "1", "remote;", "1",
                           "pinned"]])
        # Listing only: nothing was read through.
        self.assertEqual(self.tier_state("ls/evicted"), 2)
        rc, out, err = self.tier("ls", "--prefix", "none/")
        self.assertEqual((rc, out), (0, "ckpt/none/: 0 objects; 0 pinned\n"), err)
        rc, out, err = run_hots3("tier", "ls", "--endpoint", self.endpoint, "--bucket", "nosuch")
        self.assertEqual(rc, 1)
        self.assertIn("NoSuchBucket", err)

    def test_pinning_evicted_keys_fetches_them_and_unpinning_lets_them_go(self):
        bodies = {"fetch/%d" % i: data(2 * MiB, 40 + i) for i in range(3)}
        for k, body in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=k, Body=body)
        self.flush("fetch/")
        self.evict_all("fetch/")
        self.assertEqual([self.tier_state(k) for k in bodies], [2, 2, 2])
        self.assertEqual(self.head("fetch/0")["x-hots3-tier"], "remote")
        rc, out, err = self.tier("pin", "--prefix", "fetch/")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("3 objects are being fetched", out)
        self.wait_resident(list(bodies))
        for k, body in bodies.items():
            got = self.s3.get_object(Bucket="ckpt", Key=k)
            self.assertEqual(got["Body"].read(), body, k)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit", k)
        # A multipart upload asked with the header pins its key.
        upload = with_pin(self.s3, "CreateMultipartUpload",
                          lambda: self.s3.create_multipart_upload(Bucket="ckpt", Key="mpu/pinned"))
        part = self.s3.upload_part(Bucket="ckpt", Key="mpu/pinned", UploadId=upload["UploadId"],
                                   PartNumber=1, Body=b"p" * 1000)
        self.s3.complete_multipart_upload(
            Bucket="ckpt", Key="mpu/pinned", UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(self.head("mpu/pinned")["x-hots3-pinned"], "true")
        # Keys written later under a pinned prefix are pinned too.
        self.s3.put_object(Bucket="ckpt", Key="fetch/later", Body=b"later" * 1000)
        self.assertEqual(self.head("fetch/later")["x-hots3-pinned"], "true")
        self.evict_all("fetch/")
        self.assertEqual([self.tier_state(k) for k in bodies], [1, 1, 1])
        # Unpinned, they may go again; a key the binding's glob pins stays pinned.
        rc, out, err = self.tier("unpin", "--prefix", "fetch/")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("1 pins removed", out)
        self.assertEqual(self.head("fetch/0")["x-hots3-pinned"], "false")
        self.evict_all("fetch/")
        self.assertEqual([self.tier_state(k) for k in bodies], [2, 2, 2])
        self.s3.put_object(Bucket="ckpt", Key="latest/glob", Body=b"g")
        rc, out, err = self.tier("unpin", "--key", "latest/glob")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("still pinned", out)
        self.assertEqual(self.head("latest/glob")["x-hots3-pinned"], "true")

    def test_a_pin_past_the_cap_is_refused_with_the_byte_counts(self):
        for i in range(3):
            self.s3.put_object(Bucket="ckpt", Key="big/%d" % i, Body=data(16 * MiB, 60 + i))
        self.flush("big/")  # (what is owed the upstream stays within its budget)
        rc, out, err = self.tier("pin", "--prefix", "big/")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("PinLimitExceeded", err)
        self.assertIn("Pinning %d more bytes" % (48 * MiB), err)
        self.assertIn("pin_max of %d bytes" % (40 * MiB), err)
        self.assertEqual(self.head("big/0")["x-hots3-pinned"], "false")
        # One of them fits; a PUT that would pass the cap is refused before its body is kept.
        rc, out, err = self.tier("pin", "--key", "big/0")
        self.assertEqual(rc, 0, out + err)
        with self.assertRaises(ClientError) as caught:
            pinning_put(self.s3, Bucket="ckpt", Key="big/new", Body=data(32 * MiB, 70))
        e = caught.exception.response
        self.assertEqual((e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"]),
                         (409, "PinLimitExceeded"))
        self.assertEqual(e["Error"]["MaxBytes"], str(40 * MiB))
        with self.assertRaises(ClientError) as caught:
            self.s3.head_object(Bucket="ckpt", Key="big/new")
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)
        with self.assertRaises(ClientError) as caught:
            pinning_put(self.s3, pin="yes", Bucket="ckpt", Key="big/x", Body=b"x")
        self.assertEqual(caught.exception.response["Error"]["Code"], "InvalidArgument")
        rc, out, err = self.tier("unpin", "--key", "big/0")
        self.assertEqual(rc, 0, out + err)

    def test_pins_by_command_survive_a_restart_and_a_new_glob_fetches_its_keys(self):
        self.s3.put_object(Bucket="ckpt", Key="kept/a", Body=b"a" * 1000)
        rc, out, err = self.tier("pin", "--key", "kept/a")
        self.assertEqual(rc, 0, out + err)
        bodies = {"glob/%d" % i: data(MiB, 80 + i) for i in range(4)}
        for k, body in bodies.items():
            self.s3.put_object(Bucket="ckpt", Key=k, Body=body)
        self.flush("glob/")
        self.evict_all("glob/")
        self.assertEqual([self.tier_state(k) for k in bodies], [2, 2, 2, 2])
        self.local.kill()
        self.local.cleanup()
        cls = type(self)
        config = self.config.replace('pin = ["latest/**"]', 'pin = ["latest/**", "glob/*"]')
        self.assertNotEqual(config, self.config)
        cls.config = config
        cls.local = s3_support.hots3_server(config, device_size="128MiB", workdir=self.local_dir).start()
        cls.s3 = client(cls.local.port)
        cls.endpoint = "http://127.0.0.1:%d" % cls.local.port
        self.assertEqual(self.head("kept/a")["x-hots3-pinned"], "true")
        self.s3.put_object(Bucket="ckpt", Key="kept/b", Body=b"b")
        self.assertEqual(self.head("kept/b")["x-hots3-pinned"], "false")
        # The new glob's keys, evicted before, are fetched as the server starts.
        self.wait_resident(list(bodies))
        for k, body in bodies.items():
            got = self.s3.get_object(Bucket="ckpt", Key=k)
            self.assertEqual(got["Body"].read(), body, k)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "hit", k)

    def restart_with(self, config):
        self.local.kill()
        self.local.cleanup()
        cls = type(self)
        cls.config = config
        cls.local = s3_support.hots3_server(config, device_size="128MiB", workdir=self.local_dir).start()
        cls.s3 = client(cls.local.port)
        cls.endpoint = "http://127.0.0.1:%d" % cls.local.port

    def test_pins_by_glob_fetch_at_start_only_what_fits_in_the_cap(self):
        keys = ["capped/%d" % i for i in range(6)]  # 60 MiB, over the pin_max of 40 MiB
        for i, k in enumerate(keys):
            self.s3.put_object(Bucket="ckpt", Key=k, Body=data(10 * MiB, 90 + i))
        self.flush("capped/")
        self.evict_all("capped/")
        before = self.config
        pinning = before.replace('pin = [', 'pin = ["capped/*", ', 1)
        self.assertNotEqual(pinning, before)
        self.restart_with(pinning)
        try:
            deadline = time.monotonic() + 30
            while "would pass the bucket's pin_max" not in self.local.read_stderr():
                self.assertLess(time.monotonic(), deadline, self.local.read_stderr()[-2000:])
                time.sleep(0.1)
            # Those asked for come back, in key order; the rest wait for their first GET.
            settled, last = time.monotonic(), None
            while time.monotonic() - settled < 2:
                states = [self.tier_state(k) for k in keys]
                if states != last:
                    settled, last = time.monotonic(), states
                self.assertLess(time.monotonic(), deadline + 30, states)
                time.sleep(0.2)
            fetched = states.count(1)
            self.assertEqual(states, [1] * fetched + [2] * (len(keys) - fetched))
            # At most 4 of them fit in 40 MiB, fewer beside the other tests' pinned objects here.
            self.assertIn(fetched, (1, 2, 3, 4))
            got = self.s3.get_object(Bucket="ckpt", Key=keys[-1])
            self.assertEqual(got["Body"].read(), data(10 * MiB, 95))
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["x-hots3-cache"], "miss")
        finally:
            self.restart_with(before)
            for k in keys:
                self.s3.delete_object(Bucket="ckpt", Key=k)


if __name__ == "__main__":
    unittest.main()
