"""GNU wget with presigned URLs, as download scripts and container entrypoints use it: the URLs come
from boto3's generate_presigned_url (signature_version="s3v4"), wget runs with its defaults
(HTTP/1.1 keep-alive across the URLs of one run, `-c` resuming with a Range request, a PUT body
sent as `application/x-www-form-urlencoded`, 20 tries on a connection that breaks)."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import compat  # noqa: E402
from compat import KiB, MiB, expect, expect_equal, run  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

suite = compat.Suite()
B = "wget"
V4 = boto3.client("s3", endpoint_url=compat.ENDPOINT, aws_access_key_id=compat.ACCESS_KEY,
                  aws_secret_access_key=compat.SECRET_KEY, region_name=compat.REGION,
                  config=Config(signature_version="s3v4"))


def url(method, key, expires=300, **params):
    return V4.generate_presigned_url(method, Params={"Bucket": B, "Key": key, **params}, ExpiresIn=expires)


def wget(*args, timeout=300, verbose=False):
    """(exit status, server response headers as wget prints them) of one wget run. Exit status 8
    is wget's "the server answered with an error"."""
    r = run(["wget", "--server-response", "--verbose" if verbose else "--no-verbose", *args],
            check=False, timeout=timeout)
    return r.returncode, r.stderr


def statuses(log):
    return [int(s) for s in re.findall(r"^\s+HTTP/1\.[01] (\d{3})", log, re.M)]


suite.version(run(["wget", "--version"]).stdout.splitlines()[0].split(" built on")[0])

DATA = compat.random_bytes(64 * MiB + 13, 2)


@suite.check("presign", "PUT a 64 MiB file with --method=PUT --body-file, GET it back with -O")
def _():
    compat.raw_ok("PUT", "/" + B)
    src = suite.path("big.bin")
    compat.write_file(src, DATA)
    status, log = wget("--method=PUT", "--body-file=" + src, "-O", suite.path("put.out"),
                       url("put_object", "big.bin"))
    expect_equal((status, statuses(log)), (0, [200]), "presigned PUT:\n" + log)
    head = compat.raw_ok("HEAD", "/%s/big.bin" % B)
    expect_equal(head.header("etag"), '"%s"' % compat.md5(DATA), "ETag of the uploaded object")
    out = suite.path("down.bin")
    status, log = wget("-O", out, url("get_object", "big.bin"))
    expect_equal((status, statuses(log)), (0, [200]), "presigned GET:\n" + log)
    expect_equal(compat.sha256(compat.read_file(out)), compat.sha256(DATA), "downloaded")


@suite.check("basic", "-c resumes a partial download with a Range request; --spider on a HEAD URL")
def _():
    out = suite.path("partial.bin")
    compat.write_file(out, DATA[:10 * MiB + 7])  # what an interrupted download leaves
    status, log = wget("-c", "-O", out, url("get_object", "big.bin"))
    expect_equal((status, statuses(log)), (0, [206]), "resumed download:\n" + log)
    expect("Content-Range: bytes %d-%d/%d" % (10 * MiB + 7, len(DATA) - 1, len(DATA)) in log,
           "Content-Range of the resume:\n" + log)
    expect_equal(compat.sha256(compat.read_file(out)), compat.sha256(DATA), "resumed file")
    status, log = wget("--spider", url("head_object", "big.bin"))
    expect_equal(status, 0, "--spider:\n" + log)
    expect("Content-Length: %d" % len(DATA) in log, "HEAD answer:\n" + log)


@suite.check("reuse", "one wget run fetches 300 presigned URLs on a kept-alive connection, 404s and "
                      "403s among them, in under %g s" % (10 * compat.SOAK_BOUND_SECONDS))
def _():
    keys = ["many/f%03d" % i for i in range(100)]
    for i, k in enumerate(keys):
        compat.raw_ok("PUT", "/%s/%s" % (B, k), body=compat.random_bytes(i * 97 % (70 * KiB), i))
    urls = []
    for i in range(300):
        if i % 7 == 3:
            urls.append(url("get_object", "many/missing-%d" % i))  # 404 NoSuchKey
        elif i % 11 == 5:
            good = url("get_object", keys[i % 100])
            urls.append(good[:-4] + ("0000" if not good.endswith("0000") else "1111"))  # 403
        else:
            urls.append(url("get_object", keys[i % 100]))
    listing = suite.path("urls.txt")
    compat.write_file(listing, "\n".join(urls).encode() + b"\n")
    folder = suite.dir("many")
    started = time.monotonic()
    status, log = wget("-i", listing, "-P", folder, "--content-on-error", timeout=600, verbose=True)
    took = time.monotonic() - started
    got = statuses(log)
    want = [404 if i % 7 == 3 else 403 if i % 11 == 5 else 200 for i in range(300)]
    expect_equal((status, got), (8, want), "statuses (exit 8: some answers were errors)")
    # wget opens one connection and keeps it: "Reusing existing connection" for every later URL.
    expect_equal(log.count("Reusing existing connection"), 299, "connections reused (of 299):\n" + log[-2000:])
    expect(took <= compat.SOAK_BOUND_SECONDS * 10, "300 URLs took %.1f s" % took)
    print("wget: 300 URLs on one connection in %.2f s" % took)
    for i in range(0, 300, 13):
        if want[i] == 200:
            name = os.path.basename(urls[i].split("?")[0])
            files = [f for f in os.listdir(folder) if f.startswith(name + "?") or f == name]
            expect(files, "no file for %s" % name)


@suite.check("errors", "expired URL, tampered signature, missing key: exit status 8 and the S3 error body")
def _():
    short = url("get_object", "big.bin", expires=1)
    time.sleep(2.1)
    cases = ((short, 403, b"<Code>AccessDenied</Code>"),
             (url("get_object", "no/such/key"), 404, b"<Code>NoSuchKey</Code>"),
             (url("get_object", "big.bin")[:-4] + "abcd", 403, b"<Code>SignatureDoesNotMatch</Code>"))
    for u, want_status, code in cases:
        out = suite.path("error.out")
        status, log = wget("--content-on-error", "-O", out, u)
        expect_equal((status, statuses(log)), (8, [want_status]), "%s:\n%s" % (code.decode(), log))
        body = compat.read_file(out)
        expect(code in body, "body: %r" % body[:400])


@suite.check("basic", "clean up")
def _():
    compat.delete_bucket(B)


suite.main()
