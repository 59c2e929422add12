// The AWS SDK for JavaScript v3 (@aws-sdk/client-s3, lib-storage, s3-request-presigner; npm
// latest), unmodified: an S3Client with only endpoint, region and credentials. Its defaults:
// CRC32 on every upload (streams as aws-chunked with a trailer), checksum validation on GETs,
// path-style requests for an IP endpoint, 3 attempts; lib-storage's Upload cuts 5 MiB parts and
// sends 4 at once; getSignedUrl makes SigV4 query-string URLs.

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { createRequire } from "node:module";
import { Agent } from "node:http";

import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CopyObjectCommand, CreateBucketCommand,
  CreateMultipartUploadCommand, DeleteBucketCommand, DeleteObjectCommand, DeleteObjectsCommand, GetObjectCommand,
  HeadBucketCommand, HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsCommand, ListObjectsV2Command,
  ListPartsCommand, PutObjectCommand, S3Client, UploadPartCommand, UploadPartCopyCommand, paginateListObjectsV2,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

import {
  ACCESS_KEY, AWKWARD_NAMES, ENDPOINT, KiB, MiB, READER_ACCESS_KEY, READER_SECRET_KEY, REGION, SECRET_KEY,
  SOAK_BOUND_SECONDS, SOAK_OPERATIONS, Suite, expect, expectEqual, pool, randomBytes, rejects, sha256, soak,
} from "../lib/compat.mjs";

const suite = new Suite();
const B = "js-v3";
const require = createRequire(import.meta.url);
const version = (p) => JSON.parse(readFileSync(require.resolve(`${p}/package.json`))).version;

function client(accessKeyId = ACCESS_KEY, secretAccessKey = SECRET_KEY) {
  return new S3Client({ endpoint: ENDPOINT, region: REGION, credentials: { accessKeyId, secretAccessKey } });
}
const s3 = client();
const send = (cmd) => s3.send(cmd);
const bytes = async (body) => Buffer.from(await body.transformToByteArray());
const getBytes = async (Key, extra = {}) => bytes((await send(new GetObjectCommand({ Bucket: B, Key, ...extra }))).Body);
const md5 = (b) => createHash("md5").update(b).digest("hex");

async function keys(Prefix, extra = {}) {
  const out = [];
  for await (const page of paginateListObjectsV2({ client: s3, ...extra.paginator }, { Bucket: B, Prefix, ...extra.input })) {
    out.push(...(page.Contents ?? []).map((o) => o.Key));
  }
  return out;
}

async function rejectsWith(fn, name, status, what) {
  const e = await rejects(fn, what);
  expectEqual([e.name, e.$metadata?.httpStatusCode], [name, status], what);
  return e;
}

async function upload(Key, Body, extra = {}) {
  return new Upload({ client: s3, params: { Bucket: B, Key, Body, ...extra } }).done();
}

suite.version(`@aws-sdk/client-s3 ${version("@aws-sdk/client-s3")}, lib-storage ${version("@aws-sdk/lib-storage")}, ` +
  `s3-request-presigner ${version("@aws-sdk/s3-request-presigner")} (node ${process.version})`);

suite.check("basic", "CreateBucket, PutObject (string, Buffer, stream), GetObject, HeadObject", async () => {
  await send(new CreateBucketCommand({ Bucket: B }));
  await send(new HeadBucketCommand({ Bucket: B }));
  const text = await send(new PutObjectCommand({ Bucket: B, Key: "obj/hello.txt", Body: "hello from js-v3",
    ContentType: "text/plain", Metadata: { owner: "js-v3" } }));
  expectEqual(text.ETag, `"${md5("hello from js-v3")}"`, "ETag");
  expect(text.ChecksumCRC32, "no CRC32 echoed: the SDK sends one by default");
  const got = await send(new GetObjectCommand({ Bucket: B, Key: "obj/hello.txt", ChecksumMode: "ENABLED" }));
  expectEqual([(await bytes(got.Body)).toString(), got.ContentType, got.Metadata], ["hello from js-v3", "text/plain", { owner: "js-v3" }], "get");
  const buf = randomBytes(1 * MiB + 1, 1);
  await send(new PutObjectCommand({ Bucket: B, Key: "obj/buffer.bin", Body: buf }));
  expectEqual(sha256(await getBytes("obj/buffer.bin")), sha256(buf), "Buffer");
  // A stream of known length goes up as aws-chunked with a CRC32 trailer.
  await send(new PutObjectCommand({ Bucket: B, Key: "obj/stream.bin", ContentLength: buf.length,
    Body: Readable.from([buf.subarray(0, 100000), buf.subarray(100000)]) }));
  expectEqual(sha256(await getBytes("obj/stream.bin")), sha256(buf), "stream");
  const head = await send(new HeadObjectCommand({ Bucket: B, Key: "obj/stream.bin" }));
  expectEqual([head.ContentLength, head.ETag], [buf.length, `"${md5(buf)}"`], "head of the streamed object");
  expectEqual(await getBytes("obj/buffer.bin", { Range: "bytes=1000-1999" }), buf.subarray(1000, 2000), "range");
  expectEqual(await getBytes("obj/buffer.bin", { Range: "bytes=-7" }), buf.subarray(-7), "suffix range");
});

suite.check("basic", "CopyObject, DeleteObject, ListObjectsV2 and ListObjects with a delimiter", async () => {
  await send(new CopyObjectCommand({ Bucket: B, Key: "obj/sub/copy.bin", CopySource: `${B}/obj/buffer.bin` }));
  expectEqual(sha256(await getBytes("obj/sub/copy.bin")), sha256(randomBytes(1 * MiB + 1, 1)), "copy");
  const v2 = await send(new ListObjectsV2Command({ Bucket: B, Prefix: "obj/", Delimiter: "/" }));
  expectEqual([v2.CommonPrefixes.map((p) => p.Prefix), v2.Contents.map((o) => o.Key)],
    [["obj/sub/"], ["obj/buffer.bin", "obj/hello.txt", "obj/stream.bin"]], "V2");
  const v1 = await send(new ListObjectsCommand({ Bucket: B, Prefix: "obj/", Delimiter: "/" }));
  expectEqual(v1.CommonPrefixes.map((p) => p.Prefix), ["obj/sub/"], "V1");
  await send(new DeleteObjectCommand({ Bucket: B, Key: "obj/sub/copy.bin" }));
  expectEqual(await keys("obj/sub/"), [], "after DeleteObject");
});

suite.check("multipart", "lib-storage Upload of a 40 MiB stream (5 MiB parts, 4 at once)", async () => {
  const data = randomBytes(40 * MiB + 3, 2);
  const chunks = [];
  for (let i = 0; i < data.length; i += 1 * MiB) chunks.push(data.subarray(i, i + 1 * MiB));
  const r = await upload("big/stream.bin", Readable.from(chunks)); // length unknown to the SDK
  expect(/-9"$/.test(r.ETag), `ETag of nine parts: ${r.ETag}`);
  const got = await send(new GetObjectCommand({ Bucket: B, Key: "big/stream.bin" }));
  const h = createHash("sha256");
  for await (const c of got.Body) h.update(c);
  expectEqual(h.digest("hex"), sha256(data), "streamed back");
  expectEqual(await getBytes("big/stream.bin", { PartNumber: 2 }), data.subarray(5 * MiB, 10 * MiB), "GET partNumber=2");
});

suite.check("multipart", "Create, UploadPart, UploadPartCopy, ListParts, Complete, Abort", async () => {
  const a = randomBytes(5 * MiB, 3);
  const { UploadId } = await send(new CreateMultipartUploadCommand({ Bucket: B, Key: "mp/joined.bin" }));
  const p1 = await send(new UploadPartCommand({ Bucket: B, Key: "mp/joined.bin", UploadId, PartNumber: 1, Body: a }));
  const p2 = await send(new UploadPartCopyCommand({ Bucket: B, Key: "mp/joined.bin", UploadId, PartNumber: 2,
    CopySource: `${B}/obj/buffer.bin`, CopySourceRange: "bytes=0-99999" }));
  const parts = await send(new ListPartsCommand({ Bucket: B, Key: "mp/joined.bin", UploadId }));
  expectEqual(parts.Parts.map((p) => [p.PartNumber, p.Size]), [[1, 5 * MiB], [2, 100000]], "ListParts");
  const other = await send(new CreateMultipartUploadCommand({ Bucket: B, Key: "mp/aborted.bin" }));
  const uploads = await send(new ListMultipartUploadsCommand({ Bucket: B, Prefix: "mp/" }));
  expectEqual(uploads.Uploads.map((u) => u.Key).sort(), ["mp/aborted.bin", "mp/joined.bin"], "ListMultipartUploads");
  await send(new AbortMultipartUploadCommand({ Bucket: B, Key: "mp/aborted.bin", UploadId: other.UploadId }));
  await send(new CompleteMultipartUploadCommand({ Bucket: B, Key: "mp/joined.bin", UploadId, MultipartUpload: {
    Parts: [{ PartNumber: 1, ETag: p1.ETag, ChecksumCRC32: p1.ChecksumCRC32 }, { PartNumber: 2, ETag: p2.CopyPartResult.ETag }] } }));
  const want = Buffer.concat([a, randomBytes(1 * MiB + 1, 1).subarray(0, 100000)]);
  expectEqual(sha256(await getBytes("mp/joined.bin")), sha256(want), "completed object");
  await rejectsWith(() => send(new UploadPartCommand({ Bucket: B, Key: "mp/aborted.bin", UploadId: other.UploadId, PartNumber: 1, Body: "x" })),
    "NoSuchUpload", 404, "part of an aborted upload");
});

suite.check("small-files", "3,000 small objects: put (32 at once), paginate (1000 and 250 per page)", async () => {
  const items = [];
  for (let i = 0; i < 3000; i++) items.push([`small/d${i % 6}/f${String(i).padStart(5, "0")}.bin`, KiB + (i * 37) % (15 * KiB)]);
  await pool(32, items.map(([k, n], i) => () => send(new PutObjectCommand({ Bucket: B, Key: k, Body: randomBytes(n, 300 + i) }))));
  const want = items.map(([k]) => k).sort();
  expectEqual(await keys("small/"), want, "all keys (pages of 1000)");
  let pages = 0;
  for await (const page of paginateListObjectsV2({ client: s3, pageSize: 250 }, { Bucket: B, Prefix: "small/" })) {
    pages++;
    expect(page.KeyCount <= 250, `page of ${page.KeyCount}`);
  }
  expectEqual(pages, 12, "pages of 250");
  const dirs = await send(new ListObjectsV2Command({ Bucket: B, Prefix: "small/", Delimiter: "/" }));
  expectEqual(dirs.CommonPrefixes.map((p) => p.Prefix), [0, 1, 2, 3, 4, 5].map((d) => `small/d${d}/`), "prefixes");
  const after = await send(new ListObjectsV2Command({ Bucket: B, Prefix: "small/d3/", StartAfter: want.filter((k) => k.startsWith("small/d3/"))[99], MaxKeys: 3 }));
  expectEqual(after.Contents.map((o) => o.Key), want.filter((k) => k.startsWith("small/d3/")).slice(100, 103), "StartAfter");
  for (const [i, [k, n]] of items.entries()) {
    if (i % 100 !== 0) continue;
    expectEqual(sha256(await getBytes(k)), sha256(randomBytes(n, 300 + i)), `body of ${k}`);
  }
  for (let i = 0; i < want.length; i += 1000) {
    const r = await send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: want.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
    expectEqual(r.Errors ?? [], [], "DeleteObjects errors");
  }
  expectEqual(await keys("small/"), [], "left after DeleteObjects");
});

suite.check("small-files", "awkward keys: plain listing and encoding-type=url", async () => {
  const ks = AWKWARD_NAMES.map((n) => `odd/${n}`);
  for (const [i, k] of ks.entries()) await send(new PutObjectCommand({ Bucket: B, Key: k, Body: `body ${i}` }));
  const want = [...ks].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  expectEqual(await keys("odd/"), want, "plain listing");
  const enc = await send(new ListObjectsV2Command({ Bucket: B, Prefix: "odd/", EncodingType: "url" }));
  const decode = (s) => decodeURIComponent(s.replace(/\+/g, " "));
  expectEqual(enc.Contents.map((o) => decode(o.Key)), want, "decoded encoding-type=url listing");
  expect(enc.Contents.some((o) => o.Key.includes("%09")), "the tab is not percent-encoded");
  for (const [i, k] of ks.entries()) expectEqual((await getBytes(k)).toString(), `body ${i}`, `body of ${JSON.stringify(k)}`);
});

const CKPT = 16 * MiB + 100;

suite.check("checkpoint", "save ranks with Upload in parallel, commit marker with IfNoneMatch", async () => {
  for (const step of [100, 200, 300]) {
    await Promise.all([0, 1, 2].map((rank) => upload(`ckpt/step-${step}/rank-${rank}.pt`, randomBytes(CKPT, step * 10 + rank))));
    await send(new PutObjectCommand({ Bucket: B, Key: `ckpt/step-${step}/COMMIT`, Body: `step ${step}`, IfNoneMatch: "*" }));
  }
  await rejectsWith(() => send(new PutObjectCommand({ Bucket: B, Key: "ckpt/step-300/COMMIT", Body: "again", IfNoneMatch: "*" })),
    "PreconditionFailed", 412, "a second commit");
  const results = await Promise.allSettled([1, 2].map((n) =>
    send(new PutObjectCommand({ Bucket: B, Key: "ckpt/race/COMMIT", Body: `writer ${n}`, IfNoneMatch: "*" }))));
  expectEqual(results.filter((r) => r.status === "fulfilled").length, 1, "winners of a race");
  const loser = results.find((r) => r.status === "rejected").reason;
  expect(["PreconditionFailed", "ConditionalRequestConflict"].includes(loser.name), `loser got ${loser.name}`);
});

suite.check("checkpoint", "load, rotate with DeleteObjects, rename by copy + delete", async () => {
  for (const rank of [0, 1, 2]) {
    expectEqual(sha256(await getBytes(`ckpt/step-300/rank-${rank}.pt`)), sha256(randomBytes(CKPT, 3000 + rank)), `rank ${rank}`);
  }
  const old = await keys("ckpt/step-100/");
  const del = await send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: old.map((Key) => ({ Key })) } }));
  expectEqual(del.Deleted.map((d) => d.Key).sort(), old, "deleted");
  for (const k of await keys("ckpt/step-300/")) {
    await send(new CopyObjectCommand({ Bucket: B, Key: k.replace("step-300", "best"), CopySource: `${B}/${k}` }));
    await send(new DeleteObjectCommand({ Bucket: B, Key: k }));
  }
  const steps = await send(new ListObjectsV2Command({ Bucket: B, Prefix: "ckpt/", Delimiter: "/" }));
  expectEqual(steps.CommonPrefixes.map((p) => p.Prefix), ["ckpt/best/", "ckpt/race/", "ckpt/step-200/"], "steps");
  expectEqual(sha256(await getBytes("ckpt/best/rank-1.pt")), sha256(randomBytes(CKPT, 3001)), "renamed rank 1");
});

suite.check("errors", "NoSuchKey, NotFound, NoSuchBucket, BucketNotEmpty, InvalidRange, 412", async () => {
  await rejectsWith(() => getBytes("no/such/key"), "NoSuchKey", 404, "GetObject");
  await rejectsWith(() => send(new HeadObjectCommand({ Bucket: B, Key: "no/such/key" })), "NotFound", 404, "HeadObject");
  await rejectsWith(() => send(new ListObjectsV2Command({ Bucket: "js-v3-no-such-bucket" })), "NoSuchBucket", 404, "listing a missing bucket");
  await rejectsWith(() => send(new DeleteBucketCommand({ Bucket: B })), "BucketNotEmpty", 409, "DeleteBucket");
  await rejectsWith(() => getBytes("obj/hello.txt", { Range: "bytes=1000-2000" }), "InvalidRange", 416, "range past the end");
  await rejectsWith(() => getBytes("obj/hello.txt", { IfMatch: '"0123456789abcdef0123456789abcdef"' }), "PreconditionFailed", 412, "If-Match");
  await rejectsWith(() => send(new PutObjectCommand({ Bucket: B, Key: "obj/hello.txt", Body: "x", IfMatch: '"0123456789abcdef0123456789abcdef"' })),
    "PreconditionFailed", 412, "PutObject If-Match");
});

suite.check("errors", "SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied", async () => {
  const wrong = client(ACCESS_KEY, SECRET_KEY + "x");
  await rejectsWith(() => wrong.send(new GetObjectCommand({ Bucket: B, Key: "obj/hello.txt" })), "SignatureDoesNotMatch", 403, "wrong secret");
  await rejectsWith(() => wrong.send(new PutObjectCommand({ Bucket: B, Key: "obj/x", Body: "x" })), "SignatureDoesNotMatch", 403, "wrong secret, PUT");
  await rejectsWith(() => client("AKIANOSUCHKEY0000000", SECRET_KEY).send(new ListObjectsV2Command({ Bucket: B })),
    "InvalidAccessKeyId", 403, "unknown key");
  await send(new CreateBucketCommand({ Bucket: "shared-js-v3" }));
  await send(new PutObjectCommand({ Bucket: "shared-js-v3", Key: "r.txt", Body: "readable" }));
  const reader = client(READER_ACCESS_KEY, READER_SECRET_KEY);
  expectEqual((await bytes((await reader.send(new GetObjectCommand({ Bucket: "shared-js-v3", Key: "r.txt" }))).Body)).toString(), "readable", "reader");
  await rejectsWith(() => reader.send(new PutObjectCommand({ Bucket: "shared-js-v3", Key: "w.txt", Body: "no" })), "AccessDenied", 403, "read-only user");
  await send(new DeleteObjectCommand({ Bucket: "shared-js-v3", Key: "r.txt" }));
  await send(new DeleteBucketCommand({ Bucket: "shared-js-v3" }));
});

suite.check("presign", "getSignedUrl for GET and PUT, fetched; an expired URL", async () => {
  const put = await getSignedUrl(s3, new PutObjectCommand({ Bucket: B, Key: "presigned/up.bin" }), { expiresIn: 120 });
  let r = await fetch(put, { method: "PUT", body: Buffer.from("through a presigned PUT") });
  expectEqual(r.status, 200, `presigned PUT (${await r.text()})`);
  const get = await getSignedUrl(s3, new GetObjectCommand({ Bucket: B, Key: "presigned/up.bin" }), { expiresIn: 120 });
  r = await fetch(get);
  expectEqual([r.status, await r.text()], [200, "through a presigned PUT"], "presigned GET");
  const short = await getSignedUrl(s3, new GetObjectCommand({ Bucket: B, Key: "presigned/up.bin" }), { expiresIn: 1 });
  await sleep(2100);
  r = await fetch(short);
  const body = await r.text();
  expectEqual(r.status, 403, "expired URL");
  expect(/<Code>AccessDenied<\/Code>/.test(body) && /expired/i.test(body), `expired URL body: ${body}`);
});

suite.check("concurrency", "readers streaming during overwrites (PutObject and Upload) see one version", async () => {
  const versions = Array.from({ length: 6 }, (_, v) => randomBytes(12 * MiB, 700 + v));
  const hashes = new Set(versions.map(sha256));
  await send(new PutObjectCommand({ Bucket: B, Key: "race/obj", Body: versions[0] }));
  let writing = true;
  let reads = 0;
  const writer = (async () => {
    try {
      for (let round = 0; round < 2; round++) {
        for (const [i, v] of versions.entries()) {
          if (i % 2) await upload("race/obj", v); // multipart
          else await send(new PutObjectCommand({ Bucket: B, Key: "race/obj", Body: v }));
        }
      }
    } finally {
      writing = false;
    }
  })();
  const readers = Array.from({ length: 3 }, async () => {
    const c = client();
    while (writing) {
      const got = await c.send(new GetObjectCommand({ Bucket: B, Key: "race/obj" }));
      const h = createHash("sha256");
      for await (const chunk of got.Body) h.update(chunk);
      reads++;
      const d = h.digest("hex");
      expect(hashes.has(d), `a read (${reads}) matches no written version`);
    }
  });
  await Promise.all([writer, ...readers]);
  expect(reads > 0, "no read overlapped the writes");
});

// The connection-reuse soak in bucket SB, made with CreateBucket's `create` arguments.
const reuseSoak = async (SB, create = {}) => {
  const c = new S3Client({ endpoint: ENDPOINT, region: REGION, credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
    requestHandler: { httpAgent: new Agent({ keepAlive: true, maxSockets: 2 }) } });
  // Spoils the signature of the requests sent while `spoil` is set (after signing): a 403 before the body.
  let spoil = false;
  c.middlewareStack.add((next) => async (args) => {
    const headers = args.request?.headers;
    if (spoil && headers?.authorization) {
      headers.authorization = headers.authorization.slice(0, -1) + (headers.authorization.endsWith("0") ? "1" : "0");
    }
    return next(args);
  }, { step: "deserialize", name: "soakSpoilSignature" });
  // In a directory bucket: requests of the bucket sent without a session (copies are signed so).
  const unsessioned = [];
  if (create.CreateBucketConfiguration) {
    c.middlewareStack.add((next) => async (args) => {
      const { path, query = {}, headers = {}, method } = args.request;
      if (path.split("/")[1] === SB && !("session" in query) && !headers["x-amz-s3session-token"] &&
          !headers["x-amz-copy-source"]) unsessioned.push(`${method} ${path}`);
      return next(args);
    }, { step: "deserialize", name: "soakSessions" });
  }
  const model = new Map();  // key -> bytes
  const etags = new Map();  // key -> ETag
  const body = (rng) => randomBytes([0, 0, 1, 100, 4 * KiB, 70 * KiB][Math.floor(rng() * 6)], Math.floor(rng() * 1e9));
  const fails = async (call, name, command, code, status) => {
    const e = await rejects(() => call(name, () => c.send(command)), name);
    expectEqual([e.name, e.$metadata?.httpStatusCode], [code, status], `error of ${name}`);
  };
  const put = async (key, rng, call) => {
    const data = body(rng);
    const ChecksumAlgorithm = [undefined, undefined, "CRC32", "CRC32C", "SHA1", "SHA256"][Math.floor(rng() * 6)];
    const r = await call("PutObject", () => c.send(new PutObjectCommand({ Bucket: SB, Key: key, Body: data, ChecksumAlgorithm })));
    expectEqual(r.ETag, `"${md5(data)}"`, "ETag of a PUT");
    model.set(key, data);
    etags.set(key, r.ETag);
  };
  const get = async (key, rng, call) => {
    if (!model.has(key)) return fails(call, "GetObject", new GetObjectCommand({ Bucket: SB, Key: key }), "NoSuchKey", 404);
    const got = await call("GetObject", async () => bytes((await c.send(new GetObjectCommand({ Bucket: SB, Key: key }))).Body));
    expectEqual(sha256(got), sha256(model.get(key)), `GET ${key}`);
  };
  const ranged = async (key, rng, call) => {
    const data = model.get(key);
    if (!data?.length) return put(key, rng, call);
    const first = Math.floor(rng() * data.length);
    const got = await call("GetObject", async () => bytes((await c.send(new GetObjectCommand({ Bucket: SB, Key: key,
      Range: `bytes=${first}-${first + 99}` }))).Body));
    expectEqual(sha256(got), sha256(data.subarray(first, first + 100)), "ranged GET");
  };
  const badRange = async (key, rng, call) => {
    if (!model.has(key)) return fails(call, "HeadObject", new HeadObjectCommand({ Bucket: SB, Key: key }), "NotFound", 404);
    await fails(call, "GetObject", new GetObjectCommand({ Bucket: SB, Key: key, Range: `bytes=${model.get(key).length + 5}-` }),
      "InvalidRange", 416);
  };
  const conditions = async (key, rng, call) => {
    if (!model.has(key)) return put(key, rng, call);
    await fails(call, "PutObject", new PutObjectCommand({ Bucket: SB, Key: key, Body: "never", IfNoneMatch: "*" }), "PreconditionFailed", 412);
    await fails(call, "GetObject", new GetObjectCommand({ Bucket: SB, Key: key, IfMatch: `"${"0".repeat(32)}"` }), "PreconditionFailed", 412);
    // A 304 is an answer without a body: this SDK returns it rather than throwing it.
    const notModified = await call("GetObject", () => c.send(new GetObjectCommand({ Bucket: SB, Key: key,
      IfNoneMatch: etags.get(key) })).catch((e) => e));
    expectEqual(notModified.$metadata?.httpStatusCode, 304, "GetObject If-None-Match");
  };
  const refused = async (key, rng, call) => {
    spoil = true;
    try {
      await fails(call, "PutObject", new PutObjectCommand({ Bucket: SB, Key: key, Body: body(rng) }), "SignatureDoesNotMatch", 403);
    } finally {
      spoil = false;
    }
    await fails(call, "PutObject", new PutObjectCommand({ Bucket: SB, Key: key, Body: "some bytes",
      ContentMD5: "1B2M2Y8AsgTpgAmY7PhCfg==" }), "BadDigest", 400);
    if (model.has(key)) await fails(call, "GetObject", new GetObjectCommand({ Bucket: SB, Key: key, PartNumber: 0 }), "InvalidArgument", 400);
    await fails(call, "PutObject", new PutObjectCommand({ Bucket: "js-v3-soak-no-such-bucket", Key: key, Body: body(rng) }), "NoSuchBucket", 404);
  };
  const remove = async (key, rng, call) => {
    await call("DeleteObject", () => c.send(new DeleteObjectCommand({ Bucket: SB, Key: key })));
    model.delete(key);
    etags.delete(key);
  };
  const copy = async (key, rng, call) => {
    const source = keys[Math.floor(rng() * keys.length)];
    const command = new CopyObjectCommand({ Bucket: SB, Key: key, CopySource: `${SB}/${source}` });
    if (!model.has(source)) return fails(call, "CopyObject", command, "NoSuchKey", 404);
    if (source === key) return fails(call, "CopyObject", command, "InvalidRequest", 400);
    const r = await call("CopyObject", () => c.send(command));
    // A copy is a new object in one part: its ETag is the MD5 of its data, as on S3.
    expectEqual(r.CopyObjectResult.ETag, `"${md5(model.get(source))}"`, "ETag of a copy");
    model.set(key, model.get(source));
    etags.set(key, r.CopyObjectResult.ETag);
  };
  const multipart = async (key, rng, call) => {
    const { UploadId } = await call("CreateMultipartUpload", () => c.send(new CreateMultipartUploadCommand({ Bucket: SB, Key: key })));
    const data = body(rng);
    const { ETag } = await call("UploadPart", () => c.send(new UploadPartCommand({ Bucket: SB, Key: key, UploadId, PartNumber: 1, Body: data })));
    if (rng() < 0.5) {
      await call("AbortMultipartUpload", () => c.send(new AbortMultipartUploadCommand({ Bucket: SB, Key: key, UploadId })));
      return fails(call, "UploadPart", new UploadPartCommand({ Bucket: SB, Key: key, UploadId, PartNumber: 2, Body: body(rng) }), "NoSuchUpload", 404);
    }
    const done = await call("CompleteMultipartUpload", () => c.send(new CompleteMultipartUploadCommand({ Bucket: SB, Key: key, UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] } })));
    model.set(key, data);
    etags.set(key, done.ETag);
  };
  const listing = async (key, rng, call) => {
    const r = await call("ListObjectsV2", () => c.send(new ListObjectsV2Command({ Bucket: SB, Prefix: "soak/" })));
    expectEqual((r.Contents ?? []).map((o) => o.Key), [...model.keys()].sort(), "the keys under soak/");
  };
  const keys = Array.from({ length: 12 }, (_, i) => `soak/k${String(i).padStart(2, "0")}`);
  await c.send(new CreateBucketCommand({ Bucket: SB, ...create }));
  await soak([put, put, put, get, get, ranged, badRange, conditions, refused, remove, copy, multipart, listing], keys);
  for (const key of model.keys()) await c.send(new DeleteObjectCommand({ Bucket: SB, Key: key }));
  await c.send(new DeleteBucketCommand({ Bucket: SB }));
  expectEqual(unsessioned, [], "requests of the directory bucket signed without a session");
};

suite.check("reuse", `${SOAK_OPERATIONS} random operations, errors included, on a pool of 2 connections: ` +
  `each under ${SOAK_BOUND_SECONDS} s`, () => reuseSoak("js-v3-reuse"));

suite.check("reuse", "the same in a directory bucket, every request but copies signed with an S3 Express session",
  () => reuseSoak("js-v3-reuse--use1-az4--x-s3", { CreateBucketConfiguration: {
    Location: { Type: "AvailabilityZone", Name: "use1-az4" },
    Bucket: { DataRedundancy: "SingleAvailabilityZone", Type: "Directory" } } }));

suite.check("basic", "clean up: DeleteObjects everything, DeleteBucket", async () => {
  const all = await keys("");
  for (let i = 0; i < all.length; i += 1000) {
    await send(new DeleteObjectsCommand({ Bucket: B, Delete: { Objects: all.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }));
  }
  await send(new DeleteBucketCommand({ Bucket: B }));
  await rejectsWith(() => send(new HeadBucketCommand({ Bucket: B })), "NotFound", 404, "HeadBucket after DeleteBucket");
});

await suite.main();
