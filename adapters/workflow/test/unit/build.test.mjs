// @ts-check
// lib/build.mjs, lib/tgz.mjs, lib/pack.mjs: what --sdk DIR is, the package
// tarballs read without a tar tool, the content hash, the build's
// package.json (tarballs and overrides) and lockfile, the lock, and a
// checkout's packages — on small tarballs made here (no npm, no SDK).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { gzipSync } from "node:zlib";
import { BuildError, buildHash, ensureBuild, manifest, patchLock, readTarballs, sdkKind, tgzName, workloads } from "../../lib/build.mjs";
import { locked } from "../../lib/exec.mjs";
import { OTEL_PACKAGES } from "../../lib/otel.mjs";
import { needed, unbuilt, workspacePackages } from "../../lib/pack.mjs";
import { canonical, readPackage, readTgz } from "../../lib/tgz.mjs";

const dir = mkdtempSync(join(tmpdir(), "durabench-workflow-build-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * tar makes an uncompressed ustar archive of files (path → text), as npm
 * pack lays one out (everything under package/), with mtime.
 * @param {Record<string, string>} files
 * @param {number} [mtime]
 * @returns {Buffer}
 */
function tar(files, mtime = 499162500) {
  /** @type {Buffer[]} */
  const parts = [];
  for (const [path, text] of Object.entries(files)) {
    const data = Buffer.from(text);
    const h = Buffer.alloc(512);
    h.write(path, 0, 100);
    h.write("0000644\0", 100);
    h.write("0000000\0", 108);
    h.write("0000000\0", 116);
    h.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
    h.write(mtime.toString(8).padStart(11, "0") + "\0", 136);
    h.write("        ", 148);
    h.write("0", 156);
    h.write("ustar\0" + "00", 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    parts.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/**
 * pkg writes the tarball of a package (its package.json and files) at
 * path, and returns path.
 * @param {string} path
 * @param {object} pj
 * @param {Record<string, string>} [files] under package/
 * @param {{ mtime?: number, level?: number }} [opt]
 */
function pkg(path, pj, files = {}, opt = {}) {
  mkdirSync(dirname(path), { recursive: true });
  /** @type {Record<string, string>} */
  const all = { "package/package.json": JSON.stringify(pj) };
  for (const [p, t] of Object.entries(files)) all["package/" + p] = t;
  writeFileSync(path, gzipSync(tar(all, opt.mtime), { level: opt.level ?? 9 }));
  return path;
}

const core = (/** @type {string} */ d, text = "export const x = 1;\n", opt = {}) =>
  pkg(join(d, "workflow-core-1.0.0.tgz"), { name: "@workflow/core", version: "1.0.0", dependencies: { "@workflow/errors": "1.0.0", ms: "2.1.3" } }, { "dist/index.js": text }, opt);
const wf = (/** @type {string} */ d) => pkg(join(d, "workflow-1.0.0.tgz"), { name: "workflow", version: "1.0.0", dependencies: { "@workflow/core": "1.0.0", "@workflow/cli": "1.0.0" } }, { "dist/index.js": "" });
const errors = (/** @type {string} */ d) => pkg(join(d, "workflow-errors-1.0.0.tgz"), { name: "@workflow/errors", version: "1.0.0", bin: "bin/e.js" }, { "bin/e.js": "" });

test("a tarball is read without a tar tool: its files, its package.json, npm's integrity", () => {
  const f = core(join(dir, "read"));
  assert.deepEqual(readTgz(f).map((e) => e.path), ["package/package.json", "package/dist/index.js"]);
  const t = readPackage(f);
  assert.equal(t.name, "@workflow/core");
  assert.equal(t.version, "1.0.0");
  assert.equal(t.manifest.dependencies.ms, "2.1.3");
  assert.match(t.integrity, /^sha512-[A-Za-z0-9+/]+=*$/);
  assert.match(t.digest, /^[0-9a-f]{64}$/);
  writeFileSync(join(dir, "read", "junk.tgz"), "not gzip");
  assert.throws(() => readPackage(join(dir, "read", "junk.tgz")), { message: /junk\.tgz: not a gzipped tarball/ });
});

test("canonical JSON sorts every object's keys", () => {
  assert.equal(canonical({ b: 1, a: [{ d: 2, c: "x" }, null] }), '{"a":[{"c":"x","d":2},null],"b":1}');
});

test("--sdk DIR is a checkout, an installed SDK, a directory of tarballs, or an error naming --sdk and DIR", () => {
  const k = join(dir, "kinds");
  mkdirSync(join(k, "checkout", "packages", "core"), { recursive: true });
  writeFileSync(join(k, "checkout", "pnpm-workspace.yaml"), "packages:\n  - packages/*\n");
  writeFileSync(join(k, "checkout", "packages", "core", "package.json"), "{}");
  mkdirSync(join(k, "installed", "node_modules", "workflow"), { recursive: true });
  writeFileSync(join(k, "installed", "node_modules", "workflow", "package.json"), "{}");
  wf(join(k, "tarballs"));
  mkdirSync(join(k, "empty"));
  writeFileSync(join(k, "file"), "");
  assert.equal(sdkKind("x", join(k, "checkout")), "checkout");
  assert.equal(sdkKind("x", join(k, "installed")), "installed");
  assert.equal(sdkKind("x", join(k, "tarballs")), "tarballs");
  assert.throws(() => sdkKind("./empty", join(k, "empty")), { message: /^--sdk \.\/empty: .*empty is none of an SDK version under sdk\/, an installed SDK directory .*tarballs \(\*\.tgz\).*pnpm-workspace\.yaml/ });
  assert.throws(() => sdkKind("./nope", join(k, "nope")), { message: /^--sdk \.\/nope: .*nope does not exist$/ });
  assert.throws(() => sdkKind("./file", join(k, "file")), { message: /^--sdk \.\/file: .*file is not a directory$/ });
});

test("a directory of tarballs needs workflow and @workflow/core, one tarball each", () => {
  const d = join(dir, "need");
  wf(d);
  assert.throws(() => readTarballs("./need", d), { message: /^--sdk \.\/need: .*need has no tarball of @workflow\/core \(/ });
  core(d);
  errors(d);
  assert.deepEqual(readTarballs("./need", d).map((t) => t.name), ["@workflow/core", "@workflow/errors", "workflow"]);
  pkg(join(d, "core-again.tgz"), { name: "@workflow/core", version: "1.0.1" });
  assert.throws(() => readTarballs("./need", d), { message: /has two tarballs of @workflow\/core: core-again\.tgz and workflow-core-1\.0\.0\.tgz/ });
  const none = join(dir, "none");
  errors(none);
  assert.throws(() => readTarballs("./none", none), { message: /has no tarball of workflow or @workflow\/core/ });
});

test("the hash: same inputs, same hash (whatever packed them when); one byte changed, another", () => {
  const files = workloads();
  assert.ok(files.some((f) => f.path === "bench.js"), "the workloads are workflows/");
  const lock = Buffer.from("{}");
  const hash = (/** @type {string} */ d) => buildHash(readTarballs(".", d), files, lock);
  const a = join(dir, "hash-a");
  wf(a);
  core(a);
  const h = hash(a);
  assert.match(h, /^[0-9a-f]{64}$/);
  assert.equal(hash(a), h, "the same tarballs");
  const b = join(dir, "hash-b");
  wf(b);
  core(b, undefined, { mtime: 1700000000, level: 1 }); // packed again, another time and compression
  assert.equal(hash(b), h, "the same files packed again");
  const r = join(dir, "hash-reordered");
  wf(r);
  pkg(join(r, "workflow-core-1.0.0.tgz"), { version: "1.0.0", name: "@workflow/core", dependencies: { ms: "2.1.3", "@workflow/errors": "1.0.0" } }, { "dist/index.js": "export const x = 1;\n" });
  assert.equal(hash(r), h, "package.json's keys in another order (pnpm pack's dependencies)");
  const c = join(dir, "hash-c");
  wf(c);
  core(c, "export const x = 2;\n"); // one byte of one file
  assert.notEqual(hash(c), h, "one byte changed");
  assert.notEqual(buildHash(readTarballs(".", a), [...files, { path: "more.js", data: Buffer.from("") }], lock), h, "another workload");
  assert.notEqual(buildHash(readTarballs(".", a), files, Buffer.from("{ }")), h, "another lockfile");
  assert.notEqual(buildHash(readTarballs(".", a), files, null), h, "no lockfile");
});

test("the build's package.json: the entries as tarballs (or the release's versions), every package of the build in overrides", () => {
  const d = join(dir, "manifest");
  wf(d);
  core(d);
  errors(d);
  const ts = readTarballs(".", d);
  assert.equal(tgzName(ts[0]), "workflow-core-1.0.0.tgz");
  const release = { dependencies: { workflow: "1.0.0", "@workflow/cli": "1.0.0", "@workflow/world-local": "1.0.2", "@opentelemetry/api": "1.8.0" } };
  const m = manifest(ts, release);
  assert.deepEqual(m.dependencies, { workflow: "file:tgz/workflow-1.0.0.tgz", "@workflow/cli": "1.0.0", "@workflow/world-local": "1.0.2", ...OTEL_PACKAGES, "@opentelemetry/api": "1.8.0" });
  assert.deepEqual(m.overrides, {
    "@workflow/core": "file:tgz/workflow-core-1.0.0.tgz",
    "@workflow/errors": "file:tgz/workflow-errors-1.0.0.tgz",
    workflow: "file:tgz/workflow-1.0.0.tgz",
  });
  assert.deepEqual(manifest(ts, null).dependencies, { workflow: "file:tgz/workflow-1.0.0.tgz", ...OTEL_PACKAGES }, "no release: the build's own entries only, and the OTel packages the adapter pins");

  // The release's lockfile made the build's: the build's packages (nested
  // ones too) its tarballs, everything else as pinned.
  const lock = {
    name: "release",
    lockfileVersion: 3,
    packages: {
      "": { name: "release", dependencies: release.dependencies },
      "node_modules/workflow": { version: "0.9.0", resolved: "https://registry/workflow-0.9.0.tgz", integrity: "sha512-old", dependencies: { "@workflow/core": "0.9.0" } },
      "node_modules/@workflow/core": { version: "0.9.0", resolved: "https://registry/core-0.9.0.tgz", integrity: "sha512-old", dependencies: { ms: "2.1.3" } },
      "node_modules/workflow/node_modules/@workflow/errors": { version: "0.9.0", resolved: "https://registry/errors.tgz", optional: true },
      "node_modules/ms": { version: "2.1.3", resolved: "https://registry/ms-2.1.3.tgz", integrity: "sha512-ms" },
    },
  };
  const out = patchLock(lock, ts, m);
  assert.deepEqual(out.packages[""].dependencies, m.dependencies);
  const c = out.packages["node_modules/@workflow/core"];
  assert.equal(c.version, "1.0.0");
  assert.equal(c.resolved, "file:tgz/workflow-core-1.0.0.tgz");
  assert.equal(c.integrity, ts[0].integrity);
  assert.deepEqual(c.dependencies, { "@workflow/errors": "1.0.0", ms: "2.1.3" });
  const e = out.packages["node_modules/workflow/node_modules/@workflow/errors"];
  assert.deepEqual([e.version, e.resolved, e.optional, e.bin], ["1.0.0", "file:tgz/workflow-errors-1.0.0.tgz", true, { errors: "bin/e.js" }]);
  assert.deepEqual(out.packages["node_modules/ms"], lock.packages["node_modules/ms"], "the rest as pinned");
  assert.equal(lock.packages["node_modules/@workflow/core"].version, "0.9.0", "the release's lockfile untouched");
});

test("the lock: a second holder waits for the first; a dead holder's lock is taken over", async () => {
  const l = join(dir, "x.lock");
  /** @type {string[]} */
  const order = [];
  const first = locked(l, async () => {
    order.push("first in");
    await new Promise((r) => setTimeout(r, 700));
    order.push("first out");
  }, () => {});
  /** @type {string[]} */
  const said = [];
  const second = locked(l, async () => void order.push("second"), (m) => said.push(m));
  await Promise.all([first, second]);
  assert.deepEqual(order, ["first in", "first out", "second"]);
  assert.match(said[0], /^waiting for the build under way/);
  assert.ok(!existsSync(l), "released");
  // A holder that died: its pid is no process.
  mkdirSync(l);
  const dead = Number(execFileSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).toString());
  writeFileSync(join(l, "pid"), String(dead));
  assert.equal(await locked(l, async () => "taken", () => {}), "taken");
});

test("a checkout: the packages a build needs (workspace dependencies, not private ones), and whether they are built", () => {
  const c = join(dir, "repo");
  /**
   * @param {string} d
   * @param {object} pj
   */
  const ws = (d, pj) => {
    mkdirSync(join(c, "packages", d), { recursive: true });
    writeFileSync(join(c, "packages", d, "package.json"), JSON.stringify(pj));
  };
  ws("workflow", { name: "workflow", dependencies: { "@workflow/core": "workspace:*", "@workflow/next": "workspace:*" } });
  ws("core", { name: "@workflow/core", main: "dist/index.js", dependencies: { "@workflow/errors": "workspace:*", zod: "catalog:" } });
  ws("errors", { name: "@workflow/errors", devDependencies: { "@workflow/tsconfig": "workspace:*" } });
  ws("next", { name: "@workflow/next", peerDependencies: { "@workflow/world": "workspace:*" } });
  ws("world", { name: "@workflow/world" });
  ws("tsconfig", { name: "@workflow/tsconfig", private: true });
  ws("docs", { name: "docs", private: true });
  ws("web", { name: "@workflow/web" });
  const pkgs = workspacePackages(c);
  assert.deepEqual(needed(pkgs), ["@workflow/core", "@workflow/errors", "@workflow/next", "@workflow/world", "workflow"]);
  const corePkg = /** @type {any} */ (pkgs.get("@workflow/core"));
  assert.equal(unbuilt(corePkg), "dist/index.js");
  mkdirSync(join(c, "packages", "core", "dist"));
  writeFileSync(join(c, "packages", "core", "dist", "index.js"), "");
  assert.equal(unbuilt(corePkg), "");
});

test("readTarballs names --sdk in a bad tarball's error", () => {
  const d = join(dir, "bad");
  wf(d);
  core(d);
  writeFileSync(join(d, "broken.tgz"), gzipSync(Buffer.from("not a tar")));
  assert.throws(() => readTarballs("./bad", d), { message: /^--sdk \.\/bad: .*broken\.tgz: no package\.json in the tarball/ });
  assert.equal(readFileSync(join(d, "workflow-1.0.0.tgz")).subarray(0, 2).toString("hex"), "1f8b", "gzip");
});

test("a failed build leaves no directory a later run would take as good, no lock, no temporary directory", { timeout: 120_000 }, async () => {
  const d = join(dir, "fails");
  // Packages with no dependencies (npm installs them offline) and no
  // workflow bin: npm install passes, workflow build fails.
  pkg(join(d, "workflow-1.0.0.tgz"), { name: "workflow", version: "1.0.0" });
  pkg(join(d, "workflow-core-1.0.0.tgz"), { name: "@workflow/core", version: "1.0.0" });
  const cache = join(dir, "cache");
  process.env.DURABENCH_WORKFLOW_CACHE = cache;
  try {
    /** @type {string[]} */
    const said = [];
    await assert.rejects(ensureBuild(readTarballs(".", d), (m) => said.push(m)), (e) => e instanceof BuildError && /building the SDK from 2 tarballs: npx --no-install workflow build/.test(e.message));
    assert.match(said[0], /^building SDK workflow 1\.0\.0\+[0-9a-f]{12} from 2 package tarballs .*; other dependencies' versions from npm \(no release lockfile under sdk\/ for this version\)$/);
    assert.deepEqual(readdirSync(join(cache, "sdk")), [], "nothing left in the cache");
  } finally {
    delete process.env.DURABENCH_WORKFLOW_CACHE;
  }
});
