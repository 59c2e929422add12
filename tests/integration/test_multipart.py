"""Multipart uploads on the checkpoint path, against a real hots3 process: abandoned uploads
are removed after [multipart] abort_after and their space is free at once, replaced parts and
aborted uploads give their space back, and a long CompleteMultipartUpload keeps its connection
alive (200, whitespace, then the result or an Error body), as S3 does. The API as AWS documents
it: part numbers 1..10000, UploadPartCopy's conditions and ranges, ListMultipartUploads and
ListParts pagination, Complete with If-Match, re-uploaded parts. boto3 (the image's python3:
boto3 1.43) and raw HTTP."""

import datetime
import hashlib
import os
import re
import subprocess
import sys
import time
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
MiB = 1024 * 1024


def client(port):
    return boto3.client(
        "s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=s3.ACCESS_KEY,
        aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"))


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


def sweeps(server):
    """(uploads aborted, device space in use after) of each sweep that aborted uploads, as logged."""
    return [(int(n), int(used)) for n, used in re.findall(
        r"multipart: aborted (\d+) uploads .*?in use now: (\d+) bytes", server.read_stderr())]


def stop_and_check(test, server):
    """Stops the server; its space in use must be exactly what `hots3 check` finds referenced."""
    test.assertEqual(server.stop(), 0)
    logged = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", server.read_stderr())
    test.assertIsNotNone(logged, server.read_stderr()[-2000:])
    check = subprocess.run([HOTS3, "check", "--data", os.path.join(server.dir, "data")],
                           capture_output=True, text=True, timeout=300)
    test.assertEqual(check.returncode, 0, check.stdout + check.stderr)
    referenced = int(re.search(r"referenced .*?\((\d+) bytes\)", check.stdout).group(1))
    test.assertEqual(int(logged.group(2)), 0)
    test.assertEqual(int(logged.group(1)), referenced, "leaked space")
    return referenced, check.stdout


class AbandonedUploads(unittest.TestCase):
    """[multipart] abort_after with a tiny age: the sweeper aborts old uploads only."""

    AGE_S = 6  # margin for the young upload checked below, on a loaded machine

    def test_old_uploads_are_aborted_and_their_space_freed(self):
        server = s3.hots3_server(extra_config='\n[multipart]\nabort_after = "%ds"\nsweep_interval = "200ms"\n'
                                 % self.AGE_S).start()
        try:
            c = client(server.port)
            c.create_bucket(Bucket="ckpt")
            c.put_object(Bucket="ckpt", Key="kept", Body=data(MiB, 1))  # 1 MiB stays in use
            old = []
            for n in range(2):
                up = c.create_multipart_upload(Bucket="ckpt", Key="shard-%d" % n)["UploadId"]
                c.upload_part(Bucket="ckpt", Key="shard-%d" % n, UploadId=up, PartNumber=1, Body=data(5 * MiB, n))
                c.upload_part(Bucket="ckpt", Key="shard-%d" % n, UploadId=up, PartNumber=2, Body=data(MiB, n + 10))
                old.append(("shard-%d" % n, up))
            listed = {u["UploadId"] for u in c.list_multipart_uploads(Bucket="ckpt").get("Uploads", [])}
            self.assertEqual(listed, {u for _, u in old})

            # (Created a moment apart, they may go in two sweeps.)
            deadline = time.monotonic() + self.AGE_S + 30
            while sum(n for n, _ in sweeps(server)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual(sum(n for n, _ in sweeps(server)), 2, server.read_stderr()[-2000:])
            # An upload younger than abort_after survives the sweeps that follow.
            young = c.create_multipart_upload(Bucket="ckpt", Key="young")["UploadId"]
            c.upload_part(Bucket="ckpt", Key="young", UploadId=young, PartNumber=1, Body=data(MiB, 7))

            # The old uploads are gone, with their parts' space: only the kept object remains.
            self.assertEqual(sweeps(server)[-1][1], MiB)
            listed = [u["UploadId"] for u in c.list_multipart_uploads(Bucket="ckpt").get("Uploads", [])]
            self.assertEqual(listed, [young])
            for key, up in old:
                with self.assertRaises(ClientError) as e:
                    c.upload_part(Bucket="ckpt", Key=key, UploadId=up, PartNumber=3, Body=b"late")
                self.assertEqual(e.exception.response["Error"]["Code"], "NoSuchUpload")
                with self.assertRaises(ClientError) as e:
                    c.list_parts(Bucket="ckpt", Key=key, UploadId=up)
                self.assertEqual(e.exception.response["Error"]["Code"], "NoSuchUpload")
            time.sleep(1)
            self.assertEqual([u["UploadId"] for u in c.list_multipart_uploads(Bucket="ckpt").get("Uploads", [])],
                             [young])
            self.assertEqual(c.get_object(Bucket="ckpt", Key="kept")["Body"].read(), data(MiB, 1))
            # Stopped before the young upload ages: its part is referenced, nothing else is.
            referenced, report = stop_and_check(self, server)
            self.assertEqual(referenced, 2 * MiB)
            self.assertIn("uploads 1 with 1 parts", report)
        finally:
            server.kill()
            server.cleanup()

    def test_zero_never_aborts(self):
        server = s3.hots3_server(extra_config='\n[multipart]\nabort_after = "0"\nsweep_interval = "100ms"\n').start()
        try:
            c = client(server.port)
            c.create_bucket(Bucket="ckpt")
            up = c.create_multipart_upload(Bucket="ckpt", Key="k")["UploadId"]
            c.upload_part(Bucket="ckpt", Key="k", UploadId=up, PartNumber=1, Body=b"x" * 100)
            time.sleep(1.5)
            self.assertEqual([u["UploadId"] for u in c.list_multipart_uploads(Bucket="ckpt")["Uploads"]], [up])
        finally:
            server.stop()
            server.cleanup()


class ServerTest(unittest.TestCase):
    """One hots3 for the class, with `extra_config`, and its bucket `bucket`."""

    extra_config = ""
    bucket = None

    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server(extra_config=cls.extra_config).start()
        cls.port = cls.server.port
        cls.s3 = client(cls.port)
        cls.s3.create_bucket(Bucket=cls.bucket)

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()


class CompleteKeepAlive(ServerTest):
    """[multipart] complete_keepalive = 0: every Complete answers 200 and white space before its
    result, as a Complete that runs long does; its outcome comes in the body."""

    extra_config = '\n[multipart]\ncomplete_keepalive = 0\n'
    bucket = "keepalive"

    def raw(self, method, key, query=(), headers=None, body=b""):
        req = s3.SignedRequest(method, "/keepalive/" + key, query, headers, body=body, port=self.port)
        return s3.send(self.port, req.wire())

    def upload(self, key, parts):
        up = self.s3.create_multipart_upload(Bucket="keepalive", Key=key)["UploadId"]
        etags = [self.s3.upload_part(Bucket="keepalive", Key=key, UploadId=up, PartNumber=n, Body=body)["ETag"]
                 for n, body in enumerate(parts, 1)]
        return up, etags

    @staticmethod
    def complete_xml(etags):
        return ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in enumerate(etags, 1))).encode()

    def test_boto3_completes_through_the_white_space(self):
        parts = [data(5 * MiB, 1), data(1000, 2)]
        up, etags = self.upload("boto", parts)
        done = self.s3.complete_multipart_upload(
            Bucket="keepalive", Key="boto", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
        self.assertTrue(done["ETag"].endswith('-2"'), done)
        self.assertEqual(done["Key"], "boto")
        self.assertEqual(self.s3.get_object(Bucket="keepalive", Key="boto")["Body"].read(), b"".join(parts))
        # boto3's managed transfer (upload_fileobj) completes the same way.
        import io
        body = data(12 * MiB, 3)
        self.s3.upload_fileobj(io.BytesIO(body), "keepalive", "managed")
        self.assertEqual(self.s3.get_object(Bucket="keepalive", Key="managed")["Body"].read(), body)

    def test_the_wire_shows_200_then_white_space_then_the_result(self):
        up, etags = self.upload("wire", [data(5 * MiB, 4), data(10, 5)])
        r = self.raw("POST", "wire", [("uploadId", up)], body=self.complete_xml(etags))
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("transfer-encoding"), "chunked")
        self.assertTrue(r.body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n '), r.body[:80])
        result = r.body[r.body.index(b"?>") + 2:].lstrip()
        self.assertTrue(result.startswith(b"<CompleteMultipartUploadResult"), r.body)
        self.assertIn(b"-2&quot;</ETag>", result)

    def test_a_late_failure_is_an_error_document_in_the_200_body(self):
        self.s3.put_object(Bucket="keepalive", Key="taken", Body=b"first")
        up, etags = self.upload("taken", [data(5 * MiB, 6), data(10, 7)])
        # If-None-Match: * is decided in the commit transaction, after the 200 went out.
        r = self.raw("POST", "taken", [("uploadId", up)], headers={"If-None-Match": "*"}, body=self.complete_xml(etags))
        self.assertEqual(r.status, 200)
        self.assertTrue(r.body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n '), r.body[:80])
        self.assertIn(b"<Error><Code>PreconditionFailed</Code>", r.body)
        self.assertEqual(r.body.count(b"<?xml"), 1, r.body)
        # So is a part list the plan rejects (a wrong ETag).
        r = self.raw("POST", "taken", [("uploadId", up)], body=self.complete_xml(['"%s"' % ("0" * 32), etags[1]]))
        self.assertEqual(r.status, 200)
        self.assertIn(b"<Error><Code>InvalidPart</Code>", r.body)
        # boto3 sees an error in a 200 Complete body as the error it is.
        with self.assertRaises(ClientError) as e:
            self.s3.complete_multipart_upload(
                Bucket="keepalive", Key="taken", UploadId=up, IfNoneMatch="*",
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": t} for n, t in enumerate(etags, 1)]})
        self.assertEqual(e.exception.response["Error"]["Code"], "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="keepalive", Key="taken")["Body"].read(), b"first")
        # The upload is still there, and completes without the condition.
        self.s3.complete_multipart_upload(
            Bucket="keepalive", Key="taken", UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": t} for n, t in enumerate(etags, 1)]})
        self.assertEqual(self.s3.head_object(Bucket="keepalive", Key="taken")["ContentLength"], 5 * MiB + 10)
        # Errors found before the completion starts are ordinary error responses.
        r = self.raw("POST", "taken", [("uploadId", "nope")], body=self.complete_xml(etags))
        self.assertEqual(r.status, 404)
        self.assertIn(b"<Code>NoSuchUpload</Code>", r.body)



# ---- the multipart API as AWS documents it: part numbers, UploadPartCopy, listings, If-Match ----

S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def parse_xml(body):
    """The root of an S3 XML document, its namespace dropped from every tag."""
    root = ET.fromstring(body.lstrip())
    for e in root.iter():
        if e.tag.startswith(S3_NS):
            e.tag = e.tag[len(S3_NS):]
    return root


def md5_etag(*pieces):
    return '"%s"' % hashlib.md5(b"".join(pieces)).hexdigest()


def composite_etag(*parts):
    return '"%s-%d"' % (hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest(), len(parts))


class MultipartApi(ServerTest):
    """One hots3 for the class (default [multipart] settings), bucket "mpu"."""

    bucket = "mpu"

    def raw(self, method, path, query=(), headers=None, body=b""):
        req = s3.SignedRequest(method, path, query, headers, body=body, port=self.port)
        return s3.send(self.port, req.wire())

    def assertError(self, r, status, code):
        root = parse_xml(r.body) if r.body.strip() else None
        got = root.findtext("Code") if root is not None else None
        self.assertEqual((r.status, got), (status, code), r.body)
        return root

    def assertClientError(self, e, status, code):
        self.assertEqual((e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]),
                         (status, code), e.response)

    def part_numbers(self, key, up):
        return [p["PartNumber"] for p in self.s3.list_parts(Bucket="mpu", Key=key, UploadId=up).get("Parts", [])]

    def complete(self, key, up, etags, **kw):
        return self.s3.complete_multipart_upload(
            Bucket="mpu", Key=key, UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in etags]}, **kw)

    # ---- UploadPart: part numbers 1..10000 -----------------------------------------------------

    def test_part_numbers_outside_1_to_10000_are_invalid_argument(self):
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="pn")["UploadId"]
        for number in ("0", "10001"):
            r = self.raw("PUT", "/mpu/pn", [("partNumber", number), ("uploadId", up)], body=b"part")
            root = self.assertError(r, 400, "InvalidArgument")
            self.assertEqual(root.findtext("ArgumentName"), "partNumber", r.body)
        # The bounds themselves are parts.
        for number, body in ((1, b"first"), (10000, b"last")):
            r = self.raw("PUT", "/mpu/pn", [("partNumber", str(number)), ("uploadId", up)], body=body)
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(r.header("etag"), md5_etag(body))
        self.assertEqual(self.part_numbers("pn", up), [1, 10000])
        # boto3 gets the same error.
        with self.assertRaises(ClientError) as e:
            self.s3.upload_part(Bucket="mpu", Key="pn", UploadId=up, PartNumber=10001, Body=b"x")
        self.assertClientError(e.exception, 400, "InvalidArgument")
        # UploadPartCopy checks the part number too.
        self.s3.put_object(Bucket="mpu", Key="pn-src", Body=b"source")
        for number in ("0", "10001"):
            r = self.raw("PUT", "/mpu/pn", [("partNumber", number), ("uploadId", up)],
                         headers={"x-amz-copy-source": "/mpu/pn-src"})
            self.assertError(r, 400, "InvalidArgument")
        self.assertEqual(self.part_numbers("pn", up), [1, 10000])
        # A part 10000 completes (parts 1 and 10000: the first is not the last, so 5 MiB).
        first = data(5 * MiB, 40)
        e1 = self.s3.upload_part(Bucket="mpu", Key="pn", UploadId=up, PartNumber=1, Body=first)["ETag"]
        e2 = self.s3.upload_part(Bucket="mpu", Key="pn", UploadId=up, PartNumber=10000, Body=b"last")["ETag"]
        done = self.complete("pn", up, [(1, e1), (10000, e2)])
        self.assertEqual(done["ETag"], composite_etag(first, b"last"))
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="pn")["Body"].read(), first + b"last")

    # ---- UploadPartCopy: copy-source conditions and ranges -------------------------------------

    def test_upload_part_copy_conditions(self):
        put = self.s3.put_object(Bucket="mpu", Key="upc-src", Body=b"copy source bytes")
        etag = put["ETag"]
        modified = self.s3.head_object(Bucket="mpu", Key="upc-src")["LastModified"]
        past = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="upc")["UploadId"]
        cases = [
            ({"CopySourceIfMatch": etag}, None),
            ({"CopySourceIfMatch": '"%s"' % ("0" * 32)}, "x-amz-copy-source-If-Match"),
            ({"CopySourceIfNoneMatch": '"%s"' % ("0" * 32)}, None),
            ({"CopySourceIfNoneMatch": etag}, "x-amz-copy-source-If-None-Match"),
            ({"CopySourceIfModifiedSince": past}, None),
            ({"CopySourceIfModifiedSince": modified}, "x-amz-copy-source-If-Modified-Since"),
            ({"CopySourceIfUnmodifiedSince": modified}, None),
            ({"CopySourceIfUnmodifiedSince": past}, "x-amz-copy-source-If-Unmodified-Since"),
            # As S3 documents for the copy conditions: if-match true and if-unmodified-since
            # false copy; if-none-match false and if-modified-since true fail.
            ({"CopySourceIfMatch": etag, "CopySourceIfUnmodifiedSince": past}, None),
            ({"CopySourceIfNoneMatch": etag, "CopySourceIfModifiedSince": past}, "x-amz-copy-source-If-None-Match"),
        ]
        copied = []
        for n, (conditions, failed) in enumerate(cases, 1):
            if failed is None:
                r = self.s3.upload_part_copy(Bucket="mpu", Key="upc", UploadId=up, PartNumber=n,
                                             CopySource="mpu/upc-src", **conditions)
                self.assertEqual(r["CopyPartResult"]["ETag"], etag, conditions)
                copied.append(n)
            else:
                with self.assertRaises(ClientError) as e:
                    self.s3.upload_part_copy(Bucket="mpu", Key="upc", UploadId=up, PartNumber=n,
                                             CopySource="mpu/upc-src", **conditions)
                self.assertClientError(e.exception, 412, "PreconditionFailed")
                self.assertEqual(e.exception.response["Error"].get("Condition"), failed, conditions)
        # The failed copies left no part.
        self.assertEqual(self.part_numbers("upc", up), copied)
        # The same over the wire: 412 with a PreconditionFailed body.
        r = self.raw("PUT", "/mpu/upc", [("partNumber", "20"), ("uploadId", up)],
                     headers={"x-amz-copy-source": "/mpu/upc-src", "x-amz-copy-source-if-match": '"nope"'})
        self.assertError(r, 412, "PreconditionFailed")
        self.assertEqual(self.part_numbers("upc", up), copied)
        self.s3.abort_multipart_upload(Bucket="mpu", Key="upc", UploadId=up)

    def test_upload_part_copy_ranges(self):
        source = data(6 * MiB, 41)
        self.s3.put_object(Bucket="mpu", Key="range-src", Body=source)
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="ranged")["UploadId"]
        first = self.s3.upload_part_copy(Bucket="mpu", Key="ranged", UploadId=up, PartNumber=1,
                                         CopySource="mpu/range-src", CopySourceRange="bytes=0-%d" % (5 * MiB - 1))
        self.assertEqual(first["CopyPartResult"]["ETag"], md5_etag(source[:5 * MiB]))
        second = self.s3.upload_part_copy(Bucket="mpu", Key="ranged", UploadId=up, PartNumber=2,
                                          CopySource="mpu/range-src", CopySourceRange="bytes=100-1099")
        self.assertEqual(second["CopyPartResult"]["ETag"], md5_etag(source[100:1100]))
        # The last byte alone.
        third = self.s3.upload_part_copy(Bucket="mpu", Key="ranged", UploadId=up, PartNumber=3,
                                         CopySource="mpu/range-src",
                                         CopySourceRange="bytes=%d-%d" % (6 * MiB - 1, 6 * MiB - 1))
        self.assertEqual(third["CopyPartResult"]["ETag"], md5_etag(source[-1:]))
        parts = self.s3.list_parts(Bucket="mpu", Key="ranged", UploadId=up)["Parts"]
        self.assertEqual([(p["PartNumber"], p["Size"], p["ETag"]) for p in parts],
                         [(1, 5 * MiB, md5_etag(source[:5 * MiB])), (2, 1000, md5_etag(source[100:1100])),
                          (3, 1, md5_etag(source[-1:]))])
        # Not of the form bytes=first-last, or starting after the object: InvalidArgument, no part.
        for bad in ("bytes=-100", "items=0-1", "bytes=0-1,3-4", "bytes=%d-%d" % (6 * MiB, 6 * MiB + 10)):
            r = self.raw("PUT", "/mpu/ranged", [("partNumber", "4"), ("uploadId", up)],
                         headers={"x-amz-copy-source": "/mpu/range-src", "x-amz-copy-source-range": bad})
            root = self.assertError(r, 400, "InvalidArgument")
            self.assertEqual(root.findtext("ArgumentName"), "x-amz-copy-source-range", bad)
        self.assertEqual(self.part_numbers("ranged", up), [1, 2, 3])
        # Parts 1 and 3 (part 2, not the last, would be too small).
        done = self.complete("ranged", up, [(1, first["CopyPartResult"]["ETag"]), (3, third["CopyPartResult"]["ETag"])])
        self.assertEqual(done["ETag"], composite_etag(source[:5 * MiB], source[-1:]))
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="ranged")["Body"].read(), source[:5 * MiB] + source[-1:])

    def copy_range(self, up, source_size, copy_range):
        self.s3.put_object(Bucket="mpu", Key="bad-range-src", Body=data(source_size, 42))
        return self.raw("PUT", "/mpu/bad-range", [("partNumber", "1"), ("uploadId", up)],
                        headers={"x-amz-copy-source": "/mpu/bad-range-src", "x-amz-copy-source-range": copy_range})

    def test_upload_part_copy_refuses_an_open_ended_range(self):
        # AWS: the range "must use the form bytes=first-last"; bytes=first- is InvalidArgument.
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="bad-range")["UploadId"]
        r = self.copy_range(up, 5000, "bytes=100-")
        self.assertError(r, 400, "InvalidArgument")
        self.assertEqual(self.part_numbers("bad-range", up), [])

    def test_upload_part_copy_refuses_a_range_past_the_end(self):
        # AWS: 400 InvalidArgument "Range specified is not valid for source object of size: N"
        # (UploadPartCopy does not clamp the last byte the way GET does).
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="bad-range")["UploadId"]
        for copy_range in ("bytes=0-5000", "bytes=4000-6000"):
            r = self.copy_range(up, 5000, copy_range)
            self.assertError(r, 400, "InvalidArgument")
        self.assertEqual(self.part_numbers("bad-range", up), [])

    # ---- ListMultipartUploads over HTTP: delimiter, markers, max-uploads ------------------------

    def list_uploads(self, bucket, **params):
        query = [(k.replace("_", "-"), str(v)) for k, v in params.items()]
        r = self.raw("GET", "/" + bucket, [("uploads", "")] + query)
        self.assertEqual(r.status, 200, r.body)
        root = parse_xml(r.body)
        self.assertEqual(root.tag, "ListMultipartUploadsResult", r.body)
        return root

    @staticmethod
    def uploads_of(root):
        return [(u.findtext("Key"), u.findtext("UploadId")) for u in root.findall("Upload")]

    @staticmethod
    def prefixes_of(root):
        return [p.findtext("Prefix") for p in root.findall("CommonPrefixes")]

    def make_uploads(self, bucket, keys):
        self.s3.create_bucket(Bucket=bucket)
        return [(k, self.s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]) for k in keys]

    def test_list_multipart_uploads_delimiter_and_prefix(self):
        made = self.make_uploads("lmu-delim", ["a/1", "a/2", "b", "c/x/1", "c/y", "d"])
        ids = dict(made)
        root = self.list_uploads("lmu-delim", delimiter="/")
        self.assertEqual(self.uploads_of(root), [("b", ids["b"]), ("d", ids["d"])])
        self.assertEqual(self.prefixes_of(root), ["a/", "c/"])
        self.assertEqual((root.findtext("Delimiter"), root.findtext("Prefix"), root.findtext("IsTruncated"),
                          root.findtext("MaxUploads")), ("/", "", "false", "1000"))
        root = self.list_uploads("lmu-delim", prefix="c/", delimiter="/")
        self.assertEqual(self.uploads_of(root), [("c/y", ids["c/y"])])
        self.assertEqual(self.prefixes_of(root), ["c/x/"])
        self.assertEqual(root.findtext("Prefix"), "c/")
        root = self.list_uploads("lmu-delim", prefix="a/")
        self.assertEqual(self.uploads_of(root), [("a/1", ids["a/1"]), ("a/2", ids["a/2"])])
        self.assertEqual(self.prefixes_of(root), [])
        # boto3 reads the same.
        got = self.s3.list_multipart_uploads(Bucket="lmu-delim", Delimiter="/")
        self.assertEqual([u["Key"] for u in got["Uploads"]], ["b", "d"])
        self.assertEqual([p["Prefix"] for p in got["CommonPrefixes"]], ["a/", "c/"])

    def test_list_multipart_uploads_pagination(self):
        made = self.make_uploads("lmu-page", ["k1", "k2", "k2", "k2", "k3", "k4"])
        full = self.list_uploads("lmu-page")
        listed = self.uploads_of(full)
        self.assertEqual(sorted(listed), sorted(made))
        self.assertEqual([k for k, _ in listed], ["k1", "k2", "k2", "k2", "k3", "k4"])
        self.assertEqual(full.findtext("IsTruncated"), "false")
        # max-uploads=2: pages of two, each naming its last upload as the next markers.
        pages, key_marker, id_marker = [], "", ""
        while True:
            params = {"max_uploads": 2}
            if key_marker:
                params.update(key_marker=key_marker, upload_id_marker=id_marker)
            root = self.list_uploads("lmu-page", **params)
            page = self.uploads_of(root)
            pages.append(page)
            self.assertEqual(root.findtext("MaxUploads"), "2")
            self.assertEqual(root.findtext("KeyMarker"), key_marker)
            self.assertEqual(root.findtext("UploadIdMarker"), id_marker)
            self.assertLessEqual(len(page), 2)
            if root.findtext("IsTruncated") == "false":
                break
            self.assertEqual(root.findtext("IsTruncated"), "true")
            self.assertEqual(len(page), 2)
            key_marker, id_marker = root.findtext("NextKeyMarker"), root.findtext("NextUploadIdMarker")
            self.assertEqual((key_marker, id_marker), page[-1])
            self.assertLess(len(pages), 10)
        self.assertEqual([len(p) for p in pages], [2, 2, 2])
        self.assertEqual([u for p in pages for u in p], listed)
        # key-marker alone: only keys after it (none of its own uploads).
        root = self.list_uploads("lmu-page", key_marker="k2")
        self.assertEqual(self.uploads_of(root), listed[4:])
        # key-marker with upload-id-marker: that key's uploads after the one named.
        root = self.list_uploads("lmu-page", key_marker="k2", upload_id_marker=listed[1][1])
        self.assertEqual(self.uploads_of(root), listed[2:])
        self.assertEqual((root.findtext("KeyMarker"), root.findtext("UploadIdMarker")), ("k2", listed[1][1]))
        # max-uploads=1 with a delimiter counts common prefixes as entries.
        self.s3.create_multipart_upload(Bucket="lmu-page", Key="p/1")
        self.s3.create_multipart_upload(Bucket="lmu-page", Key="p/2")
        root = self.list_uploads("lmu-page", delimiter="/", key_marker="k4", max_uploads=1)
        self.assertEqual((self.uploads_of(root), self.prefixes_of(root)), ([], ["p/"]))
        self.assertEqual(root.findtext("IsTruncated"), "false")
        root = self.list_uploads("lmu-page", delimiter="/", key_marker="k3", max_uploads=1)
        self.assertEqual((self.uploads_of(root), self.prefixes_of(root)), ([listed[5]], []))
        self.assertEqual((root.findtext("IsTruncated"), root.findtext("NextKeyMarker"),
                          root.findtext("NextUploadIdMarker")), ("true", "k4", listed[5][1]))
        # boto3's paginator walks the same pages.
        paginator = self.s3.get_paginator("list_multipart_uploads")
        walked = [(u["Key"], u["UploadId"]) for page in paginator.paginate(Bucket="lmu-page", Prefix="k",
                                                                            PaginationConfig={"PageSize": 2})
                  for u in page.get("Uploads", [])]
        self.assertEqual(walked, listed)

    def test_list_multipart_uploads_orders_one_keys_uploads_by_initiation(self):
        # AWS: "uploads are sorted in ascending order within each key by the upload initiation
        # time". Uploads are created until their ids' order is not their creation order, so that
        # an order by upload id cannot pass by chance.
        self.s3.create_bucket(Bucket="lmu-order")
        created = []
        while len(created) < 3 or created == sorted(created):
            created.append(self.s3.create_multipart_upload(Bucket="lmu-order", Key="same")["UploadId"])
            time.sleep(0.01)
            self.assertLess(len(created), 30)
        root = self.list_uploads("lmu-order")
        self.assertEqual([u for _, u in self.uploads_of(root)], created)

    # ---- ListParts pagination ------------------------------------------------------------------

    def test_list_parts_pagination(self):
        up = self.s3.create_multipart_upload(Bucket="mpu", Key="lp")["UploadId"]
        numbers = [1, 2, 3, 5, 8]
        etags = {n: self.s3.upload_part(Bucket="mpu", Key="lp", UploadId=up, PartNumber=n,
                                        Body=b"part %d" % n)["ETag"] for n in numbers}

        def page(**params):
            query = [("uploadId", up)] + [(k.replace("_", "-"), str(v)) for k, v in params.items()]
            r = self.raw("GET", "/mpu/lp", query)
            self.assertEqual(r.status, 200, r.body)
            root = parse_xml(r.body)
            self.assertEqual(root.tag, "ListPartsResult")
            return root

        def parts(root):
            return [int(p.findtext("PartNumber")) for p in root.findall("Part")]

        root = page(max_parts=2)
        self.assertEqual(parts(root), [1, 2])
        self.assertEqual((root.findtext("PartNumberMarker"), root.findtext("NextPartNumberMarker"),
                          root.findtext("MaxParts"), root.findtext("IsTruncated")), ("0", "2", "2", "true"))
        root = page(max_parts=2, part_number_marker=2)
        self.assertEqual(parts(root), [3, 5])
        self.assertEqual((root.findtext("PartNumberMarker"), root.findtext("NextPartNumberMarker"),
                          root.findtext("IsTruncated")), ("2", "5", "true"))
        root = page(max_parts=2, part_number_marker=5)
        self.assertEqual(parts(root), [8])
        self.assertEqual(root.findtext("IsTruncated"), "false")
        # A marker between part numbers, and one after the last part.
        self.assertEqual(parts(page(part_number_marker=4)), [5, 8])
        root = page(part_number_marker=8)
        self.assertEqual((parts(root), root.findtext("IsTruncated")), ([], "false"))
        # Exactly max-parts parts left: not truncated.
        root = page(max_parts=5)
        self.assertEqual((parts(root), root.findtext("IsTruncated")), (numbers, "false"))
        # Each part with its ETag and size.
        root = page()
        self.assertEqual([(int(p.findtext("PartNumber")), p.findtext("ETag"), int(p.findtext("Size")))
                          for p in root.findall("Part")],
                         [(n, etags[n], len(b"part %d" % n)) for n in numbers])
        # boto3: MaxParts, PartNumberMarker, and the paginator.
        got = self.s3.list_parts(Bucket="mpu", Key="lp", UploadId=up, MaxParts=3, PartNumberMarker=1)
        self.assertEqual([p["PartNumber"] for p in got["Parts"]], [2, 3, 5])
        self.assertEqual((got["IsTruncated"], got["NextPartNumberMarker"], got["MaxParts"]), (True, 5, 3))
        walked = [p["PartNumber"] for pg in self.s3.get_paginator("list_parts").paginate(
            Bucket="mpu", Key="lp", UploadId=up, PaginationConfig={"PageSize": 2}) for p in pg["Parts"]]
        self.assertEqual(walked, numbers)
        self.s3.abort_multipart_upload(Bucket="mpu", Key="lp", UploadId=up)

    # ---- CompleteMultipartUpload with If-Match -------------------------------------------------

    def upload_two_parts(self, key, seed):
        up = self.s3.create_multipart_upload(Bucket="mpu", Key=key)["UploadId"]
        bodies = [data(5 * MiB, seed), data(100, seed + 1)]
        etags = [(n, self.s3.upload_part(Bucket="mpu", Key=key, UploadId=up, PartNumber=n, Body=b)["ETag"])
                 for n, b in enumerate(bodies, 1)]
        return up, bodies, etags

    @staticmethod
    def complete_xml(etags):
        return ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in etags)).encode()

    def test_complete_with_if_match(self):
        old = self.s3.put_object(Bucket="mpu", Key="cim", Body=b"old")["ETag"]
        wrong = '"%s"' % ("0" * 32)
        # A wrong ETag: 412 PreconditionFailed, the object unchanged.
        up, bodies, etags = self.upload_two_parts("cim", 50)
        with self.assertRaises(ClientError) as e:
            self.complete("cim", up, etags, IfMatch=wrong)
        self.assertClientError(e.exception, 412, "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="cim")["Body"].read(), b"old")
        up, bodies, etags = self.upload_two_parts("cim", 52)
        r = self.raw("POST", "/mpu/cim", [("uploadId", up)], headers={"If-Match": wrong}, body=self.complete_xml(etags))
        self.assertError(r, 412, "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="cim")["Body"].read(), b"old")
        # The object's ETag: 200, the object replaced.
        up, bodies, etags = self.upload_two_parts("cim", 54)
        done = self.complete("cim", up, etags, IfMatch=old)
        self.assertEqual(done["ResponseMetadata"]["HTTPStatusCode"], 200)
        self.assertEqual(done["ETag"], composite_etag(*bodies))
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="cim")["Body"].read(), b"".join(bodies))
        # Over the wire, against the new ETag.
        up, bodies, etags = self.upload_two_parts("cim", 56)
        r = self.raw("POST", "/mpu/cim", [("uploadId", up)], headers={"If-Match": done["ETag"]},
                     body=self.complete_xml(etags))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(parse_xml(r.body).findtext("ETag"), composite_etag(*bodies))
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="cim")["Body"].read(), b"".join(bodies))
        # The ETag the key had before is no match any more.
        up, _, etags = self.upload_two_parts("cim", 58)
        with self.assertRaises(ClientError) as e:
            self.complete("cim", up, etags, IfMatch=old)
        self.assertClientError(e.exception, 412, "PreconditionFailed")
        self.assertEqual(self.s3.get_object(Bucket="mpu", Key="cim")["Body"].read(), b"".join(bodies))

    def test_complete_with_if_match_on_a_missing_key(self):
        # AWS (conditional writes): If-Match where no object has the key is 404 NoSuchKey.
        up, _, etags = self.upload_two_parts("cim-missing", 60)
        with self.assertRaises(ClientError) as e:
            self.complete("cim-missing", up, etags, IfMatch='"%s"' % ("0" * 32))
        self.assertClientError(e.exception, 404, "NoSuchKey")
        up, _, etags = self.upload_two_parts("cim-missing", 62)
        r = self.raw("POST", "/mpu/cim-missing", [("uploadId", up)], headers={"If-Match": '"abc"'},
                     body=self.complete_xml(etags))
        self.assertError(r, 404, "NoSuchKey")
        r = self.raw("HEAD", "/mpu/cim-missing")
        self.assertEqual(r.status, 404)


class ReplacedParts(unittest.TestCase):
    """Re-uploading a part number replaces the part: its ETag, size and bytes, and its space."""

    def test_a_re_uploaded_part_replaces_the_old_one(self):
        server = s3.hots3_server().start()
        try:
            c = client(server.port)
            c.create_bucket(Bucket="rep")
            up = c.create_multipart_upload(Bucket="rep", Key="k")["UploadId"]
            old1, new1 = data(5 * MiB, 70), data(6 * MiB, 71)
            old2, new2 = data(2 * MiB, 72), data(MiB, 73)
            old_etag = c.upload_part(Bucket="rep", Key="k", UploadId=up, PartNumber=1, Body=old1)["ETag"]
            c.upload_part(Bucket="rep", Key="k", UploadId=up, PartNumber=2, Body=old2)
            self.assertEqual(c.upload_part(Bucket="rep", Key="k", UploadId=up, PartNumber=1, Body=new1)["ETag"],
                             md5_etag(new1))
            # The part is replaced again, by UploadPartCopy this time.
            c.put_object(Bucket="rep", Key="src", Body=new2)
            copied = c.upload_part_copy(Bucket="rep", Key="k", UploadId=up, PartNumber=2, CopySource="rep/src")
            self.assertEqual(copied["CopyPartResult"]["ETag"], md5_etag(new2))
            c.delete_object(Bucket="rep", Key="src")
            parts = c.list_parts(Bucket="rep", Key="k", UploadId=up)["Parts"]
            self.assertEqual([(p["PartNumber"], p["ETag"], p["Size"]) for p in parts],
                             [(1, md5_etag(new1), 6 * MiB), (2, md5_etag(new2), MiB)])
            # The replaced part is gone: its ETag is no part of the upload.
            with self.assertRaises(ClientError) as e:
                c.complete_multipart_upload(Bucket="rep", Key="k", UploadId=up, MultipartUpload={"Parts": [
                    {"PartNumber": 1, "ETag": old_etag}, {"PartNumber": 2, "ETag": md5_etag(new2)}]})
            self.assertEqual(e.exception.response["Error"]["Code"], "InvalidPart")
            done = c.complete_multipart_upload(Bucket="rep", Key="k", UploadId=up, MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": md5_etag(new1)}, {"PartNumber": 2, "ETag": md5_etag(new2)}]})
            self.assertEqual(done["ETag"], composite_etag(new1, new2))
            got = c.get_object(Bucket="rep", Key="k")
            self.assertEqual(got["Body"].read(), new1 + new2)
            self.assertEqual(got["ContentLength"], 7 * MiB)
            # The replaced parts' space is free: in use is the object alone, all of it referenced.
            referenced, _ = stop_and_check(self, server)
            self.assertEqual(referenced, 7 * MiB)
        finally:
            server.kill()
            server.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
