// @ts-check
// --sdk CHECKOUT: a checkout of the SDK's monorepo (pnpm-workspace.yaml,
// packages/NAME/package.json) whose packages are built (`pnpm install &&
// pnpm build`) is packed into tarballs, which lib/build.mjs then builds
// from as from a directory of tarballs. Packing is pnpm's: `pnpm pack`
// rewrites the `workspace:` and `catalog:` specifiers of the packages'
// dependencies into the versions they stand for, which npm could not
// install. pnpm is the checkout's own (`npx pnpm@VERSION`, VERSION from
// its package.json's packageManager), else one on PATH; without either
// the packages cannot be packed here, and the error says to pack them
// with pnpm elsewhere (`pnpm -r pack --pack-destination DIR`) and give
// that directory of tarballs instead. Only the SDK's packages a build
// needs are packed: the workspace packages ENTRIES and @workflow/core
// depend on, directly or not.
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BuildError, ENTRIES, run } from "./build.mjs";

/**
 * A workspace package: its directory under packages/, its package.json.
 * @typedef {{ dir: string, manifest: any }} WorkspacePackage
 */

/**
 * workspacePackages reads packages/*\/package.json of a checkout, by name.
 * @param {string} dir
 * @returns {Map<string, WorkspacePackage>}
 */
export function workspacePackages(dir) {
  /** @type {Map<string, WorkspacePackage>} */
  const byName = new Map();
  for (const d of readdirSync(join(dir, "packages")).sort()) {
    const f = join(dir, "packages", d, "package.json");
    if (!existsSync(f)) continue;
    const manifest = JSON.parse(readFileSync(f, "utf8"));
    if (typeof manifest.name === "string") byName.set(manifest.name, { dir: join(dir, "packages", d), manifest });
  }
  return byName;
}

/**
 * needed is the names of the workspace's packages a build needs: ENTRIES
 * and @workflow/core, and every workspace package they depend on
 * (dependencies, optional and peer dependencies; not devDependencies),
 * sorted. Private packages are never published: left out.
 * @param {Map<string, WorkspacePackage>} pkgs
 * @returns {string[]}
 */
export function needed(pkgs) {
  const seen = new Set();
  const todo = [...ENTRIES, "@workflow/core"].filter((n) => pkgs.has(n));
  while (todo.length) {
    const n = /** @type {string} */ (todo.pop());
    const p = pkgs.get(n);
    if (seen.has(n) || !p || p.manifest.private) continue;
    seen.add(n);
    const m = p.manifest;
    for (const deps of [m.dependencies, m.optionalDependencies, m.peerDependencies]) for (const d of Object.keys(deps ?? {})) if (pkgs.has(d)) todo.push(d);
  }
  return [...seen].sort();
}

/**
 * unbuilt names a package whose entry files (main, bin) are missing: a
 * checkout whose packages were not built ("" when every one is there).
 * @param {WorkspacePackage} p
 * @returns {string}
 */
export function unbuilt(p) {
  const m = p.manifest;
  const bins = typeof m.bin === "string" ? [m.bin] : Object.values(m.bin ?? {});
  for (const f of [m.main, ...bins]) if (typeof f === "string" && !existsSync(join(p.dir, f))) return f;
  return "";
}

/**
 * pnpmCommand is how pnpm is run: the checkout's version through npx
 * (packageManager "pnpm@X"), else pnpm on PATH; null when neither runs.
 * @param {string} dir
 * @param {string[]} why what failed, added to
 * @returns {Promise<{ cmd: string, args: string[], why: string } | null>}
 */
async function pnpmCommand(dir, why) {
  let pm = "";
  try {
    pm = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).packageManager ?? "";
  } catch {}
  const m = /^pnpm@([^+\s]+)/.exec(pm);
  /** @type {{ cmd: string, args: string[], why: string }[]} */
  const tries = [];
  if (m) tries.push({ cmd: "npx", args: ["--yes", `pnpm@${m[1]}`], why: `npx pnpm@${m[1]} (packageManager)` });
  tries.push({ cmd: "pnpm", args: [], why: "pnpm on PATH" });
  for (const t of tries) {
    try {
      await run(dir, t.cmd, [...t.args, "--version"]);
      return t;
    } catch (e) {
      why.push(`${t.why}: ${/** @type {Error} */ (e).message.split("\n")[0]}`);
    }
  }
  return null;
}

/**
 * packCheckout packs the packages of the checkout at dir a build needs
 * into out (made), and returns their names.
 * @param {string} arg --sdk as given
 * @param {string} dir
 * @param {string} out
 * @param {(msg: string) => void} log
 * @returns {Promise<string[]>}
 */
export async function packCheckout(arg, dir, out, log) {
  const pkgs = workspacePackages(dir);
  const names = needed(pkgs);
  if (!names.includes("workflow") || !names.includes("@workflow/core")) {
    throw new Error(`--sdk ${arg}: the checkout ${dir} has no package workflow or @workflow/core under packages/ (not the Workflow SDK's monorepo?)`);
  }
  for (const n of names) {
    const f = unbuilt(/** @type {WorkspacePackage} */ (pkgs.get(n)));
    if (f) throw new Error(`--sdk ${arg}: ${n} in ${dir} is not built (no ${f}): run pnpm install && pnpm build there first`);
  }
  /** @type {string[]} */
  const why = [];
  const pnpm = await pnpmCommand(dir, why);
  if (!pnpm) {
    throw new Error(
      `--sdk ${arg}: packing the checkout ${dir} needs pnpm (its pack rewrites the workspace: and catalog: dependencies npm cannot install), and none runs (${why.join("; ")}): ` +
        `pack the packages with pnpm where it runs (pnpm -r pack --pack-destination DIR) and give --sdk DIR, the directory of tarballs`,
    );
  }
  mkdirSync(out, { recursive: true });
  log(`packing ${names.length} packages of ${dir} with ${pnpm.why}`);
  // pnpm 9+ packs recursively with filters in one call; one package at a
  // time otherwise. Its lifecycle scripts are off: the packages are built.
  const env = { npm_config_ignore_scripts: "true" };
  const filters = names.flatMap((n) => ["--filter", n]);
  try {
    await run(dir, pnpm.cmd, [...pnpm.args, "-r", ...filters, "pack", "--pack-destination", out], env);
  } catch {
    try {
      for (const n of names) await run(/** @type {WorkspacePackage} */ (pkgs.get(n)).dir, pnpm.cmd, [...pnpm.args, "pack", "--pack-destination", out], env);
    } catch (e) {
      throw new BuildError(`packing the checkout ${dir}: ${/** @type {Error} */ (e).message}`);
    }
  }
  return names;
}
