"""kill -9 of the real hots3 process under concurrent PUT / overwrite / DELETE / multipart
(CreateMultipartUpload, UploadPart, re-uploads of a part, Complete, Abort, uploads left open
across restarts).

After each restart: every acknowledged write reads back byte-exact, an operation that was in
flight shows its old or its new state (never a mix), nothing never attempted is visible; every
upload is listed with exactly its acknowledged parts (a part upload in flight: the old part or
the new one) unless its Abort or Complete was acknowledged or in flight, and a Complete in flight
either happened entirely (object there, upload gone) or not at all. At the end, `hots3 check`
finds the catalog and the device consistent with every checksum valid, and the space the server
had in use is exactly what the catalog references: nothing leaked.

After every restart, once the verification has resolved what each key and upload holds, the space
the server reports in use (its exact figure at a clean stop, and the one it rebuilds from the
catalog at the next start) must equal what this test computes from those objects alone: each
written piece of data rounded up to 4 KiB blocks, as the allocator hands them out (a PUT's body,
each part of a multipart object or open upload), and nothing for objects stored inline (4 KiB or
less). A leak or a double free after a kill -9 shows as a difference."""

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import harness  # noqa: E402
import s3_support as s3  # noqa: E402

HOTS3 = harness.find_binary("HOTS3_BIN", "hots3")
WRITERS = 6
MULTIPART_WRITERS = 3
ROUNDS = 3
MiB = 1024 * 1024
BLOCK = 4096
INLINE_MAX = 4096  # storage.inline_max's default: such objects live in the catalog

# sha256 of content -> device bytes the object holding it takes.
ALLOCATION = {}


def blocks(size):
    return (size + BLOCK - 1) // BLOCK * BLOCK


def put_allocation(size):
    return 0 if size <= INLINE_MAX else blocks(size)


def payload(tag, size):
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (size // 32 + 1))[:size]


class Worker(threading.Thread):
    """Owns its keys, so its operations on a key are ordered: the last acknowledged one decides
    what the key must hold; one in flight at the crash may or may not have happened."""

    def __init__(self, index, port, stop):
        super().__init__(daemon=True)
        self.index = index
        self.port = port
        self.stop_flag = stop
        self.random = random.Random(index * 7919 + int(time.time()))
        self.acked = {}      # key -> sha256 hex of content, or None when deleted
        self.in_flight = {}  # key -> (possible new state) while a request is outstanding
        self.seq = 0

    def request(self, method, key, query=(), body=b"", headers=None):
        req = s3.SignedRequest(method, "/crash/" + key, query, headers, body=body, port=self.port)
        return s3.send(self.port, req.wire(), timeout_s=20)

    def put(self, key, body):
        self.in_flight[key] = hashlib.sha256(body).hexdigest()
        ALLOCATION[self.in_flight[key]] = put_allocation(len(body))
        r = self.request("PUT", key, body=body)
        if r.status == 200:
            self.acked[key] = self.in_flight.pop(key)
        return r.status

    def delete(self, key):
        self.in_flight[key] = None
        r = self.request("DELETE", key)
        if r.status == 204:
            self.acked[key] = self.in_flight.pop(key)

    def multipart(self, key):
        r = self.request("POST", key, query=[("uploads", "")])
        upload = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        parts = [payload("%s-%d-p%d" % (key, self.seq, n), 5 * 1024 * 1024 if n < 3 else 70000) for n in (1, 2, 3)]
        etags = []
        for n, body in enumerate(parts, start=1):
            r = self.request("PUT", key, query=[("partNumber", str(n)), ("uploadId", upload)], body=body)
            if r.status != 200:
                return
            etags.append(r.header("etag"))
        xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in enumerate(etags, 1))
        self.in_flight[key] = hashlib.sha256(b"".join(parts)).hexdigest()
        ALLOCATION[self.in_flight[key]] = sum(blocks(len(p)) for p in parts)  # parts keep their extents
        r = self.request("POST", key, query=[("uploadId", upload)], body=xml.encode())
        if r.status == 200 and b"<Error>" not in r.body:
            self.acked[key] = self.in_flight.pop(key)

    def run(self):
        keys = ["w%d/k%d" % (self.index, i) for i in range(8)]
        try:
            while not self.stop_flag.is_set():
                self.seq += 1
                key = self.random.choice(keys)
                op = self.random.random()
                if op < 0.55:
                    size = self.random.choice([100, 3000, 65536, 700000, 4 * 1024 * 1024])
                    self.put(key, payload("%s-%d" % (key, self.seq), size))
                elif op < 0.8:
                    self.delete(key)
                else:
                    self.multipart(key)
        except Exception:  # noqa: BLE001 - the server was killed under us
            pass


class Upload:
    """What the client knows of one multipart upload."""

    def __init__(self, key, upload_id):
        self.key = key
        self.id = upload_id
        self.parts = {}       # number -> (etag, tag) acknowledged
        self.pending = None   # (number, etag, tag) while an UploadPart is outstanding
        self.closing = None   # "abort" or "complete" while outstanding
        self.closed = False   # its Abort or Complete was acknowledged
        self.complete_sha = None


def part_size(number):
    # Every part but the last may be no smaller than 5 MiB; part 3 is the small last one.
    return 5 * MiB + 1000 * number if number < 3 else 70000


def part_body(tag, number):
    return payload(tag, part_size(number))


class MultipartWorker(Worker):
    """Creates uploads, uploads and re-uploads parts, completes and aborts, on keys of its own;
    `uploads` (id -> Upload) holds the uploads still open from earlier rounds."""

    def __init__(self, index, port, stop, uploads):
        super().__init__(100 + index, port, stop)
        self.uploads = uploads
        self.creating = None  # the key of a CreateMultipartUpload outstanding

    def create(self, key):
        self.creating = key
        r = self.request("POST", key, query=[("uploads", "")])
        if r.status == 200:
            upload_id = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
            self.uploads[upload_id] = Upload(key, upload_id)
        self.creating = None

    def upload_part(self, u):
        number = self.random.choice([1, 2, 3])
        tag = "%s-%d-mp%d" % (u.key, self.seq, number)
        body = part_body(tag, number)
        u.pending = (number, hashlib.md5(body).hexdigest(), tag)
        r = self.request("PUT", u.key, query=[("partNumber", str(number)), ("uploadId", u.id)], body=body)
        if r.status == 200:
            assert r.header("etag").strip('"') == u.pending[1]
            u.parts[number] = (u.pending[1], tag)
        u.pending = None

    def complete(self, u):
        if not u.parts:
            return
        numbers = sorted(u.parts)
        xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag></Part>" % (n, u.parts[n][0]) for n in numbers)
        u.complete_sha = hashlib.sha256(b"".join(part_body(u.parts[n][1], n) for n in numbers)).hexdigest()
        ALLOCATION[u.complete_sha] = sum(blocks(part_size(n)) for n in numbers)
        u.closing = "complete"
        self.in_flight[u.key] = u.complete_sha
        r = self.request("POST", u.key, query=[("uploadId", u.id)], body=xml.encode())
        if r.status == 200 and b"<Error>" not in r.body:
            self.acked[u.key] = self.in_flight.pop(u.key)
            u.closed = True
        else:
            raise AssertionError("Complete failed: %d %r" % (r.status, r.body))

    def abort(self, u):
        u.closing = "abort"
        r = self.request("DELETE", u.key, query=[("uploadId", u.id)])
        if r.status != 204:
            raise AssertionError("Abort failed: %d %r" % (r.status, r.body))
        u.closed = True
        u.closing = None

    def run(self):
        keys = ["m%d/k%d" % (self.index, i) for i in range(3)]
        try:
            while not self.stop_flag.is_set():
                self.seq += 1
                open_uploads = [u for u in self.uploads.values() if not u.closed]
                if not open_uploads or (len(open_uploads) < 3 and self.random.random() < 0.25):
                    self.create(self.random.choice(keys))
                    continue
                u = self.random.choice(open_uploads)
                op = self.random.random()
                if op < 0.65:
                    self.upload_part(u)
                elif op < 0.88:
                    self.complete(u)
                else:
                    self.abort(u)
        except AssertionError as e:
            self.failure = str(e)
        except Exception:  # noqa: BLE001 - the server was killed under us
            pass


class CrashTest(unittest.TestCase):
    def test_kill_9_under_load_loses_nothing_acknowledged(self):
        workdir = tempfile.mkdtemp(prefix="hots3-crash-", dir=os.environ.get("HOTS3_TEST_TMPDIR"))
        data_dir = os.path.join(workdir, "data")
        expected = {}  # key -> set of acceptable sha256 (None = absent)
        uploads = [{} for _ in range(MULTIPART_WRITERS)]  # per multipart writer: id -> Upload
        creating = []  # keys whose CreateMultipartUpload was in flight at the kill
        for round_number in range(ROUNDS):
            server = s3.hots3_server(device_size="2GiB", workdir=workdir).start()
            try:
                port = server.port
                self.verify_uploads(port, uploads, creating, expected, round_number)
                self.verify(port, expected, round_number)
                if round_number > 0:
                    # Everything is resolved now: the space in use must be what it holds.
                    server = self.check_space(server, workdir, expected, uploads, round_number)
                    port = server.port
                if round_number == 0:
                    req = s3.SignedRequest("PUT", "/crash", port=port)
                    self.assertEqual(s3.send(port, req.wire()).status, 200)
                stop = threading.Event()
                workers = [Worker(i, port, stop) for i in range(WRITERS)]
                multipart = [MultipartWorker(i, port, stop, uploads[i]) for i in range(MULTIPART_WRITERS)]
                workers += multipart
                for w in workers:
                    w.start()
                time.sleep(1.5 + random.random() * 2)
                server.proc.send_signal(signal.SIGKILL)
                server.proc.wait()
                stop.set()
                for w in workers:
                    w.join(timeout=30)
                for w in workers:
                    for key in set(w.acked) | set(w.in_flight):
                        states = set()
                        if key in w.acked:
                            states.add(w.acked[key])
                        elif key in expected:
                            states |= expected[key]
                        else:
                            states.add(None)
                        if key in w.in_flight:
                            states.add(w.in_flight[key])
                        expected[key] = states
                for w in multipart:
                    self.assertIsNone(getattr(w, "failure", None))
                    if w.creating:
                        creating.append(w.creating)
                acked = sum(len(w.acked) for w in workers)
                sys.stderr.write("round %d: %d keys acknowledged, %d operations in flight at the kill\n"
                                 % (round_number, acked, sum(len(w.in_flight) for w in workers)))
                self.assertGreater(acked, 0, "no write was acknowledged")
            finally:
                server.kill()
        server = s3.hots3_server(device_size="2GiB", workdir=workdir)
        with server:
            self.verify_uploads(server.port, uploads, creating, expected, ROUNDS)
            self.verify(server.port, expected, ROUNDS)
        self.assertEqual(server.returncode, 0)
        logged = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", server.read_stderr())
        self.assertIsNotNone(logged, server.read_stderr()[-2000:])
        check = subprocess.run([HOTS3, "check", "--data", data_dir], capture_output=True, text=True, timeout=600)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertIn("OK: catalog and device are consistent", check.stdout)
        sys.stderr.write(check.stdout)
        referenced = int(re.search(r"referenced .*?\((\d+) bytes\)", check.stdout).group(1))
        self.assertEqual(int(logged.group(2)), 0)
        self.assertEqual(int(logged.group(1)), referenced, "space in use is not what the catalog references")
        self.assertEqual(referenced, self.space_needed(expected, uploads), "space in use is not what the live "
                         "objects need")
        self.assertIn("uploads %d with" % sum(1 for per in uploads for u in per.values() if not u.closed),
                      check.stdout)
        server.cleanup()
        subprocess.run(["rm", "-rf", workdir])

    @staticmethod
    def space_needed(expected, uploads):
        """Device bytes the resolved objects and the open uploads' parts take."""
        want = sum(ALLOCATION[sha] for states in expected.values() for sha in states if sha is not None)
        return want + sum(blocks(part_size(n)) for per in uploads for u in per.values() if not u.closed
                          for n in u.parts)

    def check_space(self, server, workdir, expected, uploads, round_number):
        """Stops `server` cleanly and compares the space it had in use, and the space the next
        server rebuilds from the catalog, with what the live objects and open uploads need.
        Returns the next server, started."""
        want = self.space_needed(expected, uploads)
        where = "round %d: " % round_number
        self.assertEqual(server.stop(), 0, server.read_stderr()[-2000:])
        stopped = re.search(r"device space in use: (\d+) bytes \((\d+) waiting", server.read_stderr())
        self.assertIsNotNone(stopped, server.read_stderr()[-2000:])
        server.cleanup()
        self.assertEqual(int(stopped.group(2)), 0, where + "space still waiting for readers at the stop")
        self.assertEqual(int(stopped.group(1)), want, where + "space in use after the restart is not what the "
                         "live objects need (%d bytes)" % want)
        server = s3.hots3_server(device_size="2GiB", workdir=workdir).start()
        started = re.search(r"used \((\d+) bytes\), free space rebuilt", server.read_stderr())
        self.assertIsNotNone(started, server.read_stderr()[-2000:])
        self.assertEqual(int(started.group(1)), want, where + "space rebuilt from the catalog at start")
        sys.stderr.write("%sspace in use %d bytes, as the live objects need\n" % (where, want))
        return server

    def verify_uploads(self, port, uploads, creating, expected, round_number):
        """Every upload is where the acknowledged operations put it. Resolves what was in flight,
        so that the next round starts from known state."""
        req = s3.SignedRequest("GET", "/crash", [("uploads", "")], port=port)
        r = s3.send(port, req.wire())
        if r.status == 404:
            return  # before the bucket exists
        self.assertEqual(r.status, 200)
        self.assertNotIn(b"<IsTruncated>true</IsTruncated>", r.body)
        listed = dict((u.decode(), k.decode()) for k, u in re.findall(
            rb"<Upload><Key>([^<]+)</Key><UploadId>([^<]+)</UploadId>", r.body))
        where = "round %d: " % round_number
        known = {}
        for per in uploads:
            for u in per.values():
                known[u.id] = u
                present = u.id in listed
                if u.closed:
                    self.assertFalse(present, where + "upload %s was aborted or completed" % u.id)
                    continue
                if u.closing is None:
                    self.assertTrue(present, where + "acknowledged upload %s of %s vanished" % (u.id, u.key))
                if not present:
                    if u.closing == "complete":  # it happened, entirely
                        self.assertIn(u.complete_sha, expected[u.key])
                        expected[u.key] = {u.complete_sha}
                    u.closed = True
                    continue
                if u.closing == "complete":  # it did not happen at all
                    expected[u.key].discard(u.complete_sha)
                    self.assertTrue(expected[u.key], where + "%s: no acceptable state left" % u.key)
                req = s3.SignedRequest("GET", "/crash/" + u.key, [("uploadId", u.id)], port=port)
                r = s3.send(port, req.wire())
                self.assertEqual(r.status, 200, r.body)
                parts = {int(n): e.decode().replace("&quot;", "").strip('"') for n, e in re.findall(
                    rb"<PartNumber>(\d+)</PartNumber>.*?<ETag>([^<]+)</ETag>", r.body, re.S)}
                resolved = {}
                for number in set(parts) | set(u.parts):
                    choices = {}
                    if number in u.parts:
                        choices[u.parts[number][0]] = u.parts[number][1]
                    if u.pending and u.pending[0] == number:
                        choices[u.pending[1]] = u.pending[2]
                    self.assertIn(parts.get(number), choices,
                                  where + "upload %s part %d: %s, expected one of %s" %
                                  (u.id, number, parts.get(number), list(choices)))
                    resolved[number] = (parts[number], choices[parts[number]])
                u.parts = resolved
                u.pending = None
                u.closing = None
        # Uploads nobody was told about: a CreateMultipartUpload in flight at the kill, no parts.
        for upload_id, key in listed.items():
            if upload_id in known:
                continue
            if not key.startswith("w"):  # (the PUT/DELETE writers' uploads: just removed)
                self.assertIn(key, creating, where + "upload %s of %s was never created" % (upload_id, key))
                creating.remove(key)
                req = s3.SignedRequest("GET", "/crash/" + key, [("uploadId", upload_id)], port=port)
                self.assertNotIn(b"<Part>", s3.send(port, req.wire()).body)
            req = s3.SignedRequest("DELETE", "/crash/" + key, [("uploadId", upload_id)], port=port)
            self.assertEqual(s3.send(port, req.wire()).status, 204)
        sys.stderr.write("%suploads: %d listed (%d parts checked), %d created in flight\n" % (
            where, len(listed), sum(len(u.parts) for u in known.values() if not u.closed), len(creating)))
        creating.clear()
        for per in uploads:
            for upload_id in [i for i, u in per.items() if u.closed]:
                del per[upload_id]

    def verify(self, port, expected, round_number):
        listed = set()
        marker = ""
        while True:
            query = [("marker", marker)] if marker else []
            req = s3.SignedRequest("GET", "/crash", query, port=port)
            r = s3.send(port, req.wire())
            if r.status == 404:
                break  # before the bucket exists
            keys = re.findall(rb"<Key>([^<]+)</Key>", r.body)
            listed.update(k.decode() for k in keys)
            if b"<IsTruncated>true</IsTruncated>" not in r.body:
                break
            marker = keys[-1].decode()
        for key in listed:
            self.assertIn(key, expected, "round %d: %s is visible but was never written" % (round_number, key))
        for key, states in expected.items():
            req = s3.SignedRequest("GET", "/crash/" + key, port=port)
            r = s3.send(port, req.wire())
            if r.status == 404:
                self.assertIn(None, states, "round %d: acknowledged %s is gone" % (round_number, key))
                expected[key] = {None}
            else:
                self.assertEqual(r.status, 200, key)
                digest = hashlib.sha256(r.body).hexdigest()
                self.assertIn(digest, states, "round %d: %s holds bytes nobody wrote" % (round_number, key))
                expected[key] = {digest}


if __name__ == "__main__":
    unittest.main(verbosity=2)
