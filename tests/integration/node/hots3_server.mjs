// A hots3 for the node tests: started on 127.0.0.1 with an ephemeral port, in a temporary
// directory, with one admin user; stopped (SIGTERM, which must exit 0) and removed by stop().

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

// `extra`: more TOML after the user. Resolves to { endpoint, stop }.
export async function startServer(access, secret, extra = "") {
  const dir = mkdtempSync(join(process.env.HOTS3_TEST_TMPDIR ?? tmpdir(), "hots3-node-"));
  const config = join(dir, "hots3.toml");
  writeFileSync(
    config,
    `[http]
threads = 2
[storage]
device_size = "2GiB"
cache_size = "64MiB"
[log]
access_log = ""
[[users]]
name = "node"
access_key = "${access}"
secret_key = "${secret}"
admin = true
${extra}`,
  );
  const portFile = join(dir, "port");
  const bin = process.env.HOTS3_BIN ?? "build/src/hots3";
  const env = { ...process.env };
  delete env.HOTS3_ACCESS_KEY;
  delete env.HOTS3_SECRET_KEY;
  const server = spawn(
    bin,
    ["serve", "--config", config, "--data", join(dir, "data"), "--listen", "127.0.0.1:0", "--port-file", portFile],
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  server.stderr.on("data", (d) => (stderr += d));
  const stop = async () => {
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGTERM");
      const code = await Promise.race([exited, sleep(30000, "timeout", { ref: false })]);
      if (code === "timeout") server.kill("SIGKILL");
      assert.equal(code, 0, "hots3 exits 0 on SIGTERM");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 400; i++) {
    if (server.exitCode !== null) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`hots3 exited: ${stderr}`);
    }
    if (existsSync(portFile)) {
      const port = readFileSync(portFile, "utf8").trim();
      if (port) return { endpoint: `http://127.0.0.1:${port}`, stop };
    }
    await sleep(25);
  }
  await stop();
  throw new Error("hots3 did not write its port file");
}
