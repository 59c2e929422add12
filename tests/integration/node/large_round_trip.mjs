// One large round trip through the AWS SDK for JavaScript v3 as applications use it for big
// files: @aws-sdk/lib-storage Upload from a file stream (parallel multipart), then GetObject
// streamed into SHA-256. Driven by tests/integration/test_large.py, which starts the server.
//
// usage: node large_round_trip.mjs ENDPOINT ACCESS SECRET BUCKET KEY FILE
// prints one JSON line: {"etag": ..., "size": ..., "sha256": ...} of what GetObject returned.

import { createHash } from "node:crypto";
import { createReadStream, statSync } from "node:fs";

import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";

const [endpoint, accessKeyId, secretAccessKey, bucket, key, file] = process.argv.slice(2);
const client = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId, secretAccessKey },
});

const size = statSync(file).size;
// lib-storage's defaults (5 MiB parts, 4 at once) would need more than 10,000 parts past
// 48 GiB; applications raise the part size for big files, as this does for 8 GiB.
const partSize = Math.max(5 * 1024 * 1024, Math.ceil(size / 9000));
const upload = new Upload({
  client,
  params: { Bucket: bucket, Key: key, Body: createReadStream(file, { highWaterMark: 1024 * 1024 }) },
  partSize,
  queueSize: 4,
});
const done = await upload.done();

const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
const hash = createHash("sha256");
let received = 0;
for await (const chunk of got.Body) {
  hash.update(chunk);
  received += chunk.length;
}
console.log(JSON.stringify({ etag: done.ETag, size: received, sha256: hash.digest("hex") }));
