"""The exact S3 behaviour of a real hots3 process where clients rarely go: routing of
sub-resources, versionId, limits, checksums in every transfer mode, error codes and bodies.
Raw HTTP (hand-signed) for error paths, boto3 for what SDKs send. CTest runs this file under
the image's python3 (boto3 1.43, unittest) and Debian's (boto3 1.26, pytest)."""

import base64
import datetime
import hashlib
import os
import sys
import re
import time
import unittest
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
import botocore.exceptions  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402


def client(port, region=s3.REGION, **config):
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % port, aws_access_key_id=s3.ACCESS_KEY,
                        aws_secret_access_key=s3.SECRET_KEY, region_name=region,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      signature_version="s3v4", **config))


def error_code(e):
    return e.response["Error"]["Code"]


def data(n, seed=0):
    return (hashlib.sha256(b"%d" % seed).digest() * (n // 32 + 1))[:n]


def send(port, req, body=None):
    """Sends a SignedRequest; a HEAD response is read without a body."""
    with harness.connect(port, 30) as sock:
        sock.sendall(req.wire(body))
        return harness.Reader(sock).read_response(head_request=req.method == "HEAD")


def xml_code(body):
    start = body.find(b"<Code>")
    return body[start + 6:body.find(b"</Code>")].decode() if start >= 0 else None


def xml_field(body, name):
    start = body.find(b"<%s>" % name.encode())
    return body[start + len(name) + 2:body.find(b"</%s>" % name.encode())].decode() if start >= 0 else None


def _reflected_table(poly, width):
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _reflected_table(0x82F63B78, 32)
_CRC64NVME = _reflected_table(0x9A6C9329AC4BC9B5, 64)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _CRC32C[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc64nvme(b):
    c = 0xFFFFFFFFFFFFFFFF
    for x in b:
        c = _CRC64NVME[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFFFFFFFFFF


def b64(raw):
    return base64.b64encode(raw).decode()


# x-amz-checksum-<name> of a payload, independently of the server.
CHECKSUMS = {
    "crc32": lambda b: b64(zlib.crc32(b).to_bytes(4, "big")),
    "crc32c": lambda b: b64(crc32c(b).to_bytes(4, "big")),
    "crc64nvme": lambda b: b64(crc64nvme(b).to_bytes(8, "big")),
    "sha1": lambda b: b64(hashlib.sha1(b).digest()),
    "sha256": lambda b: b64(hashlib.sha256(b).digest()),
}
XML_NAME = {"crc32": "CRC32", "crc32c": "CRC32C", "crc64nvme": "CRC64NVME", "sha1": "SHA1", "sha256": "SHA256"}


class ServerTest(unittest.TestCase):
    """One hots3 for the class, with bucket "main"."""

    extra_config = ""

    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server(cls.extra_config).start()
        cls.port = cls.server.port
        cls.s3 = client(cls.port)
        cls.s3.create_bucket(Bucket="main")

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.server.stop() == 0
        finally:
            cls.server.cleanup()

    def raw(self, method, path, query=(), headers=None, body=b"", **kw):
        return send(self.port, s3.SignedRequest(method, path, query, headers, body=body, port=self.port, **kw))

    def assertError(self, r, status, code):
        self.assertEqual((r.status, xml_code(r.body)), (status, code), r.body)

    def exists(self, key, bucket="main"):
        return self.raw("HEAD", "/%s/%s" % (bucket, key)).status == 200


class RoutingTest(ServerTest):
    # Sub-resources of S3 that hots3 does not implement, per method, as the SDKs send them.
    UNIMPLEMENTED = [
        ("DELETE", "/main", "metadataTable"), ("DELETE", "/main", "metadataConfiguration"),
        ("DELETE", "/main", "policy"), ("DELETE", "/main", "website"), ("DELETE", "/main", "lifecycle"),
        ("DELETE", "/main", "cors"), ("DELETE", "/main", "tagging"), ("DELETE", "/main", "replication"),
        ("PUT", "/main", "versioning"), ("PUT", "/main", "metadataTable"), ("PUT", "/main", "object-lock"),
        ("GET", "/main", "website"), ("GET", "/main", "versions"), ("GET", "/main", "metadataTable"),
        ("POST", "/main", "metadataTable"), ("DELETE", "/main", "acl"),
        ("PUT", "/main/victim", "retention"), ("PUT", "/main/victim", "legal-hold"), ("PUT", "/main/victim", "tagging"),
        ("DELETE", "/main/victim", "tagging"),
        ("DELETE", "/main/victim", "retention"), ("PUT", "/main/victim", "restore"), ("POST", "/main/victim", "select"),
        ("GET", "/main/victim", "torrent"), ("GET", "/main/victim", "retention"),
        ("HEAD", "/main/victim", "acl"),
    ]

    def test_unimplemented_sub_resources_never_reach_the_plain_operation(self):
        self.s3.put_object(Bucket="main", Key="victim", Body=b"original")
        for method, path, sub in self.UNIMPLEMENTED:
            r = self.raw(method, path, query=[(sub, "")], body=b"" if method != "PUT" else b"replacement")
            self.assertEqual(r.status, 501, (method, path, sub, r.body))
            if method != "HEAD":
                self.assertEqual(xml_code(r.body), "NotImplemented", (method, path, sub))
            # Nothing happened: the bucket and the object are as they were.
            self.assertEqual(self.s3.get_object(Bucket="main", Key="victim")["Body"].read(), b"original", (method, sub))
        self.s3.head_bucket(Bucket="main")

    def test_delete_bucket_with_metadata_table_keeps_an_empty_bucket(self):
        # The bug this routing fixes: an empty bucket answered 204 to DELETE ?metadataTable and was gone.
        self.s3.create_bucket(Bucket="meta-table")
        r = self.raw("DELETE", "/meta-table", query=[("metadataTable", "")])
        self.assertError(r, 501, "NotImplemented")
        self.s3.head_bucket(Bucket="meta-table")
        self.s3.delete_bucket(Bucket="meta-table")

    def test_parameters_that_are_no_sub_resource_are_ignored(self):
        r = self.raw("PUT", "/main/ignored", query=[("x-id", "PutObject"), ("whatever", "1")], body=b"v")
        self.assertEqual(r.status, 200, r.body)
        r = self.raw("GET", "/main/ignored", query=[("x-id", "GetObject"), ("foo", "")])
        self.assertEqual((r.status, r.body), (200, b"v"))
        r = self.raw("GET", "/main", query=[("list-type", "2"), ("prefix", "ignored"), ("unknown-param", "x")])
        self.assertIn(b"<Key>ignored</Key>", r.body)
        r = self.raw("DELETE", "/main/ignored", query=[("x-id", "DeleteObject"), ("bogus", "")])
        self.assertEqual(r.status, 204)
        self.assertFalse(self.exists("ignored"))

    def test_a_part_number_without_an_upload_is_no_put_object(self):
        self.s3.put_object(Bucket="main", Key="not-a-part", Body=b"kept")
        r = self.raw("PUT", "/main/not-a-part", query=[("partNumber", "1")], body=b"overwrite?")
        self.assertError(r, 404, "NoSuchUpload")
        self.assertEqual(self.s3.get_object(Bucket="main", Key="not-a-part")["Body"].read(), b"kept")

    def test_two_sub_resources_and_other_methods(self):
        self.assertError(self.raw("GET", "/main", query=[("acl", ""), ("policy", "")]), 501, "NotImplemented")
        self.assertError(self.raw("POST", "/main"), 501, "NotImplemented")
        self.assertError(self.raw("POST", "/main/k"), 501, "NotImplemented")
        self.assertError(self.raw("PATCH", "/main/k"), 405, "MethodNotAllowed")
        self.assertError(self.raw("PUT", "/"), 405, "MethodNotAllowed")

    def test_implemented_sub_resources_still_route(self):
        self.s3.put_object(Bucket="main", Key="routed", Body=b"x")
        self.assertIn(b"<LocationConstraint", self.raw("GET", "/main", query=[("location", "")]).body)
        self.assertIn(b"<ListMultipartUploadsResult", self.raw("GET", "/main", query=[("uploads", "")]).body)
        self.assertIn(b"<VersioningConfiguration", self.raw("GET", "/main", query=[("versioning", "")]).body)
        self.assertIn(b"<AccessControlPolicy", self.raw("GET", "/main/routed", query=[("acl", "")]).body)
        self.assertIn(b"<Tagging", self.raw("GET", "/main/routed", query=[("tagging", "")]).body)
        self.assertError(self.raw("GET", "/main", query=[("policy", "")]), 404, "NoSuchBucketPolicy")


class VersionIdTest(ServerTest):
    """hots3 keeps no versions: "null" is the current object, any other id is not there."""

    def test_null_is_the_current_object(self):
        self.s3.put_object(Bucket="main", Key="v", Body=b"current")
        self.assertEqual(self.s3.get_object(Bucket="main", Key="v", VersionId="null")["Body"].read(), b"current")
        self.assertEqual(self.s3.head_object(Bucket="main", Key="v", VersionId="null")["ContentLength"], 7)
        self.s3.put_object(Bucket="main", Key="v-del", Body=b"x")
        self.s3.delete_object(Bucket="main", Key="v-del", VersionId="null")
        self.assertFalse(self.exists("v-del"))

    def test_any_other_version_does_not_exist(self):
        self.s3.put_object(Bucket="main", Key="w", Body=b"current")
        for method in ("GET", "DELETE"):
            r = self.raw(method, "/main/w", query=[("versionId", "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY")])
            self.assertError(r, 404, "NoSuchVersion")
            self.assertIn(b"<VersionId>3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY</VersionId>", r.body)
        self.assertEqual(self.raw("HEAD", "/main/w", query=[("versionId", "abc")]).status, 404)
        self.assertError(self.raw("GET", "/main/w", query=[("versionId", "")]), 400, "InvalidArgument")
        self.assertError(self.raw("GET", "/main/w", query=[("acl", ""), ("versionId", "abc")]), 404, "NoSuchVersion")
        with self.assertRaises(ClientError) as e:
            self.s3.copy_object(Bucket="main", Key="w-copy", CopySource={"Bucket": "main", "Key": "w", "VersionId": "abc"})
        self.assertEqual(error_code(e.exception), "NoSuchVersion")
        r = self.s3.delete_objects(Bucket="main", Delete={"Objects": [{"Key": "w", "VersionId": "abc"}]})
        self.assertEqual([(x["Key"], x["VersionId"], x["Code"]) for x in r["Errors"]], [("w", "abc", "NoSuchVersion")])
        # The current object was never touched.
        self.assertEqual(self.s3.get_object(Bucket="main", Key="w")["Body"].read(), b"current")


class AuthTest(ServerTest):
    def test_any_region_is_accepted_without_region_check(self):
        self.assertEqual(self.raw("GET", "/main", region="eu-west-1").status, 200)
        r = self.raw("GET", s3.presign_v4("GET", "/main", self.port, region="ap-south-1").split("?")[0])
        target = s3.presign_v4("GET", "/main", self.port, region="ap-south-1")
        self.assertEqual(harness.request(self.port, "GET", target).status, 200)
        del r

    def test_host_must_be_signed(self):
        # As S3: 403 AccessDenied naming the header, for a signature and for a presigned URL.
        r = self.raw("GET", "/main", unsigned=("host",))
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<HeadersNotSigned>host</HeadersNotSigned>", r.body)
        target = s3.presign_v4("GET", "/main", self.port, signed=("x-amz-meta-a",), headers={"x-amz-meta-a": "1"})
        r = harness.request(self.port, "GET", target, {"x-amz-meta-a": "1"})
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<HeadersNotSigned>host</HeadersNotSigned>", r.body)
        # Signed, other headers may stay unsigned (Content-Type here).
        self.assertEqual(self.raw("GET", "/main", headers={"content-type": "text/plain"}, unsigned=("content-type",)).status, 200)

    def test_aws_chunked_needs_a_valid_decoded_length(self):
        payload = data(1000, 40)
        # S3 answers a missing and a malformed length alike.
        for decoded, status, code in ((None, 411, "MissingContentLength"), ("abc", 411, "MissingContentLength"),
                                      ("-5", 411, "MissingContentLength"), ("0x3e8", 411, "MissingContentLength"),
                                      ("", 411, "MissingContentLength")):
            headers = {"content-encoding": "aws-chunked"}
            if decoded is not None:
                headers["x-amz-decoded-content-length"] = decoded
            req = s3.SignedRequest("PUT", "/main/no-length", port=self.port, headers=headers,
                                   payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
            r = send(self.port, req, s3.aws_chunked_signed(req, payload))
            self.assertError(r, status, code)
            # Unsigned chunks in HTTP chunked framing, the length nowhere: the same.
            headers["transfer-encoding"] = "chunked"
            req = s3.SignedRequest("PUT", "/main/no-length", port=self.port, headers=headers,
                                   payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
            inner = s3.aws_chunked_unsigned(payload)
            r = send(self.port, req, b"%x\r\n%s\r\n0\r\n\r\n" % (len(inner), inner))
            self.assertError(r, status, code)
        self.assertFalse(self.exists("no-length"))


class RegionCheckTest(ServerTest):
    extra_config = '\n[s3]\nregion = "eu-west-1"\nregion_check = true\n'

    @classmethod
    def setUpClass(cls):
        cls.server = s3.hots3_server(cls.extra_config).start()
        cls.port = cls.server.port
        cls.s3 = client(cls.port, region="eu-west-1")
        cls.s3.create_bucket(Bucket="main", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})

    def test_signatures_must_name_the_configured_region(self):
        self.assertEqual(self.raw("GET", "/main", region="eu-west-1").status, 200)
        r = self.raw("GET", "/main", region="us-east-1")
        self.assertError(r, 400, "AuthorizationHeaderMalformed")
        self.assertIn(b"<Region>eu-west-1</Region>", r.body)
        self.assertIn(b"the region 'us-east-1' is wrong; expecting 'eu-west-1'", r.body)
        self.assertEqual(harness.request(self.port, "GET", s3.presign_v4("GET", "/main", self.port, region="eu-west-1")).status, 200)
        r = harness.request(self.port, "GET", s3.presign_v4("GET", "/main", self.port, region="us-east-1"))
        self.assertError(r, 400, "AuthorizationQueryParametersError")
        self.assertIn(b"<Region>eu-west-1</Region>", r.body)
        # boto3 configured for another region learns the right one from <Region> and retries.
        self.assertEqual(client(self.port, region="us-west-2").list_objects_v2(Bucket="main")["KeyCount"], 0)

    def test_a_bucket_for_another_region_is_refused(self):
        # S3's regional endpoints: a LocationConstraint that is not theirs is an error.
        with self.assertRaises(ClientError) as e:
            self.s3.create_bucket(Bucket="elsewhere", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        self.assertEqual(e.exception.response["Error"]["Code"], "IllegalLocationConstraintException")
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        self.s3.create_bucket(Bucket="here", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        self.assertEqual(self.s3.get_bucket_location(Bucket="here")["LocationConstraint"], "eu-west-1")
        self.assertNotIn("elsewhere", [b["Name"] for b in self.s3.list_buckets()["Buckets"]])
        # No constraint means us-east-1, not this endpoint's region; "EU" is eu-west-1.
        r = self.raw("PUT", "/no-constraint", region="eu-west-1")
        self.assertError(r, 400, "IllegalLocationConstraintException")
        self.assertIn(b"The unspecified location constraint is incompatible", r.body)
        self.s3.create_bucket(Bucket="legacy-eu", CreateBucketConfiguration={"LocationConstraint": "EU"})


class MultipartChecksumTest(ServerTest):
    """The checksum of a multipart object: FULL_OBJECT (one CRC of the whole object, combined
    from the parts' CRCs) or COMPOSITE (a checksum of the parts' checksums, "-N")."""

    MiB = 1024 * 1024

    def create(self, key, headers=None):
        r = self.raw("POST", "/main/" + key, query=[("uploads", "")], headers=headers)
        self.assertEqual(r.status, 200, r.body)
        return r, xml_field(r.body, "UploadId")

    def part(self, key, upload, n, body, headers=None):
        r = self.raw("PUT", "/main/" + key, query=[("partNumber", str(n)), ("uploadId", upload)], headers=headers, body=body)
        self.assertEqual(r.status, 200, r.body)
        return r

    def complete(self, key, upload, parts, headers=None):
        """`parts`: (number, upload part response, extra XML)."""
        xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>%s</Part>" % (n, r.header("etag"), extra)
            for n, r, extra in parts)
        return self.raw("POST", "/main/" + key, query=[("uploadId", upload)], headers=headers, body=xml.encode())

    def checksum_headers(self, key, query=()):
        r = self.raw("HEAD", "/main/" + key, query=query, headers={"x-amz-checksum-mode": "ENABLED"})
        self.assertIn(r.status, (200, 206))
        return {k.lower(): v for k, v in r.headers if k.lower().startswith("x-amz-checksum-")}

    def test_default_is_a_full_object_crc64nvme_combined_from_the_parts(self):
        parts = [data(5 * self.MiB, 50), data(5 * self.MiB + 3, 51), data(777, 52)]
        whole = b"".join(parts)
        _, upload = self.create("default")
        sent = [self.part("default", upload, n, body) for n, body in enumerate(parts, start=1)]
        # Each part has its own CRC64NVME (S3's default checksum), returned as it is stored.
        part_crcs = [r.header("x-amz-checksum-crc64nvme") for r in sent]
        self.assertNotIn(None, part_crcs)
        self.assertEqual(part_crcs[2], CHECKSUMS["crc64nvme"](parts[2]))
        r = self.complete("default", upload, [(n, p, "") for n, p in enumerate(sent, start=1)])
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(xml_field(r.body, "ChecksumType"), "FULL_OBJECT")
        # The same bytes in one PUT: the server's CRC64NVME of the stream, not a combination.
        single = self.raw("PUT", "/main/default-single", body=whole)
        self.assertEqual(xml_field(r.body, "ChecksumCRC64NVME"), single.header("x-amz-checksum-crc64nvme"))
        self.assertEqual(self.checksum_headers("default"), {"x-amz-checksum-crc64nvme": single.header("x-amz-checksum-crc64nvme"),
                                                           "x-amz-checksum-type": "FULL_OBJECT"})
        got = self.raw("GET", "/main/default", headers={"x-amz-checksum-mode": "ENABLED"})
        self.assertEqual(got.body, whole)
        self.assertEqual(got.header("x-amz-checksum-crc64nvme"), single.header("x-amz-checksum-crc64nvme"))
        # A part read alone carries that part's checksum.
        for n in (1, 3):
            self.assertEqual(self.checksum_headers("default", [("partNumber", str(n))])["x-amz-checksum-crc64nvme"],
                             part_crcs[n - 1])
        # Without the checksum mode, no checksum.
        self.assertIsNone(self.raw("HEAD", "/main/default").header("x-amz-checksum-crc64nvme"))

    def test_full_object_crc32_and_crc32c(self):
        parts = [data(5 * self.MiB + 1, 53), data(4321, 54)]
        whole = b"".join(parts)
        for name in ("crc32", "crc32c"):
            key = "full-" + name
            r, upload = self.create(key, {"x-amz-checksum-algorithm": name.upper(), "x-amz-checksum-type": "FULL_OBJECT"})
            self.assertEqual(r.header("x-amz-checksum-algorithm"), name.upper())
            self.assertEqual(r.header("x-amz-checksum-type"), "FULL_OBJECT")
            # Part 1 with the client's checksum, part 2 without (the server computes it).
            sent = [self.part(key, upload, 1, parts[0], {"x-amz-checksum-" + name: CHECKSUMS[name](parts[0])}),
                    self.part(key, upload, 2, parts[1])]
            self.assertEqual(sent[1].header("x-amz-checksum-" + name), CHECKSUMS[name](parts[1]))
            listed = [(n, p, "<Checksum%s>%s</Checksum%s>" % (XML_NAME[name], p.header("x-amz-checksum-" + name), XML_NAME[name]))
                      for n, p in enumerate(sent, start=1)]
            # The whole object's checksum, claimed on Complete, is compared.
            wrong = self.complete(key, upload, listed, {"x-amz-checksum-" + name: CHECKSUMS[name](whole + b"!")})
            self.assertError(wrong, 400, "BadDigest")
            want = CHECKSUMS["crc32"](whole) if name == "crc32" else None
            r = self.complete(key, upload, listed, {"x-amz-checksum-" + name: want} if want else None)
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(xml_field(r.body, "ChecksumType"), "FULL_OBJECT")
            value = xml_field(r.body, "Checksum" + XML_NAME[name])
            if name == "crc32":
                self.assertEqual(value, want)
            else:  # the streaming CRC32C of the same bytes
                single = self.raw("PUT", "/main/single-crc32c", headers={"x-amz-checksum-crc32c": value}, body=whole)
                self.assertEqual(single.status, 200, single.body)
            self.assertEqual(self.checksum_headers(key), {"x-amz-checksum-" + name: value, "x-amz-checksum-type": "FULL_OBJECT"})
            self.assertEqual(self.checksum_headers(key, [("partNumber", "2")])["x-amz-checksum-" + name],
                             CHECKSUMS[name](parts[1]))

    def test_composite_checksums_are_of_the_parts_checksums(self):
        parts = [data(5 * self.MiB, 55), data(1000, 56)]
        for name in ("crc32", "crc32c", "sha1", "sha256"):
            key = "composite-" + name
            r, upload = self.create(key, {"x-amz-checksum-algorithm": name.upper()})
            self.assertEqual(r.header("x-amz-checksum-type"), "COMPOSITE")  # the default for these
            sent = [self.part(key, upload, n, body, {"x-amz-checksum-" + name: CHECKSUMS[name](body)})
                    for n, body in enumerate(parts, start=1)]
            listed = [(n, p, "<Checksum%s>%s</Checksum%s>" % (XML_NAME[name], p.header("x-amz-checksum-" + name), XML_NAME[name]))
                      for n, p in enumerate(sent, start=1)]
            # A part checksum left out of the list: S3's InvalidRequest.
            self.assertError(self.complete(key, upload, [(n, p, "") for n, p, _ in listed]), 400, "InvalidRequest")
            r = self.complete(key, upload, listed)
            self.assertEqual(r.status, 200, r.body)
            raw = b"".join(base64.b64decode(CHECKSUMS[name](body)) for body in parts)
            want = CHECKSUMS[name](raw) + "-2"
            self.assertEqual(xml_field(r.body, "Checksum" + XML_NAME[name]), want)
            self.assertEqual(xml_field(r.body, "ChecksumType"), "COMPOSITE")
            self.assertEqual(self.checksum_headers(key), {"x-amz-checksum-" + name: want, "x-amz-checksum-type": "COMPOSITE"})
            self.assertEqual(self.checksum_headers(key, [("partNumber", "1")])["x-amz-checksum-" + name],
                             CHECKSUMS[name](parts[0]))

    def test_types_an_algorithm_does_not_have(self):
        for algorithm, kind in (("CRC64NVME", "COMPOSITE"), ("SHA1", "FULL_OBJECT"), ("SHA256", "FULL_OBJECT")):
            r = self.raw("POST", "/main/no-such-type", query=[("uploads", "")],
                         headers={"x-amz-checksum-algorithm": algorithm, "x-amz-checksum-type": kind})
            self.assertError(r, 400, "InvalidRequest")
        r, upload = self.create("crc64-full", {"x-amz-checksum-algorithm": "CRC64NVME"})
        self.assertEqual(r.header("x-amz-checksum-type"), "FULL_OBJECT")
        small = data(100, 57)
        p = self.part("crc64-full", upload, 1, small)
        r = self.complete("crc64-full", upload, [(1, p, "")])
        self.assertEqual(xml_field(r.body, "ChecksumCRC64NVME"), CHECKSUMS["crc64nvme"](small))

    def test_boto3_transfer_manager(self):
        from boto3.s3.transfer import TransferConfig
        import tempfile
        body = data(12 * self.MiB + 5, 58)
        with tempfile.NamedTemporaryFile() as f:
            f.write(body)
            f.flush()
            self.s3.upload_file(f.name, "main", "tm", Config=TransferConfig(multipart_threshold=5 * self.MiB,
                                                                            multipart_chunksize=5 * self.MiB))
        head = self.s3.head_object(Bucket="main", Key="tm", ChecksumMode="ENABLED")
        if "ChecksumCRC32" in head:  # boto3 >= 1.36: CRC32 parts, a composite object checksum
            self.assertTrue(head["ChecksumCRC32"].endswith("-3"), head)
        else:  # older: no checksum asked for, S3's default (botocore 1.26 knows no CRC64NVME field)
            headers = head["ResponseMetadata"]["HTTPHeaders"]
            single = self.raw("PUT", "/main/tm-single", body=body)
            self.assertEqual(headers["x-amz-checksum-crc64nvme"], single.header("x-amz-checksum-crc64nvme"))
            self.assertEqual(headers["x-amz-checksum-type"], "FULL_OBJECT")
        self.assertEqual(self.s3.get_object(Bucket="main", Key="tm")["Body"].read(), body)



class DeleteObjectsTest(ServerTest):
    def delete(self, xml, headers=None):
        return self.raw("POST", "/main", query=[("delete", "")], headers=headers, body=xml)

    @staticmethod
    def md5(body):
        return {"content-md5": b64(hashlib.md5(body).digest())}

    def test_an_integrity_header_with_a_true_value_is_required(self):
        self.s3.put_object(Bucket="main", Key="d/kept", Body=b"x")
        body = b"<Delete><Object><Key>d/kept</Key></Object></Delete>"
        for headers in (None, {"x-amz-sdk-checksum-algorithm": "CRC32"}):
            r = self.delete(body, headers)
            self.assertError(r, 400, "InvalidRequest")
            self.assertIn(b"Missing required header for this request: Content-MD5 OR x-amz-checksum-*", r.body)
        r = self.delete(body, {"content-md5": b64(hashlib.md5(body + b" ").digest())})
        self.assertError(r, 400, "BadDigest")
        for name, checksum in CHECKSUMS.items():
            r = self.delete(body, {"x-amz-checksum-" + name: checksum(body + b" ")})
            self.assertError(r, 400, "BadDigest")
        self.assertTrue(self.exists("d/kept"))
        # Each checksum with its true value, and Content-MD5, do delete.
        for i, headers in enumerate([self.md5] + [lambda b, n=n, c=c: {"x-amz-checksum-" + n: c(b)} for n, c in CHECKSUMS.items()]):
            key = "d/%d" % i
            self.s3.put_object(Bucket="main", Key=key, Body=b"x")
            xml = b"<Delete><Object><Key>%s</Key></Object></Delete>" % key.encode()
            r = self.delete(xml, headers(xml))
            self.assertEqual(r.status, 200, r.body)
            self.assertIn(b"<Deleted><Key>%s</Key></Deleted>" % key.encode(), r.body)
            self.assertFalse(self.exists(key))
        # The checksum as an aws-chunked trailer (what SDKs streaming over TLS send).
        self.s3.put_object(Bucket="main", Key="d/trailer", Body=b"x")
        xml = b"<Delete><Object><Key>d/trailer</Key></Object></Delete>"
        req = s3.SignedRequest("POST", "/main", query=[("delete", "")], port=self.port,
                               payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                               headers={"content-encoding": "aws-chunked", "x-amz-trailer": "x-amz-checksum-crc32",
                                        "x-amz-decoded-content-length": str(len(xml))})
        r = send(self.port, req, s3.aws_chunked_unsigned(xml, trailer=("x-amz-checksum-crc32", CHECKSUMS["crc32"](xml))))
        self.assertEqual(r.status, 200, r.body)
        self.assertFalse(self.exists("d/trailer"))

    def test_malformed_requests(self):
        self.s3.put_object(Bucket="main", Key="d/safe", Body=b"x")
        too_many = b"<Delete>%s</Delete>" % b"".join(b"<Object><Key>d/%d</Key></Object>" % i for i in range(1001))
        for xml in (b"not xml", b"<Delete><Object><Key>d/safe</Key></Object>", b"<Remove><Object><Key>d/safe</Key></Object></Remove>",
                    b"<Delete><Object><VersionId>null</VersionId></Object></Delete>", b"<Delete></Delete>",
                    b"<Delete><Quiet>maybe</Quiet><Object><Key>d/safe</Key></Object></Delete>", too_many):
            r = self.delete(xml, self.md5(xml))
            self.assertError(r, 400, "MalformedXML")
        self.assertTrue(self.exists("d/safe"))
        thousand = b"<Delete><Quiet>true</Quiet>%s</Delete>" % b"".join(b"<Object><Key>d/%d</Key></Object>" % i for i in range(1000))
        r = self.delete(thousand, self.md5(thousand))
        self.assertEqual(r.status, 200, r.body)
        self.assertNotIn(b"<Deleted>", r.body)

    def test_boto3(self):
        self.s3.put_object(Bucket="main", Key="d/boto", Body=b"x")
        r = self.s3.delete_objects(Bucket="main", Delete={"Objects": [{"Key": "d/boto"}, {"Key": "d/never"}]})
        self.assertEqual(sorted(d["Key"] for d in r["Deleted"]), ["d/boto", "d/never"])


class ObjectReadTest(ServerTest):
    MiB = 1024 * 1024

    def assertIds(self, r):
        # Every error body names the request and the host, as the response headers do.
        self.assertEqual(xml_field(r.body, "RequestId"), r.header("x-amz-request-id"), r.body)
        self.assertEqual(xml_field(r.body, "HostId"), r.header("x-amz-id-2"), r.body)
        self.assertTrue(xml_field(r.body, "HostId"), r.body)

    def test_part_numbers(self):
        self.s3.put_object(Bucket="main", Key="pn-single", Body=b"hello")
        for bad in ("0", "10001", "abc", "-1", ""):
            r = self.raw("GET", "/main/pn-single", query=[("partNumber", bad)])
            self.assertError(r, 400, "InvalidArgument")
            self.assertEqual(xml_field(r.body, "ArgumentName"), "partNumber", bad)
            self.assertEqual(xml_field(r.body, "ArgumentValue"), bad)
            self.assertEqual(self.raw("HEAD", "/main/pn-single", query=[("partNumber", bad)]).status, 400, bad)
        r = self.raw("GET", "/main/pn-single", query=[("partNumber", "1")])
        self.assertEqual((r.status, r.body, r.header("x-amz-mp-parts-count")), (200, b"hello", "1"))
        # A part the object does not have: 416 InvalidPartNumber.
        r = self.raw("GET", "/main/pn-single", query=[("partNumber", "2")])
        self.assertError(r, 416, "InvalidPartNumber")
        self.assertIds(r)
        self.assertEqual(self.raw("HEAD", "/main/pn-single", query=[("partNumber", "2")]).status, 416)
        parts = [data(5 * self.MiB, 60), data(100, 61)]
        up = self.s3.create_multipart_upload(Bucket="main", Key="pn-multi")["UploadId"]
        etags = [self.s3.upload_part(Bucket="main", Key="pn-multi", UploadId=up, PartNumber=n, Body=b)["ETag"]
                 for n, b in enumerate(parts, start=1)]
        self.s3.complete_multipart_upload(Bucket="main", Key="pn-multi", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, start=1)]})
        r = self.raw("GET", "/main/pn-multi", query=[("partNumber", "2")])
        self.assertEqual((r.status, r.body, r.header("x-amz-mp-parts-count")), (206, parts[1], "2"))
        for beyond in ("3", "10000"):
            r = self.raw("GET", "/main/pn-multi", query=[("partNumber", beyond)])
            self.assertError(r, 416, "InvalidPartNumber")
            self.assertIn(b"<Message>The requested partnumber is not satisfiable</Message>", r.body)
        with self.assertRaises(ClientError) as e:
            self.s3.get_object(Bucket="main", Key="pn-multi", PartNumber=3)
        self.assertEqual(error_code(e.exception), "InvalidPartNumber")

    def test_version_null_reads_the_object_other_ids_do_not_exist(self):
        self.s3.put_object(Bucket="main", Key="vn", Body=b"now")
        for method in ("GET", "HEAD"):
            self.assertEqual(self.raw(method, "/main/vn", query=[("versionId", "null")]).status, 200, method)
            r = self.raw(method, "/main/vn", query=[("versionId", "Z3JlYXQ")])
            self.assertEqual(r.status, 404, method)
        self.assertError(self.raw("GET", "/main/vn", query=[("versionId", "Z3JlYXQ")]), 404, "NoSuchVersion")

    def test_invalid_range_error_body(self):
        self.s3.put_object(Bucket="main", Key="short", Body=b"0123456789")
        r = self.raw("GET", "/main/short", headers={"Range": "bytes=10-20"})
        self.assertError(r, 416, "InvalidRange")
        self.assertEqual(r.header("content-range"), "bytes */10")
        self.assertEqual(xml_field(r.body, "RangeRequested"), "bytes=10-20")
        self.assertEqual(xml_field(r.body, "ActualObjectSize"), "10")
        self.assertIds(r)


class ListMaxKeysTest(ServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for key in ("a", "b/1", "b/2", "c"):
            cls.s3.put_object(Bucket="main", Key=key, Body=b"x")

    def test_zero_is_an_empty_complete_page(self):
        for query in ([("list-type", "2")], [("list-type", "2"), ("delimiter", "/")], [], [("delimiter", "/")]):
            r = self.raw("GET", "/main", query=query + [("max-keys", "0")])
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(xml_field(r.body, "IsTruncated"), "false", query)
            self.assertEqual(xml_field(r.body, "MaxKeys"), "0")
            for absent in (b"<Contents>", b"<CommonPrefixes>", b"NextContinuationToken", b"NextMarker"):
                self.assertNotIn(absent, r.body, query)
            if query and query[0] == ("list-type", "2"):
                self.assertEqual(xml_field(r.body, "KeyCount"), "0")
        r = self.s3.list_objects_v2(Bucket="main", MaxKeys=0)
        self.assertEqual((r["KeyCount"], r["IsTruncated"], r.get("Contents")), (0, False, None))
        # One key per page still pages through everything.
        r = self.s3.list_objects_v2(Bucket="main", MaxKeys=1)
        self.assertEqual((r["KeyCount"], r["IsTruncated"]), (1, True))

    def test_v1_next_marker_only_with_a_delimiter(self):
        r = self.raw("GET", "/main", query=[("max-keys", "1")])
        self.assertEqual(xml_field(r.body, "IsTruncated"), "true")
        self.assertNotIn(b"<NextMarker>", r.body)  # the last key is the marker
        r = self.raw("GET", "/main", query=[("max-keys", "2"), ("delimiter", "/")])
        self.assertEqual((xml_field(r.body, "IsTruncated"), xml_field(r.body, "NextMarker")), ("true", "b/"))
        for delimiter in ("", "/"):
            keys = []
            for page in self.s3.get_paginator("list_objects").paginate(Bucket="main", Delimiter=delimiter,
                                                                       PaginationConfig={"PageSize": 1}):
                keys += [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            self.assertEqual(keys, ["a", "b/1", "b/2", "c"] if not delimiter else ["a", "b/", "c"], delimiter)

    def test_negative_or_not_a_number(self):
        for list_type in ([("list-type", "2")], []):
            for bad in ("-1", "abc", "1.5", "", "99999999999999999999"):
                r = self.raw("GET", "/main", query=list_type + [("max-keys", bad)])
                self.assertError(r, 400, "InvalidArgument")
                self.assertEqual(xml_field(r.body, "ArgumentName"), "max-keys")
                self.assertEqual(xml_field(r.body, "ArgumentValue"), bad)


class SizeLimitTest(ServerTest):
    """Limits configured small, so that S3's 5 GiB ones can be crossed in a test."""

    LIMIT = 6 * 1024 * 1024
    extra_config = "\n[s3]\nsingle_put_max = %d\n" % LIMIT

    def test_single_put_limit(self):
        self.assertEqual(self.raw("PUT", "/main/at-limit", body=data(self.LIMIT, 70)).status, 200)
        # Refused on the head alone (a client sending "Expect: 100-continue" never sends the body).
        payload = data(self.LIMIT + 1, 71)
        req = s3.SignedRequest("PUT", "/main/over-limit", port=self.port, body=payload,
                               headers={"expect": "100-continue", "content-length": str(len(payload))})
        r = send(self.port, req, b"")
        self.assertError(r, 400, "EntityTooLarge")
        self.assertEqual(xml_field(r.body, "ProposedSize"), str(self.LIMIT + 1))
        self.assertEqual(xml_field(r.body, "MaxSizeAllowed"), str(self.LIMIT))
        # The same limit holds for the decoded length of an aws-chunked body.
        req = s3.SignedRequest("PUT", "/main/over-limit", port=self.port, payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                               headers={"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(payload)),
                                        "expect": "100-continue",
                                        "content-length": str(len(s3.aws_chunked_signed(s3.SignedRequest(
                                            "PUT", "/", port=self.port), payload)))})
        r = send(self.port, req, b"")
        self.assertError(r, 400, "EntityTooLarge")
        self.assertEqual(xml_field(r.body, "ProposedSize"), str(self.LIMIT + 1))
        with self.assertRaises(ClientError) as e:
            self.s3.put_object(Bucket="main", Key="over-limit", Body=payload)
        self.assertEqual(error_code(e.exception), "EntityTooLarge")
        self.assertFalse(self.exists("over-limit"))

    def test_copy_source_limit(self):
        self.s3.put_object(Bucket="main", Key="copy-small", Body=data(self.LIMIT, 73))
        self.s3.copy_object(Bucket="main", Key="copy-small-2", CopySource="main/copy-small")
        self.assertEqual(self.s3.head_object(Bucket="main", Key="copy-small-2")["ContentLength"], self.LIMIT)
        # A multipart object larger than a single PUT may be: too large for CopyObject.
        up = self.s3.create_multipart_upload(Bucket="main", Key="copy-big")["UploadId"]
        parts = [data(5 * 1024 * 1024, 74), data(5 * 1024 * 1024, 75)]
        etags = [self.s3.upload_part(Bucket="main", Key="copy-big", UploadId=up, PartNumber=n, Body=b)["ETag"]
                 for n, b in enumerate(parts, start=1)]
        self.s3.complete_multipart_upload(Bucket="main", Key="copy-big", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, start=1)]})
        r = self.raw("PUT", "/main/copy-big-2", headers={"x-amz-copy-source": "/main/copy-big"})
        self.assertError(r, 400, "InvalidRequest")
        self.assertIn(b"<Message>The specified copy source is larger than the maximum allowable size for a copy source: %d</Message>"
                      % self.LIMIT, r.body)
        self.assertFalse(self.exists("copy-big-2"))
        # UploadPartCopy too: the whole source is too large for one part, a range of it is not.
        up = self.s3.create_multipart_upload(Bucket="main", Key="copy-parts")["UploadId"]
        r = self.raw("PUT", "/main/copy-parts", query=[("partNumber", "1"), ("uploadId", up)],
                     headers={"x-amz-copy-source": "/main/copy-big"})
        self.assertError(r, 400, "InvalidRequest")
        self.assertIn(b"larger than the maximum allowable size for a copy source: %d" % self.LIMIT, r.body)
        self.s3.upload_part_copy(Bucket="main", Key="copy-parts", UploadId=up, PartNumber=1,
                                 CopySource="main/copy-big", CopySourceRange="bytes=0-%d" % (self.LIMIT - 1))
        self.assertEqual([p["Size"] for p in self.s3.list_parts(Bucket="main", Key="copy-parts", UploadId=up)["Parts"]],
                         [self.LIMIT])


class MetadataLimitTest(ServerTest):
    def test_2048_bytes_of_names_and_values(self):
        # S3 counts the UTF-8 bytes of each name (without "x-amz-meta-") and value.
        exact = {"x-amz-meta-k": "v" * 2047}
        self.assertEqual(self.raw("PUT", "/main/meta-2048", headers=exact, body=b"x").status, 200)
        self.assertEqual(self.s3.head_object(Bucket="main", Key="meta-2048")["Metadata"], {"k": "v" * 2047})
        split = {"x-amz-meta-one": "a" * 1000, "x-amz-meta-two": "b" * 1042}
        self.assertEqual(self.raw("PUT", "/main/meta-split", headers=split, body=b"x").status, 200)
        for over in ({"x-amz-meta-k": "v" * 2048}, {"x-amz-meta-one": "a" * 1000, "x-amz-meta-two": "b" * 1043}):
            r = self.raw("PUT", "/main/meta-2049", headers=over, body=b"x")
            self.assertError(r, 400, "MetadataTooLarge")
        self.assertFalse(self.exists("meta-2049"))


class ChecksumTransferTest(ServerTest):
    """Each checksum algorithm as a header, an unsigned trailer and a signed trailer."""

    PAYLOAD = data(70000, 80)  # two aws-chunked chunks

    def put(self, mode, key, name, value, tamper_trailer_signature=False):
        payload = self.PAYLOAD
        header = "x-amz-checksum-" + name
        if mode == "header":
            return self.raw("PUT", "/main/" + key, headers={header: value}, body=payload)
        headers = {"content-encoding": "aws-chunked", "x-amz-trailer": header,
                   "x-amz-decoded-content-length": str(len(payload))}
        if mode == "unsigned-trailer":
            req = s3.SignedRequest("PUT", "/main/" + key, port=self.port, headers=headers,
                                   payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
            return send(self.port, req, s3.aws_chunked_unsigned(payload, trailer=(header, value)))
        req = s3.SignedRequest("PUT", "/main/" + key, port=self.port, headers=headers,
                               payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
        body = s3.aws_chunked_signed(req, payload, trailer=(header, value))
        if tamper_trailer_signature:
            at = body.rindex(b"x-amz-trailer-signature:") + len(b"x-amz-trailer-signature:")
            body = body[:at] + b"0" * 64 + body[at + 64:]
        return send(self.port, req, body)

    def test_every_algorithm_in_every_mode(self):
        for mode in ("header", "unsigned-trailer", "signed-trailer"):
            for name, checksum in CHECKSUMS.items():
                key = "ck/%s/%s" % (mode, name)
                right = checksum(self.PAYLOAD)
                r = self.put(mode, key, name, right)
                self.assertEqual(r.status, 200, (mode, name, r.body))
                self.assertEqual(r.header("x-amz-checksum-" + name), right, (mode, name))
                for method in ("GET", "HEAD"):
                    got = self.raw(method, "/main/" + key, headers={"x-amz-checksum-mode": "ENABLED"})
                    self.assertEqual(got.header("x-amz-checksum-" + name), right, (mode, name, method))
                    self.assertEqual(got.header("x-amz-checksum-type"), "FULL_OBJECT", (mode, name, method))
                    # The one checksum asked for; no default CRC64NVME besides it.
                    stored = [h for h, _ in got.headers if h.lower().startswith("x-amz-checksum-") and h.lower() != "x-amz-checksum-type"]
                    self.assertEqual(len(stored), 1, (mode, name, got.headers))
                self.assertEqual(self.raw("GET", "/main/" + key).body, self.PAYLOAD, (mode, name))
                # A wrong value (the right one of other bytes): BadDigest, nothing stored.
                wrong_key = key + "-wrong"
                r = self.put(mode, wrong_key, name, checksum(self.PAYLOAD + b"!"))
                self.assertError(r, 400, "BadDigest")
                self.assertFalse(self.exists(wrong_key), (mode, name))

    def test_bad_trailer_signature(self):
        for name, checksum in CHECKSUMS.items():
            key = "ck/bad-trailer-signature/" + name
            r = self.put("signed-trailer", key, name, checksum(self.PAYLOAD), tamper_trailer_signature=True)
            self.assertError(r, 403, "SignatureDoesNotMatch")
            self.assertFalse(self.exists(key), name)


class PresignedTimeTest(ServerTest):
    def test_expired_sigv2(self):
        self.s3.put_object(Bucket="main", Key="p2", Body=b"v2")
        now = int(time.time())
        self.assertEqual(harness.request(self.port, "GET", s3.presign_v2("GET", "/main/p2", now + 60)).body, b"v2")
        r = harness.request(self.port, "GET", s3.presign_v2("GET", "/main/p2", now - 5))
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<Message>Request has expired</Message>", r.body)

    def test_expired_sigv4(self):
        self.s3.put_object(Bucket="main", Key="p4x", Body=b"v4")
        when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=2)
        r = harness.request(self.port, "GET", s3.presign_v4("GET", "/main/p4x", self.port, when=when, expires_s=60))
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<Message>Request has expired</Message>", r.body)
        self.assertEqual(xml_field(r.body, "X-Amz-Expires"), "60")
        # boto3's own presigned URL (SigV4), a second after it expired.
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": "main", "Key": "p4x"}, ExpiresIn=1)
        time.sleep(2.1)
        r = harness.request(self.port, "GET", url.split(str(self.port), 1)[1])
        self.assertError(r, 403, "AccessDenied")

    def test_sigv4_signed_in_the_future(self):
        self.s3.put_object(Bucket="main", Key="p4", Body=b"v4")
        now = datetime.datetime.now(datetime.timezone.utc)
        # Within the clock-skew window (15 minutes): valid.
        r = harness.request(self.port, "GET", s3.presign_v4("GET", "/main/p4", self.port, when=now + datetime.timedelta(minutes=5)))
        self.assertEqual((r.status, r.body), (200, b"v4"))
        # Beyond it: S3's AccessDenied "Request is not yet valid".
        when = now + datetime.timedelta(hours=1)
        r = harness.request(self.port, "GET", s3.presign_v4("GET", "/main/p4", self.port, when=when, expires_s=3600))
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<Message>Request is not yet valid</Message>", r.body)
        self.assertEqual(xml_field(r.body, "X-Amz-Date"), str(int(when.replace(microsecond=0).timestamp()) * 1000))


class CopyConditionTest(ServerTest):
    def test_copy_source_conditions_and_their_precedence(self):
        put = self.s3.put_object(Bucket="main", Key="cc-src", Body=b"source")
        etag = put["ETag"]
        modified = self.raw("HEAD", "/main/cc-src").header("last-modified")
        past = "Sat, 01 Jan 2000 00:00:00 GMT"
        p = "x-amz-copy-source-"
        cases = [
            ({p + "if-match": etag}, None), ({p + "if-match": '"nope"'}, "x-amz-copy-source-If-Match"),
            ({p + "if-none-match": '"nope"'}, None), ({p + "if-none-match": etag}, "x-amz-copy-source-If-None-Match"),
            ({p + "if-modified-since": past}, None), ({p + "if-modified-since": modified}, "x-amz-copy-source-If-Modified-Since"),
            ({p + "if-unmodified-since": modified}, None), ({p + "if-unmodified-since": past}, "x-amz-copy-source-If-Unmodified-Since"),
            # As S3 documents: if-match true and if-unmodified-since false copy;
            ({p + "if-match": etag, p + "if-unmodified-since": past}, None),
            # if-none-match false and if-modified-since true fail.
            ({p + "if-none-match": etag, p + "if-modified-since": past}, "x-amz-copy-source-If-None-Match"),
        ]
        for n, (headers, failed) in enumerate(cases):
            key = "cc-dst-%d" % n
            r = self.raw("PUT", "/main/" + key, headers=dict(headers, **{"x-amz-copy-source": "/main/cc-src"}))
            if failed is None:
                self.assertEqual(r.status, 200, (headers, r.body))
                self.assertEqual(self.s3.get_object(Bucket="main", Key=key)["Body"].read(), b"source")
            else:
                self.assertError(r, 412, "PreconditionFailed")
                self.assertEqual(xml_field(r.body, "Condition"), failed, headers)
                self.assertFalse(self.exists(key), headers)
        with self.assertRaises(ClientError) as e:
            self.s3.copy_object(Bucket="main", Key="cc-boto", CopySource="main/cc-src", CopySourceIfNoneMatch=etag)
        self.assertEqual(error_code(e.exception), "PreconditionFailed")


class ClientDefaultsTest(ServerTest):
    """What real clients send at their defaults, answered as S3 answers it."""

    def test_content_encoding_is_kept_as_sent_without_aws_chunked(self):
        self.s3.put_object(Bucket="main", Key="enc", Body=b"x", ContentEncoding="deflate, gzip")
        self.assertEqual(self.s3.head_object(Bucket="main", Key="enc")["ContentEncoding"], "deflate, gzip")
        payload = data(1000, 41)
        for sent, stored in (("aws-chunked, deflate, gzip", "deflate, gzip"), ("gzip,aws-chunked", "gzip"),
                             ("aws-chunked", None)):
            req = s3.SignedRequest("PUT", "/main/enc-chunked", port=self.port,
                                   headers={"content-encoding": sent, "x-amz-decoded-content-length": str(len(payload))},
                                   payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
            self.assertEqual(send(self.port, req, s3.aws_chunked_signed(req, payload)).status, 200, sent)
            self.assertEqual(self.raw("HEAD", "/main/enc-chunked").header("content-encoding"), stored, sent)

    def test_start_after_is_echoed_beside_a_continuation_token(self):
        for key in ("sa/a", "sa/b", "sa/c", "sa/d"):
            self.s3.put_object(Bucket="main", Key=key, Body=b"")
        first = self.s3.list_objects_v2(Bucket="main", Prefix="sa/", StartAfter="sa/a", MaxKeys=1)
        self.assertEqual([o["Key"] for o in first["Contents"]], ["sa/b"])
        second = self.s3.list_objects_v2(Bucket="main", Prefix="sa/", StartAfter="sa/a", MaxKeys=1,
                                         ContinuationToken=first["NextContinuationToken"])
        self.assertEqual(second["StartAfter"], "sa/a")
        self.assertEqual([o["Key"] for o in second["Contents"]], ["sa/c"])

    def test_url_encoded_listings_round_trip_a_control_character(self):
        # boto3 asks for encoding-type=url on every listing and decodes the fields S3 encodes:
        # keys and common prefixes (which may hold characters XML cannot carry) in both
        # versions, V2's Prefix and StartAfter, V1's Marker. V1's Prefix goes back as sent.
        prefix = "ctl\x01dir é+"
        self.s3.put_object(Bucket="main", Key=prefix + "/sub/k\x02", Body=b"")
        self.s3.put_object(Bucket="main", Key=prefix + "/k\x03", Body=b"")
        v1 = self.s3.list_objects(Bucket="main", Prefix="ctl", Delimiter="/", Marker="ctl\x01")
        self.assertEqual((v1["Prefix"], v1["Delimiter"], v1["Marker"]), ("ctl", "/", "ctl\x01"))
        self.assertEqual([p["Prefix"] for p in v1["CommonPrefixes"]], [prefix + "/"])
        v1 = self.s3.list_objects(Bucket="main", Prefix="ctl", MaxKeys=1, Delimiter="\x03")
        self.assertEqual([p["Prefix"] for p in v1.get("CommonPrefixes", [])], [prefix + "/k\x03"])
        self.assertEqual(v1["Delimiter"], "\x03")
        v2 = self.s3.list_objects_v2(Bucket="main", Prefix=prefix + "/", StartAfter=prefix + "/")
        self.assertEqual((v2["Prefix"], v2["StartAfter"]), (prefix + "/", prefix + "/"))
        self.assertEqual([o["Key"] for o in v2["Contents"]], [prefix + "/k\x03", prefix + "/sub/k\x02"])
        v2 = self.s3.list_objects_v2(Bucket="main", Prefix=prefix + "/", Delimiter="/")
        self.assertEqual([p["Prefix"] for p in v2["CommonPrefixes"]], [prefix + "/sub/"])

    def test_a_date_header_beside_x_amz_date(self):
        # SigV4 takes its time from x-amz-date; a Date header beside it, signed or not, old or
        # empty, does not matter.
        self.s3.put_object(Bucket="main", Key="dated", Body=b"d")
        for headers, unsigned in (({"date": "Sat, 01 Jan 2000 00:00:00 GMT"}, ()),
                                  ({"date": "Sat, 01 Jan 2000 00:00:00 GMT"}, ("date",)),
                                  ({"date": ""}, ("date",))):
            r = self.raw("GET", "/main/dated", headers=headers, unsigned=unsigned)
            self.assertEqual((r.status, r.body), (200, b"d"), (headers, unsigned, r.body))


class ObjectAttributesTest(ServerTest):
    ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]

    def test_an_object_in_one_piece(self):
        put = self.s3.put_object(Bucket="main", Key="attr-one", Body=b"attributes", ChecksumAlgorithm="SHA256")
        got = self.s3.get_object_attributes(Bucket="main", Key="attr-one", ObjectAttributes=self.ALL)
        self.assertEqual(got["ETag"], put["ETag"].strip('"'))
        self.assertEqual(got["Checksum"]["ChecksumSHA256"], base64.b64encode(hashlib.sha256(b"attributes").digest()).decode())
        self.assertEqual((got["StorageClass"], got["ObjectSize"]), ("STANDARD", 10))
        self.assertNotIn("ObjectParts", got)  # not a multipart object
        self.assertEqual(got["LastModified"], self.s3.head_object(Bucket="main", Key="attr-one")["LastModified"])
        only = self.s3.get_object_attributes(Bucket="main", Key="attr-one", ObjectAttributes=["ObjectSize"])
        self.assertEqual(only["ObjectSize"], 10)
        self.assertNotIn("ETag", only)

    def test_the_parts_of_a_multipart_object_page_by_page(self):
        up = self.s3.create_multipart_upload(Bucket="main", Key="attr-mp", ChecksumAlgorithm="CRC32")["UploadId"]
        parts, sizes = [], [5 * 1024 * 1024, 5 * 1024 * 1024, 1234]
        for n, size in enumerate(sizes, 1):
            body = data(size, 80 + n)
            r = self.s3.upload_part(Bucket="main", Key="attr-mp", UploadId=up, PartNumber=n, Body=body,
                                    ChecksumAlgorithm="CRC32")
            parts.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
        done = self.s3.complete_multipart_upload(Bucket="main", Key="attr-mp", UploadId=up,
                                                 MultipartUpload={"Parts": parts})
        got = self.s3.get_object_attributes(Bucket="main", Key="attr-mp", ObjectAttributes=self.ALL, MaxParts=2)
        self.assertEqual(got["ETag"], done["ETag"].strip('"'))
        self.assertEqual(got["Checksum"]["ChecksumCRC32"], done["ChecksumCRC32"])
        self.assertEqual(got["ObjectSize"], sum(sizes))
        op = got["ObjectParts"]
        self.assertEqual((op["TotalPartsCount"], op["MaxParts"], op["IsTruncated"], op["NextPartNumberMarker"]),
                         (3, 2, True, 2))
        self.assertEqual([(p["PartNumber"], p["Size"], p["ChecksumCRC32"]) for p in op["Parts"]],
                         [(1, sizes[0], parts[0]["ChecksumCRC32"]), (2, sizes[1], parts[1]["ChecksumCRC32"])])
        rest = self.s3.get_object_attributes(Bucket="main", Key="attr-mp", ObjectAttributes=["ObjectParts"],
                                             MaxParts=2, PartNumberMarker=2)["ObjectParts"]
        self.assertEqual((rest["IsTruncated"], [p["PartNumber"] for p in rest["Parts"]]), (False, [3]))
        self.assertEqual(rest["Parts"][0]["Size"], 1234)

    def test_errors(self):
        with self.assertRaises(ClientError) as e:
            self.s3.get_object_attributes(Bucket="main", Key="attr-none", ObjectAttributes=["ETag"])
        self.assertEqual(error_code(e.exception), "NoSuchKey")
        self.s3.put_object(Bucket="main", Key="attr-e", Body=b"e")
        self.assertError(self.raw("GET", "/main/attr-e", query=[("attributes", "")]), 400, "InvalidArgument")
        r = self.raw("GET", "/main/attr-e", query=[("attributes", "")], headers={"x-amz-object-attributes": "ETag,Colour"})
        self.assertError(r, 400, "InvalidArgument")
        r = self.raw("GET", "/main/attr-e", query=[("attributes", "")],
                     headers={"x-amz-object-attributes": "ETag", "x-amz-max-parts": "many"})
        self.assertError(r, 400, "InvalidArgument")


class ConditionalDeleteTest(ServerTest):
    def supports(self, operation, member):
        return member in self.s3.meta.service_model.operation_model(operation).input_shape.members

    def test_delete_object_if_match_and_the_directory_bucket_conditions(self):
        put = self.s3.put_object(Bucket="main", Key="cd", Body=b"twelve bytes")
        modified = self.raw("HEAD", "/main/cd").header("last-modified")
        for headers in ({"if-match": '"0123456789abcdef0123456789abcdef"'}, {"x-amz-if-match-size": "11"},
                        {"x-amz-if-match-last-modified-time": "Sat, 01 Jan 2000 00:00:00 GMT"},
                        {"if-match": put["ETag"], "x-amz-if-match-size": "13"}):
            self.assertError(self.raw("DELETE", "/main/cd", headers=headers), 412, "PreconditionFailed")
            self.assertTrue(self.exists("cd"), headers)
        self.assertError(self.raw("DELETE", "/main/cd", headers={"x-amz-if-match-size": "x"}), 400, "InvalidArgument")
        r = self.raw("DELETE", "/main/cd", headers={"if-match": put["ETag"], "x-amz-if-match-size": "12",
                                                   "x-amz-if-match-last-modified-time": modified})
        self.assertEqual(r.status, 204, r.body)
        self.assertFalse(self.exists("cd"))
        # If-Match needs an object; the other two do not.
        self.assertError(self.raw("DELETE", "/main/cd", headers={"if-match": "*"}), 404, "NoSuchKey")
        self.assertEqual(self.raw("DELETE", "/main/cd", headers={"x-amz-if-match-size": "12"}).status, 204)
        self.s3.put_object(Bucket="main", Key="cd", Body=b"again")
        self.assertEqual(self.raw("DELETE", "/main/cd", headers={"if-match": "*"}).status, 204)
        if self.supports("DeleteObject", "IfMatch"):
            etag = self.s3.put_object(Bucket="main", Key="cd-boto", Body=b"b")["ETag"]
            with self.assertRaises(ClientError) as e:
                self.s3.delete_object(Bucket="main", Key="cd-boto", IfMatch='"%s"' % ("0" * 32))
            self.assertEqual(error_code(e.exception), "PreconditionFailed")
            self.s3.delete_object(Bucket="main", Key="cd-boto", IfMatch=etag)
            self.assertFalse(self.exists("cd-boto"))

    def test_delete_objects_with_an_etag_per_object(self):
        etags = {k: self.s3.put_object(Bucket="main", Key=k, Body=k.encode())["ETag"] for k in ("dm-a", "dm-b", "dm-c")}
        objects = [{"Key": "dm-a", "ETag": etags["dm-a"]}, {"Key": "dm-b", "ETag": '"%s"' % ("0" * 32)},
                   {"Key": "dm-c"}, {"Key": "dm-none", "ETag": etags["dm-a"]}]
        if "ETag" in self.s3.meta.service_model.shape_for("ObjectIdentifier").members:
            r = self.s3.delete_objects(Bucket="main", Delete={"Objects": objects})
            deleted = sorted(d["Key"] for d in r["Deleted"])
            errors = sorted((e["Key"], e["Code"]) for e in r["Errors"])
        else:  # boto3 before conditional deletes: the same document by hand
            body = "<Delete>%s</Delete>" % "".join(
                "<Object><Key>%s</Key>%s</Object>" % (o["Key"], "<ETag>%s</ETag>" % o["ETag"] if "ETag" in o else "")
                for o in objects)
            r = self.raw("POST", "/main", query=[("delete", "")], body=body.encode(),
                         headers={"content-md5": base64.b64encode(hashlib.md5(body.encode()).digest()).decode()})
            self.assertEqual(r.status, 200, r.body)
            deleted = sorted(re.findall(r"<Deleted><Key>([^<]*)</Key>", r.body.decode()))
            errors = sorted(re.findall(r"<Error><Key>([^<]*)</Key><Code>([^<]*)</Code>", r.body.decode()))
        self.assertEqual(deleted, ["dm-a", "dm-c"])
        self.assertEqual(errors, [("dm-b", "PreconditionFailed"), ("dm-none", "NoSuchKey")])
        self.assertTrue(self.exists("dm-b"))


class LostResponseTest(ServerTest):
    """SDKs retry a request whose response was lost. Here the client loses it: the request goes
    out and is answered (the server finished it), then the client drops the answer as a broken
    connection would, and botocore's own retry sends it again. The retry must get the answer
    the first one would have got."""

    def lossy_client(self, operation):
        # At the SDK's own retry settings.
        c = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % self.port, aws_access_key_id=s3.ACCESS_KEY,
                         aws_secret_access_key=s3.SECRET_KEY, region_name=s3.REGION,
                         config=Config(s3={"addressing_style": "path"}))
        endpoint = c._endpoint
        real_send = endpoint.http_session.send
        lost = []

        def send_losing_first(request):
            response = real_send(request)
            response.content  # read to its end: the server has answered
            if not lost and self.current_operation[0] == operation:
                lost.append(request.url)
                raise botocore.exceptions.ConnectionClosedError(endpoint_url=request.url)
            return response
        endpoint.http_session.send = send_losing_first
        self.current_operation = [None]

        def note_operation(model, **_):
            self.current_operation[0] = model.name
        c.meta.events.register("before-call.s3", note_operation)
        return c, lost

    def test_complete_multipart_upload(self):
        c, lost = self.lossy_client("CompleteMultipartUpload")
        up = c.create_multipart_upload(Bucket="main", Key="lr-mp", ChecksumAlgorithm="CRC32")["UploadId"]
        body = data(5 * 1024 * 1024 + 7, 90)
        part = c.upload_part(Bucket="main", Key="lr-mp", UploadId=up, PartNumber=1, Body=body, ChecksumAlgorithm="CRC32")
        done = c.complete_multipart_upload(Bucket="main", Key="lr-mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]}]})
        self.assertEqual(len(lost), 1, "the first answer was not lost")
        self.assertEqual(done["ResponseMetadata"]["RetryAttempts"], 1)
        head = self.s3.head_object(Bucket="main", Key="lr-mp", ChecksumMode="ENABLED")
        self.assertEqual((done["ETag"], done["ChecksumCRC32"]), (head["ETag"], head["ChecksumCRC32"]))
        self.assertEqual(self.s3.get_object(Bucket="main", Key="lr-mp")["Body"].read(), body)
        # Once the key holds something else, the upload is gone for good.
        self.s3.put_object(Bucket="main", Key="lr-mp", Body=b"replaced")
        with self.assertRaises(ClientError) as e:
            self.s3.complete_multipart_upload(Bucket="main", Key="lr-mp", UploadId=up, MultipartUpload={
                "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(error_code(e.exception), "NoSuchUpload")

    def test_writes_and_deletes(self):
        self.s3.put_object(Bucket="main", Key="lr-src", Body=data(300000, 91))
        cases = [
            ("PutObject", lambda c: c.put_object(Bucket="main", Key="lr-put", Body=data(1000, 92))["ETag"],
             lambda: '"%s"' % hashlib.md5(data(1000, 92)).hexdigest()),
            ("CopyObject", lambda c: c.copy_object(Bucket="main", Key="lr-copy", CopySource="main/lr-src")["CopyObjectResult"]["ETag"],
             lambda: '"%s"' % hashlib.md5(data(300000, 91)).hexdigest()),
            ("DeleteObject", lambda c: c.delete_object(Bucket="main", Key="lr-copy")["ResponseMetadata"]["HTTPStatusCode"],
             lambda: 204),
            ("DeleteObjects", lambda c: sorted(d["Key"] for d in c.delete_objects(
                Bucket="main", Delete={"Objects": [{"Key": "lr-put"}, {"Key": "lr-none"}]})["Deleted"]),
             lambda: ["lr-none", "lr-put"]),
        ]
        for operation, call, expected in cases:
            c, lost = self.lossy_client(operation)
            self.assertEqual(call(c), expected(), operation)
            self.assertEqual(len(lost), 1, operation)
        self.assertFalse(self.exists("lr-put"))
        self.assertFalse(self.exists("lr-copy"))

    def test_abort_multipart_upload(self):
        up = self.s3.create_multipart_upload(Bucket="main", Key="lr-abort")["UploadId"]
        self.s3.upload_part(Bucket="main", Key="lr-abort", UploadId=up, PartNumber=1, Body=b"part")
        c, lost = self.lossy_client("AbortMultipartUpload")
        r = c.abort_multipart_upload(Bucket="main", Key="lr-abort", UploadId=up)
        self.assertEqual((len(lost), r["ResponseMetadata"]["HTTPStatusCode"]), (1, 204))
        with self.assertRaises(ClientError) as e:
            self.s3.list_parts(Bucket="main", Key="lr-abort", UploadId=up)
        self.assertEqual(error_code(e.exception), "NoSuchUpload")
        # An upload that never was is still NoSuchUpload.
        with self.assertRaises(ClientError) as e:
            self.s3.abort_multipart_upload(Bucket="main", Key="lr-abort", UploadId="no-such-upload")
        self.assertEqual(error_code(e.exception), "NoSuchUpload")

    def test_upload_part_and_part_copy(self):
        up = self.s3.create_multipart_upload(Bucket="main", Key="lr-parts")["UploadId"]
        c, lost = self.lossy_client("UploadPart")
        body = data(5 * 1024 * 1024, 93)
        first = c.upload_part(Bucket="main", Key="lr-parts", UploadId=up, PartNumber=1, Body=body)
        self.assertEqual((len(lost), first["ETag"]), (1, '"%s"' % hashlib.md5(body).hexdigest()))
        self.s3.put_object(Bucket="main", Key="lr-src2", Body=data(100000, 94))
        c, lost = self.lossy_client("UploadPartCopy")
        second = c.upload_part_copy(Bucket="main", Key="lr-parts", UploadId=up, PartNumber=2, CopySource="main/lr-src2")
        self.assertEqual(len(lost), 1)
        self.assertEqual(second["CopyPartResult"]["ETag"], '"%s"' % hashlib.md5(data(100000, 94)).hexdigest())
        self.s3.complete_multipart_upload(Bucket="main", Key="lr-parts", UploadId=up, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": first["ETag"]}, {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]}]})
        self.assertEqual(self.s3.get_object(Bucket="main", Key="lr-parts")["Body"].read(), body + data(100000, 94))


class ContentHeadersTest(ServerTest):
    STORED = {"content-type": "text/csv", "content-encoding": "gzip", "expires": "Thu, 01 Dec 2033 16:00:00 GMT",
              "cache-control": "max-age=60", "content-disposition": "attachment; filename=\"a.csv\"",
              "content-language": "de"}

    def test_round_trip(self):
        self.assertEqual(self.raw("PUT", "/main/ch", headers=self.STORED, body=b"\x1f\x8b").status, 200)
        for method in ("GET", "HEAD"):
            r = self.raw(method, "/main/ch")
            self.assertEqual({h: r.header(h) for h in self.STORED}, self.STORED, method)
        got = self.s3.get_object(Bucket="main", Key="ch")
        self.assertEqual(got["ContentEncoding"], "gzip")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["expires"], self.STORED["expires"])

    def test_response_overrides(self):
        self.assertEqual(self.raw("PUT", "/main/ch-ov", headers=self.STORED, body=b"x").status, 200)
        overrides = {"response-content-type": ("content-type", "image/png"),
                     "response-content-language": ("content-language", "fr"),
                     "response-expires": ("expires", "Sun, 01 Jan 2034 00:00:00 GMT"),
                     "response-cache-control": ("cache-control", "no-store"),
                     "response-content-disposition": ("content-disposition", "inline"),
                     "response-content-encoding": ("content-encoding", "identity")}
        query = [(param, value) for param, (_, value) in overrides.items()]
        for method in ("GET", "HEAD"):
            r = self.raw(method, "/main/ch-ov", query=query)
            self.assertEqual(r.status, 200, method)
            self.assertEqual({h: r.header(h) for h, _ in overrides.values()}, dict(overrides.values()), method)
        # One override leaves the other stored headers as they are.
        r = self.raw("GET", "/main/ch-ov", query=[("response-content-type", "image/gif")])
        self.assertEqual((r.header("content-type"), r.header("content-encoding"), r.header("expires")),
                         ("image/gif", "gzip", self.STORED["expires"]))
        got = self.s3.get_object(Bucket="main", Key="ch-ov", ResponseContentEncoding="br",
                                 ResponseExpires=datetime.datetime(2035, 1, 2, tzinfo=datetime.timezone.utc))
        self.assertEqual(got["ContentEncoding"], "br")
        self.assertEqual(got["ResponseMetadata"]["HTTPHeaders"]["expires"], "Tue, 02 Jan 2035 00:00:00 GMT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
