// @ts-check
// The SDK's world, set up on the main thread before the worker loads the
// SDK (the worker inherits the environment): world-local in a fresh data
// dir for every cell, or world-postgres on --pg-url or a throwaway server
// (lib/pgserver.mjs) with the schema made by the package's own bootstrap
// bin.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { startPostgres } from "./pgserver.mjs";

/** @typedef {import("./types.mjs").Flags} Flags */
/** @typedef {import("./process.mjs").Cleanups} Cleanups */

/**
 * A world set up: newCell gives the next cell a world of its own where the
 * world keeps its data in files (world-local slows down as its dir fills).
 * @typedef {{ newCell: () => void }} World
 */

/**
 * setUpWorld sets the world of flags up for the SDK in dir; cleanups
 * removes it.
 * @param {Pick<Flags, "world" | "pgURL" | "pgNoFsync">} flags
 * @param {string} dir
 * @param {Cleanups} cleanups
 * @returns {Promise<World>}
 */
export async function setUpWorld(flags, dir, cleanups) {
  if (flags.world === "local") return localWorld(cleanups, localNames(dir));
  let pgURL = flags.pgURL;
  if (!pgURL) {
    const pg = await startPostgres({ fsync: !flags.pgNoFsync });
    cleanups.push(() => pg.stop());
    pgURL = pg.url;
  }
  process.env.WORKFLOW_TARGET_WORLD = "@workflow/world-postgres";
  process.env.WORKFLOW_POSTGRES_URL = pgURL;
  bootstrapPostgres(dir, pgURL);
  return { newCell() {} };
}

/**
 * The names world-local goes by: its WORKFLOW_TARGET_WORLD and the variable
 * of its data dir.
 * @typedef {{ target: string, dataDir: string }} LocalNames
 */

/** @type {LocalNames} */
export const LOCAL = { target: "local", dataDir: "WORKFLOW_LOCAL_DATA_DIR" };

/** @type {LocalNames} the 4.0.1 betas' name for world-local */
export const EMBEDDED = { target: "embedded", dataDir: "WORKFLOW_EMBEDDED_DATA_DIR" };

/**
 * localNames says which names the SDK in dir gives world-local: the 4.0.1
 * betas (world-local 5.0.0-beta.8 with core 4.0.1-beta.12, and earlier)
 * call it the "embedded" world and read WORKFLOW_EMBEDDED_DATA_DIR and
 * WORKFLOW_EMBEDDED_BASE_URL; later ones "local" and WORKFLOW_LOCAL_*. Told
 * by the variable its installed world-local reads (dist/config.js).
 * @param {string} dir
 * @returns {LocalNames}
 */
export function localNames(dir) {
  const config = join(dir, "node_modules", "@workflow", "world-local", "dist", "config.js");
  if (!existsSync(config)) return LOCAL;
  return readFileSync(config, "utf8").includes("WORKFLOW_EMBEDDED_DATA_DIR") ? EMBEDDED : LOCAL;
}

/**
 * localWorld is world-local under a new temporary directory, cell-1 its
 * first data dir; each newCell moves to the next (cell-2, …) and removes
 * the last.
 * @param {Cleanups} cleanups
 * @param {LocalNames} [names]
 * @returns {World}
 */
export function localWorld(cleanups, names = LOCAL) {
  const root = mkdtempSync(join(tmpdir(), "durabench-workflow-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  let cells = 1;
  process.env.WORKFLOW_TARGET_WORLD = names.target;
  process.env[names.dataDir] = join(root, "cell-1");
  return {
    newCell() {
      const old = String(process.env[names.dataDir]);
      cells++;
      process.env[names.dataDir] = join(root, `cell-${cells}`);
      rm(old, { recursive: true, force: true }).catch(() => {});
    },
  };
}

/**
 * bootstrapPostgres creates world-postgres' schema with the package's own
 * bootstrap bin.
 * @param {string} dir
 * @param {string} pgURL
 */
export function bootstrapPostgres(dir, pgURL) {
  const pkgFile = join(dir, "node_modules", "@workflow", "world-postgres", "package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  const bin = pkg.bin?.bootstrap;
  if (!bin) throw new Error(`${pkgFile}: no bootstrap bin`);
  const r = spawnSync(process.execPath, [join(dirname(pkgFile), bin)], {
    env: { ...process.env, WORKFLOW_POSTGRES_URL: pgURL, DATABASE_URL: pgURL },
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`world-postgres bootstrap: ${(r.stderr || r.stdout || "").trim().split("\n").slice(-3).join(" ")}`);
}
