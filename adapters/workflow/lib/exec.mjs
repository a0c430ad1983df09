// @ts-check
// The commands a build runs, its lock, and what a build under way leaves
// to remove if the adapter is stopped mid-build (lib/build.mjs).
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// What is under way, for abortBuilds: the commands running, the
// temporary directory and the lock held.
/** @type {Set<import("node:child_process").ChildProcess>} */
const children = new Set();
/** @type {Set<string>} */
export const leftovers = new Set();

/**
 * abortBuilds stops the commands under way and removes the temporary
 * directory and the lock of a build under way (the adapter stopped
 * mid-build: SIGTERM, SIGINT). Synchronous: it runs as the process exits.
 */
export function abortBuilds() {
  for (const c of children) c.kill("SIGTERM");
  for (const d of leftovers) rmSync(d, { recursive: true, force: true });
}

/**
 * run runs a command in cwd with its output kept (never on the adapter's
 * stdout, whose first line is its URL); a failure is an error with the
 * output's tail.
 * @param {string} cwd
 * @param {string} cmd
 * @param {string[]} args
 * @param {Record<string, string>} [env] added to the environment
 * @returns {Promise<string>}
 */
export function run(cwd, cmd, args, env = {}) {
  return new Promise((ok, fail) => {
    const p = spawn(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, npm_config_update_notifier: "false", ...env } });
    children.add(p);
    let out = "";
    p.stdout.on("data", (b) => (out += b));
    p.stderr.on("data", (b) => (out += b));
    p.on("error", fail);
    p.on("close", (code) => (children.delete(p), code === 0 ? ok(out) : fail(new Error(`${cmd} ${args.join(" ")} in ${cwd}: exit ${code}\n${out.trim().split("\n").slice(-15).join("\n")}`))));
  });
}

/**
 * alive reports whether process pid exists.
 * @param {number} pid
 */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return /** @type {NodeJS.ErrnoException} */ (e).code === "EPERM";
  }
}

/**
 * locked runs fn holding the lock of one build (a directory made with
 * mkdir, atomic, with its holder's pid): a second adapter building the
 * same hash waits for the first, then finds its build. A lock whose holder
 * died is taken over.
 * @template T
 * @param {string} lock
 * @param {() => Promise<T>} fn
 * @param {(msg: string) => void} log
 * @returns {Promise<T>}
 */
export async function locked(lock, fn, log) {
  let said = false;
  for (;;) {
    try {
      mkdirSync(lock);
      leftovers.add(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch (e) {
      if (/** @type {NodeJS.ErrnoException} */ (e).code !== "EEXIST") throw e;
    }
    let pid = 0;
    let age = 0;
    try {
      age = Date.now() - statSync(lock).mtimeMs;
      pid = Number(readFileSync(join(lock, "pid"), "utf8")) || 0;
    } catch {
      // gone (its holder is done: try again), or its pid not written yet
    }
    // A holder that died, or that died before it wrote its pid.
    if ((pid && !alive(pid)) || (!pid && age > 60_000)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (!said) log(`waiting for the build under way (${lock}, pid ${pid || "?"})`);
    said = true;
    await new Promise((r) => setTimeout(r, 500));
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
    leftovers.delete(lock);
  }
}
