"""A bucket in cache mode fronts an upstream bucket that others write too: what they write there is
found through hots3 (HEAD, GET, LIST) without hots3 having seen it written, read through once and
then served locally; what clients write through hots3 goes through to the upstream.

The upstream is a second hots3 behind the fault proxy; "others" write to it directly."""

import concurrent.futures
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support  # noqa: E402
import test_tier_readthrough  # noqa: E402
from test_tier_readthrough import TieredTest  # noqa: E402
from test_tier_writeback import MiB, PREFIX, client, data, run_hots3  # noqa: E402

import botocore.config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


def sha(body):
    return hashlib.sha256(body).hexdigest()


class CacheBucket(TieredTest):
    """`ckpt` in cache mode over team-ckpt/PREFIX."""

    mode = "cache"

    def others_put(self, key, body, **kwargs):
        """Writes `key` upstream as another writer would; its ETag."""
        return self.up.put_object(Bucket="team-ckpt", Key=PREFIX + key, Body=body, **kwargs)["ETag"]

    def others_put_multipart(self, key, parts):
        upload = self.up.create_multipart_upload(Bucket="team-ckpt", Key=PREFIX + key)["UploadId"]
        etags = [self.up.upload_part(Bucket="team-ckpt", Key=PREFIX + key, UploadId=upload, PartNumber=n + 1,
                                     Body=body)["ETag"] for n, body in enumerate(parts)]
        return self.up.complete_multipart_upload(
            Bucket="team-ckpt", Key=PREFIX + key, UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})["ETag"]

    def upstream_body(self, key):
        return self.up.get_object(Bucket="team-ckpt", Key=PREFIX + key)["Body"].read()

    @contextlib.contextmanager
    def more_headers(self, operation, headers):
        """Meanwhile, the test client's requests of `operation` ("GetObject") carry `headers`."""
        def add(request, **_):
            for name, value in headers.items():
                request.headers[name] = value
        event = "before-sign.s3." + operation
        self.s3.meta.events.register(event, add)
        try:
            yield
        finally:
            self.s3.meta.events.unregister(event, add)

    def key_rows(self, key):
        """How many rows the local catalog has for `key`."""
        return self.catalog_rows("SELECT count(*) FROM objects WHERE key = ?", (key,))[0][0]



class CacheModeTest(CacheBucket):
    """What others write is found; what clients write goes up."""

    def test_an_object_written_upstream_is_described_read_through_once_and_kept(self):
        single = data(3 * MiB + 17, 11)
        parts = [data(5 * MiB, 12), data(5 * MiB, 13), data(2 * MiB + 5, 14)]
        single_etag = self.others_put("ds/single", single, ContentType="application/x-shard",
                                      Metadata={"epoch": "7"})
        multi_etag = self.others_put_multipart("ds/multi", parts)

        head = self.s3.head_object(Bucket="ckpt", Key="ds/single")
        self.assertEqual((head["ETag"], head["ContentLength"], head["ContentType"], head["Metadata"]),
                         (single_etag, len(single), "application/x-shard", {"epoch": "7"}))
        self.assertEqual(head["ResponseMetadata"]["HTTPHeaders"]["x-hots3-tier"], "remote")
        self.assertEqual(head.get("StorageClass"), None)  # STANDARD, as S3 leaves it out
        self.assertEqual(self.catalog("ds/single"), (2, 0))  # a stub: upstream only, no data

        for key, body, etag in (("ds/single", single, single_etag), ("ds/multi", b"".join(parts), multi_etag)):
            got = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss", key)
            self.assertEqual(sha(got["Body"].read()), sha(body), key)
            self.assertEqual(got["ETag"], etag)
            self.assertEqual(self.upstream_bytes(key), len(body), key)
            # Verified against its ETag (the multipart one by its parts) and kept.
            self.assertEqual(self.catalog(key)[0], 1, key)
            again = self.s3.get_object(Bucket="ckpt", Key=key)
            self.assertEqual(again["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "hit", key)
            self.assertEqual(sha(again["Body"].read()), sha(body), key)
            self.assertEqual(self.upstream_bytes(key), len(body), key)

        # The part table the upstream's parts give: a part's HEAD and GET as S3 answers them.
        part = self.s3.head_object(Bucket="ckpt", Key="ds/multi", PartNumber=2)
        self.assertEqual((part["ContentLength"], part["PartsCount"]), (5 * MiB, 3))
        got = self.s3.get_object(Bucket="ckpt", Key="ds/multi", PartNumber=3)
        self.assertEqual(got["Body"].read(), parts[2])

    def test_a_missing_key_is_asked_for_again_and_a_deleted_one_is_gone_both_sides(self):
        with self.assertRaises(ClientError) as caught:
            self.s3.get_object(Bucket="ckpt", Key="late/k")
        self.assertEqual(caught.exception.response["Error"]["Code"], "NoSuchKey")
        with self.assertRaises(ClientError) as caught:
            self.s3.head_object(Bucket="ckpt", Key="late/k")
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)
        # Not remembered as missing: written upstream now, it is there at once.
        self.others_put("late/k", b"came later")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="late/k")["Body"].read(), b"came later")

        self.s3.delete_object(Bucket="ckpt", Key="late/k")
        with self.assertRaises(ClientError) as caught:
            self.up.head_object(Bucket="team-ckpt", Key=PREFIX + "late/k")
        self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 404)
        with self.assertRaises(ClientError) as caught:
            self.s3.get_object(Bucket="ckpt", Key="late/k")
        self.assertEqual(caught.exception.response["Error"]["Code"], "NoSuchKey")

    def test_writes_go_through_and_replace_what_others_wrote(self):
        self.others_put("w/k", b"theirs")
        # hots3 never saw their version: its write replaces it (the last writer wins, as in S3),
        # with no side copy of a conflict.
        self.s3.put_object(Bucket="ckpt", Key="w/k", Body=b"ours")
        self.assertEqual(self.upstream_body("w/k"), b"ours")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="w/k")["Body"].read(), b"ours")
        listed = self.up.list_objects_v2(Bucket="team-ckpt", Prefix=PREFIX + "w/")
        self.assertEqual([o["Key"] for o in listed["Contents"]], [PREFIX + "w/k"])

        # Others overwrite it again; a key hots3 holds is its own until revalidated, but a new
        # key of theirs is found.
        self.others_put("w/new", b"new of theirs")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="w/new")["Body"].read(), b"new of theirs")

    def put_with(self, key, body, **headers):
        """PUT through hots3 with more request headers (any boto3): the status code."""
        def add(request, **_):
            for name, value in headers.items():
                request.headers[name] = value
        self.s3.meta.events.register("before-sign.s3.PutObject", add)
        try:
            return self.s3.put_object(Bucket="ckpt", Key=key, Body=body)["ResponseMetadata"]["HTTPStatusCode"]
        except ClientError as e:
            return e.response["ResponseMetadata"]["HTTPStatusCode"]
        finally:
            self.s3.meta.events.unregister("before-sign.s3.PutObject", add)

    def test_a_clients_conditions_are_decided_by_what_the_upstream_holds(self):
        theirs = self.others_put("c/k", b"theirs")
        # Never read here: If-None-Match: * must not replace their object, nor a stale If-Match.
        self.assertEqual(self.put_with("c/k", b"ours", **{"If-None-Match": "*"}), 412)
        self.assertEqual(self.put_with("c/k", b"ours", **{"If-Match": '"0123456789abcdef0123456789abcdef"'}), 412)
        self.assertEqual(self.upstream_body("c/k"), b"theirs")
        # Their current ETag: taken, though this server held no version of the key.
        self.assertEqual(self.put_with("c/k", b"ours", **{"If-Match": theirs}), 200)
        self.assertEqual(self.upstream_body("c/k"), b"ours")
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="c/k")["Body"].read(), b"ours")
        self.assertEqual(self.put_with("c/new", b"first", **{"If-None-Match": "*"}), 200)
        self.assertEqual(self.upstream_body("c/new"), b"first")

    def test_tier_ls_lists_without_recording_what_is_only_upstream(self):
        self.others_put("ls/only-upstream", b"1")
        self.others_put("ls/read", b"22")
        self.s3.get_object(Bucket="ckpt", Key="ls/read")["Body"].read()
        rc, out, err = run_hots3("tier", "ls", "--endpoint", self.endpoint, "--bucket", "ckpt", "--prefix", "ls/")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([line.split() for line in out.splitlines()],
                         [["absent", "-", "1", "ls/only-upstream"], ["clean", "-", "2", "ls/read"],
                          ["ckpt/ls/:", "2", "objects,", "1", "absent,", "1", "clean;", "0", "pinned"]])
        self.assertEqual(self.key_rows("ls/only-upstream"), 0)

    def test_keys_of_any_bytes_are_listed_and_found(self):
        keys = ["odd/a b+c%25d", "odd/ctl\x01x", "odd/\u00e9t\u00e9/\U0001f600", "odd/lt<&>"]
        for n, key in enumerate(keys):
            self.others_put(key, b"%d" % n)
        listed = [o["Key"] for o in self.s3.list_objects_v2(Bucket="ckpt", Prefix="odd/")["Contents"]]
        self.assertEqual(listed, sorted(keys, key=lambda k: k.encode()))
        for n, key in enumerate(keys):
            self.assertEqual(self.s3.get_object(Bucket="ckpt", Key=key)["Body"].read(), b"%d" % n, key)

    def test_a_listing_is_the_upstreams_page_by_page(self):
        expected = []
        for d in range(6):
            for n in range(40):
                key = "list/d%d/k%03d" % (d, n)
                self.others_put(key, b"x" * n)
                expected.append(key)
        for n in range(30):
            key = "list/top%03d" % n
            self.others_put(key, b"t")
            expected.append(key)
        # Some are known here already (a stub, a local copy), and one is written through hots3.
        self.s3.head_object(Bucket="ckpt", Key="list/d2/k005")
        self.s3.get_object(Bucket="ckpt", Key="list/d3/k007")["Body"].read()
        self.s3.put_object(Bucket="ckpt", Key="list/d4/zz-ours", Body=b"ours")
        expected.append("list/d4/zz-ours")
        self.s3.delete_object(Bucket="ckpt", Key="list/d5/k000")
        expected.remove("list/d5/k000")
        expected.sort()

        keys = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
                Bucket="ckpt", Prefix="list/", PaginationConfig={"PageSize": 37}):
            self.assertLessEqual(page["KeyCount"], 37)
            keys += [o["Key"] for o in page.get("Contents", [])]
        self.assertEqual(keys, expected)
        sizes = {o["Key"]: o["Size"] for o in self.s3.list_objects_v2(Bucket="ckpt", Prefix="list/d1/")["Contents"]}
        self.assertEqual(sizes["list/d1/k039"], 39)

        # With a delimiter, V1 and V2: the directories once each, then the top-level keys.
        for v2 in (True, False):
            prefixes, top = [], []
            paginator = self.s3.get_paginator("list_objects_v2" if v2 else "list_objects")
            for page in paginator.paginate(Bucket="ckpt", Prefix="list/", Delimiter="/",
                                           PaginationConfig={"PageSize": 4}):
                prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
                top += [o["Key"] for o in page.get("Contents", [])]
            self.assertEqual(prefixes, ["list/d%d/" % d for d in range(6)], v2)
            self.assertEqual(top, ["list/top%03d" % n for n in range(30)], v2)

        # StartAfter, and a page that ends inside a directory.
        after = self.s3.list_objects_v2(Bucket="ckpt", Prefix="list/", StartAfter="list/d4/k038", MaxKeys=3)
        self.assertEqual([o["Key"] for o in after["Contents"]], ["list/d4/k039", "list/d4/zz-ours", "list/d5/k001"])
        self.assertTrue(after["IsTruncated"])

    def test_a_listing_shows_the_writes_here_the_upstream_has_not_taken_yet(self):
        for key in ("pend/a", "pend/b", "pend/sub/c"):
            self.others_put(key, b"theirs")
        self.s3.put_object(Bucket="ckpt", Key="pend/src", Body=b"ours")

        def listed(client, bucket, prefix, **kwargs):
            got = client.list_objects_v2(Bucket=bucket, Prefix=prefix, **kwargs)
            return ([o["Key"][len(prefix) - len("pend/"):] for o in got.get("Contents", [])],
                    [p["Prefix"][len(prefix) - len("pend/"):] for p in got.get("CommonPrefixes", [])])

        here = lambda **kwargs: listed(self.s3, "ckpt", "pend/", **kwargs)
        upstream = lambda: listed(self.up, "team-ckpt", PREFIX + "pend/")
        # A copy and a delete commit here, then wait for the upstream to take them.
        self.proxy.hold_writes = True
        try:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                writes = [pool.submit(self.s3.copy_object, Bucket="ckpt", Key="pend/sub2/copy",
                                      CopySource={"Bucket": "ckpt", "Key": "pend/src"}),
                          pool.submit(self.s3.delete_object, Bucket="ckpt", Key="pend/a")]
                self.until(lambda: here()[0] == ["pend/b", "pend/src", "pend/sub/c", "pend/sub2/copy"])
                self.assertEqual(here(Delimiter="/"), (["pend/b", "pend/src"], ["pend/sub/", "pend/sub2/"]))
                self.assertEqual(upstream()[0], ["pend/a", "pend/b", "pend/src", "pend/sub/c"])  # none went up
                self.proxy.hold_writes = False
                for w in writes:
                    w.result()
        finally:
            self.proxy.hold_writes = False
        self.assertEqual(upstream()[0], ["pend/b", "pend/src", "pend/sub/c", "pend/sub2/copy"])
        self.assertEqual(here()[0], upstream()[0])

    def test_aws_cli_syncs_a_prefix_others_wrote_and_the_second_sync_is_local(self):
        files = {"sync/big.bin": data(20 * MiB + 3, 21), "sync/a/one": data(1000, 22),
                 "sync/a/two": data(70 * 1024, 23), "sync/b/three": b""}
        for key, body in files.items():
            self.others_put(key, body)
        tmp = tempfile.mkdtemp(prefix="hots3-cache-cli-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, tmp, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"AWS_ACCESS_KEY_ID": s3_support.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3_support.SECRET_KEY,
                    "AWS_DEFAULT_REGION": s3_support.REGION, "AWS_CONFIG_FILE": os.path.join(tmp, "none"),
                    "AWS_SHARED_CREDENTIALS_FILE": os.path.join(tmp, "none"), "AWS_PAGER": ""})
        clis = [[sys.executable, "-m", "awscli"]] + ([["/usr/bin/aws"]] if os.path.exists("/usr/bin/aws") else [])
        for n, cli in enumerate(clis + clis):
            into = os.path.join(tmp, "copy%d" % n)
            before = sum(self.upstream_bytes(k) for k in files)
            r = subprocess.run(cli + ["--endpoint-url", self.endpoint, "s3", "sync", "s3://ckpt/sync/", into],
                               capture_output=True, text=True, env=env, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for key, body in files.items():
                with open(os.path.join(into, key[len("sync/"):]), "rb") as f:
                    self.assertEqual(sha(f.read()), sha(body), (cli, key))
            if n >= len(clis):
                # Each object was kept by the first syncs (the big one by the restore its first
                # range asked for): nothing more comes from the upstream.
                self.assertEqual(sum(self.upstream_bytes(k) for k in files), before, cli)
            else:
                for k in files:
                    if files[k]:
                        self.until_here(k)

    def test_an_upstream_that_cannot_answer_gets_503_for_what_is_not_here(self):
        self.others_put("down/k", b"there")
        self.s3.put_object(Bucket="ckpt", Key="down/here", Body=b"here")
        self.proxy.refuse_heads = 100
        try:
            with self.assertRaises(ClientError) as caught:
                self.s3.head_object(Bucket="ckpt", Key="down/k")
            self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
            # What is here is served.
            self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="down/here")["Body"].read(), b"here")
        finally:
            self.proxy.refuse_heads = 0
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="down/k")["Body"].read(), b"there")


class OverwriteMidFetchTest(CacheBucket):
    """Others overwrite a key while hots3 fetches it in chunks, two at a time, over a slow link."""

    upstream_keys = "read_streams = 2"

    def test_an_overwrite_amid_a_fetch_cuts_it_short_and_the_next_get_is_the_new_version_whole(self):
        old, new = data(6 * 8 * MiB, 41), data(2 * 8 * MiB + 5, 42)
        old_etag = self.others_put("mid/k", old)
        path = "/team-ckpt/" + PREFIX + "mid/k"
        received = b""
        # A chunk takes half a second: the third is asked for after the overwrite.
        self.proxy.stream_bandwidth = 16e6
        try:
            stream = self.s3.get_object(Bucket="ckpt", Key="mid/k")["Body"]
            received = stream.read(MiB)
            new_etag = self.others_put("mid/k", new)
            with self.assertRaises(Exception) as cut:  # the SDK's error for a body cut short
                while piece := stream.read(MiB):
                    received += piece
            self.assertIn(type(cut.exception).__name__, ("IncompleteReadError", "ResponseStreamingError"))
        finally:
            self.proxy.stream_bandwidth = None
        # What came was the old version's, never a mix: at least the two chunks asked for first.
        self.assertGreaterEqual(len(received), 8 * MiB)
        self.assertLess(len(received), len(old))
        self.assertEqual(sha(received), sha(old[:len(received)]))
        pinned = [condition for p, condition in list(self.proxy.object_get_conditions) if p == path]
        self.assertGreaterEqual(len(pinned), 3)
        self.assertEqual(set(pinned), {old_etag})

        # The next GET finds what the upstream holds now, without waiting for the TTL.
        got = self.s3.get_object(Bucket="ckpt", Key="mid/k")
        self.assertEqual(sha(got["Body"].read()), sha(new))
        self.assertEqual(got["ETag"], new_etag)
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "miss")
        later = [condition for p, condition in list(self.proxy.object_get_conditions) if p == path][len(pinned):]
        self.assertEqual(set(later), {new_etag})
        self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="mid/k")["ContentLength"], len(new))


class RevalidationTest(CacheBucket):
    """Cache mode with a short TTL: a version here is asked about again once older than it."""

    binding = 'revalidate = "ttl:2s"\n[[tier.bucket.revalidate_prefix]]\nprefix = "now/"\nrevalidate = "always"'
    ttl_s = 2

    def get(self, key, **headers):
        """GET `key` with more request headers: (body, x-hots3-cache)."""
        with self.more_headers("GetObject", headers):
            got = self.s3.get_object(Bucket="ckpt", Key=key)
        return got["Body"].read(), got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache")

    def test_an_overwrite_upstream_is_served_after_the_ttl_whole_and_a_delete_after_it_too(self):
        v1, v2 = data(3 * MiB + 1, 31), data(5 * MiB + 2, 32)
        self.others_put("r/k", v1)
        self.assertEqual(self.get("r/k"), (v1, "miss"))
        self.others_put("r/k", v2)
        body, state = self.get("r/k")
        self.assertEqual((sha(body), state), (sha(v1), "hit"))  # within the TTL
        time.sleep(self.ttl_s + 1)
        body, state = self.get("r/k")
        self.assertEqual((sha(body), state), (sha(v2), "miss"))  # the new version, read through whole
        self.assertEqual(self.s3.head_object(Bucket="ckpt", Key="r/k")["ContentLength"], len(v2))
        body, state = self.get("r/k")
        self.assertEqual((sha(body), state), (sha(v2), "hit"))

        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "r/k")
        self.assertEqual(sha(self.get("r/k")[0]), sha(v2))
        time.sleep(self.ttl_s + 1)
        with self.assertRaises(ClientError) as caught:
            self.s3.get_object(Bucket="ckpt", Key="r/k")
        self.assertEqual(caught.exception.response["Error"]["Code"], "NoSuchKey")
        self.assertEqual(self.key_rows("r/k"), 0)

    def test_a_prefix_has_its_own_rule_and_no_cache_reads_the_new_version(self):
        for key in ("now/k", "soon/k", "asked/k"):
            self.others_put(key, b"one")
            self.assertEqual(self.get(key), (b"one", "miss"))
            self.others_put(key, b"two")
        self.assertEqual(self.get("now/k"), (b"two", "miss"))  # every read asks, under now/
        self.assertEqual(self.get("now/k"), (b"two", "revalidated"))
        self.assertEqual(self.get("soon/k"), (b"one", "hit"))  # the bucket's TTL
        self.assertEqual(self.get("asked/k", **{"Cache-Control": "no-cache"}), (b"two", "miss"))

    def test_a_request_can_ask_for_revalidation_inside_the_ttl(self):
        self.others_put("f/k", b"one")
        self.assertEqual(self.get("f/k"), (b"one", "miss"))
        self.assertEqual(self.get("f/k", **{"Cache-Control": "no-cache"}), (b"one", "revalidated"))
        self.others_put("f/k", b"two")
        self.assertEqual(self.get("f/k"), (b"one", "hit"))
        self.assertEqual(self.get("f/k", **{"x-hots3-revalidate": "1"}), (b"two", "miss"))

    def test_tier_revalidate_asks_again_about_a_prefix_inside_the_ttl(self):
        for key in ("rv/a", "rv/b", "rv/c", "rv/d"):
            self.others_put(key, b"old " + key.encode())
            self.assertEqual(self.get(key)[0], b"old " + key.encode())
        self.others_put("rv/a", b"new a")
        self.others_put("rv/b", b"new b")
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "rv/c")
        rc, out, err = run_hots3("tier", "revalidate", "--endpoint", self.endpoint, "--bucket", "ckpt",
                                  "--prefix", "rv/")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out.splitlines(), ["replaced rv/a", "replaced rv/b", "gone     rv/c",
                                            "ckpt/rv/: 4 objects, 1 current, 1 gone, 2 replaced"])
        self.assertEqual(self.get("rv/a"), (b"new a", "miss"))
        self.assertEqual(self.get("rv/b"), (b"new b", "miss"))
        self.assertEqual(self.get("rv/d"), (b"old rv/d", "hit"))
        with self.assertRaises(ClientError):
            self.s3.head_object(Bucket="ckpt", Key="rv/c")

    def test_an_unreachable_upstream_serves_the_version_here_as_stale(self):
        self.others_put("s/k", b"kept")
        self.assertEqual(self.get("s/k"), (b"kept", "miss"))
        time.sleep(self.ttl_s + 1)
        self.proxy.refuse_heads = 1000
        try:
            self.assertEqual(self.get("s/k"), (b"kept", "stale"))
        finally:
            self.proxy.refuse_heads = 0
        self.assertEqual(self.get("s/k"), (b"kept", "revalidated"))
        self.assertEqual(self.get("s/k"), (b"kept", "hit"))


class CacheRestartTest(CacheBucket):
    """What was read through stays a hit across a kill -9 and a clean stop, within the bucket's
    revalidation period (ttl:10m, the default in cache mode): the restart asks the upstream
    nothing."""

    # (Through the module: a test class named here would run its tests here too.)
    restart = test_tier_readthrough.RestartTest.restart
    relaunch = test_tier_readthrough.RestartTest.relaunch
    read_back_across_restarts = test_tier_readthrough.RestartTest.read_back_across_restarts

    def test_what_was_read_through_is_a_hit_after_a_kill_and_after_a_stop(self):
        bodies = {"rs/%d" % n: data(3 * MiB + n * 1000, 60 + n) for n in range(3)}
        for key, body in bodies.items():
            self.others_put(key, body)
        self.read_back_across_restarts(bodies, "/rs/")


class KeptAnswersTest(CacheBucket):
    """A bucket that keeps what it learnt: a key the upstream deletes is still served here, and
    one it lacks is answered 404 for negative_ttl without asking again."""

    binding = 'revalidate = "always"\non_upstream_delete = "keep"\nnegative_ttl = "3s"'

    def test_a_key_deleted_upstream_is_still_served_here(self):
        body = data(100 * 1024, 51)
        self.others_put("kept/k", body)
        self.assertEqual(sha(self.s3.get_object(Bucket="ckpt", Key="kept/k")["Body"].read()), sha(body))
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "kept/k")
        got = self.s3.get_object(Bucket="ckpt", Key="kept/k")
        self.assertEqual(sha(got["Body"].read()), sha(body))
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-cache"), "revalidated")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"].get("x-hots3-revalidation"), "kept")
        self.assertEqual(self.key_rows("kept/k"), 1)
        heads = [line for line in list(self.proxy.lines) if line.startswith("HEAD /team-ckpt/" + PREFIX + "kept/k")]
        self.assertGreaterEqual(len(heads), 2)  # the look-up, then the revalidation that found it gone

    def test_a_key_evicted_here_and_deleted_upstream_is_said_to_be_lost(self):
        # Keeping what the upstream deleted needs the bytes here: once evicted, nobody has them.
        self.others_put("gone/k", data(100 * 1024, 52))
        self.s3.get_object(Bucket="ckpt", Key="gone/k")["Body"].read()
        rc, out, err = run_hots3("tier", "evict", "--endpoint", "http://127.0.0.1:%d" % self.local.port,
                                 "--bucket", "ckpt", "--prefix", "gone/")
        self.assertEqual(rc, 0, out + err)
        self.up.delete_object(Bucket="team-ckpt", Key=PREFIX + "gone/k")
        once = client(self.local.port, botocore.config.Config(retries={"total_max_attempts": 1}))
        with self.assertRaises(ClientError) as lost:
            once.get_object(Bucket="ckpt", Key="gone/k")
        meta = lost.exception.response["ResponseMetadata"]
        self.assertEqual((meta["HTTPStatusCode"], meta["HTTPHeaders"].get("x-hots3-tier"),
                          meta["HTTPHeaders"].get("x-hots3-revalidation")), (500, "lost", "lost"))
        self.assertEqual(self.key_rows("gone/k"), 1)

    def test_a_key_the_upstream_lacks_is_not_asked_about_again_within_the_negative_ttl(self):
        heads = lambda key: len([line for line in list(self.proxy.lines)
                                 if line.startswith("HEAD /team-ckpt/" + PREFIX + key + " ")])

        def status(key, **headers):
            with self.more_headers("HeadObject", headers):
                try:
                    self.s3.head_object(Bucket="ckpt", Key=key)
                    return 200
                except ClientError as e:
                    return e.response["ResponseMetadata"]["HTTPStatusCode"]

        self.assertEqual(status("neg/k"), 404)
        self.assertEqual(heads("neg/k"), 1)
        noted = time.monotonic()
        self.others_put("neg/k", b"late")
        self.assertEqual(status("neg/k"), 404)
        with self.assertRaises(ClientError) as caught:
            self.s3.get_object(Bucket="ckpt", Key="neg/k")
        self.assertEqual(caught.exception.response["Error"]["Code"], "NoSuchKey")
        self.assertLess(time.monotonic() - noted, 3)
        self.assertEqual(heads("neg/k"), 1)
        # A request that asks for revalidation asks; the TTL past, every read does.
        self.assertEqual(status("neg/k", **{"Cache-Control": "no-cache"}), 200)
        self.assertEqual(status("neg/other"), 404)
        self.others_put("neg/other", b"later")
        time.sleep(3.2)
        self.assertEqual(self.s3.get_object(Bucket="ckpt", Key="neg/other")["Body"].read(), b"later")


class AlwaysFailTest(CacheBucket):
    """Every read asks the upstream first, and one it cannot answer fails."""

    binding = 'revalidate = "always"\non_upstream_error = "fail"'

    def gets_at_once(self, key, n, head_delay_s):
        """`n` GETs of `key` at once, each on a connection of its own, while each HEAD upstream
        takes `head_delay_s`: their bodies."""
        readers = client(self.local.port, botocore.config.Config(max_pool_connections=n))
        self.proxy.delay_heads = head_delay_s
        try:
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                return list(pool.map(lambda _: readers.get_object(Bucket="ckpt", Key=key)["Body"].read(),
                                     range(n)))
        finally:
            self.proxy.delay_heads = 0

    def test_each_new_version_reaches_every_reader_at_once(self):
        # The readers that share one answer each replace the version they read; those that find
        # it replaced by another must serve that one, never the version they started from.
        for i in range(12):
            body = data(100 * 1024 + i, 60 + i)
            self.others_put("n/k", body)
            got = self.gets_at_once("n/k", 12, 0.2)
            self.assertEqual([sha(b) for b in got], [sha(body)] * 12, f"round {i}")

    def test_reads_at_once_share_one_question_and_an_unanswered_one_fails(self):
        body = data(100 * 1024, 41)
        self.others_put("a/k", body)
        self.assertEqual(sha(self.s3.get_object(Bucket="ckpt", Key="a/k")["Body"].read()), sha(body))
        heads = lambda: len([line for line in list(self.proxy.lines) if line.startswith("HEAD /team-ckpt/" + PREFIX + "a/k")])
        before = heads()
        got = self.gets_at_once("a/k", 64, 1.5)  # all of them come while the first question is out
        self.assertEqual({sha(b) for b in got}, {sha(body)})
        self.assertEqual(heads() - before, 1)
        # A new version upstream: every reader of the shared answer gets it whole, none the old.
        new = data(200 * 1024, 42)
        self.others_put("a/k", new)
        got = self.gets_at_once("a/k", 8, 0.3)
        self.assertEqual([sha(b) for b in got], [sha(new)] * 8)
        self.proxy.refuse_heads = 1000
        try:
            with self.assertRaises(ClientError) as caught:
                self.s3.get_object(Bucket="ckpt", Key="a/k")
            self.assertEqual(caught.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)
        finally:
            self.proxy.refuse_heads = 0


if __name__ == "__main__":
    unittest.main()
