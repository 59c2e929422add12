"""Who may do what: every S3 operation hots3 routes, tried by every kind of caller against a real
server, generated from one table (OPERATIONS below).

Callers: the bucket's owner (a non-admin user who created it), a user with a read grant, one
with a write grant, one with none, an anonymous request, a wrong signature, a request signed too
long ago, and the owner's request with an unsigned x-amz-* header added. An operation's
`access` says which of read / write / owner it needs; the expected status of each cell follows
from it. Every route of src/s3/router.cc must have a row: adding an operation without one fails
this test."""

import datetime
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import s3_support as s3  # noqa: E402

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUCKET = "alice-data"
DIRECTORY_BUCKET = "alice-dir--z1--x-s3"

USERS = """
[[users]]
name = "alice"
access_key = "AUTHZALICEACCESSKEY1"
secret_key = "alice-secret-key-0123456789"
create_buckets = ["alice-*"]
[[users]]
name = "rita"
access_key = "AUTHZRITAACCESSKEY01"
secret_key = "rita-secret-key-0123456789"
grants = [{ bucket = "alice-*", access = "read" }]
[[users]]
name = "walt"
access_key = "AUTHZWALTACCESSKEY01"
secret_key = "walt-secret-key-0123456789"
grants = [{ bucket = "alice-*", access = "write" }]
[[users]]
name = "nora"
access_key = "AUTHZNORAACCESSKEY01"
secret_key = "nora-secret-key-0123456789"
"""
KEYS = {
    "owner": ("AUTHZALICEACCESSKEY1", "alice-secret-key-0123456789"),
    "read grant": ("AUTHZRITAACCESSKEY01", "rita-secret-key-0123456789"),
    "write grant": ("AUTHZWALTACCESSKEY01", "walt-secret-key-0123456789"),
    "no grant": ("AUTHZNORAACCESSKEY01", "nora-secret-key-0123456789"),
}
CALLERS = ("owner", "read grant", "write grant", "no grant", "anonymous", "wrong signature", "expired",
           "unsigned extra header")

DELETE_BODY = b"<Delete><Object><Key>gone</Key></Object></Delete>"
ACL_BODY = b"""<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>x</ID></Grantee>
<Permission>FULL_CONTROL</Permission></Grant></AccessControlList></AccessControlPolicy>"""


class Op:
    """One row: an S3 operation, the route it takes (router.cc's function name), the access it
    needs ("read", "write", "owner", "create" for CreateBucket, "any" for ListBuckets, "read or
    write" for CreateSession, "admin" for hots3 admin's reports) and its
    status on success. `prepare(ctx)` makes what one attempt needs and returns the request's
    (method, path, query, headers, body)."""

    def __init__(self, name, route, access, ok, prepare):
        self.name, self.route, self.access, self.ok, self.prepare = name, route, access, ok, prepare


def obj(path="k"):
    return "/%s/%s" % (BUCKET, path)


OPERATIONS = [
    Op("ListBuckets", "list_buckets_or_directory_buckets", "any", 200, lambda c: ("GET", "/", [], {}, b"")),
    Op("ListDirectoryBuckets", "list_buckets_or_directory_buckets", "any", 200,
       lambda c: ("GET", "/", [("x-id", "ListDirectoryBuckets")], {}, b"")),
    # A session of the most the caller may have: ReadWrite with a write grant, ReadOnly with a read one.
    Op("CreateSession", "create_session", "read or write", 200,
       lambda c: ("GET", "/" + DIRECTORY_BUCKET, [("session", "")], {}, b"")),
    # The session clock moves only on a server with s3.test_hooks, which this one is not.
    Op("MoveSessionClock", "advance_session_clock", "any", 501,
       lambda c: ("POST", "/", [("x-hots3-clock", ""), ("advance-seconds", "1")], {}, b"")),
    # hots3 admin's reports: admins only.
    Op("AdminStatus", "admin_status", "admin", 200, lambda c: ("GET", "/", [("x-hots3-status", "")], {}, b"")),
    Op("AdminUsers", "admin_users", "admin", 200, lambda c: ("GET", "/", [("x-hots3-users", "")], {}, b"")),
    Op("AdminBuckets", "admin_buckets", "admin", 200, lambda c: ("GET", "/", [("x-hots3-buckets", "")], {}, b"")),
    Op("CreateBucket", "create_bucket", "create", 200, lambda c: ("PUT", "/alice-new-%d" % c.next(), [], {}, b"")),
    Op("DeleteBucket", "delete_bucket", "owner", 204, lambda c: ("DELETE", "/" + c.empty_bucket(), [], {}, b"")),
    Op("HeadBucket", "head_bucket", "read", 200, lambda c: ("HEAD", "/" + BUCKET, [], {}, b"")),
    Op("GetBucketLocation", "get_bucket_location", "read", 200,
       lambda c: ("GET", "/" + BUCKET, [("location", "")], {}, b"")),
    Op("ListObjectsV2", "list_objects_v1_or_v2", "read", 200,
       lambda c: ("GET", "/" + BUCKET, [("list-type", "2")], {}, b"")),
    Op("ListObjects", "list_objects_v1_or_v2", "read", 200, lambda c: ("GET", "/" + BUCKET, [], {}, b"")),
    Op("ListMultipartUploads", "list_multipart_uploads", "read", 200,
       lambda c: ("GET", "/" + BUCKET, [("uploads", "")], {}, b"")),
    Op("GetBucketAcl", "bucket_subresource", "read", 200, lambda c: ("GET", "/" + BUCKET, [("acl", "")], {}, b"")),
    Op("GetBucketVersioning", "bucket_subresource", "read", 200,
       lambda c: ("GET", "/" + BUCKET, [("versioning", "")], {}, b"")),
    Op("PutBucketAcl", "bucket_subresource", "owner", 200,
       lambda c: ("PUT", "/" + BUCKET, [("acl", "")], {"x-amz-acl": "private"}, b"")),
    Op("DeleteObjects", "delete_objects", "write", 200,
       lambda c: ("POST", "/" + BUCKET, [("delete", "")], {"content-md5": s3_md5(DELETE_BODY)}, DELETE_BODY)),
    Op("GetObject", "get_object_body", "read", 200, lambda c: ("GET", obj(), [], {}, b"")),
    Op("HeadObject", "head_object", "read", 200, lambda c: ("HEAD", obj(), [], {}, b"")),
    Op("GetObjectAttributes", "get_object_attributes", "read", 200,
       lambda c: ("GET", obj(), [("attributes", "")], {"x-amz-object-attributes": "ETag,ObjectSize"}, b"")),
    # The object is here (the bucket is not bound to an upstream): nothing to restore.
    Op("RestoreObject", "restore_object", "read", 200, lambda c: ("POST", obj(), [("restore", "")], {}, b"")),
    Op("PutObject", "put_or_copy_object", "write", 200, lambda c: ("PUT", obj("new"), [], {}, b"data")),
    Op("CopyObject", "put_or_copy_object", "readwrite", 200,
       lambda c: ("PUT", obj("copy"), [], {"x-amz-copy-source": obj()}, b"")),
    Op("AppendObject", "put_or_copy_object", "write", 200,
       lambda c: ("PUT", obj(c.appendable()), [], {"x-amz-write-offset-bytes": "1"}, b"y")),
    Op("DeleteObject", "delete_object", "write", 204, lambda c: ("DELETE", obj("gone"), [], {}, b"")),
    Op("GetObjectAcl", "object_subresource", "read", 200, lambda c: ("GET", obj(), [("acl", "")], {}, b"")),
    Op("PutObjectAcl", "object_subresource", "write", 200,
       lambda c: ("PUT", obj(), [("acl", "")], {"x-amz-acl": "private"}, b"")),
    Op("GetObjectTagging", "object_subresource", "read", 200, lambda c: ("GET", obj(), [("tagging", "")], {}, b"")),
    Op("RenameObject", "rename_object", "write", 200,
       lambda c: ("PUT", obj("renamed-%d" % c.next()), [("renameObject", "")],
                  {"x-amz-rename-source": obj(c.renamable())}, b"")),
    Op("CreateMultipartUpload", "create_multipart_upload", "write", 200,
       lambda c: ("POST", obj("mpu"), [("uploads", "")], {}, b"")),
    Op("UploadPart", "upload_part", "write", 200,
       lambda c: ("PUT", obj("mpu"), [("partNumber", "1"), ("uploadId", c.upload())], {}, b"part")),
    Op("UploadPartCopy", "upload_part", "readwrite", 200,
       lambda c: ("PUT", obj("mpu"), [("partNumber", "1"), ("uploadId", c.upload())],
                  {"x-amz-copy-source": obj()}, b"")),
    Op("CompleteMultipartUpload", "complete_multipart_upload", "write", 200, lambda c: c.complete()),
    Op("AbortMultipartUpload", "abort_multipart_upload", "write", 204,
       lambda c: ("DELETE", obj("mpu"), [("uploadId", c.upload())], {}, b"")),
    Op("ListParts", "list_parts", "read", 200, lambda c: ("GET", obj("mpu"), [("uploadId", c.upload())], {}, b"")),
    # hots3's own; the bucket here is not bound to an upstream, so an allowed caller hears that.
    Op("FlushBucket", "flush_bucket", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-flush", ""), ("prefix", "p/")], {}, b"")),
    Op("EvictBucket", "evict_bucket", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-evict", ""), ("prefix", "p/")], {}, b"")),
    Op("AdoptKeys", "adopt_keys", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-adopt", ""), ("prefix", "p/")], {}, b"")),
    # (Forgetting the lost versions of an unbound bucket: there are none here.)
    Op("SettleLost", "settle_lost_keys", "write", 200,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-lost", ""), ("settle", "forget"), ("prefix", "p/")], {}, b"")),
    Op("StartPrefetch", "start_prefetch", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-prefetch", ""), ("prefix", "p/")], {}, b"")),
    Op("PrefetchStatus", "prefetch_status", "read", 200,
       lambda c: ("GET", "/" + BUCKET, [("x-hots3-prefetch", "")], {}, b"")),
    Op("ParkedJobs", "parked_jobs", "read", 400,
       lambda c: ("GET", "/" + BUCKET, [("x-hots3-parked", "")], {}, b"")),
    Op("PinKeys", "pin_keys", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-pin", ""), ("prefix", "p/")], {}, b"")),
    Op("UnpinKeys", "unpin_keys", "write", 400,
       lambda c: ("POST", "/" + BUCKET, [("x-hots3-unpin", ""), ("key", "p/k")], {}, b"")),
]


def s3_md5(body):
    import base64
    import hashlib
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def expected(op, caller):
    """The status `caller` gets for `op`."""
    if caller in ("anonymous", "wrong signature", "expired", "unsigned extra header"):
        # Refused before anything is looked at: 403 (a request too old is RequestTimeTooSkewed).
        return 403
    allowed = {
        "any": True,
        "create": caller == "owner",
        "owner": caller == "owner",
        "read": caller in ("owner", "read grant"),
        "write": caller in ("owner", "write grant"),
        "readwrite": caller == "owner",  # the copy's source must be readable, its target writable
        "read or write": caller in ("owner", "read grant", "write grant"),
        "admin": False,  # none of the callers is an admin
    }[op.access]
    return op.ok if allowed else 403


def routes_in_router():
    """The operation functions of kRoutes in src/s3/router.cc."""
    with open(os.path.join(SOURCE, "src", "s3", "router.cc")) as f:
        text = f.read()
    table = text[text.index("constexpr Route kRoutes[]"):]
    table = table[:table.index("};")]
    return set(re.findall(r"\{Method::k\w+, Target::k\w+, \"[\w-]*\", (\w+), \"\w+\"\}", table))


class Context:
    """The state one attempt needs, made by the owner (alice) through signed requests."""

    def __init__(self, port):
        self.port = port
        self.n = 0

    def next(self):
        self.n += 1
        return self.n

    def send(self, method, path, query=(), headers=None, body=b""):
        access, secret = KEYS["owner"]
        return s3.send(self.port, s3.SignedRequest(method, path, query, headers, body=body, port=self.port,
                                                   access=access, secret=secret).wire())

    def must(self, response, status=200):
        assert response.status == status, (response.status, response.body[:500])
        return response

    def empty_bucket(self):
        name = "alice-empty-%d" % self.next()
        self.must(self.send("PUT", "/" + name))
        return name

    def appendable(self):
        key = "append-%d" % self.next()
        self.must(self.send("PUT", obj(key), body=b"x"))
        return key

    def renamable(self):
        key = "rename-src-%d" % self.next()
        self.must(self.send("PUT", obj(key), body=b"r"))
        return key

    def upload(self):
        r = self.must(self.send("POST", obj("mpu"), [("uploads", "")]))
        return re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()

    def complete(self):
        upload = self.upload()
        r = self.must(self.send("PUT", obj("mpu"), [("partNumber", "1"), ("uploadId", upload)], body=b"p"))
        etag = r.header("etag")
        body = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
                "</CompleteMultipartUpload>" % etag).encode()
        return ("POST", obj("mpu"), [("uploadId", upload)], {}, body)


def attempt(port, caller, method, path, query, headers, body):
    if caller == "anonymous":
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n" % (
            method, s3.SignedRequest(method, path, query, port=port).target(), port, len(body))
        head += "".join("%s: %s\r\n" % kv for kv in headers.items())
        return s3.send(port, head.encode() + b"\r\n" + body)
    key = "owner" if caller in ("wrong signature", "expired", "unsigned extra header") else caller
    access, secret = KEYS[key]
    extra = {}
    if caller == "wrong signature":
        secret += "x"
    if caller == "expired":
        extra["when"] = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    if caller == "unsigned extra header":
        headers = dict(headers, **{"x-amz-meta-added": "by someone else"})
        extra["unsigned"] = ("x-amz-meta-added",)
    req = s3.SignedRequest(method, path, query, headers, body=body, port=port, access=access, secret=secret, **extra)
    return s3.send(port, req.wire())


class AuthorizationMatrix(unittest.TestCase):
    def test_every_route_has_rows(self):
        routes = routes_in_router()
        self.assertGreater(len(routes), 15, "the route table of router.cc was not found")
        missing = routes - {op.route for op in OPERATIONS}
        self.assertFalse(missing, "operations with no rows in the authorization table: %s" % sorted(missing))

    def test_every_operation_by_every_caller(self):
        with s3.hots3_server(USERS) as server:
            ctx = Context(server.port)
            ctx.must(ctx.send("PUT", "/" + BUCKET))
            ctx.must(ctx.send("PUT", "/" + DIRECTORY_BUCKET, body=(
                b"<CreateBucketConfiguration><Location><Type>AvailabilityZone</Type><Name>z1</Name></Location>"
                b"<Bucket><Type>Directory</Type></Bucket></CreateBucketConfiguration>")))
            ctx.must(ctx.send("PUT", obj(), body=b"the object"))
            failures = []
            for op in OPERATIONS:
                for caller in CALLERS:
                    ctx.must(ctx.send("PUT", obj("gone"), body=b"g"))  # what DeleteObject(s) remove
                    method, path, query, headers, body = op.prepare(ctx)
                    r = attempt(server.port, caller, method, path, query, headers, body)
                    want = expected(op, caller)
                    if r.status != want:
                        failures.append("%s by %s: %d, expected %d %s" % (op.name, caller, r.status, want,
                                                                            r.body[:200]))
            self.assertFalse(failures, "\n".join(failures))
            # What the refused callers tried left the data as it was.
            r = ctx.send("GET", obj())
            self.assertEqual(r.body, b"the object")


if __name__ == "__main__":
    unittest.main(verbosity=2)
