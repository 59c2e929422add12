// What the JavaScript suites of s3-compat-tests share: the settings the runner hands over and
// the results protocol (the same as lib/compat.py: JSON lines appended to S3COMPAT_RESULTS,
// one "client" record, then one "check" record per check; a check fails by throwing).

import { appendFileSync, mkdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";

export const AREAS = ["basic", "multipart", "dataset", "small-files", "checkpoint", "errors",
  "concurrency", "presign"];

export const ENDPOINT = process.env.S3COMPAT_ENDPOINT ?? "";
export const ACCESS_KEY = process.env.S3COMPAT_ACCESS_KEY ?? "";
export const SECRET_KEY = process.env.S3COMPAT_SECRET_KEY ?? "";
export const READER_ACCESS_KEY = process.env.S3COMPAT_READER_ACCESS_KEY ?? "";
export const READER_SECRET_KEY = process.env.S3COMPAT_READER_SECRET_KEY ?? "";
export const REGION = process.env.S3COMPAT_REGION ?? "us-east-1";
export const TMP = process.env.S3COMPAT_TMP ?? "/tmp/s3compat-node";
export const KiB = 1024;
export const MiB = 1024 * 1024;
mkdirSync(TMP, { recursive: true });

// Same keys as lib/compat.py AWKWARD_NAMES.
export const AWKWARD_NAMES = [
  "space name.txt",
  "plus+sign.txt",
  "percent%41%2F.txt",
  "double//slash.txt",
  "unicodé/ファイル.txt",
  "xml<&>'\".txt",
  "tab\tkey.txt",
  "question?hash#.txt",
  "tilde~equals=.txt",
  "emoji-\u{1F600}.txt",
];

export function sha256(data) {
  return createHash("sha256").update(data).digest("hex");
}

// Deterministic bytes (xorshift), so that a failure can be reproduced.
export function randomBytes(n, seed) {
  const out = Buffer.allocUnsafe(n);
  let x = (seed * 2654435761 + 0x9e3779b9) >>> 0 || 1;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out.writeUInt32LE(x, i);
  }
  for (; i < n; i++) out[i] = (x >>> (8 * (i % 4))) & 0xff;
  return out;
}

export function expect(cond, message) {
  if (!cond) throw new Error(message);
}

export function expectEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: got ${a?.slice(0, 300)}, expected ${e?.slice(0, 300)}`);
}

// Runs `fn` and returns the error it throws; fails when it does not throw.
export async function rejects(fn, what) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error(`${what}: succeeded, expected an error`);
}

export function path(...parts) {
  return join(TMP, ...parts);
}

export class Suite {
  constructor(client) {
    this.client = client ?? process.env.S3COMPAT_CLIENT ?? "unnamed";
    this.results = process.env.S3COMPAT_RESULTS;
    this.only = process.env.S3COMPAT_ONLY ?? "";
    this.checks = [];
    this.failed = 0;
  }

  record(rec) {
    const line = JSON.stringify({ ...rec, client: this.client });
    if (this.results) appendFileSync(this.results, line + "\n");
    else console.log(line);
  }

  version(text) {
    this.record({ type: "client", version: text.trim() });
  }

  check(area, name, fn) {
    if (!AREAS.includes(area)) throw new Error(`unknown area ${area}`);
    this.checks.push({ area, name, fn });
  }

  async main() {
    for (const { area, name, fn } of this.checks) {
      if (this.only && !name.includes(this.only)) continue;
      const start = performance.now();
      let ok = true;
      let detail = "";
      try {
        await fn();
      } catch (e) {
        ok = false;
        detail = `${e?.name ?? "Error"}: ${e?.message ?? e}`;
        if (e?.code) detail += ` (code ${e.code})`;
        console.log(e?.stack ?? String(e));
      }
      const seconds = (performance.now() - start) / 1000;
      if (!ok) this.failed++;
      console.log(`${ok ? "ok  " : "FAIL"} ${area.padEnd(12)} ${name.padEnd(50)} ${seconds.toFixed(1).padStart(6)}s ${detail.slice(0, 2000)}`);
      this.record({ type: "check", area, name, ok, seconds: Math.round(seconds * 100) / 100, detail: detail.slice(0, 2000) });
    }
    process.exitCode = this.failed ? 1 : 0;
  }
}

export async function streamToBuffer(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

// Runs `tasks` (functions returning promises) with at most `limit` in flight.
export async function pool(limit, tasks) {
  const results = new Array(tasks.length);
  let next = 0;
  async function worker() {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
