"""The exact S3 behaviour of a real hots3 process where clients rarely go: routing of
sub-resources, versionId, limits, checksums in every transfer mode, error codes and bodies.
Raw HTTP (hand-signed) for error paths, boto3 for what SDKs send. CTest runs this file under
the image's python3 (boto3 1.43, unittest) and Debian's (boto3 1.26, pytest)."""

import base64
import hashlib
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
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
        ("PUT", "/main/victim", "renameObject"), ("DELETE", "/main/victim", "tagging"),
        ("DELETE", "/main/victim", "retention"), ("POST", "/main/victim", "restore"), ("POST", "/main/victim", "select"),
        ("GET", "/main/victim", "attributes"), ("GET", "/main/victim", "torrent"), ("GET", "/main/victim", "retention"),
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
        for decoded, status, code in ((None, 411, "MissingContentLength"), ("abc", 400, "InvalidArgument"),
                                      ("-5", 400, "InvalidArgument"), ("0x3e8", 400, "InvalidArgument")):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
