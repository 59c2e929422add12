"""curl with presigned URLs: the way people hand an object to a program that knows nothing of S3
(a download script, a container's entrypoint, a browser). The URLs come from what people use to
make them: boto3's generate_presigned_url with its default (SigV2 query strings) and with
signature_version="s3v4", and Debian's AWS CLI v2 `aws s3 presign` (SigV4). curl runs with its
defaults (for a PUT of a file: Expect: 100-continue, no Content-Type)."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import MiB, expect, expect_equal, run  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

suite = compat.Suite()
B = "curl"


def signer(**config):
    return boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=compat.ACCESS_KEY,
                        aws_secret_access_key=compat.SECRET_KEY, region_name=compat.REGION,
                        config=Config(**config) if config else None)


V2 = signer()
V4 = signer(signature_version="s3v4")


def url(client, method, key, expires=300, **params):
    return client.generate_presigned_url(method, Params={"Bucket": B, "Key": key, **params}, ExpiresIn=expires)


def cli_presign(key, expires=300):
    return run(["/usr/bin/aws", "--endpoint-url", compat.ENDPOINT, "s3", "presign", "s3://%s/%s" % (B, key),
                "--expires-in", str(expires)], env=compat.aws_env()).stdout.strip()


def curl(*args, out=None):
    """(HTTP status, body bytes, headers text) of one curl run."""
    out = out or suite.path("curl.out")
    hdr = suite.path("curl.hdr")
    r = run(["curl", "-sS", "-o", out, "-D", hdr, "-w", "%{http_code}", *args], check=False, timeout=300)
    if r.returncode != 0:
        raise compat.CheckFailed("curl %s exited %d: %s" % (" ".join(args)[:200], r.returncode, r.stderr))
    return int(r.stdout), compat.read_file(out) if os.path.exists(out) else b"", compat.read_file(hdr).decode()


suite.version(run(["curl", "--version"]).stdout.splitlines()[0].split(" (")[0])

DATA = compat.random_bytes(64 * MiB + 11, 1)


@suite.check("presign", "PUT a 64 MiB file with curl -T (SigV2 and SigV4 URLs), GET it back")
def _():
    compat.raw_ok("PUT", "/" + B)
    src = suite.path("big.bin")
    compat.write_file(src, DATA)
    for name, client in (("v2", V2), ("v4", V4)):
        status, body, _ = curl("-T", src, url(client, "put_object", "big-%s.bin" % name))
        expect_equal((status, body), (200, b""), "presigned PUT (%s)" % name)
        head = compat.raw_ok("HEAD", "/%s/big-%s.bin" % (B, name))
        expect_equal(head.header("etag"), '"%s"' % compat.md5(DATA), "ETag of the uploaded object (%s)" % name)
    out = suite.path("down.bin")
    status, _, headers = curl(url(V2, "get_object", "big-v2.bin"), out=out)
    expect_equal(status, 200, "presigned GET (SigV2)")
    expect_equal(compat.sha256(compat.read_file(out)), compat.sha256(DATA), "downloaded (SigV2)")
    status, _, _ = curl(cli_presign("big-v4.bin"), out=out)
    expect_equal(status, 200, "presigned GET (aws s3 presign)")
    expect_equal(compat.sha256(compat.read_file(out)), compat.sha256(DATA), "downloaded (SigV4)")


@suite.check("basic", "HEAD and ranged GETs through presigned URLs; response-* overrides")
def _():
    status, _, headers = curl("-I", url(V4, "head_object", "big-v4.bin"))
    expect_equal(status, 200, "presigned HEAD")
    expect("content-length: %d" % len(DATA) in headers.lower(), "HEAD headers:\n" + headers)
    for first, last in ((0, 0), (1000, 1999), (64 * MiB - 5, 64 * MiB + 10)):
        status, body, headers = curl("-r", "%d-%d" % (first, last), url(V4, "get_object", "big-v4.bin"))
        expect_equal((status, body), (206, DATA[first:last + 1]), "range %d-%d" % (first, last))
        expect("content-range: bytes %d-%d/%d" % (first, last, len(DATA)) in headers.lower(), "Content-Range:\n" + headers)
    status, body, headers = curl(url(V2, "get_object", "big-v2.bin", ResponseContentDisposition='attachment; filename="x.bin"',
                                     ResponseContentType="application/x-download"), "-r", "0-9")
    expect_equal(status, 206, "status with overrides")
    expect('content-disposition: attachment; filename="x.bin"' in headers.lower() and
           "content-type: application/x-download" in headers.lower(), "overridden headers:\n" + headers)


@suite.check("multipart", "presigned UploadPart URLs: parts PUT by curl, completed")
def _():
    # How browsers and remote workers upload big files: the server side presigns each part.
    s3 = V4
    up = s3.create_multipart_upload(Bucket=B, Key="parts.bin")
    parts, etags = [DATA[:8 * MiB], DATA[8 * MiB:16 * MiB], DATA[16 * MiB:17 * MiB]], []
    for n, p in enumerate(parts, 1):
        f = suite.path("part-%d" % n)
        compat.write_file(f, p)
        status, _, headers = curl("-T", f, url(s3, "upload_part", "parts.bin", UploadId=up["UploadId"], PartNumber=n))
        expect_equal(status, 200, "part %d" % n)
        etags.append([h.split(":", 1)[1].strip() for h in headers.splitlines() if h.lower().startswith("etag:")][0])
    s3.complete_multipart_upload(Bucket=B, Key="parts.bin", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
    status, body, _ = curl(url(V2, "get_object", "parts.bin"))
    expect_equal((status, compat.sha256(body)), (200, compat.sha256(DATA[:17 * MiB])), "assembled object")


@suite.check("checkpoint", "commit marker: presigned PUT with If-None-Match: * (then 412)")
def _():
    f = suite.path("COMMIT")
    compat.write_file(f, b"step 1")
    marker = url(V4, "put_object", "ckpt/COMMIT")
    status, _, _ = curl("-T", f, "-H", "If-None-Match: *", marker)
    expect_equal(status, 200, "first commit")
    status, body, _ = curl("-T", f, "-H", "If-None-Match: *", marker)
    expect_equal(status, 412, "second commit")
    expect(b"<Code>PreconditionFailed</Code>" in body, "body: %r" % body)


@suite.check("errors", "expired URL, tampered signature, missing key, bad range: the S3 error bodies")
def _():
    short = url(V2, "get_object", "big-v2.bin", expires=1)
    short4 = cli_presign("big-v4.bin", expires=1)
    time.sleep(2.1)
    for u in (short, short4):
        status, body, _ = curl(u)
        expect_equal(status, 403, "expired URL")
        expect(b"<Code>AccessDenied</Code>" in body and b"expired" in body.lower(), "expired URL body: %r" % body[:400])
    good = url(V4, "get_object", "big-v4.bin")
    tampered = good[:-4] + ("0000" if not good.endswith("0000") else "1111")
    status, body, _ = curl(tampered)
    expect_equal(status, 403, "tampered signature")
    expect(b"<Code>SignatureDoesNotMatch</Code>" in body, "body: %r" % body[:400])
    status, body, _ = curl(url(V4, "get_object", "no/such/key"))
    expect_equal(status, 404, "missing key")
    expect(b"<Code>NoSuchKey</Code>" in body, "body: %r" % body[:400])
    status, body, headers = curl("-r", "%d-" % (len(DATA) + 1), url(V4, "get_object", "big-v4.bin"))
    expect_equal(status, 416, "range past the end")
    expect(b"<Code>InvalidRange</Code>" in body and "content-range: bytes */%d" % len(DATA) in headers.lower(),
           "416 response:\n%s%r" % (headers, body[:300]))
    status, body, _ = curl(url(V4, "get_object", "k").replace("/%s/k" % B, "/curl-no-such-bucket/k"))
    expect_equal(status, 403, "a URL edited to another bucket no longer matches its signature")


@suite.check("basic", "clean up")
def _():
    compat.delete_bucket(B)


suite.main()
