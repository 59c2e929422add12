// Directory buckets through the AWS SDK for JavaScript v3 at its defaults: for a `--x-s3` bucket
// it creates a session (GET /bucket?session, signed for s3express) and signs the bucket's requests
// with the session's credentials and token (x-amz-s3session-token). A middleware records what went
// on the wire, after signing.
//
// Run by CTest: node --test tests/integration/node/directory_buckets.test.mjs  (HOTS3_BIN = the binary)

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListDirectoryBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  RenameObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

import { startServer } from "./hots3_server.mjs";

const ACCESS = "HOTS3NODEEXPRESSKEY1";
const SECRET = "hots3-node-express-secret-0123456789";
const ZONE = "use1-az4";
const MiB = 1024 * 1024;

let server;

function client(extra = {}) {
  const s3 = new S3Client({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: ACCESS, secretAccessKey: SECRET },
    maxAttempts: 1,
    ...extra,
  });
  const wire = [];
  s3.middlewareStack.add(
    (next) => async (args) => {
      const h = args.request.headers;
      wire.push({
        method: args.request.method,
        path: args.request.path,
        query: args.request.query ?? {},
        token: h["x-amz-s3session-token"],
        scope: /Credential=([^/]+)\/[^/]+\/[^/]+\/([^/]+)\//.exec(h.authorization ?? "") ?? [],
      });
      return next(args);
    },
    { step: "deserialize", name: "wireRecorder" },
  );
  return { s3, wire };
}

const sessions = (wire) => wire.filter((r) => "session" in r.query);
const bytesOf = async (body) => Buffer.from(await body.transformToByteArray());
const configuration = {
  Location: { Type: "AvailabilityZone", Name: ZONE },
  Bucket: { DataRedundancy: "SingleAvailabilityZone", Type: "Directory" },
};

// Moves the server's session clock (s3.test_hooks): a ListBuckets turned, before it is signed,
// into the admin's POST /?x-hots3-clock.
async function advanceClock(seconds) {
  const { s3 } = client();
  s3.middlewareStack.add(
    (next) => async (args) => {
      args.request.method = "POST";
      args.request.query = { "x-hots3-clock": "", "advance-seconds": String(seconds) };
      return next(args);
    },
    { step: "build", name: "toClock" },
  );
  const answer = await s3.send(new ListBucketsCommand({})).catch((e) => e);
  // The answer has no body to parse: only its status matters.
  assert.equal(answer.$metadata?.httpStatusCode ?? answer.$response?.statusCode, 204);
}

before(async () => {
  server = await startServer(ACCESS, SECRET, "[s3]\ntest_hooks = true\n");
});

after(async () => {
  if (server) await server.stop();
});

describe("@aws-sdk/client-s3, directory buckets", () => {
  test("one session signs a new bucket's every request but the listing of buckets", async () => {
    const { s3, wire } = client();
    const bucket = `train--${ZONE}--x-s3`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket, CreateBucketConfiguration: configuration }));
    const head = await s3.send(new HeadBucketCommand({ Bucket: bucket }));
    assert.equal(head.BucketLocationType, "AvailabilityZone");
    assert.equal(head.BucketLocationName, ZONE);

    const body = randomBytes(3 * MiB + 7);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "shards/0", Body: body }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "shards/0" }));
    assert.ok((await bytesOf(got.Body)).equals(body));
    const ranged = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "shards/0", Range: "bytes=100-199" }));
    assert.ok((await bytesOf(ranged.Body)).equals(body.subarray(100, 200)));
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "shards/0" }))).ContentLength, body.length);

    // Multipart (lib-storage), then a rename of the result, then an append.
    const big = randomBytes(12 * MiB + 3);
    await new Upload({ client: s3, params: { Bucket: bucket, Key: "ckpt.tmp", Body: big }, partSize: 5 * MiB }).done();
    await s3.send(new RenameObjectCommand({ Bucket: bucket, Key: "ckpt", RenameSource: `${bucket}/ckpt.tmp` }));
    assert.ok((await bytesOf((await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "ckpt" }))).Body)).equals(big));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "log", Body: "first " }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "log", Body: "second", WriteOffsetBytes: 6 }));
    const log = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "log" }));
    assert.equal(await log.Body.transformToString(), "first second");

    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Delimiter: "/" }));
    assert.deepEqual(listed.CommonPrefixes.map((p) => p.Prefix), ["shards/"]);
    assert.deepEqual(listed.Contents.map((o) => o.Key), ["ckpt", "log"]);

    const directory = await s3.send(new ListDirectoryBucketsCommand({}));
    assert.ok(directory.Buckets.some((b) => b.Name === bucket));
    assert.equal(wire.at(-1).query["x-id"], "ListDirectoryBuckets");
    const general = await s3.send(new ListBucketsCommand({}));
    assert.ok(!(general.Buckets ?? []).some((b) => b.Name === bucket));

    // A presigned GET carries the session's token in its query.
    const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: "log" }), { expiresIn: 60 });
    assert.match(url, /X-Amz-S3session-Token=/);
    const fetched = await fetch(url);
    assert.equal(fetched.status, 200);
    assert.equal(await fetched.text(), "first second");

    for (const key of ["shards/0", "ckpt", "log"]) await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));

    assert.equal(sessions(wire).length, 1);
    assert.equal(wire[0].token, undefined);
    assert.deepEqual(wire[0].scope.slice(1), [ACCESS, "s3express"]);
    for (const r of wire.slice(1)) {
      const service = r.path === "/" ? "listing" : "bucket";
      if (service === "bucket") {
        assert.ok(r.token, `${r.method} ${r.path} carries the session token`);
        assert.notEqual(r.scope[1], ACCESS, `${r.method} ${r.path} signed with the session's key`);
        assert.equal(r.scope[2], "s3express");
      } else {
        assert.equal(r.token, undefined);
      }
    }
  });

  test("an expired session is ExpiredToken, and a new client's session works", async () => {
    const bucket = `clock--${ZONE}--x-s3`;
    const { s3 } = client();
    await s3.send(new CreateBucketCommand({ Bucket: bucket, CreateBucketConfiguration: configuration }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "k", Body: "tick" }));
    await advanceClock(301);
    const e = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "k" })).catch((err) => err);
    assert.equal(e.name, "ExpiredToken");
    assert.equal(e.$metadata.httpStatusCode, 400);
    const fresh = client().s3;
    assert.equal(await (await fresh.send(new GetObjectCommand({ Bucket: bucket, Key: "k" }))).Body.transformToString(), "tick");
  });

  test("disableS3ExpressSessionAuth signs with the user's own keys", async () => {
    const bucket = `plain--${ZONE}--x-s3`;
    const { s3, wire } = client({ disableS3ExpressSessionAuth: true });
    await s3.send(new CreateBucketCommand({ Bucket: bucket, CreateBucketConfiguration: configuration }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "k", Body: "no session" }));
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "k" }))).Body.transformToString(), "no session");
    assert.equal(sessions(wire).length, 0);
    for (const r of wire) {
      assert.equal(r.token, undefined);
      assert.equal(r.scope[1], ACCESS);
    }
  });
});
