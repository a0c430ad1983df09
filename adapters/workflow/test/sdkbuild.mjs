// @ts-check
// --sdk DIR of package tarballs, end to end: the SDK's packages of the
// release under test (the versions sdk/4.8.9/package-lock.json pins) packed
// from the npm registry with `npm pack`, and the same with a one-line
// change to @workflow/core repacked; the adapter builds each (its own code
// path: adapter.mjs --sdk DIR), serves a fan-out on it, names the build's
// hash in /v1/info (and the SDK's spans: the build has the OpenTelemetry
// packages), finds the build again from the cache in seconds, and
// another hash for the changed build. It installs from the registry (npm
// pack, npm install: minutes), so it is not a unit test: make test-targets
// runs it (test/adapter.test.mjs imports it for the default SDK), or
// `node --test test/sdkbuild.mjs`. Builds go to a cache of their own under
// .cache/, removed after.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { readTgz } from "../lib/tgz.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const adapterDir = join(here, "..");
const release = "4.8.9";
const tmp = mkdtempSync(join(tmpdir(), "durabench-workflow-sdkbuild-"));
// Inside the adapter's directory, as the default cache: workflow build
// finds the adapter's tsconfig.json there.
const cache = join(adapterDir, ".cache", `test-${process.pid}`);
const env = { ...process.env, DURABENCH_WORKFLOW_CACHE: cache };

/**
 * adapter runs adapter.mjs with args to its end (--build-only, or a bad
 * --sdk): its exit code, stdout and stderr, and how long it took.
 * @param {string[]} args
 */
function adapter(args) {
  const t0 = Date.now();
  return new Promise((res) => {
    const p = spawn(process.execPath, [join(adapterDir, "adapter.mjs"), ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (err += b));
    p.on("close", (code) => res({ code, out, err, ms: Date.now() - t0 }));
  }).then((r) => /** @type {{ code: number, out: string, err: string, ms: number }} */ (r));
}

describe(`--sdk DIR: the SDK ${release} packed from the registry, built by the adapter`, () => {
  const base = join(tmp, "base-tgz");
  const head = join(tmp, "head-tgz");
  /** @type {import("node:child_process").ChildProcessByStdio<null, import("node:stream").Readable, null> | undefined} */
  let proc;

  before(() => {
    // The SDK's packages at the versions the release's lockfile pins.
    const lock = JSON.parse(readFileSync(join(adapterDir, "sdk", release, "package-lock.json"), "utf8"));
    const specs = new Set();
    for (const [path, e] of Object.entries(lock.packages)) {
      const m = /node_modules\/(workflow|@workflow\/[^/]+)$/.exec(path);
      if (m) specs.add(`${m[1]}@${/** @type {any} */ (e).version}`);
    }
    mkdirSync(base, { recursive: true });
    execFileSync("npm", ["pack", "--silent", ...specs], { cwd: base, stdio: ["ignore", "ignore", "inherit"] });
    // The head: @workflow/core with one line added, repacked.
    cpSync(base, head, { recursive: true });
    const src = join(tmp, "core");
    for (const e of readTgz(join(base, `workflow-core-${release}.tgz`))) {
      const f = join(src, e.path.slice(e.path.indexOf("/") + 1));
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, e.data);
    }
    writeFileSync(join(src, "dist", "runtime.js"), readFileSync(join(src, "dist", "runtime.js"), "utf8") + "// a one-line change\n");
    rmSync(join(head, `workflow-core-${release}.tgz`));
    execFileSync("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", head], { cwd: src, stdio: ["ignore", "ignore", "inherit"] });
  });
  after(async () => {
    if (proc && proc.exitCode === null) {
      const exited = new Promise((res) => proc?.once("exit", res));
      proc.kill("SIGTERM");
      await exited;
    }
    rmSync(tmp, { recursive: true, force: true });
    rmSync(cache, { recursive: true, force: true });
  });

  /** @type {string} */
  let baseHash;

  test("the tarballs are built once, then found in the cache in seconds", { timeout: 15 * 60_000 }, async () => {
    const cold = await adapter(["--sdk", base, "--build-only"]);
    assert.equal(cold.code, 0, cold.err);
    const m = /^(\S+) workflow 4\.8\.9\+([0-9a-f]{12})\n$/.exec(cold.out);
    assert.ok(m, cold.out);
    baseHash = m[2];
    assert.equal(m[1], join(cache, "sdk", baseHash));
    assert.match(cold.err, /other dependencies' versions from sdk\/4\.8\.9\/package-lock\.json/);
    assert.ok(existsSync(join(m[1], ".well-known", "workflow", "v1", "manifest.json")));
    const warm = await adapter(["--sdk", base, "--build-only"]);
    assert.equal(warm.code, 0, warm.err);
    assert.equal(warm.out, cold.out, "the same build");
    assert.doesNotMatch(warm.err, /building/);
    assert.ok(warm.ms < 10_000, `a cached build starts in seconds, not ${warm.ms} ms`);
    process.stderr.write(`# cold build ${(cold.ms / 1000).toFixed(1)} s, warm ${(warm.ms / 1000).toFixed(1)} s\n`);
  });

  test("the build serves a fan-out, its info naming the hash", { timeout: 5 * 60_000 }, async () => {
    const p = spawn(process.execPath, [join(adapterDir, "adapter.mjs"), "--sdk", base], { env, stdio: ["ignore", "pipe", "inherit"] });
    proc = p;
    const url = await new Promise((res, rej) => {
      let out = "";
      p.stdout.on("data", (b) => {
        out += b;
        if (out.includes("\n")) res(out.split("\n")[0]);
      });
      p.once("exit", (code) => rej(new Error(`adapter exited ${code} before it was ready`)));
    });
    /** @param {string} path @param {object} [body] @returns {Promise<{ status: number, body: any }>} */
    const call = async (path, body) => {
      const r = await fetch(url + path, { method: body ? "POST" : "GET", headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) });
      return { status: r.status, body: await r.json() };
    };
    const info = (await call("/v1/info")).body;
    assert.equal(info.version, release);
    assert.equal(info.sdk_hash, baseHash);
    assert.equal(info.label, `workflow ${release}+${baseHash} · local`);
    assert.equal((await call("/v1/runs", { run: "b-fan", scenario: "fanout", options: { branches: "4" }, spans: true })).status, 202);
    /** @type {any[]} */
    const events = [];
    for (;;) {
      const { status, body } = await call(`/v1/runs/b-fan/timeline?after=${events.length}&wait=10s`);
      assert.equal(status, 200);
      events.push(...body.events);
      if (body.status !== "running") {
        assert.equal(body.status, "completed");
        break;
      }
    }
    const started = events.filter((e) => e.kind === "step_started").map((e) => e.index).sort();
    assert.deepEqual(started, [0, 1, 2, 3]);
    assert.equal(events.at(-1).kind, "run_completed");
    // The build has the OpenTelemetry packages: the SDK's spans come.
    const bodies = events.filter((e) => e.kind === "span" && e.category === "body").map((e) => e.index).sort();
    assert.deepEqual(bodies, [0, 1, 2, 3], "a body span per step");
  });

  test("one line changed in one package: another hash, another build", { timeout: 15 * 60_000 }, async () => {
    const r = await adapter(["--sdk", head, "--build-only"]);
    assert.equal(r.code, 0, r.err);
    const m = /workflow 4\.8\.9\+([0-9a-f]{12})\n$/.exec(r.out);
    assert.ok(m, r.out);
    assert.notEqual(m[1], baseHash);
    assert.match(r.err, /building SDK workflow 4\.8\.9\+/);
    const core = join(cache, "sdk", m[1], "node_modules", "@workflow", "core", "dist", "runtime.js");
    assert.match(readFileSync(core, "utf8"), /a one-line change\n$/, "the build's @workflow/core is the changed one");
  });

  test("bad input is exit 2 naming --sdk and the path", async () => {
    const empty = join(tmp, "empty");
    mkdirSync(empty);
    const r = await adapter(["--sdk", empty]);
    assert.equal(r.code, 2);
    assert.match(r.err, new RegExp(`--sdk ${empty}: ${empty} is none of`));
    const only = join(tmp, "only-core");
    mkdirSync(only);
    cpSync(join(base, `workflow-core-${release}.tgz`), join(only, `workflow-core-${release}.tgz`));
    const r2 = await adapter(["--sdk", only]);
    assert.equal(r2.code, 2);
    assert.match(r2.err, /--sdk .*only-core: .*only-core has no tarball of workflow/);
  });
});
