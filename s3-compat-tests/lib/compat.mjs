// What the JavaScript suites of s3-compat-tests share: the settings the runner hands over and
// the results protocol (the same as lib/compat.py: JSON lines appended to S3COMPAT_RESULTS,
// one "client" record, then one "check" record per check; a check fails by throwing).

import { appendFileSync, mkdirSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";

export const AREAS = ["basic", "multipart", "dataset", "small-files", "checkpoint", "errors",
  "concurrency", "presign", "reuse"];

// The connection-reuse soak ("reuse"): one client with a small connection pool runs a long random
// mix of operations, successes and errors alike, and none may take longer than this. A request
// that leaves a pooled connection in a state the client misreads shows up as one operation
// waiting for the client's read timeout.
export const SOAK_OPERATIONS = Number(process.env.S3COMPAT_SOAK_OPERATIONS || 600);
export const SOAK_BOUND_SECONDS = Number(process.env.S3COMPAT_SOAK_BOUND_SECONDS || 2);

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
      if (this.only && !this.only.split("|").some((t) => name.includes(t))) continue;
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

// A seeded generator of floats in [0, 1) (mulberry32), so that a soak can be replayed.
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The connection-reuse soak: SOAK_OPERATIONS steps, each an operation of `operations` (async
// (key, rng, call) => void) on one of `keys`. Operations make every request through
// call(name, fn), which times it; no request may take longer than SOAK_BOUND_SECONDS, and a
// step that hangs fails after 30 s instead of waiting for a client that has no timeout.
export async function soak(operations, keys, seed = 28) {
  const rng = seededRandom(seed);
  let longest = { seconds: 0, name: "", status: "" };
  for (let n = 0; n < SOAK_OPERATIONS; n++) {
    const op = operations[Math.floor(rng() * operations.length)];
    const key = keys[Math.floor(rng() * keys.length)];
    const step = `step ${n} (${op.name} of ${key})`;
    const call = async (name, fn) => {
      const started = performance.now();
      let status = "ok";
      try {
        return await fn();
      } catch (e) {
        status = e.$metadata?.httpStatusCode ?? e.code ?? e.name;
        throw e;
      } finally {
        const seconds = (performance.now() - started) / 1000;
        if (seconds > longest.seconds) longest = { seconds, name, status };
        expect(seconds <= SOAK_BOUND_SECONDS, `${step}: ${name} answered ${status} after ${seconds.toFixed(1)} s`);
      }
    };
    let timer;
    const hung = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${step} did not end in 30 s`)), 30000);
    });
    try {
      await Promise.race([op(key, rng, call), hung]);
    } finally {
      clearTimeout(timer);
    }
  }
  console.log(`soak: ${SOAK_OPERATIONS} steps, the longest request ${longest.seconds.toFixed(3)} s (${longest.name}, ${longest.status})`);
}
