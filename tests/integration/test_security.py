"""What an attacker tries against a real hots3: requests that must neither stop the server nor do
more than their signature and the signer's grants allow. Each test names the finding it pins;
raw HTTP (hand-signed), because no SDK sends these requests."""

import datetime
import os
import re
import socket
import sys
import tempfile
import time
import unittest
import urllib.parse
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

WRITER = {"access": "HOTS3WRITERACCESSKEY", "secret": "writer-secret-key-0123456789"}
READER = {"access": "HOTS3READERACCESSKEY", "secret": "reader-secret-key-0123456789"}
# Users of their own for the bucket-ownership findings: mallory may create "owned-*" and
# "drop-*" buckets; carol's grant on "owned-*" counts only in buckets the admin owns, her grant
# on "drop-*" in anyone's.
EXTRA_USERS = """
[[users]]
name = "mallory"
access_key = "HOTS3MALLORYACCESSK1"
secret_key = "mallory-secret-key-0123456789"
create_buckets = ["owned-*", "drop-*"]
[[users]]
name = "carol"
access_key = "HOTS3CAROLACCESSKEY1"
secret_key = "carol-secret-key-0123456789"
grants = [{ bucket = "owned-*", access = "readwrite", owner = "admin" },
          { bucket = "drop-*", access = "readwrite" }]
"""
MALLORY = {"access": "HOTS3MALLORYACCESSK1", "secret": "mallory-secret-key-0123456789"}
CAROL = {"access": "HOTS3CAROLACCESSKEY1", "secret": "carol-secret-key-0123456789"}


def xml_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def raw_request(port, method, target, headers=None, body=b""):
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (method, target, port)
    head += "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    if body or method in ("PUT", "POST"):
        head += "Content-Length: %d\r\n" % len(body)
    return s3.send(port, head.encode() + b"\r\n" + body)


class SecurityTest(s3.ServerTestCase):
    server_config = EXTRA_USERS
    server_options = {"args": ("--log-level", "debug")}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for bucket in ("main", "shared-drop", "owned-by-admin"):
            assert cls.signed("PUT", "/" + bucket).status == 200
        assert cls.signed("PUT", "/main/secret", body=b"the admin's private bytes").status == 200

    def assertError(self, r, status, code):
        self.assertEqual((r.status, xml_code(r.body)), (status, code), r.body[:2000])

    def assertAlive(self):
        self.assertEqual(harness.request(self.port, "GET", "/health/live").status, 200)
        self.assertEqual(self.signed("GET", "/main", query=[("list-type", "2")]).status, 200)

    def exists(self, path):
        return self.signed("HEAD", path).status == 200

    # ---- one request must not stop the server -------------------------------------------------

    def test_sigv2_query_without_expires_is_refused_not_a_crash(self):
        for target in ("/?AWSAccessKeyId=%s&Signature=x" % s3.ACCESS_KEY,
                       "/main?Signature=x&Expires=1",
                       "/main/secret?AWSAccessKeyId=%s" % s3.ACCESS_KEY):
            r = harness.request(self.port, "GET", target)
            self.assertError(r, 403, "AccessDenied")
            self.assertIn(b"requires the Signature, Expires and AWSAccessKeyId parameters", r.body)
        self.assertAlive()

    # ---- nothing unsigned is acted on ---------------------------------------------------------

    def test_a_presigned_put_cannot_be_turned_into_a_copy_of_what_the_signer_reads(self):
        # The admin hands out an upload URL for shared-drop; its holder adds x-amz-copy-source.
        url = s3.presign_v4("PUT", "/shared-drop/upload", self.port)
        r = raw_request(self.port, "PUT", url, {"x-amz-copy-source": "/main/secret"})
        self.assertError(r, 403, "AccessDenied")
        self.assertIn(b"<HeadersNotSigned>x-amz-copy-source</HeadersNotSigned>", r.body)
        self.assertFalse(self.exists("/shared-drop/upload"))
        # The URL itself still works as signed.
        self.assertEqual(raw_request(self.port, "PUT", url, body=b"upload").status, 200)

    def test_unsigned_x_amz_headers_are_refused_on_every_signature_form(self):
        self.assertEqual(self.signed("PUT", "/main/base", body=b"12345").status, 200)
        for header, value in (("x-amz-copy-source", "/main/secret"),
                              ("x-amz-write-offset-bytes", "5"),
                              ("x-amz-rename-source", "/main/base"),
                              ("x-amz-metadata-directive", "REPLACE"),
                              ("x-amz-meta-owner", "mallory"),
                              ("x-amz-checksum-crc32", "AAAAAA==")):
            # A header-signed request replayed with one header added.
            req = s3.SignedRequest("PUT", "/main/target", headers={header: value}, body=b"x", port=self.port,
                                   unsigned=(header,))
            r = s3.send(self.port, req.wire())
            self.assertError(r, 403, "AccessDenied")
            self.assertIn(("<HeadersNotSigned>%s</HeadersNotSigned>" % header).encode(), r.body)
            # A presigned URL used with it.
            url = s3.presign_v4("PUT", "/main/target", self.port)
            r = raw_request(self.port, "PUT", url, {header: value}, body=b"x")
            self.assertError(r, 403, "AccessDenied")
        self.assertFalse(self.exists("/main/target"))
        r = self.signed("GET", "/main/base")
        self.assertEqual(r.body, b"12345")
        # Signed, the same headers are honoured as ever.
        self.assertEqual(self.signed("PUT", "/main/copy", headers={"x-amz-copy-source": "/main/base"}).status, 200)

    # ---- RenameObject's client tokens ---------------------------------------------------------

    def test_client_tokens_belong_to_their_user(self):
        self.signed("PUT", "/shared-drop/a", body=b"a")
        self.signed("PUT", "/shared-drop/c", body=b"c", **WRITER)
        token = {"x-amz-client-token": "same-token"}
        r = self.signed("PUT", "/shared-drop/b", query=[("renameObject", "")],
                        headers=dict(token, **{"x-amz-rename-source": "/shared-drop/a"}))
        self.assertEqual(r.status, 200, r.body)
        # Another user's rename with the same token is a rename of its own, not a retry of the
        # admin's (neither IdempotencyParameterMismatch nor a 200 that renames nothing).
        r = self.signed("PUT", "/shared-drop/d", query=[("renameObject", "")],
                        headers=dict(token, **{"x-amz-rename-source": "/shared-drop/c"}), **WRITER)
        self.assertEqual(r.status, 200, r.body)
        self.assertTrue(self.exists("/shared-drop/d"))
        self.assertFalse(self.exists("/shared-drop/c"))

    # ---- presigned SigV4 ----------------------------------------------------------------------

    def test_presigned_urls_must_be_signed_for_s3(self):
        url = s3.presign_v4("GET", "/main/secret", self.port, service="ec2")
        self.assertError(harness.request(self.port, "GET", url), 400, "AuthorizationQueryParametersError")
        url = s3.presign_v4("GET", "/main/secret", self.port)
        self.assertEqual(harness.request(self.port, "GET", url).status, 200)

    def test_presigned_urls_take_no_aws_chunked_payload(self):
        for mode in ("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"):
            url = s3.presign_v4("PUT", "/main/streamed", self.port, content_sha256=mode,
                                signed=("host", "x-amz-decoded-content-length"),
                                headers={"x-amz-decoded-content-length": "5"})
            body = b"5;chunk-signature=%s\r\nhello\r\n0;chunk-signature=%s\r\n\r\n" % (b"0" * 64, b"0" * 64)
            r = raw_request(self.port, "PUT", url, {"x-amz-decoded-content-length": "5"}, body=body)
            self.assertError(r, 400, "InvalidRequest")
        self.assertFalse(self.exists("/main/streamed"))

    # ---- presigned SigV2 ----------------------------------------------------------------------

    def test_sigv2_urls_live_at_most_seven_days(self):
        now = int(time.time())
        self.assertEqual(harness.request(self.port, "GET", s3.presign_v2("GET", "/main/secret", now + 3600)).status,
                         200)
        for expires in (now + 8 * 24 * 3600, now + 1000 * 365 * 24 * 3600, 2 ** 62, 2 ** 63 - 1):
            r = harness.request(self.port, "GET", s3.presign_v2("GET", "/main/secret", expires))
            self.assertError(r, 403, "AccessDenied")
        r = harness.request(self.port, "GET", s3.presign_v2("GET", "/main/secret", now - 10))
        self.assertEqual(r.status, 403)
        self.assertAlive()

    # ---- what a failed signature costs --------------------------------------------------------

    def test_a_signature_mismatch_is_not_an_amplifier(self):
        big = {"x-amz-meta-pad-%d" % i: "v" * 1000 for i in range(50)}  # 50 KiB of signed headers
        req = s3.SignedRequest("PUT", "/main/amp", headers=big, body=b"x", port=self.port,
                               secret=s3.SECRET_KEY + "wrong")
        wire = req.wire()
        r = s3.send(self.port, wire)
        self.assertError(r, 403, "SignatureDoesNotMatch")
        self.assertLess(len(r.body), len(wire) // 2, "the reply echoes the request many times over")
        # Small requests still get S3's full details.
        r = self.signed("GET", "/main", secret=s3.SECRET_KEY + "wrong")
        self.assertError(r, 403, "SignatureDoesNotMatch")
        self.assertIn(b"<CanonicalRequestBytes>", r.body)

    def test_credential_scopes_are_bounded(self):
        r = self.signed("GET", "/main", region="r" * 200)
        self.assertError(r, 400, "AuthorizationHeaderMalformed")
        self.assertAlive()

    # ---- request framing ----------------------------------------------------------------------

    def test_ambiguous_transfer_encodings_are_refused_and_the_connection_closed(self):
        smuggled = s3.SignedRequest("PUT", "/main/smuggled", body=b"", port=self.port).wire()
        for headers in ({"Transfer-Encoding": "chunked, identity"}, {"Transfer-Encoding": "xchunked"},
                        {"Transfer-Encoding": "identity"}, {"Transfer-Encoding": "chunked",
                                                            "Content-Length": "%d" % len(smuggled)},
                        {"Transfer-Encoding": "gzip, chunked"}):
            head = "GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            head += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
            with harness.connect(self.port) as sock:
                sock.sendall(head.encode() + smuggled)
                reader = harness.Reader(sock)
                r = reader.read_response()
                self.assertEqual(r.status, 400, headers)
                self.assertEqual(r.header("connection"), "close")
                self.assertTrue(reader.closed(), "the body must never be read as a request")
                self.assertEqual(reader.buf, b"", "a second response came")
        self.assertFalse(self.exists("/main/smuggled"))
        self.assertAlive()

    # ---- keys and the XML they go into --------------------------------------------------------

    def test_keys_with_nul_are_refused_and_control_characters_keep_listings_well_formed(self):
        self.assertError(self.signed("PUT", "/main/a\0b", body=b"x"), 400, "InvalidArgument")
        self.assertEqual(self.signed("PUT", "/main/ctl/a\x01b\x1fc\rd", body=b"x").status, 200)
        for query in ([("list-type", "2"), ("prefix", "ctl/")], [("prefix", "ctl/")],
                      [("uploads", ""), ("prefix", "ctl/")]):
            r = self.signed("GET", "/main", query=query)
            self.assertEqual(r.status, 200, r.body)
            ElementTree.fromstring(r.body)  # well-formed, or this raises
        r = self.signed("GET", "/main", query=[("list-type", "2"), ("prefix", "ctl/")])
        self.assertIn("<Key>ctl/a\ufffdb\ufffdc&#13;d</Key>".encode(), r.body)
        r = self.signed("GET", "/main", query=[("list-type", "2"), ("prefix", "ctl/"), ("encoding-type", "url")])
        key = ElementTree.fromstring(r.body).find("{*}Contents/{*}Key").text
        self.assertEqual(urllib.parse.unquote(key), "ctl/a\x01b\x1fc\rd")
        # An error naming such a key is well-formed too.
        r = self.signed("GET", "/main/ctl/\x02missing")
        self.assertError(r, 404, "NoSuchKey")
        ElementTree.fromstring(r.body)

    # ---- who may create and own a bucket ------------------------------------------------------

    def test_bucket_creation_is_a_permission(self):
        self.assertError(self.signed("PUT", "/shared-taken", **READER), 403, "AccessDenied")
        self.assertEqual(self.signed("HEAD", "/shared-taken").status, 404)
        self.assertEqual(self.signed("PUT", "/readers-own", **READER).status, 200)
        self.assertEqual(self.signed("PUT", "/readers-own", **READER).status, 200)  # its owner, again

    def test_grants_that_name_an_owner_give_nothing_in_a_bucket_someone_else_took(self):
        # mallory may create owned-* names and takes one before the admin does.
        self.assertEqual(self.signed("PUT", "/owned-taken", **MALLORY).status, 200)
        r = self.signed("PUT", "/owned-taken/carols-data", body=b"secret", **CAROL)
        self.assertError(r, 403, "AccessDenied")
        # In the admin's owned-* bucket carol's grant holds; in a drop-* bucket (no owner named)
        # it holds whoever owns it.
        self.assertEqual(self.signed("PUT", "/owned-by-admin/carols-data", body=b"x", **CAROL).status, 200)
        self.assertEqual(self.signed("PUT", "/drop-mallory", **MALLORY).status, 200)
        self.assertEqual(self.signed("PUT", "/drop-mallory/x", body=b"x", **CAROL).status, 200)

    # ---- signed fields have one spelling ------------------------------------------------------

    def test_x_amz_date_must_be_digits(self):
        # Signed as sent: "...T0809-1Z" read as 08:08:59 would make one instant signable in
        # several spellings.
        now = datetime.datetime.now(datetime.timezone.utc)
        odd = now.strftime("%Y%m%dT%H%M") + "-1Z"
        r = s3.send(self.port, s3.SignedRequest("GET", "/main", port=self.port, when=now, amz_date=odd).wire())
        self.assertError(r, 403, "AccessDenied")
        self.assertEqual(s3.send(self.port, s3.SignedRequest("GET", "/main", port=self.port, when=now).wire()).status,
                         200)

    def test_repeated_query_parameters_are_refused(self):
        r = self.signed("GET", "/main", query=[("list-type", "2"), ("prefix", "a"), ("prefix", "b")])
        self.assertError(r, 400, "InvalidArgument")
        self.assertIn(b"<ArgumentName>prefix</ArgumentName>", r.body)
        r = self.signed("DELETE", "/main/secret", query=[("uploadId", "a"), ("uploadId", "b")])
        self.assertError(r, 400, "InvalidArgument")
        self.assertTrue(self.exists("/main/secret"))

    def test_put_acl_verifies_the_body_it_reads(self):
        acl = (b'<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>x</ID></Grantee>'
               b'<Permission>FULL_CONTROL</Permission></Grant></AccessControlList></AccessControlPolicy>')
        req = s3.SignedRequest("PUT", "/main/secret", [("acl", "")], body=acl, port=self.port,
                               payload_hash="0" * 64)
        self.assertError(s3.send(self.port, req.wire()), 400, "XAmzContentSHA256Mismatch")

    def test_signatures_never_reach_the_server_log(self):
        url = s3.presign_v4("GET", "/main/secret", self.port, secret="not-the-secret-key")
        signature = urllib.parse.parse_qs(url.split("?", 1)[1])["X-Amz-Signature"][0]
        encoded = url.replace("X-Amz-Signature=", "X-Amz-Sig%6Eature=")
        self.assertEqual(harness.request(self.port, "GET", url).status, 403)
        self.assertEqual(harness.request(self.port, "GET", encoded).status, 403)
        v2 = s3.presign_v2("GET", "/main/secret", int(time.time()) + 60, secret="wrong")
        self.assertEqual(harness.request(self.port, "GET", v2).status, 403)
        v2_signature = urllib.parse.unquote(v2.split("Signature=")[1])
        log = self.server.read_stderr()
        self.assertIn("authentication failed", log)
        self.assertNotIn(signature, log)
        self.assertNotIn(v2_signature, log)
        self.assertNotIn(urllib.parse.quote(v2_signature, safe=""), log)


class LimitsTest(unittest.TestCase):
    """Caps that keep one client from growing the catalog without end."""

    def test_open_uploads_are_capped_per_user_and_per_bucket(self):
        config = EXTRA_USERS + "[multipart]\nopen_uploads_max_per_user = 3\nopen_uploads_max_per_bucket = 5\n"
        with s3.hots3_server(config) as server:
            def signed(method, path, query=(), **keys):
                return s3.send(server.port, s3.SignedRequest(method, path, query, port=server.port, **keys).wire())

            self.assertEqual(signed("PUT", "/drop-x", **MALLORY).status, 200)
            for i in range(3):
                self.assertEqual(signed("POST", "/drop-x/k%d" % i, [("uploads", "")], **MALLORY).status, 200)
            r = signed("POST", "/drop-x/k3", [("uploads", "")], **MALLORY)
            self.assertEqual((r.status, xml_code(r.body)), (400, "InvalidRequest"), r.body)
            self.assertIn(b"for this user", r.body)
            for i in range(2):
                self.assertEqual(signed("POST", "/drop-x/c%d" % i, [("uploads", "")], **CAROL).status, 200)
            r = signed("POST", "/drop-x/c2", [("uploads", "")], **CAROL)
            self.assertIn(b"in this bucket", r.body)
            # Ending one makes room again.
            page = signed("GET", "/drop-x", [("uploads", "")]).body
            upload = re.search(rb"<Key>k0</Key><UploadId>([^<]+)</UploadId>", page).group(1).decode()
            self.assertEqual(signed("DELETE", "/drop-x/k0", [("uploadId", upload)], **MALLORY).status, 204)
            self.assertEqual(signed("POST", "/drop-x/k3", [("uploads", "")], **MALLORY).status, 200)

    def test_sigv2_can_be_turned_off(self):
        with s3.hots3_server("[s3]\nsigv2 = false\n") as server:
            r = harness.request(server.port, "GET", s3.presign_v2("GET", "/main/x", int(time.time()) + 60))
            self.assertEqual((r.status, xml_code(r.body)), (400, "InvalidRequest"), r.body)
            self.assertEqual(s3.send(server.port, s3.SignedRequest("GET", "/", port=server.port).wire()).status,
                             200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
