// @ts-check
// The adapter's process: its name in messages, how it fails, what it
// removes when it stops, and what stops it (SIGTERM, SIGINT, its parent
// gone).

export const NAME = "durabench-target-workflow";

/**
 * warn writes a line to stderr, prefixed with the adapter's name.
 * @param {string} msg
 */
export function warn(msg) {
  process.stderr.write(`${NAME}: ${msg}\n`);
}

/**
 * fail writes msg and exits with code.
 * @param {number} code
 * @param {string} msg
 * @returns {never}
 */
export function fail(code, msg) {
  warn(msg);
  process.exit(code);
}

/** @typedef {() => unknown} Cleanup */

// Cleanups is what the adapter removes when it stops (a data dir, a
// PostgreSQL server, its servers), the last added first.
export class Cleanups {
  constructor() {
    /** @type {Cleanup[]} */
    this.list = [];
  }

  /** @param {Cleanup} fn */
  push(fn) {
    this.list.push(fn);
  }

  // run runs them all, each once; a failing one is reported, the rest
  // run regardless.
  async run() {
    while (this.list.length) {
      const fn = /** @type {Cleanup} */ (this.list.pop());
      try {
        await fn();
      } catch (e) {
        warn(`cleanup: ${/** @type {Error} */ (e).message}`);
      }
    }
  }
}

/**
 * stopOn stops the adapter (cleanups, then exit 0) on SIGTERM or SIGINT,
 * and when its parent is gone.
 * @param {Cleanups} cleanups
 */
export function stopOn(cleanups) {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    // The clean-up has 20 s; then the process exits regardless.
    setTimeout(() => process.exit(0), 20_000).unref();
    await cleanups.run();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // An adapter whose parent died (durabench killed, or a lost SIGTERM)
  // stops rather than keep its engine and data dir for good.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 1000).unref();
}
