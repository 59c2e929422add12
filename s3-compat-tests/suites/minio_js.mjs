// minio-js (npm "minio"), unmodified: a Client with only the endpoint and the keys. Its defaults
// matter here: the region is looked up with GetBucketLocation, single PUTs carry Content-MD5,
// objects above 64 MiB (its default part size) go up as a sequential multipart upload that
// first looks for an unfinished upload of the same key (ListMultipartUploads), listings ask for
// encoding-type=url, removeObjects sends quiet DeleteObjects, composeObject uses UploadPartCopy.

import { createReadStream, readFileSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import { Agent } from "node:http";

import * as Minio from "minio";

import {
  ACCESS_KEY, AWKWARD_NAMES, ENDPOINT, KiB, MiB, READER_ACCESS_KEY, READER_SECRET_KEY, SECRET_KEY,
  SOAK_BOUND_SECONDS, SOAK_OPERATIONS, Suite, expect, expectEqual, path, pool, randomBytes, rejects, sha256, soak,
  streamToBuffer,
} from "../lib/compat.mjs";

const md5 = (b) => createHash("md5").update(b).digest("hex");

const suite = new Suite();
const url = new URL(ENDPOINT);
const options = { endPoint: url.hostname, port: Number(url.port), useSSL: false };
const mc = new Minio.Client({ ...options, accessKey: ACCESS_KEY, secretKey: SECRET_KEY });
const B = "minio-js";
const require = createRequire(import.meta.url);
const minioVersion = require("minio/package.json").version;

function listAll(stream) {
  return new Promise((resolve, reject) => {
    const out = [];
    stream.on("data", (o) => out.push(o));
    stream.on("error", reject);
    stream.on("end", () => resolve(out));
  });
}

async function getBytes(bucket, key) {
  return streamToBuffer(await mc.getObject(bucket, key));
}

suite.version(`minio ${minioVersion} (node ${process.version})`);

suite.check("basic", "makeBucket, bucketExists, listBuckets", async () => {
  await mc.makeBucket(B);
  expect(await mc.bucketExists(B), "bucketExists after makeBucket");
  expect(!(await mc.bucketExists("minio-js-never-made")), "bucketExists of a missing bucket");
  const buckets = await mc.listBuckets();
  expect(buckets.some((b) => b.name === B), `listBuckets lacks ${B}`);
});

suite.check("basic", "putObject, getObject, statObject with metadata", async () => {
  const body = randomBytes(300 * KiB + 5, 1);
  const put = await mc.putObject(B, "objects/one.bin", body, body.length, {
    "Content-Type": "application/x-test",
    "X-Amz-Meta-Owner": "minio-js",
    project: "hots3", // minio-js turns this into x-amz-meta-project
  });
  expect(/^[0-9a-f]{32}$/.test(put.etag), `etag ${put.etag}`);
  const stat = await mc.statObject(B, "objects/one.bin");
  expectEqual(stat.size, body.length, "size");
  expectEqual(stat.etag, put.etag, "etag of statObject");
  expectEqual(stat.metaData["content-type"], "application/x-test", "content-type");
  expectEqual(stat.metaData.owner, "minio-js", "x-amz-meta-owner");
  expectEqual(stat.metaData.project, "hots3", "x-amz-meta-project");
  expectEqual(sha256(await getBytes(B, "objects/one.bin")), sha256(body), "body");
  // A string and an empty object.
  await mc.putObject(B, "objects/hello.txt", "hello from minio-js\n");
  expectEqual((await getBytes(B, "objects/hello.txt")).toString(), "hello from minio-js\n", "string body");
  await mc.putObject(B, "objects/empty", Buffer.alloc(0));
  expectEqual((await mc.statObject(B, "objects/empty")).size, 0, "empty object size");
});

suite.check("basic", "getPartialObject (ranged GET)", async () => {
  const body = randomBytes(1 * MiB, 2);
  await mc.putObject(B, "objects/ranged.bin", body);
  for (const [offset, length] of [[0, 1], [12345, 4096], [MiB - 10, 10], [500000, 0]]) {
    const got = await streamToBuffer(await mc.getPartialObject(B, "objects/ranged.bin", offset, length));
    const want = length ? body.subarray(offset, offset + length) : body.subarray(offset);
    expectEqual(sha256(got), sha256(want), `range ${offset}+${length}`);
  }
});

suite.check("basic", "fPutObject and fGetObject of a file", async () => {
  const src = path("upload.bin");
  const body = randomBytes(3 * MiB + 17, 3);
  writeFileSync(src, body);
  await mc.fPutObject(B, "files/upload.bin", src, { "Content-Type": "application/octet-stream" });
  const dst = path("download.bin");
  await mc.fGetObject(B, "files/upload.bin", dst);
  expectEqual(sha256(readFileSync(dst)), sha256(body), "downloaded file");
});

suite.check("basic", "copyObject with conditions, removeObject", async () => {
  const stat = await mc.statObject(B, "objects/one.bin");
  const cond = new Minio.CopyConditions();
  cond.setMatchETag(stat.etag);
  await mc.copyObject(B, "objects/copy.bin", `/${B}/objects/one.bin`, cond);
  expectEqual(sha256(await getBytes(B, "objects/copy.bin")), sha256(await getBytes(B, "objects/one.bin")), "copy");
  const bad = new Minio.CopyConditions();
  bad.setMatchETag("0123456789abcdef0123456789abcdef");
  const e = await rejects(() => mc.copyObject(B, "objects/copy2.bin", `/${B}/objects/one.bin`, bad), "copy with a stale etag");
  expectEqual(e.code, "PreconditionFailed", "error code of a failed copy condition");
  await mc.removeObject(B, "objects/copy.bin");
  const gone = await rejects(() => mc.statObject(B, "objects/copy.bin"), "statObject after removeObject");
  expectEqual(gone.code, "NotFound", "statObject of a removed object");
});

suite.check("basic", "listObjects and listObjectsV2, recursive and by directory", async () => {
  const keys = [];
  for (let d = 0; d < 3; d++) for (let f = 0; f < 4; f++) keys.push(`tree/d${d}/f${f}.txt`);
  keys.push("tree/top.txt");
  await pool(8, keys.map((k) => () => mc.putObject(B, k, `content of ${k}`)));
  const flat = await listAll(mc.listObjectsV2(B, "tree/", true));
  expectEqual(flat.map((o) => o.name).sort(), [...keys].sort(), "recursive listObjectsV2");
  expectEqual(flat.find((o) => o.name === "tree/top.txt").size, "content of tree/top.txt".length, "size in listing");
  const dir = await listAll(mc.listObjectsV2(B, "tree/", false));
  expectEqual(dir.filter((o) => o.prefix).map((o) => o.prefix).sort(), ["tree/d0/", "tree/d1/", "tree/d2/"], "common prefixes");
  expectEqual(dir.filter((o) => o.name).map((o) => o.name), ["tree/top.txt"], "keys beside the prefixes");
  const v1 = await listAll(mc.listObjects(B, "tree/d1/", false));
  expectEqual(v1.map((o) => o.name), ["tree/d1/f0.txt", "tree/d1/f1.txt", "tree/d1/f2.txt", "tree/d1/f3.txt"], "listObjects (V1)");
  const after = await listAll(mc.listObjectsV2(B, "tree/", true, "tree/d2/f1.txt"));
  expectEqual(after.map((o) => o.name), ["tree/d2/f2.txt", "tree/d2/f3.txt", "tree/top.txt"], "listObjectsV2 with startAfter");
});

suite.check("multipart", "fPutObject of 72 MiB: multipart (64 MiB parts), read back", async () => {
  const src = path("big.bin");
  const body = randomBytes(72 * MiB + 1234, 4);
  writeFileSync(src, body);
  const put = await mc.fPutObject(B, "big/big.bin", src, {});
  expect(/-2$/.test(put.etag), `etag of a two-part upload: ${put.etag}`);
  const stat = await mc.statObject(B, "big/big.bin");
  expectEqual(stat.size, body.length, "size");
  const dst = path("big.out");
  await mc.fGetObject(B, "big/big.bin", dst);
  expectEqual(sha256(readFileSync(dst)), sha256(body), "content");
  const tail = await streamToBuffer(await mc.getPartialObject(B, "big/big.bin", 64 * MiB - 100, 200));
  expectEqual(sha256(tail), sha256(body.subarray(64 * MiB - 100, 64 * MiB + 100)), "range across the part boundary");
  // Nothing left behind.
  const uploads = await listAll(mc.listIncompleteUploads(B, "big/", true));
  expectEqual(uploads.length, 0, "incomplete uploads after a finished upload");
});

suite.check("multipart", "putObject of a stream of unknown size (multipart)", async () => {
  const body = randomBytes(70 * MiB, 5);
  const src = path("stream.bin");
  writeFileSync(src, body);
  // No size: minio-js assumes the 5 TiB maximum and picks its part size for that.
  const put = await mc.putObject(B, "big/stream.bin", createReadStream(src));
  expect(/-[0-9]+$/.test(put.etag), `etag of a streamed (multipart) upload: ${put.etag}`);
  expectEqual(sha256(await getBytes(B, "big/stream.bin")), sha256(body), "content");
});

suite.check("multipart", "composeObject (UploadPartCopy) of three objects", async () => {
  const parts = [randomBytes(5 * MiB, 10), randomBytes(6 * MiB + 3, 11), randomBytes(100 * KiB, 12)];
  await Promise.all(parts.map((p, i) => mc.putObject(B, `compose/src-${i}`, p)));
  const sources = parts.map((_, i) => new Minio.CopySourceOptions({ Bucket: B, Object: `compose/src-${i}` }));
  const dest = new Minio.CopyDestinationOptions({ Bucket: B, Object: "compose/joined" });
  await mc.composeObject(dest, sources);
  // composeObject swallows part errors (it aborts and returns): the object must really be there.
  const got = await getBytes(B, "compose/joined");
  expectEqual(got.length, parts.reduce((n, p) => n + p.length, 0), "size of the composed object");
  expectEqual(sha256(got), sha256(Buffer.concat(parts)), "content of the composed object");
});

suite.check("small-files", "2,500 small objects: put, list across pages, removeObjects", async () => {
  const keys = [];
  for (let i = 0; i < 2500; i++) keys.push(`small/p${String(i % 5)}/obj-${String(i).padStart(5, "0")}.bin`);
  await pool(16, keys.map((k, i) => () => mc.putObject(B, k, randomBytes(KiB + (i % 15) * KiB, 100 + i))));
  const all = await listAll(mc.listObjectsV2(B, "small/", true));
  expectEqual(all.length, keys.length, "objects listed (three pages of 1000)");
  expectEqual(all.map((o) => o.name), [...keys].sort(), "listing order and keys");
  const v1 = await listAll(mc.listObjects(B, "small/", true));
  expectEqual(v1.length, keys.length, "objects listed by V1 (marker pagination)");
  const dirs = await listAll(mc.listObjectsV2(B, "small/", false));
  expectEqual(dirs.map((o) => o.prefix), ["small/p0/", "small/p1/", "small/p2/", "small/p3/", "small/p4/"], "prefixes");
  const errors = await mc.removeObjects(B, keys);
  expectEqual(errors.filter((e) => e.Code || e.code), [], "removeObjects errors");
  expectEqual((await listAll(mc.listObjectsV2(B, "small/", true))).length, 0, "objects left after removeObjects");
});

suite.check("small-files", "awkward key names: put, list (encoding-type=url), get", async () => {
  const keys = AWKWARD_NAMES.map((n) => `odd/${n}`);
  for (const [i, k] of keys.entries()) await mc.putObject(B, k, `body ${i}`);
  const listed = (await listAll(mc.listObjectsV2(B, "odd/", true))).map((o) => o.name);
  expectEqual(listed, [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))), "listed keys");
  const v1 = (await listAll(mc.listObjects(B, "odd/", true))).map((o) => o.name);
  expectEqual(v1, listed, "listed keys (V1)");
  const dir = await listAll(mc.listObjectsV2(B, "odd/", false));
  expect(dir.some((o) => o.prefix === "odd/unicodé/"), `prefix odd/unicodé/ in ${JSON.stringify(dir)}`);
  for (const [i, k] of keys.entries()) expectEqual((await getBytes(B, k)).toString(), `body ${i}`, `body of ${JSON.stringify(k)}`);
});

suite.check("checkpoint", "save shards in parallel, commit marker with If-None-Match: *", async () => {
  for (const step of [100, 200, 300]) {
    await Promise.all([0, 1, 2, 3].map((rank) =>
      mc.putObject(B, `ckpt/step-${step}/rank-${rank}.pt`, randomBytes(6 * MiB, step + rank))));
    await mc.putObject(B, `ckpt/step-${step}/COMMIT`, `step ${step}`, undefined, { "If-None-Match": "*" });
  }
  const e = await rejects(() => mc.putObject(B, "ckpt/step-300/COMMIT", "again", undefined, { "If-None-Match": "*" }),
    "a second commit marker");
  expectEqual(e.code, "PreconditionFailed", "error code");
  expectEqual((await getBytes(B, "ckpt/step-300/COMMIT")).toString(), "step 300", "the first marker stays");
});

suite.check("checkpoint", "load the latest committed step", async () => {
  const steps = (await listAll(mc.listObjectsV2(B, "ckpt/", false))).map((o) => o.prefix);
  expectEqual(steps, ["ckpt/step-100/", "ckpt/step-200/", "ckpt/step-300/"], "steps");
  const latest = steps.at(-1);
  await mc.statObject(B, `${latest}COMMIT`);
  for (const rank of [0, 1, 2, 3]) {
    expectEqual(sha256(await getBytes(B, `${latest}rank-${rank}.pt`)), sha256(randomBytes(6 * MiB, 300 + rank)), `rank ${rank}`);
  }
});

suite.check("checkpoint", "rotate: removeObjects of the oldest step", async () => {
  const old = (await listAll(mc.listObjectsV2(B, "ckpt/step-100/", true))).map((o) => o.name);
  expectEqual(old.length, 5, "objects of step 100");
  await mc.removeObjects(B, old);
  const steps = (await listAll(mc.listObjectsV2(B, "ckpt/", false))).map((o) => o.prefix);
  expectEqual(steps, ["ckpt/step-200/", "ckpt/step-300/"], "steps after rotation");
});

suite.check("checkpoint", "rename a step by copy + delete", async () => {
  const keys = (await listAll(mc.listObjectsV2(B, "ckpt/step-300/", true))).map((o) => o.name);
  for (const k of keys) {
    const to = k.replace("ckpt/step-300/", "ckpt/best/");
    await mc.copyObject(B, to, `/${B}/${k}`, new Minio.CopyConditions());
    await mc.removeObject(B, k);
  }
  const moved = (await listAll(mc.listObjectsV2(B, "ckpt/best/", true))).map((o) => o.name);
  expectEqual(moved, keys.map((k) => k.replace("ckpt/step-300/", "ckpt/best/")), "renamed keys");
  expectEqual((await listAll(mc.listObjectsV2(B, "ckpt/step-300/", true))).length, 0, "old keys left");
  expectEqual(sha256(await getBytes(B, "ckpt/best/rank-2.pt")), sha256(randomBytes(6 * MiB, 302)), "renamed content");
});

suite.check("errors", "NoSuchKey, NoSuchBucket, NotFound on stat", async () => {
  let e = await rejects(() => mc.getObject(B, "no/such/key"), "getObject of a missing key");
  expectEqual(e.code, "NoSuchKey", "getObject");
  e = await rejects(() => mc.getObject("minio-js-no-such-bucket", "k"), "getObject in a missing bucket");
  expectEqual(e.code, "NoSuchBucket", "getObject in a missing bucket");
  e = await rejects(() => mc.statObject(B, "no/such/key"), "statObject of a missing key");
  expectEqual(e.code, "NotFound", "statObject");
  e = await rejects(() => mc.removeBucket("minio-js-no-such-bucket"), "removeBucket of a missing bucket");
  expectEqual(e.code, "NoSuchBucket", "removeBucket");
});

suite.check("errors", "wrong secret: SignatureDoesNotMatch; read-only user: AccessDenied", async () => {
  const wrong = new Minio.Client({ ...options, accessKey: ACCESS_KEY, secretKey: SECRET_KEY + "x", region: "us-east-1" });
  let e = await rejects(() => wrong.listBuckets(), "listBuckets with a wrong secret");
  expectEqual(e.code, "SignatureDoesNotMatch", "wrong secret");
  e = await rejects(() => wrong.getObject(B, "objects/one.bin"), "getObject with a wrong secret");
  expectEqual(e.code, "SignatureDoesNotMatch", "wrong secret on getObject");
  await mc.makeBucket("shared-minio-js");
  await mc.putObject("shared-minio-js", "readable.txt", "for the reader");
  const reader = new Minio.Client({ ...options, accessKey: READER_ACCESS_KEY, secretKey: READER_SECRET_KEY, region: "us-east-1" });
  expectEqual((await streamToBuffer(await reader.getObject("shared-minio-js", "readable.txt"))).toString(), "for the reader", "reader reads");
  e = await rejects(() => reader.putObject("shared-minio-js", "written.txt", "no"), "putObject by a read-only user");
  expectEqual(e.code, "AccessDenied", "read-only user writing");
  await mc.removeObject("shared-minio-js", "readable.txt");
  await mc.removeBucket("shared-minio-js");
});

suite.check("errors", "416 for a range past the end; BucketNotEmpty", async () => {
  const e = await rejects(() => mc.getPartialObject(B, "objects/hello.txt", 1000, 10), "range past the end");
  expectEqual(e.code, "InvalidRange", "range past the end");
  const ne = await rejects(() => mc.removeBucket(B), "removeBucket of a bucket with objects");
  expectEqual(ne.code, "BucketNotEmpty", "removeBucket");
});

suite.check("presign", "presignedGetObject, presignedPutObject, expiry", async () => {
  const put = await mc.presignedPutObject(B, "presigned/up.txt", 60);
  let r = await fetch(put, { method: "PUT", body: "through a presigned PUT" });
  expectEqual(r.status, 200, "presigned PUT status");
  const get = await mc.presignedGetObject(B, "presigned/up.txt", 60);
  r = await fetch(get);
  expectEqual(r.status, 200, "presigned GET status");
  expectEqual(await r.text(), "through a presigned PUT", "presigned GET body");
  const withHeaders = await mc.presignedGetObject(B, "presigned/up.txt", 60, { "response-content-type": "text/x-minio" });
  r = await fetch(withHeaders);
  expectEqual(r.headers.get("content-type"), "text/x-minio", "response-content-type override");
  const short = await mc.presignedGetObject(B, "presigned/up.txt", 1);
  await sleep(2100);
  r = await fetch(short);
  expectEqual(r.status, 403, "expired URL status");
  const text = await r.text();
  expect(/<Code>AccessDenied<\/Code>/.test(text) && /expired/i.test(text), `expired URL body: ${text}`);
});

suite.check("concurrency", "readers during overwrites see one whole version", async () => {
  const size = 4 * MiB;
  const versions = Array.from({ length: 8 }, (_, v) => randomBytes(size, 500 + v));
  const hashes = new Set(versions.map(sha256));
  await mc.putObject(B, "race/obj", versions[0]);
  let writing = true;
  const writer = (async () => {
    for (let round = 0; round < 3; round++) for (const v of versions) await mc.putObject(B, "race/obj", v);
    writing = false;
  })();
  let reads = 0;
  const readers = Array.from({ length: 3 }, async () => {
    while (writing) {
      const got = await getBytes(B, "race/obj");
      reads++;
      expect(hashes.has(sha256(got)), `a read of ${got.length} bytes matches no written version`);
    }
  });
  await Promise.all([writer, ...readers]);
  expect(reads > 0, "no read overlapped the writes");
});

suite.check("reuse", `${SOAK_OPERATIONS} random operations, errors included, on a pool of 2 connections: ` +
  `each under ${SOAK_BOUND_SECONDS} s`, async () => {
  const SB = "minio-js-reuse";
  // Both clients share one pool of two keep-alive connections.
  const transportAgent = new Agent({ keepAlive: true, maxSockets: 2 });
  const c = new Minio.Client({ ...options, accessKey: ACCESS_KEY, secretKey: SECRET_KEY, region: "us-east-1", transportAgent });
  const wrong = new Minio.Client({ ...options, accessKey: ACCESS_KEY, secretKey: SECRET_KEY + "x", region: "us-east-1", transportAgent });
  const model = new Map();  // key -> bytes
  const etags = new Map();  // key -> ETag, unquoted as minio-js gives it
  const body = (rng) => randomBytes([0, 0, 1, 100, 4 * KiB, 70 * KiB][Math.floor(rng() * 6)], Math.floor(rng() * 1e9));
  const fails = async (call, name, fn, code) => {
    const e = await rejects(() => call(name, fn), name);
    expectEqual(e.code, code, `error of ${name}`);
  };
  const set = (key, data, etag) => { model.set(key, data); etags.set(key, etag); };
  const put = async (key, rng, call) => {
    const data = body(rng);
    const r = await call("putObject", () => c.putObject(SB, key, data));
    expectEqual(r.etag, md5(data), "ETag of a PUT");
    set(key, data, r.etag);
  };
  const get = async (key, rng, call) => {
    if (!model.has(key)) return fails(call, "getObject", () => c.getObject(SB, key), "NoSuchKey");
    const got = await call("getObject", async () => streamToBuffer(await c.getObject(SB, key)));
    expectEqual(sha256(got), sha256(model.get(key)), `GET ${key}`);
  };
  const ranged = async (key, rng, call) => {
    const data = model.get(key);
    if (!data?.length) return put(key, rng, call);
    const first = Math.floor(rng() * data.length);
    const length = Math.min(100, data.length - first);
    const got = await call("getPartialObject", async () => streamToBuffer(await c.getPartialObject(SB, key, first, length)));
    expectEqual(sha256(got), sha256(data.subarray(first, first + length)), "ranged GET");
  };
  const badRange = async (key, rng, call) => {
    if (!model.has(key)) return fails(call, "statObject", () => c.statObject(SB, key), "NotFound");
    await fails(call, "getPartialObject", () => c.getPartialObject(SB, key, model.get(key).length + 5, 10), "InvalidRange");
  };
  const conditions = async (key, rng, call) => {
    const source = keys[Math.floor(rng() * keys.length)];
    if (!model.has(source) || source === key) return put(key, rng, call);
    const cond = new Minio.CopyConditions();
    cond.setMatchETag("0".repeat(32));
    await fails(call, "copyObject", () => c.copyObject(SB, key, `/${SB}/${source}`, cond), "PreconditionFailed");
  };
  const refused = async (key, rng, call) => {
    await fails(call, "putObject", () => wrong.putObject(SB, key, body(rng)), "SignatureDoesNotMatch");
    await fails(call, "putObject", () => c.putObject("minio-js-soak-no-such-bucket", key, body(rng)), "NoSuchBucket");
  };
  const remove = async (key, rng, call) => {
    await call("removeObject", () => c.removeObject(SB, key));
    model.delete(key);
    etags.delete(key);
  };
  const copy = async (key, rng, call) => {
    const source = keys[Math.floor(rng() * keys.length)];
    const run = () => c.copyObject(SB, key, `/${SB}/${source}`, new Minio.CopyConditions());
    if (!model.has(source)) return fails(call, "copyObject", run, "NoSuchKey");
    if (source === key) return fails(call, "copyObject", run, "InvalidRequest");
    const r = await call("copyObject", run);
    // A copy is a new object in one part: its ETag is the MD5 of its data, as on S3.
    expectEqual(r.etag, md5(model.get(source)), "ETag of a copy");
    set(key, model.get(source), r.etag);
  };
  const multipart = async (key, rng, call) => {
    const uploadID = await call("initiateNewMultipartUpload", () => c.initiateNewMultipartUpload(SB, key, {}));
    const data = body(rng);
    const part = (partNumber, payload) => c.uploadPart({ bucketName: SB, objectName: key, uploadID, partNumber, headers: {} }, payload);
    await fails(call, "uploadPart", () => part(0, data), "InvalidArgument");
    const { etag } = await call("uploadPart", () => part(1, data));
    if (rng() < 0.5) {
      await call("abortMultipartUpload", () => c.abortMultipartUpload(SB, key, uploadID));
      return fails(call, "uploadPart", () => part(2, body(rng)), "NoSuchUpload");
    }
    const done = await call("completeMultipartUpload", () => c.completeMultipartUpload(SB, key, uploadID, [{ part: 1, etag }]));
    set(key, data, done.etag);
  };
  const listing = async (key, rng, call) => {
    const got = await call("listObjectsV2", () => listAll(c.listObjectsV2(SB, "soak/", true)));
    expectEqual(got.map((o) => o.name), [...model.keys()].sort(), "the keys under soak/");
  };
  const keys = Array.from({ length: 12 }, (_, i) => `soak/k${String(i).padStart(2, "0")}`);
  await c.makeBucket(SB);
  await soak([put, put, put, get, get, ranged, badRange, conditions, refused, remove, copy, multipart, listing], keys);
  for (const key of model.keys()) await c.removeObject(SB, key);
  await c.removeBucket(SB);
});

suite.check("basic", "clean up: remove everything and the bucket", async () => {
  const all = (await listAll(mc.listObjectsV2(B, "", true))).map((o) => o.name);
  await mc.removeObjects(B, all);
  await mc.removeBucket(B);
  expect(!(await mc.bucketExists(B)), "bucket still exists");
});

await suite.main();
