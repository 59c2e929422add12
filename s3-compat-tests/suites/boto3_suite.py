"""boto3, unmodified, with whatever version this interpreter has: the runner starts it under the
image's python3 (boto3 1.43: CRC32 checksums in aws-chunked trailers on every upload,
x-amz-checksum-mode on GETs) and under Debian's /usr/bin/python3 (boto3 1.26: Content-MD5, no
checksums). A client is made the way a training script makes one: endpoint_url and keys, no
Config. The transfer manager (upload_file, download_file, upload_fileobj) keeps its defaults:
8 MiB multipart threshold and parts, 10 threads; one check runs it with 64 threads, as scripts
that want speed do."""

import concurrent.futures
import hashlib
import http.client
import io
import json
import os
import random
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal  # noqa: E402

import boto3  # noqa: E402
import boto3.s3.transfer  # noqa: E402
import botocore  # noqa: E402
import botocore.config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

suite = compat.Suite()
# Both boto3 suites share one server: each has its own buckets.
B = "boto3-" + ("new" if suite.client == "boto3" else "old")
SMALL_FILES = int(os.environ.get("S3COMPAT_SMALL_FILES", "20000"))


def client(access=compat.ACCESS_KEY, secret=compat.SECRET_KEY):
    return boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=access,
                        aws_secret_access_key=secret, region_name=compat.REGION)


s3 = client()


def code_of(e):
    return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]


def raises(code, status, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ClientError as e:
        expect_equal(code_of(e), (code, status), "error of %s" % fn.__name__)
        return e
    raise compat.CheckFailed("%s succeeded, expected %s" % (fn.__name__, code))


def supports(operation, member):
    return member in s3.meta.service_model.operation_model(operation).input_shape.members


# boto3 1.26 predates PutObject's IfNoneMatch: there, the header is added the way people did it,
# with one event handler on the client, asked for per call (per thread).
_create_only = threading.local()


def _add_if_none_match(request, **_):
    if getattr(_create_only, "on", False):
        request.headers["If-None-Match"] = "*"


s3.meta.events.register("before-sign.s3.PutObject", _add_if_none_match)


def put_if_absent(key, body, bucket=None):
    """put_object with If-None-Match: *."""
    bucket = bucket or B
    if supports("PutObject", "IfNoneMatch"):
        return s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    _create_only.on = True
    try:
        return s3.put_object(Bucket=bucket, Key=key, Body=body)
    finally:
        _create_only.on = False


def put_if_absent_with(c, bucket):
    """put_object with If-None-Match: * through client `c` (keyword arguments key, body)."""
    def put_if_absent_on(key, body):
        if supports("PutObject", "IfNoneMatch"):
            return c.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
        c.meta.events.register("before-sign.s3.PutObject", _add_if_none_match, unique_id="if-none-match")
        _create_only.on = True
        try:
            return c.put_object(Bucket=bucket, Key=key, Body=body)
        finally:
            _create_only.on = False
    put_if_absent_on.__name__ = "put_object"
    return put_if_absent_on


def body_of(key, bucket=None, **kwargs):
    return s3.get_object(Bucket=bucket or B, Key=key, **kwargs)["Body"].read()


def all_keys(prefix, bucket=None, **kwargs):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket or B, Prefix=prefix, **kwargs):
        out += [o["Key"] for o in page.get("Contents", [])]
    return out


def delete_prefix(prefix, bucket=None):
    keys = all_keys(prefix, bucket)
    for i in range(0, len(keys), 1000):
        r = s3.delete_objects(Bucket=bucket or B, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]],
                                                          "Quiet": True})
        expect_equal(r.get("Errors", []), [], "DeleteObjects errors")
    return len(keys)


suite.version("boto3 %s, botocore %s (python %s)" % (boto3.__version__, botocore.__version__,
                                                     sys.version.split()[0]))


@suite.check("basic", "create_bucket, head_bucket, list_buckets, get_bucket_location")
def _():
    s3.create_bucket(Bucket=B)
    s3.head_bucket(Bucket=B)
    expect(B in [b["Name"] for b in s3.list_buckets()["Buckets"]], "bucket not listed")
    expect(s3.get_bucket_location(Bucket=B)["LocationConstraint"] in (None, "us-east-1"), "location")


@suite.check("basic", "put_object, get_object, head_object, metadata, ranges, zero bytes")
def _():
    data = compat.random_bytes(1 * MiB + 3, 1)
    put = s3.put_object(Bucket=B, Key="obj/one.bin", Body=data, ContentType="application/x-test",
                        Metadata={"owner": "boto3", "step": "42"}, CacheControl="no-cache")
    expect_equal(put["ETag"], '"%s"' % compat.md5(data), "ETag")
    head = s3.head_object(Bucket=B, Key="obj/one.bin")
    expect_equal((head["ContentLength"], head["ContentType"], head["Metadata"], head.get("CacheControl")),
                 (len(data), "application/x-test", {"owner": "boto3", "step": "42"}, "no-cache"), "head")
    got = s3.get_object(Bucket=B, Key="obj/one.bin")
    expect_equal(got["Body"].read(), data, "body")
    r = s3.get_object(Bucket=B, Key="obj/one.bin", Range="bytes=1000-1999")
    expect_equal((r["ContentRange"], r["Body"].read()), ("bytes 1000-1999/%d" % len(data), data[1000:2000]), "range")
    expect_equal(body_of("obj/one.bin", Range="bytes=-10"), data[-10:], "suffix range")
    expect_equal(body_of("obj/one.bin", Range="bytes=%d-" % (len(data) - 5)), data[-5:], "open range")
    s3.put_object(Bucket=B, Key="obj/empty", Body=b"")
    expect_equal(body_of("obj/empty"), b"", "empty object")
    # Conditional reads.
    etag = head["ETag"]
    try:
        s3.get_object(Bucket=B, Key="obj/one.bin", IfNoneMatch=etag)
        raise compat.CheckFailed("If-None-Match with the current ETag returned the object")
    except ClientError as e:
        expect_equal(e.response["ResponseMetadata"]["HTTPStatusCode"], 304, "If-None-Match status")
    expect_equal(body_of("obj/one.bin", IfMatch=etag), data, "If-Match with the current ETag")


@suite.check("basic", "upload_file, download_file, copy_object, delete_object, list V1 and V2")
def _():
    src = suite.path("up", "small.bin")
    compat.write_file(src, compat.random_bytes(100 * KiB, 2))
    s3.upload_file(src, B, "files/a/small.bin")
    s3.upload_file(src, B, "files/b/small.bin")
    dst = suite.path("down", "small.bin")
    s3.download_file(B, "files/a/small.bin", dst)
    expect_equal(compat.read_file(dst), compat.read_file(src), "downloaded file")
    s3.copy_object(Bucket=B, Key="files/c/copied.bin", CopySource={"Bucket": B, "Key": "files/a/small.bin"})
    expect_equal(body_of("files/c/copied.bin"), compat.read_file(src), "copy")
    v2 = s3.list_objects_v2(Bucket=B, Prefix="files/", Delimiter="/")
    expect_equal([p["Prefix"] for p in v2["CommonPrefixes"]], ["files/a/", "files/b/", "files/c/"], "V2 prefixes")
    v1 = s3.list_objects(Bucket=B, Prefix="files/", Delimiter="/")
    expect_equal([p["Prefix"] for p in v1["CommonPrefixes"]], ["files/a/", "files/b/", "files/c/"], "V1 prefixes")
    s3.delete_object(Bucket=B, Key="files/c/copied.bin")
    expect_equal(all_keys("files/"), ["files/a/small.bin", "files/b/small.bin"], "after delete_object")


@suite.check("multipart", "upload_file of 40 MiB (parallel parts), download_file (parallel ranges)")
def _():
    data = compat.random_bytes(40 * MiB + 5, 3)
    src = suite.path("up", "big.bin")
    compat.write_file(src, data)
    s3.upload_file(src, B, "big/big.bin")
    head = s3.head_object(Bucket=B, Key="big/big.bin")
    expect(head["ETag"].endswith('-6"'), "ETag of six parts (8 MiB each, the last 5 bytes): %s" % head["ETag"])
    expect_equal(head["ContentLength"], len(data), "size")
    dst = suite.path("down", "big.bin")
    s3.download_file(B, "big/big.bin", dst)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "downloaded")
    part2 = s3.get_object(Bucket=B, Key="big/big.bin", PartNumber=2)
    expect_equal(part2["Body"].read(), data[8 * MiB:16 * MiB], "GET partNumber=2")


@suite.check("multipart", "transfer manager with 64 threads: upload_file, download_file, a non-seekable "
                          "upload_fileobj")
def _():
    # What a data-loading script does to go faster: many threads, the client left at its default
    # pool of 10 connections, so urllib3 opens and discards connections beyond it all the time.
    config = boto3.s3.transfer.TransferConfig(max_concurrency=64)
    data = compat.random_bytes(200 * MiB + 7, 5)
    src = suite.path("up64", "big.bin")
    compat.write_file(src, data)
    s3.upload_file(src, B, "big/64-threads.bin", Config=config)
    head = s3.head_object(Bucket=B, Key="big/64-threads.bin")
    expect(head["ETag"].endswith('-26"'), "ETag of 26 parts of 8 MiB: %s" % head["ETag"])
    dst = suite.path("down64", "big.bin")
    s3.download_file(B, "big/64-threads.bin", dst, Config=config)
    expect_equal(compat.sha256(compat.read_file(dst)), compat.sha256(data), "downloaded")
    os.remove(src)
    os.remove(dst)

    class Pipe(io.RawIOBase):
        """A stream that cannot seek or tell its length, like a socket or a compressor."""
        def __init__(self, payload):
            self.rest = memoryview(payload)

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), len(self.rest), 3 * MiB + 1)
            b[:n] = self.rest[:n]
            self.rest = self.rest[n:]
            return n
    s3.upload_fileobj(Pipe(data[:50 * MiB]), B, "big/64-threads-stream.bin", Config=config)
    buf = io.BytesIO()
    s3.download_fileobj(B, "big/64-threads-stream.bin", buf, Config=config)
    expect_equal(compat.sha256(buf.getvalue()), compat.sha256(data[:50 * MiB]), "streamed upload")
    s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "big/64-threads.bin"},
                                                    {"Key": "big/64-threads-stream.bin"}]})


@suite.check("multipart", "create, upload_part in parallel, list_parts, list uploads, complete, abort")
def _():
    parts = [compat.random_bytes(5 * MiB, 10 + i) for i in range(3)] + [b"tail"]
    up = s3.create_multipart_upload(Bucket=B, Key="mp/manual.bin", ContentType="application/x-ckpt")
    uid = up["UploadId"]

    def send(n):
        return n, s3.upload_part(Bucket=B, Key="mp/manual.bin", UploadId=uid, PartNumber=n, Body=parts[n - 1])["ETag"]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        etags = dict(ex.map(send, range(1, 5)))
    listed = s3.list_parts(Bucket=B, Key="mp/manual.bin", UploadId=uid)["Parts"]
    expect_equal([(p["PartNumber"], p["Size"]) for p in listed], [(1, 5 * MiB), (2, 5 * MiB), (3, 5 * MiB), (4, 4)], "parts")
    other = s3.create_multipart_upload(Bucket=B, Key="mp/aborted.bin")["UploadId"]
    uploads = s3.list_multipart_uploads(Bucket=B, Prefix="mp/")["Uploads"]
    expect_equal(sorted(u["Key"] for u in uploads), ["mp/aborted.bin", "mp/manual.bin"], "uploads")
    s3.abort_multipart_upload(Bucket=B, Key="mp/aborted.bin", UploadId=other)
    s3.complete_multipart_upload(Bucket=B, Key="mp/manual.bin", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]})
    expect_equal(body_of("mp/manual.bin"), b"".join(parts), "assembled object")
    expect_equal(s3.head_object(Bucket=B, Key="mp/manual.bin")["ContentType"], "application/x-ckpt", "content type")
    expect_equal(s3.list_multipart_uploads(Bucket=B, Prefix="mp/").get("Uploads", []), [], "uploads left")
    raises("NoSuchUpload", 404, s3.upload_part, Bucket=B, Key="mp/aborted.bin", UploadId=other, PartNumber=1, Body=b"x")


@suite.check("multipart", "upload_part_copy: a large object from ranges of others")
def _():
    big = compat.random_bytes(40 * MiB + 5, 3)
    uid = s3.create_multipart_upload(Bucket=B, Key="mp/copied.bin")["UploadId"]
    ranges = [(0, 8 * MiB - 1), (20 * MiB, 30 * MiB - 1), (40 * MiB, 40 * MiB + 4)]
    etags = []
    for n, (a, z) in enumerate(ranges, 1):
        r = s3.upload_part_copy(Bucket=B, Key="mp/copied.bin", UploadId=uid, PartNumber=n,
                                CopySource={"Bucket": B, "Key": "big/big.bin"}, CopySourceRange="bytes=%d-%d" % (a, z))
        etags.append(r["CopyPartResult"]["ETag"])
    s3.complete_multipart_upload(Bucket=B, Key="mp/copied.bin", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
    want = b"".join(big[a:z + 1] for a, z in ranges)
    expect_equal(compat.sha256(body_of("mp/copied.bin")), compat.sha256(want), "copied parts")


# --- Dataset --------------------------------------------------------------------------------------

def dataset_root():
    return os.path.join(suite.data_dir, "dataset")


@suite.check("dataset", "upload 1,000 shards (16 threads), list each directory with a delimiter")
def _():
    root = dataset_root()
    layout = compat.dataset(root)

    def upload(item):
        rel, _ = item
        s3.upload_file(os.path.join(root, rel), B, "dataset/" + rel)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(upload, layout))
    s3.upload_file(os.path.join(root, "manifest.json"), B, "dataset/manifest.json")
    top = s3.list_objects_v2(Bucket=B, Prefix="dataset/", Delimiter="/")
    expect_equal(([p["Prefix"] for p in top["CommonPrefixes"]], [o["Key"] for o in top["Contents"]]),
                 (["dataset/train/", "dataset/val/"], ["dataset/manifest.json"]), "top level")
    train = s3.list_objects_v2(Bucket=B, Prefix="dataset/train/", Delimiter="/")
    expect_equal([p["Prefix"] for p in train["CommonPrefixes"]], ["dataset/train/part-%d/" % i for i in range(8)], "train/")
    for d in compat.DATASET_DIRS:
        got = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=B, Prefix="dataset/%s/" % d, Delimiter="/"):
            expect_equal(page.get("CommonPrefixes", []), [], "prefixes under a leaf directory")
            got.update({o["Key"]: o["Size"] for o in page["Contents"]})
        want = {"dataset/" + rel: size for rel, size in layout if rel.rsplit("/", 1)[0] == d}
        expect_equal(got, want, "objects and sizes of " + d)


def _loader_worker(args):
    """A DataLoader worker process: its own client, random samples by ranged GETs."""
    seed, n, layout, root = args
    c = client()
    rng = random.Random(seed)
    bad, done = [], 0
    for _ in range(n):
        rel, _ = rng.choice(layout)
        name, offset, size = rng.choice(compat.shard_members(os.path.join(root, rel)))
        got = c.get_object(Bucket=B, Key="dataset/" + rel, Range="bytes=%d-%d" % (offset, offset + size - 1))["Body"].read()
        with open(os.path.join(root, rel), "rb") as f:
            f.seek(offset)
            if f.read(size) != got:
                bad.append("%s:%s" % (rel, name))
        done += 1
    return done, bad


@suite.check("dataset", "random samples by ranged GETs from 4 processes at once, verified")
def _():
    root = dataset_root()
    layout = compat.dataset(root)
    with concurrent.futures.ProcessPoolExecutor(4) as ex:
        results = list(ex.map(_loader_worker, [(s, 150, layout, root) for s in range(4)]))
    expect_equal(sum(d for d, _ in results), 600, "samples read")
    expect_equal([b for _, bs in results for b in bs], [], "samples that differ")


@suite.check("dataset", "a whole shard streamed and parsed as tar; each sample matches its index")
def _():
    rel = "train/part-5/shard-000042.tar"
    body = s3.get_object(Bucket=B, Key="dataset/" + rel)["Body"]
    with tarfile.open(fileobj=body, mode="r|") as tar:  # streaming, as webdataset reads
        members = {}
        for m in tar:
            members[m.name] = tar.extractfile(m).read()
    jpgs = [n for n in members if n.endswith(".jpg")]
    expect(len(jpgs) > 0, "no samples")
    for n in jpgs:
        meta = json.loads(members[n[:-4] + ".json"])
        expect_equal(meta["sha256"], compat.sha256(members[n]), "sample " + n)


# --- Many small files -----------------------------------------------------------------------------

@suite.check("small-files", "put %d objects of 1-16 KiB in nested prefixes (16 threads)" % SMALL_FILES)
def _():
    layout = compat.small_files_layout(SMALL_FILES)

    def put(item):
        key, seed, size = item
        s3.put_object(Bucket=B, Key="small/" + key, Body=compat.random_bytes(size, seed))
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(put, layout))


@suite.check("small-files", "list all without a delimiter: pages of 1000, sizes, order")
def _():
    layout = compat.small_files_layout(SMALL_FILES)
    pages, got = 0, []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=B, Prefix="small/"):
        pages += 1
        expect(page["KeyCount"] <= 1000, "a page of %d keys" % page["KeyCount"])
        got += [(o["Key"], o["Size"]) for o in page["Contents"]]
    want = sorted(("small/" + k, size) for k, _, size in layout)
    expect_equal(len(got), len(want), "objects listed")
    expect(got == want, "listing differs from what was written (order, keys or sizes)")
    expect_equal(pages, (len(want) + 999) // 1000, "pages")
    v1 = []
    for page in s3.get_paginator("list_objects").paginate(Bucket=B, Prefix="small/"):
        v1 += [o["Key"] for o in page["Contents"]]
    expect(v1 == [k for k, _ in want], "V1 listing (marker pagination) differs")


@suite.check("small-files", "list with a delimiter at every level; small pages with start-after")
def _():
    layout = compat.small_files_layout(SMALL_FILES)
    tops = sorted({k.split("/")[0] + "/" for k, _, _ in layout})
    r = s3.list_objects_v2(Bucket=B, Prefix="small/", Delimiter="/")
    expect_equal([p["Prefix"] for p in r["CommonPrefixes"]], ["small/" + t for t in tops], "first level")
    seconds = sorted({"/".join(k.split("/")[:2]) + "/" for k, _, _ in layout if k.startswith("a1/")})
    r = s3.list_objects_v2(Bucket=B, Prefix="small/a1/", Delimiter="/")
    expect_equal([p["Prefix"] for p in r["CommonPrefixes"]], ["small/" + s for s in seconds], "second level")
    leaf = sorted("small/" + k for k, _, _ in layout if k.startswith("a1/b07/"))
    got, pages = [], 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=B, Prefix="small/a1/b07/", Delimiter="/",
                                                             PaginationConfig={"PageSize": 7}):
        pages += 1
        got += [o["Key"] for o in page.get("Contents", [])]
    expect_equal((got, pages), (leaf, (len(leaf) + 6) // 7), "pages of 7")
    r = s3.list_objects_v2(Bucket=B, Prefix="small/a1/b07/", StartAfter=leaf[49], MaxKeys=10)
    expect_equal([o["Key"] for o in r["Contents"]], leaf[50:60], "start-after")
    r = s3.list_objects(Bucket=B, Prefix="small/a1/b07/", Marker=leaf[89], MaxKeys=5)
    expect_equal(([o["Key"] for o in r["Contents"]], r["IsTruncated"]), (leaf[90:95], True), "V1 marker")


@suite.check("small-files", "awkward keys with encoding-type=url (V1 and V2, with delimiter)")
def _():
    keys = ["odd/" + n for n in compat.AWKWARD_NAMES] + ["odd/ctrl\x01char.txt"]
    for i, k in enumerate(keys):
        s3.put_object(Bucket=B, Key=k, Body=b"body %d" % i)
    want = sorted(keys, key=lambda k: k.encode())
    # boto3 asks for EncodingType=url itself and decodes the answer.
    expect_equal(all_keys("odd/"), want, "V2 listing")
    v1 = [o["Key"] for o in s3.list_objects(Bucket=B, Prefix="odd/")["Contents"]]
    expect_equal(v1, want, "V1 listing")
    r = s3.list_objects_v2(Bucket=B, Prefix="odd/", Delimiter="/")
    expect_equal([p["Prefix"] for p in r["CommonPrefixes"]], ["odd/double/", "odd/unicodé/"],
                 "prefixes (one ends at the first '/' of '//')")
    # The raw answer really is URL-encoded (botocore would hide a server that ignored it).
    raw = compat.raw_ok("GET", "/" + B, [("list-type", "2"), ("prefix", "odd/"), ("encoding-type", "url")]).body
    expect(b"<Key>odd/ctrl%01char.txt</Key>" in raw and b"<EncodingType>url</EncodingType>" in raw,
           "raw listing not URL-encoded: %r" % raw[:600])
    for i, k in enumerate(keys):
        expect_equal(body_of(k), b"body %d" % i, "body of %r" % k)
    # XML 1.0 cannot carry U+0001, so DeleteObjects cannot name this key (on AWS neither).
    s3.delete_object(Bucket=B, Key="odd/ctrl\x01char.txt")


@suite.check("small-files", "read 2,000 small objects back from 16 threads, then delete all with DeleteObjects")
def _():
    layout = compat.small_files_layout(SMALL_FILES)
    sample = random.Random(8).sample(layout, min(2000, len(layout)))

    def check(item):
        key, seed, size = item
        return body_of("small/" + key) == compat.random_bytes(size, seed)
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        ok = list(ex.map(check, sample))
    expect_equal(ok.count(False), 0, "objects that differ")
    expect_equal(delete_prefix("small/"), len(layout), "objects deleted")
    expect_equal(all_keys("small/"), [], "left after DeleteObjects")


# --- Checkpoint -----------------------------------------------------------------------------------

CKPT = 20 * MiB + 12345


@suite.check("checkpoint", "save 4 ranks in parallel (multipart), commit with If-None-Match: *")
def _():
    for step in (100, 200, 300):
        def save(rank):
            s3.upload_fileobj(io.BytesIO(compat.checkpoint_bytes(step * 10 + rank, CKPT)), B,
                              "ckpt/step-%d/rank-%d.pt" % (step, rank))
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            list(ex.map(save, range(4)))
        put_if_absent("ckpt/step-%d/COMMIT" % step, b"step %d" % step)
    for rank in range(4):
        head = s3.head_object(Bucket=B, Key="ckpt/step-300/rank-%d.pt" % rank)
        expect(head["ETag"].endswith('-3"'), "rank %d not multipart: %s" % (rank, head["ETag"]))
    raises("PreconditionFailed", 412, put_if_absent, "ckpt/step-300/COMMIT", b"again")
    expect_equal(body_of("ckpt/step-300/COMMIT"), b"step 300", "the first commit stays")


@suite.check("checkpoint", "two writers race for one commit marker: exactly one wins")
def _():
    results = []
    barrier = threading.Barrier(2)

    def racer(n):
        barrier.wait()
        try:
            put_if_absent("ckpt/race/COMMIT", b"writer %d" % n)
            results.append("won")
        except ClientError as e:
            results.append(code_of(e))
    threads = [threading.Thread(target=racer, args=(n,)) for n in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    expect_equal(results.count("won"), 1, "winners (%r)" % results)
    loser = [r for r in results if r != "won"][0]
    expect(loser in (("PreconditionFailed", 412), ("ConditionalRequestConflict", 409)), "loser got %r" % (loser,))


@suite.check("checkpoint", "load the latest committed step (download_fileobj, parallel ranges)")
def _():
    steps = [p["Prefix"] for p in s3.list_objects_v2(Bucket=B, Prefix="ckpt/step-", Delimiter="/")["CommonPrefixes"]]
    committed = [s for s in steps if s3.list_objects_v2(Bucket=B, Prefix=s + "COMMIT")["KeyCount"] == 1]
    expect_equal(committed[-1], "ckpt/step-300/", "latest committed step")
    for rank in range(4):
        buf = io.BytesIO()
        s3.download_fileobj(B, "ckpt/step-300/rank-%d.pt" % rank, buf)
        expect_equal(compat.sha256(buf.getvalue()), compat.sha256(compat.checkpoint_bytes(3000 + rank, CKPT)),
                     "rank %d" % rank)


@suite.check("checkpoint", "rotate with DeleteObjects; rename by copy + delete (as fsspec does)")
def _():
    old = all_keys("ckpt/step-100/")
    r = s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": k} for k in old]})
    expect_equal(sorted(d["Key"] for d in r["Deleted"]), sorted(old), "deleted keys (verbose)")
    expect_equal(all_keys("ckpt/step-100/"), [], "left of step 100")
    # fsspec/s3fs mv: copy_object per key (multipart copy above 5 GiB), then delete.
    for key in all_keys("ckpt/step-300/"):
        to = key.replace("ckpt/step-300/", "ckpt/best/")
        s3.copy_object(Bucket=B, Key=to, CopySource={"Bucket": B, "Key": key})
        s3.delete_object(Bucket=B, Key=key)
    expect_equal(all_keys("ckpt/step-300/"), [], "left of step 300")
    expect_equal(compat.sha256(body_of("ckpt/best/rank-2.pt")), compat.sha256(compat.checkpoint_bytes(3002, CKPT)),
                 "renamed rank 2")
    steps = [p["Prefix"] for p in s3.list_objects_v2(Bucket=B, Prefix="ckpt/", Delimiter="/")["CommonPrefixes"]]
    expect_equal(steps, ["ckpt/best/", "ckpt/race/", "ckpt/step-200/"], "after rotate and rename")


# --- Errors ---------------------------------------------------------------------------------------

@suite.check("errors", "NoSuchKey, 404 on HEAD, NoSuchBucket, BucketNotEmpty")
def _():
    raises("NoSuchKey", 404, s3.get_object, Bucket=B, Key="no/such/key")
    raises("404", 404, s3.head_object, Bucket=B, Key="no/such/key")
    raises("NoSuchBucket", 404, s3.list_objects_v2, Bucket="boto3-no-such-bucket")
    raises("NoSuchBucket", 404, s3.put_object, Bucket="boto3-no-such-bucket", Key="k", Body=b"x")
    raises("BucketNotEmpty", 409, s3.delete_bucket, Bucket=B)


@suite.check("errors", "SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied")
def _():
    wrong = client(secret=compat.SECRET_KEY + "x")
    e = raises("SignatureDoesNotMatch", 403, wrong.get_object, Bucket=B, Key="obj/one.bin")
    expect("StringToSign" in e.response["Error"], "no StringToSign in the error: %r" % e.response["Error"])
    raises("SignatureDoesNotMatch", 403, wrong.put_object, Bucket=B, Key="obj/x", Body=b"x")
    raises("InvalidAccessKeyId", 403, client(access="AKIANOSUCHKEY0000000").list_buckets)
    s3.create_bucket(Bucket="shared-" + B)
    s3.put_object(Bucket="shared-" + B, Key="r.txt", Body=b"readable")
    reader = client(os.environ["S3COMPAT_READER_ACCESS_KEY"], os.environ["S3COMPAT_READER_SECRET_KEY"])
    expect_equal(reader.get_object(Bucket="shared-" + B, Key="r.txt")["Body"].read(), b"readable", "reader reads")
    raises("AccessDenied", 403, reader.put_object, Bucket="shared-" + B, Key="w.txt", Body=b"no")
    raises("AccessDenied", 403, reader.delete_object, Bucket="shared-" + B, Key="r.txt")
    raises("AccessDenied", 403, reader.list_objects_v2, Bucket=B)
    delete_prefix("", "shared-" + B)
    s3.delete_bucket(Bucket="shared-" + B)


@suite.check("errors", "412 on failed conditional writes and reads, 416 on a bad range")
def _():
    raises("PreconditionFailed", 412, put_if_absent, "obj/one.bin", b"x")
    raises("PreconditionFailed", 412, s3.get_object, Bucket=B, Key="obj/one.bin", IfMatch='"0123456789abcdef0123456789abcdef"')
    if supports("PutObject", "IfMatch"):
        raises("PreconditionFailed", 412, s3.put_object, Bucket=B, Key="obj/one.bin", Body=b"x",
               IfMatch='"0123456789abcdef0123456789abcdef"')
    e = raises("InvalidRange", 416, s3.get_object, Bucket=B, Key="obj/one.bin", Range="bytes=%d-" % (2 * MiB))
    expect_equal(e.response["ResponseMetadata"]["HTTPHeaders"].get("content-range"), "bytes */%d" % (MiB + 3),
                 "Content-Range of a 416")
    expect_equal(len(body_of("obj/one.bin")), MiB + 3, "the object is unchanged")


@suite.check("presign", "generate_presigned_url GET and PUT, fetched by urllib; expiry")
def _():
    url = s3.generate_presigned_url("put_object", Params={"Bucket": B, "Key": "presigned/up.bin"}, ExpiresIn=120)
    # Sent as `requests.put(url, data=...)` sends it: no Content-Type (a SigV2 URL signs it).
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("PUT", parts.path + "?" + parts.query, body=b"through a presigned PUT")
    r = conn.getresponse()
    expect_equal((r.status, r.read()[:300]), (200, b""), "presigned PUT")
    conn.close()
    url = s3.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "presigned/up.bin"}, ExpiresIn=120)
    with urllib.request.urlopen(url, timeout=30) as r:
        expect_equal(r.read(), b"through a presigned PUT", "presigned GET")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "presigned/up.bin"}, ExpiresIn=1)
    time.sleep(2.1)
    try:
        urllib.request.urlopen(url, timeout=30)
        raise compat.CheckFailed("an expired URL was served")
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        expect_equal(e.code, 403, "status of an expired URL")
        expect("<Code>AccessDenied</Code>" in body and "expired" in body.lower(), "body: " + body)


@suite.check("concurrency", "readers streaming during overwrites (single and multipart) see one version")
def _():
    versions = [compat.random_bytes(12 * MiB, 900 + v) for v in range(6)]
    hashes = {compat.sha256(v) for v in versions}
    s3.put_object(Bucket=B, Key="race/obj", Body=versions[0])
    stop = threading.Event()
    reads, bad = [0], []

    def reader():
        c = client()
        while not stop.is_set():
            h = hashlib.sha256()
            for chunk in c.get_object(Bucket=B, Key="race/obj")["Body"].iter_chunks(64 * KiB):
                h.update(chunk)
            reads[0] += 1
            if h.hexdigest() not in hashes:
                bad.append(h.hexdigest())
    threads = [threading.Thread(target=reader) for _ in range(3)]
    [t.start() for t in threads]
    try:
        for _ in range(2):
            for i, v in enumerate(versions):
                if i % 2:
                    s3.upload_fileobj(io.BytesIO(v), B, "race/obj")  # multipart (12 MiB > 8 MiB)
                else:
                    s3.put_object(Bucket=B, Key="race/obj", Body=v)
    finally:
        stop.set()
        [t.join() for t in threads]
    expect(reads[0] > 0, "no read overlapped the writes")
    expect_equal(bad, [], "reads that match no written version (of %d)" % reads[0])


@suite.check("concurrency", "64 threads read random ranges of one object through one client "
                            "(its default pool, then a pool of 64)")
def _():
    # A data loader's workers sharing one client: every sample is a ranged GET of a shard.
    data = compat.random_bytes(64 * MiB, 77)
    s3.put_object(Bucket=B, Key="ranged/shard.bin", Body=data)
    for c in (s3, boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=compat.ACCESS_KEY,
                               aws_secret_access_key=compat.SECRET_KEY, region_name=compat.REGION,
                               config=botocore.config.Config(max_pool_connections=64))):
        def reader(seed):
            rng = random.Random(seed)
            wrong = 0
            for _ in range(12):
                first = rng.randrange(len(data))
                size = rng.choice((1, 4 * KiB, 100 * KiB, 1 * MiB))
                got = c.get_object(Bucket=B, Key="ranged/shard.bin",
                                   Range="bytes=%d-%d" % (first, first + size - 1))["Body"].read()
                wrong += got != data[first:first + size]
            return wrong
        with concurrent.futures.ThreadPoolExecutor(64) as ex:
            wrong = sum(ex.map(reader, range(64)))
        expect_equal(wrong, 0, "ranges that differ (of 768)")
    s3.delete_object(Bucket=B, Key="ranged/shard.bin")


# --- Connection reuse -----------------------------------------------------------------------------

_bad_signature = threading.local()


def _spoil_signature(request, **_):
    """Makes the next request of this thread fail its signature check (403 before the body)."""
    if getattr(_bad_signature, "on", False):
        auth = request.headers["Authorization"]
        if isinstance(auth, bytes):  # botocore 1.29 keeps it as bytes
            auth = auth.decode()
        request.headers["Authorization"] = auth[:-1] + ("0" if auth[-1] != "0" else "1")


def soak(bucket, **create):
    """The connection-reuse soak in `bucket`, made with `create` (CreateBucket's arguments)."""
    c = boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=compat.ACCESS_KEY,
                     aws_secret_access_key=compat.SECRET_KEY, region_name=compat.REGION,
                     config=botocore.config.Config(max_pool_connections=2))
    c.meta.events.register("before-send.s3", _spoil_signature)
    unsessioned = []  # in a directory bucket: requests of the bucket sent without a session

    def note_session(request, **_):
        own = urllib.parse.urlsplit(request.url).path.split("/")[1] == bucket
        if own and "x-amz-s3session-token" not in request.headers and "x-amz-copy-source" not in request.headers \
                and not request.url.endswith("?session"):
            unsessioned.append("%s %s" % (request.method, request.url))
    if create:
        c.meta.events.register("before-send.s3", note_session)
    c.create_bucket(Bucket=bucket, **create)
    rng = random.Random(28)
    keys = ["soak/k%02d" % i for i in range(12)]
    model = {}  # key -> bytes, what the bucket holds under soak/
    etags = {}  # key -> ETag

    def fails(code, status, fn, **kwargs):
        try:
            fn(**kwargs)
        except ClientError as e:
            expect_equal(code_of(e), (code, status), "error of %s" % fn.__name__)
            return
        raise compat.CheckFailed("%s succeeded, expected %s" % (fn.__name__, code))

    def body():
        return compat.random_bytes(rng.choice((0, 0, 1, 100, 4 * KiB, 70 * KiB)), rng.random())

    def put(key):
        data = body()
        extra = {}
        algorithm = rng.choice((None, None, "CRC32", "SHA1", "SHA256"))
        if algorithm and supports("PutObject", "ChecksumAlgorithm"):
            extra["ChecksumAlgorithm"] = algorithm
        r = c.put_object(Bucket=bucket, Key=key, Body=data, **extra)
        expect_equal(r["ETag"], '"%s"' % compat.md5(data), "ETag of a PUT")
        model[key], etags[key] = data, r["ETag"]

    def get(key):
        if key not in model:
            return fails("NoSuchKey", 404, c.get_object, Bucket=bucket, Key=key)
        expect_equal(c.get_object(Bucket=bucket, Key=key)["Body"].read(), model[key], "GET " + key)

    def ranged(key):
        data = model.get(key)
        if not data:
            return put(key)
        first = rng.randrange(len(data))
        got = c.get_object(Bucket=bucket, Key=key, Range="bytes=%d-%d" % (first, first + 99))["Body"].read()
        expect_equal(got, data[first:first + 100], "ranged GET")

    def bad_range(key):
        if key not in model:
            return fails("404", 404, c.head_object, Bucket=bucket, Key=key)
        fails("InvalidRange", 416, c.get_object, Bucket=bucket, Key=key,
              Range="bytes=%d-" % (len(model[key]) + 5))

    def conditions(key):
        if key not in model:
            return put(key)
        fails("PreconditionFailed", 412, put_if_absent_with(c, bucket), key=key, body=b"never")
        fails("PreconditionFailed", 412, c.get_object, Bucket=bucket, Key=key, IfMatch='"%s"' % ("0" * 32))
        fails("304", 304, c.get_object, Bucket=bucket, Key=key, IfNoneMatch=etags[key])

    def refused(key):
        _bad_signature.on = True
        try:
            fails("SignatureDoesNotMatch", 403, c.put_object, Bucket=bucket, Key=key, Body=body() or b"x")
        finally:
            _bad_signature.on = False
        # (No BadDigest here: botocore's legacy retry mode retries it four times with back-off.)
        if key in model:
            fails("InvalidArgument", 400, c.get_object, Bucket=bucket, Key=key, PartNumber=0)
        fails("NoSuchBucket", 404, c.put_object, Bucket="boto3-soak-no-such-bucket", Key=key, Body=body())

    def delete(key):
        c.delete_object(Bucket=bucket, Key=key)
        model.pop(key, None)
        etags.pop(key, None)

    def copy(key):
        source = rng.choice(keys)
        if source not in model:
            return fails("NoSuchKey", 404, c.copy_object, Bucket=bucket, Key=key,
                         CopySource={"Bucket": bucket, "Key": source})
        if source == key:
            return fails("InvalidRequest", 400, c.copy_object, Bucket=bucket, Key=key,
                         CopySource={"Bucket": bucket, "Key": source})
        r = c.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": source})
        # A copy is a new object in one part: its ETag is the MD5 of its data, as on S3.
        expect_equal(r["CopyObjectResult"]["ETag"], '"%s"' % compat.md5(model[source]), "ETag of a copy")
        model[key], etags[key] = model[source], r["CopyObjectResult"]["ETag"]

    def multipart(key):
        upload = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        data = body()
        etag = c.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=data)["ETag"]
        if rng.random() < 0.5:
            c.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
            return fails("NoSuchUpload", 404, c.upload_part, Bucket=bucket, Key=key, UploadId=upload,
                         PartNumber=2, Body=body())
        done = c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                           MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        model[key], etags[key] = data, done["ETag"]

    def listing(_):
        got = sorted(o["Key"] for o in c.list_objects_v2(Bucket=bucket, Prefix="soak/").get("Contents", []))
        expect_equal(got, sorted(model), "the keys under soak/")

    compat.SoakTimer(c).run([put, put, put, get, get, ranged, bad_range, conditions, refused, delete,
                             copy, multipart, listing], keys, rng)
    for key in list(model):
        delete(key)
    c.delete_bucket(Bucket=bucket)
    expect_equal(unsessioned, [], "requests of the directory bucket signed without a session")


@suite.check("reuse", "%d random operations, errors included, on a pool of 2 connections: "
                      "each under %g s" % (compat.SOAK_OPERATIONS, compat.SOAK_BOUND_SECONDS))
def _():
    soak(B + "-reuse")


# botocore signs a directory bucket's requests with S3 Express sessions from 1.33 on; 1.26 (Debian's)
# knows no directory buckets, so only the newer client has this check.
if "CreateSession" in s3.meta.service_model.operation_names:
    @suite.check("reuse", "the same in a directory bucket, every request but copies signed with an "
                          "S3 Express session")
    def _():
        soak(B + "-reuse--use1-az4--x-s3", CreateBucketConfiguration={
            "Location": {"Type": "AvailabilityZone", "Name": "use1-az4"},
            "Bucket": {"DataRedundancy": "SingleAvailabilityZone", "Type": "Directory"}})


@suite.check("basic", "clean up: delete everything, delete_bucket")
def _():
    delete_prefix("")
    s3.delete_bucket(Bucket=B)
    raises("404", 404, s3.head_bucket, Bucket=B)


suite.main()
