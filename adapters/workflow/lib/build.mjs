// @ts-check
// An SDK the adapter builds itself: --sdk DIR where DIR holds the SDK's
// package tarballs (`npm pack`, `pnpm pack`) or is a checkout of its
// monorepo (lib/pack.mjs packs it first). The SDK directory is made under
// the cache (.cache/sdk/HASH/, git-ignored) as make engines makes
// sdk/VERSION: a package.json whose SDK packages are the tarballs (file:,
// and npm overrides for the same, so the SDK's packages among themselves
// resolve to the build too), the rest of its dependencies pinned by the
// release's committed lockfile where there is one (npm resolves them
// otherwise), `npm install`, workflows/ copied in, the SDK's own
// `workflow build`. HASH is the content hash of the inputs: the tarballs'
// files, the workloads' files, the lockfile the versions came from and
// RECIPE. A build is made in a temporary directory and renamed into place
// whole once it is complete, under a lock, so a failed or concurrent
// build never leaves a directory a later run would take as good.
import { createHash } from "node:crypto";
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { abortBuilds, leftovers, locked, run } from "./exec.mjs";
import { OTEL_PACKAGES } from "./otel.mjs";
import { readPackage } from "./tgz.mjs";

/** @typedef {import("./tgz.mjs").Tarball} Tarball */

// root is adapters/workflow (the adapter's directory).
const root = fileURLToPath(new URL("..", import.meta.url));

// RECIPE is the version of the steps below: part of every build's hash,
// so a change to how builds are made never reuses one made the old way.
// 2: the build installs the OpenTelemetry packages (lib/otel.mjs).
export const RECIPE = "2";

// BUILT marks a complete build (written last, before the rename): it says
// what the build was made from.
export const BUILT = "durabench-build.json";

/**
 * manifestFile is the manifest workflow build wrote in its output dir
 * (.well-known/workflow/v1): manifest.json (4.1 and later), or
 * manifest.debug.json, the only one the 4.0.1 betas write (same layout:
 * steps and workflows by file); "" when there is neither.
 * @param {string} base
 * @returns {string}
 */
export function manifestFile(base) {
  return ["manifest.json", "manifest.debug.json"].map((n) => join(base, n)).find(existsSync) ?? "";
}

// abortBuilds and run are lib/exec.mjs's, for the adapter and lib/pack.mjs.
export { abortBuilds, run };

// ENTRIES are the SDK's packages a build depends on directly, as
// sdk/VERSION/package.json does (workflow build's bin is @workflow/cli's;
// world-postgres only when the build or the release has one).
export const ENTRIES = ["workflow", "@workflow/cli", "@workflow/world-local", "@workflow/world-postgres"];

/**
 * cacheDir is where builds are kept: DURABENCH_WORKFLOW_CACHE, or
 * adapters/workflow/.cache (inside the adapter, so workflow build's esbuild
 * finds the adapter's tsconfig.json as it does for sdk/VERSION).
 * @returns {string}
 */
export function cacheDir() {
  return process.env.DURABENCH_WORKFLOW_CACHE ? resolve(process.env.DURABENCH_WORKFLOW_CACHE) : join(root, ".cache");
}

/**
 * sdkKind says what --sdk DIR is: a checkout of the SDK's monorepo
 * (pnpm-workspace.yaml and packages/NAME/package.json), an installed SDK
 * directory (node_modules/workflow), or a directory of package tarballs.
 * Anything else is an error naming --sdk and the directory.
 * @param {string} arg --sdk as given
 * @param {string} dir
 * @returns {"checkout" | "installed" | "tarballs"}
 */
export function sdkKind(arg, dir) {
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new Error(`--sdk ${arg}: ${dir} does not exist`);
  }
  if (!st.isDirectory()) throw new Error(`--sdk ${arg}: ${dir} is not a directory`);
  const names = readdirSync(dir);
  if (names.includes("pnpm-workspace.yaml") && existsSync(join(dir, "packages"))) {
    if (readdirSync(join(dir, "packages")).some((p) => existsSync(join(dir, "packages", p, "package.json")))) return "checkout";
  }
  if (existsSync(join(dir, "node_modules", "workflow", "package.json"))) return "installed";
  if (names.some((n) => n.endsWith(".tgz"))) return "tarballs";
  throw new Error(
    `--sdk ${arg}: ${dir} is none of an SDK version under sdk/, an installed SDK directory (node_modules/workflow and workflow build's output), ` +
      `a directory of the SDK's package tarballs (*.tgz) or a checkout of its monorepo (pnpm-workspace.yaml, packages/*/package.json)`,
  );
}

/**
 * readTarballs reads every *.tgz of dir (sorted by package name). Two
 * tarballs of one package, or none of workflow or @workflow/core, is an
 * error naming --sdk and the directory.
 * @param {string} arg --sdk as given
 * @param {string} dir
 * @returns {Tarball[]}
 */
export function readTarballs(arg, dir) {
  /** @type {Map<string, Tarball>} */
  const byName = new Map();
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".tgz")).sort()) {
    let t;
    try {
      t = readPackage(join(dir, f));
    } catch (e) {
      throw new Error(`--sdk ${arg}: ${/** @type {Error} */ (e).message}`);
    }
    const prev = byName.get(t.name);
    if (prev) throw new Error(`--sdk ${arg}: ${dir} has two tarballs of ${t.name}: ${basename(prev.file)} and ${f}`);
    byName.set(t.name, t);
  }
  const missing = ["workflow", "@workflow/core"].filter((n) => !byName.has(n));
  if (missing.length) throw new Error(`--sdk ${arg}: ${dir} has no tarball of ${missing.join(" or ")} (a build of the SDK packs at least workflow and @workflow/core)`);
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/**
 * workloads lists the files of workflows/ (path under it, bytes), in
 * path order: what the build compiles besides the SDK.
 * @param {string} [dir]
 * @returns {{ path: string, data: Buffer }[]}
 */
export function workloads(dir = join(root, "workflows")) {
  return /** @type {string[]} */ (readdirSync(dir, { recursive: true }))
    .filter((p) => statSync(join(dir, p)).isFile())
    .sort()
    .map((p) => ({ path: p.split("\\").join("/"), data: readFileSync(join(dir, p)) }));
}

/**
 * releaseDir is the release under sdk/ whose committed lockfile pins the
 * build's other dependencies: sdk/VERSION for the build's workflow
 * version, or "" when there is none.
 * @param {string} version
 * @returns {string}
 */
export function releaseDir(version) {
  const dir = join(root, "sdk", version);
  return existsSync(join(dir, "package-lock.json")) && existsSync(join(dir, "package.json")) ? dir : "";
}

/**
 * buildHash is the content hash of a build's inputs: RECIPE, each
 * tarball's files (its digest), each workload file's bytes and the
 * lockfile the other versions come from.
 * @param {Tarball[]} tarballs
 * @param {{ path: string, data: Buffer }[]} files
 * @param {Buffer | null} lock
 * @returns {string} 64 hex digits
 */
export function buildHash(tarballs, files, lock) {
  const h = createHash("sha256");
  const sha = (/** @type {Buffer} */ b) => createHash("sha256").update(b).digest("hex");
  h.update(`durabench workflow SDK build, recipe ${RECIPE}\n`);
  for (const t of [...tarballs].sort((a, b) => (a.name < b.name ? -1 : 1))) h.update(`package ${t.name} ${t.version} ${t.digest}\n`);
  for (const f of files) h.update(`workload ${f.path} ${sha(f.data)}\n`);
  h.update(`lock ${lock ? sha(lock) : "none"}\n`);
  return h.digest("hex");
}

// SHORT is how many hex digits of the hash name a build (its directory,
// /v1/info's sdk_hash, the label).
export const SHORT = 12;

/**
 * tgzName is the file name npm pack gives a package's tarball
 * (@workflow/core 4.8.9: workflow-core-4.8.9.tgz).
 * @param {Tarball} t
 */
export const tgzName = (t) => `${t.name.replace(/^@/, "").replace("/", "-")}-${t.version}.tgz`;

/**
 * manifest is the build's package.json: the SDK's entry packages (ENTRIES)
 * as the build's tarballs (file:tgz/…) or, those the build lacks, at the
 * release's versions; every package of the build in npm overrides too, so
 * that the SDK's packages, which depend on each other by exact version,
 * resolve to the build wherever they are required; and the OpenTelemetry
 * packages the adapter collects the SDK's spans with (OTEL_PACKAGES, at
 * the release's versions where it has them).
 * @param {Tarball[]} tarballs
 * @param {any} release the release's package.json, or null
 * @returns {any}
 */
export function manifest(tarballs, release) {
  /** @type {Record<string, string>} */
  const overrides = {};
  for (const t of tarballs) overrides[t.name] = `file:tgz/${tgzName(t)}`;
  /** @type {Record<string, string>} */
  const dependencies = {};
  for (const n of ENTRIES) {
    const spec = overrides[n] ?? release?.dependencies?.[n];
    if (spec) dependencies[n] = spec;
  }
  for (const [n, v] of Object.entries(OTEL_PACKAGES)) dependencies[n] = overrides[n] ?? release?.dependencies?.[n] ?? v;
  const version = tarballs.find((t) => t.name === "workflow")?.version;
  return {
    name: "durabench-target-workflow-sdk-build",
    private: true,
    type: "commonjs",
    description: `A build of the Workflow SDK (workflow ${version}) made by the durabench adapter from package tarballs (lib/build.mjs)`,
    dependencies,
    overrides,
  };
}

// LOCKED are the fields of a package's lockfile entry its package.json
// gives.
const LOCKED = ["license", "dependencies", "optionalDependencies", "peerDependencies", "peerDependenciesMeta", "bin", "engines", "os", "cpu"];

/**
 * patchLock turns the release's lockfile into the build's: the root's
 * dependencies the build's package.json's, and every entry of a package
 * the build provides (node_modules/NAME, nested ones too) its tarball —
 * version, resolved file:, integrity, and what its package.json declares.
 * npm install then keeps every other version the lockfile pins that
 * still satisfies the build's packages (a dependency only a replaced
 * package needs would otherwise be resolved anew, at the newest version).
 * @param {any} lock the release's package-lock.json
 * @param {Tarball[]} tarballs
 * @param {any} pkg the build's package.json (manifest)
 * @returns {any}
 */
export function patchLock(lock, tarballs, pkg) {
  const out = structuredClone(lock);
  out.name = pkg.name;
  const rootEntry = { ...(out.packages?.[""] ?? {}), name: pkg.name, dependencies: pkg.dependencies };
  out.packages = { ...out.packages, "": rootEntry };
  const byName = new Map(tarballs.map((t) => [t.name, t]));
  for (const [path, entry] of Object.entries(out.packages)) {
    const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(path);
    const t = m && byName.get(m[1]);
    if (!t) continue;
    /** @type {Record<string, any>} */
    const e = { version: t.version, resolved: `file:tgz/${tgzName(t)}`, integrity: t.integrity };
    for (const k of LOCKED) if (t.manifest[k] !== undefined) e[k] = t.manifest[k];
    if (typeof e.bin === "string") e.bin = { [t.name.replace(/^@[^/]+\//, "")]: e.bin };
    for (const k of ["dev", "optional", "peer", "devOptional"]) if (/** @type {any} */ (entry)[k]) e[k] = /** @type {any} */ (entry)[k];
    out.packages[path] = e;
  }
  return out;
}

/**
 * BuildError is a build that failed (npm, workflow build, pnpm pack): the
 * adapter exits 1 with it. Any other error of resolving --sdk is bad
 * input (exit 2).
 */
export class BuildError extends Error {}

/**
 * What a build is made from, and where it is.
 * @typedef {object} Build
 * @property {string} dir the SDK directory (cache/sdk/SHORT)
 * @property {string} hash the content hash (SHORT hex digits)
 * @property {string} version the build's workflow version
 * @property {string} lock where the other dependencies' versions come from
 * @property {boolean} cached whether an earlier build was reused
 */

/**
 * ensureBuild makes (or finds) the SDK directory of a build from its
 * tarballs. dir is kept when it is complete; otherwise the build is made
 * in a temporary directory beside it and renamed into place once
 * workflow build has run.
 * @param {Tarball[]} tarballs
 * @param {(msg: string) => void} log progress, on stderr
 * @returns {Promise<Build>}
 */
export async function ensureBuild(tarballs, log) {
  const version = /** @type {Tarball} */ (tarballs.find((t) => t.name === "workflow")).version;
  const release = releaseDir(version);
  const lockBytes = release ? readFileSync(join(release, "package-lock.json")) : null;
  const full = buildHash(tarballs, workloads(), lockBytes);
  const hash = full.slice(0, SHORT);
  const sdkCache = join(cacheDir(), "sdk");
  const dir = join(sdkCache, hash);
  const lockFrom = release ? relative(root, join(release, "package-lock.json")) : "npm (no release lockfile under sdk/ for this version)";
  /** @returns {Build} */
  const done = (/** @type {boolean} */ cached) => ({ dir, hash, version, lock: lockFrom, cached });
  if (existsSync(join(dir, BUILT))) return done(true);
  mkdirSync(sdkCache, { recursive: true });
  return locked(
    join(sdkCache, `${hash}.lock`),
    async () => {
      if (existsSync(join(dir, BUILT))) return done(true); // built while we waited
      // A directory without the mark is a build that never finished (a
      // crash mid-rename cannot leave one: the rename is atomic): gone.
      rmSync(dir, { recursive: true, force: true });
      // Temporary directories of this hash are a dead holder's (we hold
      // its lock): gone too.
      for (const n of readdirSync(sdkCache)) if (n.startsWith(`.tmp-${hash}-`)) rmSync(join(sdkCache, n), { recursive: true, force: true });
      const tmp = join(sdkCache, `.tmp-${hash}-${process.pid}`);
      leftovers.add(tmp);
      const t0 = Date.now();
      // A line every 20 s while it builds: durabench waits for an adapter's
      // URL as long as it writes to stderr (2 minutes of silence fail it).
      let step = "npm install";
      const beat = setInterval(() => log(`building SDK workflow ${version}+${hash}: ${step}, ${Math.round((Date.now() - t0) / 1000)} s`), 20_000);
      try {
        mkdirSync(join(tmp, "tgz"), { recursive: true });
        for (const t of tarballs) copyFileSync(t.file, join(tmp, "tgz", tgzName(t)));
        const releasePkg = release ? JSON.parse(readFileSync(join(release, "package.json"), "utf8")) : null;
        const pkg = manifest(tarballs, releasePkg);
        writeFileSync(join(tmp, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
        if (lockBytes) writeFileSync(join(tmp, "package-lock.json"), JSON.stringify(patchLock(JSON.parse(lockBytes.toString("utf8")), tarballs, pkg), null, 2) + "\n");
        log(`building SDK workflow ${version}+${hash} from ${tarballs.length} package tarballs in ${dir}; other dependencies' versions from ${lockFrom}`);
        await run(tmp, "npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]);
        cpSync(join(root, "workflows"), join(tmp, "workflows"), { recursive: true });
        step = "workflow build";
        await run(tmp, "npx", ["--no-install", "workflow", "build"]);
        if (!manifestFile(join(tmp, ".well-known", "workflow", "v1"))) throw new Error(`workflow build in ${tmp} wrote no .well-known/workflow/v1/manifest.json (nor manifest.debug.json)`);
        const built = { hash: full, recipe: RECIPE, version, lock: lockFrom, packages: Object.fromEntries(tarballs.map((t) => [t.name, { version: t.version, digest: t.digest }])), built: new Date().toISOString(), seconds: (Date.now() - t0) / 1000 };
        writeFileSync(join(tmp, BUILT), JSON.stringify(built, null, 2) + "\n");
        renameSync(tmp, dir);
      } catch (e) {
        rmSync(tmp, { recursive: true, force: true });
        throw new BuildError(`building the SDK from ${tarballs.length} tarballs: ${/** @type {Error} */ (e).message}`);
      } finally {
        clearInterval(beat);
        leftovers.delete(tmp);
      }
      log(`built SDK workflow ${version}+${hash} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      return done(false);
    },
    log,
  );
}
