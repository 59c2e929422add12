"""`hots3 check` against a real store that is corrupted on purpose, one way at a time: each
corruption must be reported and make check exit non-zero; the intact store passes. Also the
store lock: neither check nor a second server runs on a store a live server holds."""

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
BIG = bytes((i * 7 + i // 4096) % 251 for i in range(300 * 1024))  # several 4 KiB blocks
SMALL = b"inline object data " * 10                                 # under inline_max (4 KiB)
PART = bytes((i * 13) % 253 for i in range(5 * 1024 * 1024))


def check(data_dir):
    r = subprocess.run([HOTS3, "check", "--data", data_dir], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


class CheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hots3-check-")
        server = s3.hots3_server(workdir=cls.root, device_size="64MiB")
        with server:
            port = server.port

            def req(method, path, query=(), body=b""):
                r = s3.send(port, s3.SignedRequest(method, path, query, body=body, port=port).wire())
                assert r.status == 200, r
                return r

            req("PUT", "/bkt")
            req("PUT", "/bkt/big", body=BIG)
            req("PUT", "/bkt/small", body=SMALL)
            r = req("POST", "/bkt/multi", query=[("uploads", "")])
            upload = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
            req("PUT", "/bkt/multi", query=[("partNumber", "1"), ("uploadId", upload)], body=PART)

            # While the server runs: check refuses, and so does a second server.
            code, out = check(os.path.join(cls.root, "data"))
            cls.live_check = (code, out)
            second = subprocess.run([HOTS3, "serve", "--data", os.path.join(cls.root, "data"),
                                     "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
            cls.second_serve = (second.returncode, second.stdout + second.stderr)
        assert server.returncode == 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hots3-check-copy-")
        self.data = os.path.join(self.dir, "data")
        shutil.copytree(os.path.join(self.root, "data"), self.data)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, *statements):
        db = sqlite3.connect(os.path.join(self.data, "catalog.db"))
        try:
            rows = None
            for s in statements:
                rows = db.execute(s).fetchall()
            db.commit()
            return rows
        finally:
            db.close()

    def object_id(self, key):
        return self.sql("SELECT id FROM objects WHERE key = '%s'" % key)[0][0]

    def assertProblem(self, pattern):
        code, out = check(self.data)
        self.assertEqual(code, 1, out)
        self.assertIn("FAILED: problems found", out)
        self.assertRegex(out, pattern)
        return out

    def test_intact_store_passes(self):
        code, out = check(self.data)
        self.assertEqual(code, 0, out)
        self.assertIn("OK: catalog and device are consistent", out)
        self.assertIn("objects 2 (1 inline), uploads 1 with 1 parts", out)
        self.assertNotIn("PROBLEM", out)

    def test_check_leaves_the_catalog_unchanged(self):
        path = os.path.join(self.data, "catalog.db")
        before = open(path, "rb").read()
        self.assertEqual(check(self.data)[0], 0)
        self.assertEqual(open(path, "rb").read(), before)

    def test_live_server_holds_the_store(self):
        code, out = self.live_check
        self.assertNotEqual(code, 0, out)
        self.assertIn("is in use", out)
        self.assertIn("running hots3 server", out)
        code, out = self.second_serve
        self.assertNotEqual(code, 0, out)
        self.assertIn("is in use", out)

    def test_integrity_check(self):
        # The index no longer describes its rows: SQLite's integrity_check must say so.
        self.sql("PRAGMA writable_schema = ON",
                 "UPDATE sqlite_master SET sql = 'CREATE INDEX extents_owner ON extents(owner_id, length)' "
                 "WHERE name = 'extents_owner'")
        self.assertProblem(r"PROBLEM: catalog integrity: .*extents_owner")

    def test_extent_without_object(self):
        self.sql("DELETE FROM objects WHERE key = 'big'")
        out = self.assertProblem(r"PROBLEM: extent \d+ \(device \d+\+\d+\) belongs to no object or part")
        self.assertRegex(out, r"PROBLEM: \d+ bytes of the device are allocated but unreferenced")

    def test_part_without_upload(self):
        self.sql("DELETE FROM uploads")
        self.assertProblem(r"PROBLEM: part \d+ \(number 1\) belongs to upload \d+, which does not exist")

    def test_object_pointing_at_missing_extents(self):
        self.sql("DELETE FROM extents WHERE owner_id = %d" % self.object_id("big"))
        self.assertProblem(r"PROBLEM: object bkt/big: extents hold 0 bytes, the size is %d" % len(BIG))

    def test_inline_data_without_object(self):
        self.sql("DELETE FROM objects WHERE key = 'small'")
        self.assertProblem(r"PROBLEM: inline data of object id \d+, which does not exist")

    def test_completed_upload_of_a_missing_object(self):
        self.sql("INSERT INTO ended_uploads(upload_id, object_id, ended_ms) VALUES ('gone-upload', 999999, 0)",
                 "INSERT INTO ended_uploads(upload_id, object_id, ended_ms) VALUES ('aborted', NULL, 0)")
        out = self.assertProblem(r"PROBLEM: completed upload gone-upload made object id 999999, which does not exist")
        self.assertNotIn("aborted", out)  # an abort names no object

    def test_overlapping_extents(self):
        big = self.object_id("big")
        self.sql("UPDATE extents SET device_offset = (SELECT device_offset FROM extents WHERE owner_id = %d) "
                 "WHERE owner_id != %d" % (big, big))
        self.assertProblem(r"PROBLEM: extent \d+ \(owner \d+, device \d+\+\d+\) overlaps extent \d+")

    def test_extent_beyond_the_device(self):
        self.sql("UPDATE extents SET device_offset = %d WHERE owner_id = %d" % (1 << 40, self.object_id("big")))
        self.assertProblem(r"PROBLEM: extent \d+ \(device 1099511627776\+\d+\) lies outside the data area")

    def test_allocated_beyond_the_data(self):
        self.sql("UPDATE extents SET device_length = device_length + 4096 * 4 "
                 "WHERE device_offset = (SELECT max(device_offset) FROM extents)")
        self.assertProblem(r"PROBLEM: extent \d+ allocates \d+ bytes for \d+ bytes of data: 16384 bytes unreferenced")

    def test_block_checksum(self):
        offset = self.sql("SELECT device_offset FROM extents WHERE owner_id = %d" % self.object_id("big"))[0][0]
        with open(os.path.join(self.data, "device.img"), "r+b") as f:
            f.seek(offset + 3 * 4096 + 100)
            byte = f.read(1)
            f.seek(offset + 3 * 4096 + 100)
            f.write(bytes([byte[0] ^ 0x40]))
        self.assertProblem(r"PROBLEM: object bkt/big: checksum mismatch at byte %d " % (3 * 4096))

    def test_inline_checksum(self):
        self.sql("UPDATE inline_data SET data = CAST(replace(CAST(data AS TEXT), 'object', 'OBJECT') AS BLOB)")
        self.assertProblem(r"PROBLEM: object bkt/small: inline data checksum mismatch")
        # And a server never sends those bytes: an error, and a log line that says why.
        server = s3.hots3_server('[metrics]\nbearer_token = "check-metrics-token-0123"\n', workdir=self.dir,
                                 device_size="64MiB")
        with server:
            # HEAD answers from the object's record and reads no bytes: the damage is not its.
            r = s3.send(server.port, s3.SignedRequest("HEAD", "/bkt/small", port=server.port).wire())
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b"")
            r = s3.send(server.port, s3.SignedRequest("GET", "/bkt/small", port=server.port).wire())
            self.assertEqual(r.status, 500, r)
            self.assertNotIn(b"OBJECT", r.body)
            r = s3.send(server.port, s3.SignedRequest("GET", "/bkt/big", port=server.port).wire())
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, BIG)
            # Operators see it in the metrics too.
            r = s3.send(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                                     b"Authorization: Bearer check-metrics-token-0123\r\n\r\n")
            self.assertIn(b"\nhots3_checksum_failures_total 1\n", r.body)
        self.assertRegex(server.read_stderr(), r"inline data of object id \d+ fails its checksum")

    def test_wrong_device(self):
        self.sql("UPDATE meta SET value = zeroblob(16) WHERE key = 'device_uuid'")
        self.assertProblem(r"PROBLEM: the catalog does not belong to this device \(device UUID \S+, catalog "
                           r"00000000-0000-0000-0000-000000000000\)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
