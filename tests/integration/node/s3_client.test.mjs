// hots3 through the AWS SDK for JavaScript v3 (@aws-sdk/client-s3), unmodified, with its
// current defaults (CRC32 on every upload, streams as STREAMING-UNSIGNED-PAYLOAD-TRAILER,
// x-amz-checksum-mode on GETs) and with requestChecksumCalculation WHEN_REQUIRED.
//
// Run by CTest: node --test tests/integration/node/s3_client.test.mjs  (HOTS3_BIN = the binary)
// The server is started on 127.0.0.1 with an ephemeral port and stopped by this file.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";

import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketLocationCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";

import { startServer } from "./hots3_server.mjs";

const ACCESS = "HOTS3NODETESTACCESS1";
const SECRET = "hots3-node-test-secret-0123456789abcdef";

let server;
let endpoint;

function client(extra = {}) {
  return new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: ACCESS, secretAccessKey: SECRET },
    maxAttempts: 1,
    ...extra,
  });
}

const md5 = (b) => createHash("md5").update(b).digest("hex");
const bytesOf = async (body) => Buffer.from(await body.transformToByteArray());
const errorOf = async (promise) => {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail("expected an error");
};

before(async () => {
  server = await startServer(ACCESS, SECRET);
  endpoint = server.endpoint;
});

after(async () => {
  if (server) await server.stop();
});

for (const [label, options] of [
  ["default checksums", {}],
  ["requestChecksumCalculation WHEN_REQUIRED", { requestChecksumCalculation: "WHEN_REQUIRED", responseChecksumValidation: "WHEN_REQUIRED" }],
]) {
  describe(`@aws-sdk/client-s3, ${label}`, () => {
    let s3;
    const bucket = `node-${options.requestChecksumCalculation ? "required" : "default"}`;

    before(async () => {
      s3 = client(options);
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    });

    test("buckets: head, list, location, re-created by the owner", async () => {
      await s3.send(new HeadBucketCommand({ Bucket: bucket }));
      const list = await s3.send(new ListBucketsCommand({}));
      assert.ok(list.Buckets.some((b) => b.Name === bucket));
      const location = await s3.send(new GetBucketLocationCommand({ Bucket: bucket }));
      assert.ok(location.LocationConstraint === undefined || location.LocationConstraint === "");
      // Re-created by its owner: 200 in us-east-1 (S3's legacy behaviour), no error.
      const again = await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      assert.equal(again.$metadata.httpStatusCode, 200);
      const missing = await errorOf(s3.send(new HeadBucketCommand({ Bucket: "no-such-bucket-here" })));
      assert.equal(missing.$metadata.httpStatusCode, 404);
    });

    test("put a string and a Buffer, get them back with metadata and checksums", async () => {
      const put = await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: "hello.txt",
          Body: "hello, world",
          ContentType: "text/plain",
          Metadata: { owner: "node", "mixed-case": "Value" },
        }),
      );
      assert.equal(put.ETag, `"${md5("hello, world")}"`);
      if (!options.requestChecksumCalculation) assert.ok(put.ChecksumCRC32, "CRC32 echoed on PUT");
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "hello.txt", ChecksumMode: "ENABLED" }));
      assert.equal((await bytesOf(got.Body)).toString(), "hello, world");
      assert.equal(got.ContentType, "text/plain");
      assert.deepEqual(got.Metadata, { owner: "node", "mixed-case": "Value" });
      assert.equal(got.ETag, put.ETag);
      // A checksum always comes back: the client's CRC32, or the CRC64NVME the server computes.
      assert.ok(got.ChecksumCRC32 || got.ChecksumCRC64NVME);

      const buffer = randomBytes(300 * 1024);
      const p2 = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "dir/buffer.bin", Body: buffer }));
      assert.equal(p2.ETag, `"${md5(buffer)}"`);
      const g2 = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "dir/buffer.bin" }));
      assert.ok((await bytesOf(g2.Body)).equals(buffer));
    });

    test("put a stream (aws-chunked with a CRC32 trailer by default)", async () => {
      const data = randomBytes(200 * 1024 + 17);
      const put = await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: "stream.bin",
          Body: Readable.from([data.subarray(0, 70000), data.subarray(70000)]),
          ContentLength: data.length,
        }),
      );
      assert.equal(put.ETag, `"${md5(data)}"`);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "stream.bin" }));
      assert.equal(head.ContentLength, data.length);
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "stream.bin" }));
      assert.ok((await bytesOf(got.Body)).equals(data), "the aws-chunked framing is never stored");
    });

    test("ranges and conditional reads", async () => {
      const data = Buffer.from("0123456789abcdefghij");
      const { ETag } = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "range.txt", Body: data }));
      const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "range.txt", Range: "bytes=6-10", ChecksumMode: "ENABLED" }));
      assert.equal((await bytesOf(r.Body)).toString(), "6789a");
      assert.equal(r.ContentRange, "bytes 6-10/20");
      assert.equal(r.ChecksumCRC32, undefined, "no full-object checksum for a range");
      const tail = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "range.txt", Range: "bytes=-4" }));
      assert.equal((await bytesOf(tail.Body)).toString(), "ghij");
      const bad = await errorOf(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "range.txt", Range: "bytes=50-60" })));
      assert.equal(bad.$metadata.httpStatusCode, 416);
      const notModified = await errorOf(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "range.txt", IfNoneMatch: ETag })));
      assert.equal(notModified.$metadata.httpStatusCode, 304);
      const failed = await errorOf(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "range.txt", IfMatch: '"0000"' })));
      assert.equal(failed.$metadata.httpStatusCode, 412);
    });

    test("missing keys", async () => {
      const e = await errorOf(s3.send(new GetObjectCommand({ Bucket: bucket, Key: "nope" })));
      assert.equal(e.name, "NoSuchKey");
      const h = await errorOf(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "nope" })));
      assert.equal(h.$metadata.httpStatusCode, 404);
      const b = await errorOf(s3.send(new GetObjectCommand({ Bucket: "no-such-bucket-here", Key: "k" })));
      assert.equal(b.name, "NoSuchBucket");
    });

    test("list v2 and v1 with delimiter and pagination", async () => {
      for (const k of ["list/a", "list/b", "list/sub/c", "list/sub/d", "list/z"]) {
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: k, Body: k }));
      }
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "list/", Delimiter: "/" }));
      assert.deepEqual(page.Contents.map((o) => o.Key), ["list/a", "list/b", "list/z"]);
      assert.deepEqual(page.CommonPrefixes.map((p) => p.Prefix), ["list/sub/"]);
      assert.equal(page.KeyCount, 4);
      const keys = [];
      let token;
      do {
        const p = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "list/", MaxKeys: 2, ContinuationToken: token }));
        keys.push(...p.Contents.map((o) => o.Key));
        token = p.NextContinuationToken;
        assert.equal(p.IsTruncated, token !== undefined);
      } while (token);
      assert.deepEqual(keys, ["list/a", "list/b", "list/sub/c", "list/sub/d", "list/z"]);
      const v1 = await s3.send(new ListObjectsCommand({ Bucket: bucket, Prefix: "list/", MaxKeys: 3 }));
      assert.equal(v1.Contents.length, 3);
      assert.equal(v1.IsTruncated, true);
    });

    test("copy, delete, delete objects (CRC32 instead of Content-MD5)", async () => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "src file+1.txt", Body: "copy me", Metadata: { a: "1" } }));
      const copied = await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: "dst.txt", CopySource: `${bucket}/src%20file%2B1.txt` }));
      assert.equal(copied.CopyObjectResult.ETag, `"${md5("copy me")}"`);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "dst.txt" }));
      assert.deepEqual(head.Metadata, { a: "1" });
      const replaced = await s3.send(
        new CopyObjectCommand({ Bucket: bucket, Key: "dst.txt", CopySource: `${bucket}/dst.txt`, MetadataDirective: "REPLACE", Metadata: { b: "2" } }),
      );
      assert.ok(replaced.CopyObjectResult.ETag);
      assert.deepEqual((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "dst.txt" }))).Metadata, { b: "2" });

      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: "dst.txt" }));
      await errorOf(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "dst.txt" })));
      const many = [];
      for (let i = 0; i < 20; i++) {
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `del/${i}`, Body: "x" }));
        many.push({ Key: `del/${i}` });
      }
      many.push({ Key: "del/never-existed" });
      const verbose = await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: many } }));
      assert.equal(verbose.Deleted.length, 21, "S3 reports a missing key as deleted");
      assert.equal(verbose.Errors, undefined);
      const left = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "del/" }));
      assert.equal(left.KeyCount, 0);
      const quiet = await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [{ Key: "x" }], Quiet: true } }));
      assert.equal(quiet.Deleted, undefined);
    });

    test("conditional writes", async () => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "once", Body: "first", IfNoneMatch: "*" }));
      const e = await errorOf(s3.send(new PutObjectCommand({ Bucket: bucket, Key: "once", Body: "second", IfNoneMatch: "*" })));
      assert.equal(e.$metadata.httpStatusCode, 412);
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "once" }));
      assert.equal((await bytesOf(got.Body)).toString(), "first");
    });

    test("multipart with lib-storage (parts of 5 MiB, CRC32 per part)", async () => {
      const data = randomBytes(12 * 1024 * 1024 + 5);
      const upload = new Upload({ client: s3, params: { Bucket: bucket, Key: "big.bin", Body: data }, partSize: 5 * 1024 * 1024, queueSize: 2 });
      const done = await upload.done();
      assert.match(done.ETag, /^"[0-9a-f]{32}-3"$/);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "big.bin", PartNumber: 2 }));
      assert.equal(head.ContentLength, 5 * 1024 * 1024);
      assert.equal(head.PartsCount, 3);
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "big.bin" }));
      assert.ok((await bytesOf(got.Body)).equals(data));
    });

    test("multipart by hand: list uploads and parts, abort", async () => {
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: "manual" }));
      const part = Buffer.alloc(5 * 1024 * 1024, 7);
      const p1 = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: "manual", UploadId, PartNumber: 1, Body: part }));
      assert.equal(p1.ETag, `"${md5(part)}"`);
      const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: "manual" }));
      assert.deepEqual(uploads.Uploads.map((u) => u.UploadId), [UploadId]);
      const parts = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: "manual", UploadId }));
      assert.deepEqual(parts.Parts.map((p) => [p.PartNumber, p.Size]), [[1, part.length]]);
      await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: "manual", UploadId }));
      const gone = await errorOf(
        s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: "manual", UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: p1.ETag }] } })),
      );
      assert.equal(gone.name, "NoSuchUpload");
    });

    test("presigned GET and PUT URLs", async () => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "signed.txt", Body: "presigned" }));
      const url = await getSignedUrl(s3, new GetObjectCommand({ Bucket: bucket, Key: "signed.txt" }), { expiresIn: 60 });
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), "presigned");
      const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: "uploaded.txt" }), { expiresIn: 60 });
      const put = await fetch(putUrl, { method: "PUT", body: "via url" });
      assert.equal(put.status, 200);
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "uploaded.txt" }));
      assert.equal((await bytesOf(got.Body)).toString(), "via url");
    });

    test("wrong secret and unknown key", async () => {
      const wrong = client({ ...options, credentials: { accessKeyId: ACCESS, secretAccessKey: "wrong-secret" } });
      const e = await errorOf(wrong.send(new ListObjectsV2Command({ Bucket: bucket })));
      assert.equal(e.name, "SignatureDoesNotMatch");
      const unknown = client({ ...options, credentials: { accessKeyId: "AKIANOSUCHKEY0000000", secretAccessKey: "x" } });
      const u = await errorOf(unknown.send(new ListObjectsV2Command({ Bucket: bucket })));
      assert.equal(u.name, "InvalidAccessKeyId");
    });

    test("delete the bucket once empty", async () => {
      const name = `${bucket}-tmp`;
      await s3.send(new CreateBucketCommand({ Bucket: name }));
      await s3.send(new PutObjectCommand({ Bucket: name, Key: "k", Body: "v" }));
      const e = await errorOf(s3.send(new DeleteBucketCommand({ Bucket: name })));
      assert.equal(e.name, "BucketNotEmpty");
      await s3.send(new DeleteObjectCommand({ Bucket: name, Key: "k" }));
      await s3.send(new DeleteBucketCommand({ Bucket: name }));
      const gone = await errorOf(s3.send(new HeadBucketCommand({ Bucket: name })));
      assert.equal(gone.$metadata.httpStatusCode, 404);
    });
  });
}
