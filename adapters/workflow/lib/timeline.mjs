// @ts-check
// Run logs served over the durabench target protocol: each run's events in
// the order the adapter recorded them (seq 1, 2, 3, …), its status, its
// anomalies, and the long polls waiting on it. docs/target-protocol.md is the
// specification; this is the Node counterpart of package target's Server.

/** @typedef {import("./types.mjs").TimelineEvent} TimelineEvent */
/** @typedef {import("./types.mjs").Anomaly} Anomaly */
/** @typedef {import("./types.mjs").Cost} Cost */

/**
 * A timeline answer (GET /v1/runs/{run}/timeline).
 * @typedef {object} Timeline
 * @property {string} run
 * @property {string} status
 * @property {TimelineEvent[]} events
 * @property {string} [error]
 * @property {Anomaly[]} [anomalies]
 * @property {Cost} [adapter]
 */

// Batch: a poll that has new events waits this long for more (not for a
// waiting hook or a finished run), as package target's server does.
export const BATCH_MS = 10;
// MAX_WAIT_MS bounds a long poll.
export const MAX_WAIT_MS = 30_000;
// KEEP_MS: a finished run's timeline is kept until durabench deletes it
// (DELETE /v1/runs/{run}) or this long after it finished.
export const KEEP_MS = 10 * 60_000;

export class RunLog {
  /** @param {string} run */
  constructor(run) {
    this.run = run;
    /** @type {TimelineEvent[]} */
    this.events = [];
    /** @type {"running" | "completed" | "failed"} */
    this.status = "running";
    this.error = "";
    /** @type {Anomaly[]} */
    this.anomalies = [];
    /** @type {Cost | null} what the adapter spent on the run, once it is over */
    this.adapter = null;
    this.finishedAt = 0;
    /** @type {Set<() => void>} */
    this.waiters = new Set();
  }

  /**
   * add appends an event (seq assigned here) and wakes the polls.
   * @param {TimelineEvent} ev
   */
  add(ev) {
    this.events.push({ seq: this.events.length + 1, ...ev });
    this.wake();
  }

  /**
   * finish makes the run terminal (once); its terminal event must be in
   * the log already: a run is over when its terminal event is readable.
   * @param {boolean} failed
   * @param {string} [msg]
   */
  finish(failed, msg) {
    if (this.status !== "running") return;
    this.status = failed ? "failed" : "completed";
    this.error = failed ? msg || "run failed" : "";
    this.finishedAt = Date.now();
    this.wake();
  }

  wake() {
    for (const w of this.waiters) w();
    this.waiters.clear();
  }

  /**
   * @param {number} after
   * @returns {Timeline}
   */
  answer(after) {
    /** @type {Timeline} */
    const tl = { run: this.run, status: this.status, events: this.events.slice(Math.max(after, 0)) };
    if (this.error) tl.error = this.error;
    if (this.anomalies.length) tl.anomalies = this.anomalies;
    // What the adapter itself spent on the run (its host around the SDK's
    // handlers, its reads of the event log): durabench ignores it; the
    // adapter's overhead measurement (README) reads it.
    if (this.adapter) tl.adapter = this.adapter;
    return tl;
  }

  /**
   * poll answers a timeline request: at once when there are events after
   * `after` (after BATCH_MS more for a running run without a waiting hook),
   * when the run is over, or when waitMs ends.
   * @param {number} after
   * @param {number} waitMs
   * @param {AbortSignal} [signal]
   * @returns {Promise<Timeline>}
   */
  poll(after, waitMs, signal) {
    return new Promise((resolve) => {
      /** @type {ReturnType<typeof setTimeout> | undefined} */
      let batch;
      /** @type {ReturnType<typeof setTimeout> | undefined} */
      let timer;
      const done = () => {
        clearTimeout(timer);
        clearTimeout(batch);
        this.waiters.delete(check);
        signal?.removeEventListener("abort", done);
        resolve(this.answer(after));
      };
      const check = () => {
        const fresh = this.events.length > after;
        if (this.status !== "running" || waitMs <= 0) return done();
        if (fresh) {
          const urgent = this.events.slice(Math.max(after, 0)).some((e) => e.kind === "hook_waiting");
          if (urgent) return done();
          if (!batch) batch = setTimeout(done, BATCH_MS);
        }
        this.waiters.add(check);
      };
      timer = setTimeout(done, Math.max(0, waitMs));
      signal?.addEventListener("abort", done);
      check();
    });
  }
}

/**
 * parseWait reads a Go duration (`5s`, `250ms`, `1m30s`) into ms, bounded
 * by MAX_WAIT_MS; anything else is 0 (answer at once).
 * @param {string} s
 * @returns {number}
 */
export function parseWait(s) {
  if (!s) return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  /** @type {Record<string, number>} */
  const unit = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6 };
  let total = 0;
  let m;
  let pos = 0;
  while ((m = re.exec(s)) !== null) {
    total += Number(m[1]) * unit[m[2]];
    pos = re.lastIndex;
  }
  if (pos !== s.length) return 0;
  return Math.min(total, MAX_WAIT_MS);
}
