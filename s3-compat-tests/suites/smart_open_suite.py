"""smart_open (Debian's python3-smart-open, on Debian's boto3 1.26): the file-like S3 streams that
training and preprocessing code opens as `smart_open.open("s3://bucket/key", mode,
transport_params={"client": client})`. Its defaults: a reader is one streaming GET `Range: bytes=N-`
reopened at every seek (a 416 on an empty object or past the end answers with the object's size);
a writer buffers 50 MiB parts of a multipart upload and, when nothing was written, aborts the
upload and PUTs an empty object; compression follows the key's extension (.gz, .bz2)."""

import concurrent.futures
import gzip
import os
import random
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal  # noqa: E402

import boto3  # noqa: E402
import botocore  # noqa: E402
import botocore.config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
import smart_open  # noqa: E402

suite = compat.Suite()
B = "smart-open"


def client(secret=compat.SECRET_KEY, **config):
    return boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=compat.ACCESS_KEY,
                        aws_secret_access_key=secret, region_name=compat.REGION,
                        config=botocore.config.Config(**config) if config else None)


s3 = client()


def so_open(key, mode, c=None, bucket=B, **params):
    return smart_open.open("s3://%s/%s" % (bucket, key), mode,
                           transport_params={"client": c or s3, **params})


def error_code(e):
    """The S3 error code inside whatever smart_open raised (it wraps some ClientErrors)."""
    while e is not None:
        if isinstance(e, ClientError):
            return e.response["Error"]["Code"]
        e = e.__cause__ or e.__context__
    return None


def raises_code(code, fn):
    try:
        fn()
    except Exception as e:  # smart_open raises ClientError, OSError or ValueError around it
        expect_equal(error_code(e), code, "error of %r" % e)
        return
    raise compat.CheckFailed("succeeded, expected %s" % code)


suite.version("smart_open %s, boto3 %s, botocore %s (python %s)" % (
    smart_open.__version__, boto3.__version__, botocore.__version__, sys.version.split()[0]))


@suite.check("basic", "text lines written and iterated; .gz and .bz2 compressed by extension")
def _():
    s3.create_bucket(Bucket=B)
    lines = ["sample %06d\tlabel %d\n" % (i, i % 1000) for i in range(50000)]
    for key in ("text/lines.txt", "text/lines.txt.gz", "text/lines.txt.bz2"):
        with so_open(key, "w") as f:
            for line in lines:
                f.write(line)
        with so_open(key, "r") as f:
            expect_equal(list(f), lines, "lines of " + key)
    raw = s3.get_object(Bucket=B, Key="text/lines.txt.gz")["Body"].read()
    expect_equal(gzip.decompress(raw).decode(), "".join(lines), "the stored .gz is plain gzip")


@suite.check("basic", "seek and read as a random-access file: every seek is a new ranged GET")
def _():
    data = compat.random_bytes(5 * MiB + 3, 1)
    s3.put_object(Bucket=B, Key="seek/obj.bin", Body=data)
    rng = random.Random(5)
    with so_open("seek/obj.bin", "rb") as f:
        for _ in range(50):
            first, size = rng.randrange(len(data)), rng.choice((1, 100, 64 * KiB, 1 * MiB))
            f.seek(first)
            expect_equal(f.read(size), data[first:first + size], "read at %d" % first)
        f.seek(-10, os.SEEK_END)
        expect_equal(f.read(), data[-10:], "the last 10 bytes")
        f.seek(len(data) + 100)  # past the end: smart_open reads the size from the 416
        expect_equal(f.read(), b"", "a read past the end")
    s3.put_object(Bucket=B, Key="seek/empty", Body=b"")
    with so_open("seek/empty", "rb") as f:  # Range: bytes=0- of nothing is a 416 too
        expect_equal(f.read(), b"", "an empty object")


@suite.check("multipart", "120 MiB written in 1 MiB writes: three 50 MiB-part upload; single-part writer")
def _():
    data = compat.random_bytes(120 * MiB + 9, 2)
    with so_open("big/stream.bin", "wb") as f:
        for i in range(0, len(data), 1 * MiB):
            f.write(data[i:i + 1 * MiB])
    head = s3.head_object(Bucket=B, Key="big/stream.bin")
    expect(head["ETag"].endswith('-3"'), "ETag of three parts: %s" % head["ETag"])
    with so_open("big/stream.bin", "rb") as f:
        expect_equal(compat.sha256(f.read()), compat.sha256(data), "read back")
    with so_open("big/single.bin", "wb", multipart_upload=False) as f:
        f.write(data[:8 * MiB])
    head = s3.head_object(Bucket=B, Key="big/single.bin")
    expect_equal(head["ETag"], '"%s"' % compat.md5(data[:8 * MiB]), "ETag of the single-part writer")
    s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "big/stream.bin"}, {"Key": "big/single.bin"}]})


@suite.check("multipart", "nothing written: an empty object; an exception: no object, no upload left")
def _():
    for params in ({}, {"multipart_upload": False}):
        with so_open("empty/%d" % len(params), "wb", **params):
            pass
        expect_equal(s3.get_object(Bucket=B, Key="empty/%d" % len(params))["Body"].read(), b"", "empty object")
    try:
        with so_open("failed/ckpt.pt", "wb", min_part_size=5 * MiB) as f:
            f.write(compat.random_bytes(12 * MiB, 3))  # two parts sent
            raise KeyboardInterrupt("the job is killed while saving")
    except KeyboardInterrupt:
        pass
    raises_code("NoSuchKey", lambda: s3.get_object(Bucket=B, Key="failed/ckpt.pt"))
    uploads = s3.list_multipart_uploads(Bucket=B, Prefix="failed/").get("Uploads", [])
    expect_equal(uploads, [], "uploads left after the writer's exception")


@suite.check("dataset", "WebDataset shards streamed through tarfile; samples read by seeking")
def _():
    root = os.path.join(os.environ.get("S3COMPAT_DATA", suite.dir("data")), "dataset")
    layout = compat.dataset(root)[::50]  # 20 shards
    for rel, _ in layout:
        with open(os.path.join(root, rel), "rb") as src, so_open("dataset/" + rel, "wb") as dst:
            while chunk := src.read(256 * KiB):
                dst.write(chunk)
    for rel, size in layout:
        with so_open("dataset/" + rel, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tar:
            names = [m.name for m in tar]
        with tarfile.open(os.path.join(root, rel)) as tar:
            expect_equal(names, tar.getnames(), "members of " + rel)
    rel = layout[3][0]
    local = compat.read_file(os.path.join(root, rel))
    with so_open("dataset/" + rel, "rb") as f:
        for name, offset, size in compat.shard_members(os.path.join(root, rel))[::7]:
            f.seek(offset)
            expect_equal(f.read(size), local[offset:offset + size], "sample " + name)


@suite.check("checkpoint", "ranks saved in parallel in 4 KiB writes, loaded, a killed save leaves the old one")
def _():
    size = 24 * MiB + 100

    def save(rank, step):
        data = compat.checkpoint_bytes(step * 10 + rank, size)
        with so_open("ckpt/rank-%d.pt" % rank, "wb", min_part_size=8 * MiB) as f:
            for i in range(0, len(data), 4 * KiB):  # a pickler's many small writes
                f.write(data[i:i + 4 * KiB])
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda r: save(r, 100), range(4)))
    try:
        with so_open("ckpt/rank-0.pt", "wb", min_part_size=8 * MiB) as f:
            f.write(compat.checkpoint_bytes(2000, 20 * MiB))
            raise RuntimeError("out of memory in the middle of a save")
    except RuntimeError:
        pass
    for rank in range(4):
        with so_open("ckpt/rank-%d.pt" % rank, "rb") as f:
            expect_equal(compat.sha256(f.read()), compat.sha256(compat.checkpoint_bytes(1000 + rank, size)),
                         "rank %d" % rank)


@suite.check("errors", "a missing key or bucket, a wrong secret, a read-only user: the S3 error codes")
def _():
    raises_code("NoSuchKey", lambda: so_open("no/such/key", "rb").read())
    raises_code("NoSuchBucket", lambda: so_open("k", "wb", bucket="smart-open-no-such-bucket").close())
    wrong = client(secret=compat.SECRET_KEY + "x")
    raises_code("SignatureDoesNotMatch", lambda: so_open("big/x", "wb", c=wrong).close())
    raises_code("SignatureDoesNotMatch", lambda: so_open("text/lines.txt", "rb", c=wrong).read())
    s3.create_bucket(Bucket="shared-smart-open")
    s3.put_object(Bucket="shared-smart-open", Key="r.txt", Body=b"readable")
    reader = boto3.client("s3", endpoint_url=compat.ENDPOINT, region_name=compat.REGION,
                          aws_access_key_id=os.environ["S3COMPAT_READER_ACCESS_KEY"],
                          aws_secret_access_key=os.environ["S3COMPAT_READER_SECRET_KEY"])
    with so_open("r.txt", "rb", c=reader, bucket="shared-smart-open") as f:
        expect_equal(f.read(), b"readable", "the reader reads")
    raises_code("AccessDenied", lambda: so_open("w.txt", "wb", c=reader, bucket="shared-smart-open").close())
    s3.delete_object(Bucket="shared-smart-open", Key="r.txt")
    s3.delete_bucket(Bucket="shared-smart-open")


@suite.check("reuse", "%d random stream operations on a pool of 2 connections: each request under %g s"
                      % (compat.SOAK_OPERATIONS, compat.SOAK_BOUND_SECONDS))
def _():
    c = client(max_pool_connections=2)
    rng = random.Random(28)
    keys = ["soak/k%02d" % i for i in range(12)]
    model = {}

    def body():
        return compat.random_bytes(rng.choice((0, 0, 1, 100, 4 * KiB, 70 * KiB)), rng.random())

    def write(key):
        data = body()
        with so_open(key, "wb", c=c, multipart_upload=rng.random() < 0.5) as f:
            f.write(data)
        model[key] = data

    def read(key):
        if key not in model:
            return raises_code("NoSuchKey", lambda: so_open(key, "rb", c=c).read())
        with so_open(key, "rb", c=c) as f:
            expect_equal(f.read(), model[key], "read of " + key)

    def seek(key):
        data = model.get(key)
        if not data:
            return write(key)
        with so_open(key, "rb", c=c) as f:  # leaves a body half read, as a sampler does
            first = rng.randrange(len(data))
            f.seek(first)
            expect_equal(f.read(10), data[first:first + 10], "read at %d of %s" % (first, key))
            f.seek(len(data) + rng.randrange(1, 100))
            expect_equal(f.read(), b"", "read past the end")

    def abandoned(key):
        try:
            with so_open(key, "wb", c=c, min_part_size=5 * MiB) as f:
                f.write(body())
                raise ValueError("abandoned")
        except ValueError:
            pass

    def delete(key):
        c.delete_object(Bucket=B, Key=key)
        model.pop(key, None)

    compat.SoakTimer(c).run([write, write, read, read, seek, abandoned, delete], keys, rng)
    got = sorted(o["Key"] for o in c.list_objects_v2(Bucket=B, Prefix="soak/").get("Contents", []))
    expect_equal(got, sorted(model), "the keys under soak/")
    expect_equal(c.list_multipart_uploads(Bucket=B, Prefix="soak/").get("Uploads", []), [], "uploads left")


@suite.check("basic", "clean up: delete everything, delete_bucket")
def _():
    keys = list(compat.list_keys(B))
    for i in range(0, len(keys), 1000):
        s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
    s3.delete_bucket(Bucket=B)


suite.main()
