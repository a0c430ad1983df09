// @ts-check
// Finding and loading the SDK: --sdk resolved to a directory (a version
// under sdk/, a path laid out like one, or one built from a directory of
// package tarballs or a checkout of the SDK's monorepo: lib/build.mjs),
// whether that SDK can run what was asked, and its packages and `workflow
// build` output loaded (on the worker thread). The SDK's packages are not
// installed here: they are loaded at run time from that directory, and
// typed `any`.
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cacheDir, ensureBuild, manifestFile, readTarballs, sdkKind } from "./build.mjs";
import { SCENARIOS } from "./options.mjs";
import { packCheckout } from "./pack.mjs";

// root is adapters/workflow (the adapter's directory).
const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * isRelease reports whether --sdk names a version under sdk/ rather than
 * a path: a bare name (no slash, no leading dot) is a version unless
 * there is no such version and a directory of that name is here
 * (`--sdk=head-tgz`).
 * @param {string} sdk
 */
export function isRelease(sdk) {
  if (sdk.includes("/") || sdk.startsWith(".")) return false;
  return existsSync(join(root, "sdk", sdk)) || !existsSync(resolve(sdk));
}

/**
 * sdkDir resolves --sdk: a version under sdk/, or a directory.
 * @param {string} sdk
 * @returns {string}
 */
export function sdkDir(sdk) {
  const dir = isRelease(sdk) ? join(root, "sdk", sdk) : resolve(sdk);
  if (!existsSync(join(dir, "node_modules", "workflow", "package.json"))) {
    throw new Error(`--sdk ${sdk}: ${dir} has no installed workflow package (make engines builds sdk/<version>/; a path needs npm install there)`);
  }
  return dir;
}

/**
 * The SDK --sdk names: its directory and, for one the adapter built from
 * tarballs or a checkout, the build (its content hash).
 * @typedef {{ dir: string, kind: "version" | "installed" | "tarballs" | "checkout", build: import("./build.mjs").Build | null }} ResolvedSDK
 */

/**
 * resolveSDK resolves --sdk: a version under sdk/ or an installed
 * directory as they are; a directory of package tarballs or a checkout of
 * the SDK's monorepo built (or found built) under the cache. Bad input is
 * an error naming --sdk and the path.
 * @param {string} sdk
 * @param {(msg: string) => void} log progress, on stderr
 * @returns {Promise<ResolvedSDK>}
 */
export async function resolveSDK(sdk, log) {
  if (isRelease(sdk)) return { dir: sdkDir(sdk), kind: "version", build: null };
  const dir = resolve(sdk);
  const kind = sdkKind(sdk, dir);
  if (kind === "installed") return { dir: sdkDir(sdk), kind, build: null };
  // A checkout is packed first, into a directory of its own.
  const out = kind === "checkout" ? join(cacheDir(), "pack", `${process.pid}-${Date.now()}`) : "";
  try {
    if (out) await packCheckout(sdk, dir, out, log);
    const build = await ensureBuild(readTarballs(sdk, out || dir), log);
    if (build.cached) log(`SDK workflow ${build.version}+${build.hash}: the build in ${build.dir}`);
    return { dir: build.dir, kind, build };
  } finally {
    if (out) rmSync(out, { recursive: true, force: true });
  }
}

/**
 * pkgVersion is the version of package name installed in dir ("" if none).
 * @param {string} dir
 * @param {string} name
 * @returns {string}
 */
export function pkgVersion(dir, name) {
  try {
    return JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return "";
  }
}

/**
 * unreadSwitches is the names of switches no JavaScript file of the SDK's
 * packages (workflow, @workflow/*) in dir reads: switches with no effect.
 * @param {string} dir
 * @param {string[]} names
 * @returns {string[]}
 */
export function unreadSwitches(dir, names) {
  const left = new Set(names);
  /** @param {string} d */
  const walk = (d) => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (left.size === 0) return;
      const p = join(d, e.name);
      if (e.name === "node_modules") continue;
      let st;
      try {
        st = statSync(p); // follows the links of a --sdk=PATH install
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p);
      else if (/\.(m|c)?js$/.test(e.name)) {
        const text = readFileSync(p, "utf8");
        // Read as code does: a property (process.env.NAME) or a string
        // ("NAME", 'NAME'); a comment's `NAME` is no reading.
        for (const n of left) if (new RegExp(`\\.${n}\\b|["']${n}["']`).test(text)) left.delete(n);
      }
    }
  };
  const nm = join(dir, "node_modules");
  walk(join(nm, "workflow"));
  /** @type {string[]} */
  let scoped = [];
  try {
    scoped = readdirSync(join(nm, "@workflow"));
  } catch {}
  for (const p of scoped) walk(join(nm, "@workflow", p));
  return names.filter((n) => left.has(n));
}

/**
 * whyUnavailable says why the SDK in dir cannot serve world with switches
 * ("" when it can): 5.0 has no world-postgres; a switch this SDK never
 * reads would label cells that measure the default path as if they
 * measured the switch.
 * @param {string} dir
 * @param {string} world
 * @param {Record<string, string>} switches
 * @returns {string}
 */
export function whyUnavailable(dir, world, switches) {
  const version = pkgVersion(dir, "workflow");
  if (world === "postgres" && !existsSync(join(dir, "node_modules", "@workflow", "world-postgres", "package.json"))) {
    return `workflow ${version} has no world-postgres in ${dir} (the published 5.0 betas of @workflow/world-postgres fail: "Event id is not slot-numbered")`;
  }
  const unread = unreadSwitches(dir, Object.keys(switches));
  if (unread.length > 0) return `workflow ${version} does not read ${unread.join(", ")} (no file of its packages names it): the cells would measure its default`;
  return "";
}

/**
 * bundles finds workflow build's output: 4.x writes flow.js and step.js
 * (CommonJS), 5.0 flow.mjs only (steps run from the flow route); the
 * manifest is manifest.json, or manifest.debug.json on the 4.0.1 betas.
 * @param {string} dir
 * @returns {{ flow: string, step: string | undefined, manifest: any }}
 */
export function bundles(dir) {
  const base = join(dir, ".well-known", "workflow", "v1");
  /** @param {string} name */
  const pick = (name) => [".mjs", ".js"].map((ext) => join(base, name + ext)).find(existsSync);
  const flow = pick("flow");
  if (!flow) throw new Error(`${base}: no flow.js or flow.mjs: run \`npx workflow build\` in ${dir} (make engines does)`);
  const m = manifestFile(base);
  if (!m) throw new Error(`${base}: no manifest.json (nor the 4.0.1 betas' manifest.debug.json): run \`npx workflow build\` in ${dir}`);
  return { flow, step: pick("step"), manifest: JSON.parse(readFileSync(m, "utf8")) };
}

/**
 * workflowIds maps each scenario to its workflow's id in the build's
 * manifest.
 * @param {any} manifest
 * @returns {Record<string, string>}
 */
export function workflowIds(manifest) {
  /** @type {Record<string, string>} */
  const byName = {};
  for (const file of Object.values(manifest.workflows ?? {})) {
    for (const [name, w] of Object.entries(/** @type {Record<string, any>} */ (file))) byName[name] = w.workflowId;
  }
  /** @type {Record<string, string>} */
  const ids = {};
  for (const [s, { workflow }] of Object.entries(SCENARIOS)) {
    ids[s] = byName[workflow];
    if (!ids[s]) throw new Error(`manifest.json: no workflow for scenario ${s}`);
  }
  return ids;
}

/**
 * The SDK as the worker uses it.
 * @typedef {object} SDK
 * @property {string} version
 * @property {string} worldVersion
 * @property {any} api workflow/api: start(), resumeHook(), getRun()
 * @property {any} runtime workflow/runtime
 * @property {any} world the world: runs, events, close
 * @property {Record<string, string>} ids each scenario's workflow id
 * @property {(req: Request) => Promise<Response>} flow the flow route's handler
 * @property {((req: Request) => Promise<Response>) | null} step the step route's (4.x)
 * @property {boolean} runEvents whether the event log holds the run's own
 * events (run_started, run_completed, …): not on the 4.0.1 betas, whose
 * run lifecycle is only in the run's record (lib/history.mjs recordEvents)
 */

/**
 * hasRunEvents says whether the SDK in dir writes the run's own events to
 * its event log: whether @workflow/world's event schema names run_completed
 * (4.0.1 betas: workflow_completed, never written).
 * @param {string} dir
 * @returns {boolean}
 */
export function hasRunEvents(dir) {
  const f = join(dir, "node_modules", "@workflow", "world", "dist", "events.js");
  return !existsSync(f) || readFileSync(f, "utf8").includes("run_completed");
}

/**
 * openSDK loads the SDK from dir: start() and the world from its packages,
 * the flow (and 4.x step) handlers from its build.
 * @param {string} dir
 * @returns {Promise<SDK>}
 */
export async function openSDK(dir) {
  const req = createRequire(join(dir, "package.json"));
  /** @param {string} file @returns {Promise<any>} */
  const load = async (file) => (file.endsWith(".mjs") ? import(pathToFileURL(file).href) : req(file));
  const b = bundles(dir);
  const api = await import(pathToFileURL(req.resolve("workflow/api")).href);
  const runtime = await import(pathToFileURL(req.resolve("workflow/runtime")).href);
  const flow = await load(b.flow);
  const step = b.step ? await load(b.step) : null;
  const world = await runtime.getWorld();
  await world.start?.();
  const worldPkg = ["local", "embedded"].includes(String(process.env.WORKFLOW_TARGET_WORLD)) ? "@workflow/world-local" : String(process.env.WORKFLOW_TARGET_WORLD);
  return {
    version: pkgVersion(dir, "workflow"),
    worldVersion: pkgVersion(dir, worldPkg),
    api,
    runtime,
    world,
    ids: workflowIds(b.manifest),
    flow: flow.POST,
    step: step?.POST ?? null,
    runEvents: hasRunEvents(dir),
  };
}
