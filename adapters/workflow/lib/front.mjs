// @ts-check
// The protocol front, on the main thread: the runs' timelines and long
// polls, the resume ids' dedupe, the clock; it keeps each run's timeline
// until durabench DELETEs it (a running run's DELETE is 409) or KEEP_MS
// after it finished. The SDK runs on a worker thread (lib/worker.mjs), a
// new one for every cell: the front asks it to start and resume runs and
// hears the runs' events from it.
import { abs, now, toClock } from "./clock.mjs";
import { warn } from "./process.mjs";
import { KEEP_MS, RunLog } from "./timeline.mjs";

/** @typedef {import("node:worker_threads").Worker} Worker */
/** @typedef {import("./types.mjs").FromWorker} FromWorker */
/** @typedef {import("./types.mjs").ToWorker} ToWorker */
/** @typedef {import("./types.mjs").Reply} Reply */
/** @typedef {import("./protocol.mjs").Answer} Answer */
/** @typedef {import("./protocol.mjs").Endpoints} Endpoints */
/** @typedef {import("./protocol.mjs").Start} Start */
/** @typedef {import("./world.mjs").World} World */

// ABANDON_MS: a running run whose timeline durabench has not asked for in
// this long is one it stopped following (cut by the cell timeout): the
// adapter cancels it in the SDK.
export const ABANDON_MS = Number(process.env.DURABENCH_WORKFLOW_ABANDON_MS) || 30_000;

// Followed is a run as the front follows it: its timeline, who polls it,
// its resumes.
export class Followed {
  /** @param {string} run */
  constructor(run) {
    this.log = new RunLog(run);
    this.polling = 0; // timeline requests waiting on it
    this.lastPoll = Date.now(); // when the last one was answered (or the run started)
    this.starting = true; // its start is under way (answered by its call)
    this.abandoned = false;
    /** @type {Map<string, Promise<void>>} resume id -> the resume */
    this.resumes = new Map();
  }
}

/**
 * A worker thread as the front keeps it.
 * @typedef {Worker & { stopping?: boolean, lastError?: Error }} SDKWorker
 */

export class Front {
  /**
   * @param {() => Worker} spawnWorker starts an SDK worker thread
   * @param {World} world gives every cell a world of its own
   */
  constructor(spawnWorker, world) {
    this.spawnWorker = spawnWorker;
    this.world = world;
    /** @type {Map<string, Followed>} durabench run id -> the run */
    this.runs = new Map();
    /** @type {Map<number, (r: Reply) => void>} call id -> its answer */
    this.calls = new Map();
    this.next = 1;
    /** @type {SDKWorker} */
    this.worker = /** @type {any} */ (undefined);
    /** @type {string | null} why the worker is gone */
    this.dead = null;
    /** @type {string | undefined} */
    this.cellKey = undefined;
    this.ready = this.spawn();
    this.cellReady = this.ready;
    this.sweeper = setInterval(() => this.expire(), 30_000);
    this.sweeper.unref();
    this.watcher = setInterval(() => this.abandoned(), Math.min(5_000, ABANDON_MS));
    this.watcher.unref();
  }

  /**
   * endpoints is what the protocol's requests are answered by.
   * @param {unknown} info the first worker's /v1/info
   * @returns {Endpoints}
   */
  endpoints(info) {
    return {
      info: () => info,
      start: (s) => this.start(s),
      timeline: (run, after, waitMs, signal) => this.timeline(run, after, waitMs, signal),
      remove: (run) => this.remove(run),
      resume: (run, token, resumeId, payload) => this.resume(run, token, resumeId, payload),
    };
  }

  // abandoned cancels in the SDK the running runs durabench stopped
  // following (none of their timelines asked for in ABANDON_MS: durabench
  // polls a run it follows at least every 10 s): a run cut by the cell
  // timeout would otherwise go on competing with the next runs of the
  // same cell — a warm-up run cut at the timeout with the measured runs
  // after it. Its timeline ends failed ("abandoned").
  abandoned() {
    const cut = Date.now() - ABANDON_MS;
    for (const [run, f] of this.runs) {
      if (f.log.status !== "running" || f.polling > 0 || f.lastPoll > cut || f.abandoned) continue;
      f.abandoned = true;
      warn(`run ${run} not followed for ${ABANDON_MS / 1000} s: cancelled`);
      this.post({ t: "abandon", run });
    }
  }

  /** @param {ToWorker & { id?: number }} m */
  post(m) {
    this.worker.postMessage(m);
  }

  /**
   * spawn starts the SDK's worker thread; it resolves with its info once
   * the SDK is loaded. A worker that exits when nobody stopped it (out of
   * memory, a crash) fails the runs it held with why, at once.
   * @returns {Promise<unknown>}
   */
  spawn() {
    /** @type {SDKWorker} */
    const worker = this.spawnWorker();
    this.worker = worker;
    this.dead = null;
    worker.on("message", (m) => worker === this.worker && this.message(m));
    worker.on("error", (e) => {
      warn(`SDK worker: ${e.stack || e.message}`);
      worker.lastError = e;
    });
    worker.once("exit", (code) => {
      if (worker !== this.worker || worker.stopping) return;
      this.dead = `the SDK's worker thread exited (code ${code}${worker.lastError ? `: ${worker.lastError.message}` : ""})`;
      warn(this.dead);
      this.failRunning(this.dead);
    });
    return new Promise((res, rej) => {
      worker.once("message", (m) => (m.t === "ready" ? res(m.info) : rej(new Error(`the SDK's worker said ${m.t} first`))));
      worker.once("error", rej);
      worker.once("exit", (code) => rej(new Error(`the SDK's worker exited (${code})`)));
    });
  }

  /**
   * failRunning ends every running run's timeline failed, with why, and
   * answers the calls waiting on the worker.
   * @param {string} why
   */
  failRunning(why) {
    const at = now();
    for (const { log, starting } of this.runs.values()) {
      // A run whose start is still under way is answered by its call.
      if (log.status !== "running" || starting) continue;
      log.add({ kind: "run_failed", at, source: "worker", error: why });
      log.finish(true, why);
    }
    for (const res of this.calls.values()) res({ code: 500, error: why });
    this.calls.clear();
  }

  // stopWorker stops the current worker: it closes what it serves and
  // exits on its own, or is terminated after 10 s.
  async stopWorker() {
    const worker = this.worker;
    worker.stopping = true;
    const exited = new Promise((r) => worker.once("exit", r));
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    await Promise.race([this.call({ t: "close" }).then(() => exited), new Promise((r) => (timer = setTimeout(r, 10_000)))]);
    clearTimeout(timer);
    await worker.terminate();
  }

  /**
   * newCell gives a start of another scenario or other options than the
   * last one (a new cell: durabench runs cells one after another) a new
   * SDK: the old worker is stopped with whatever it was still doing (runs
   * cut by the last cell's timeout, their queued deliveries: minutes of
   * work after a 256-branch fan-out on 4.8.9 · local), and a new world
   * (world-local: a new data dir). A cell's first start waits for it
   * (about a second: a warm-up run absorbs it).
   * @param {string} key the cell: its scenario and options
   * @returns {Promise<unknown>}
   */
  newCell(key) {
    if (this.cellKey === undefined || this.cellKey === key) {
      this.cellKey = key;
      return this.cellReady;
    }
    this.cellKey = key;
    this.cellReady = this.cellReady.then(async () => {
      this.failRunning("cut: the next cell started; the run was stopped with the SDK that ran it");
      await this.stopWorker();
      this.world.newCell();
      return this.spawn();
    });
    return this.cellReady;
  }

  /** @param {FromWorker} m */
  message(m) {
    switch (m.t) {
      case "event": {
        const log = this.runs.get(m.run)?.log;
        if (log) log.add({ ...m.ev, at: toClock(m.ev.at), ...(m.ev.written !== undefined ? { written: toClock(m.ev.written) } : {}) });
        break;
      }
      case "spans": {
        // The run's spans (lib/spans.mjs), before its terminal event.
        const log = this.runs.get(m.run)?.log;
        if (!log) break;
        for (const sp of m.spans) {
          const at = toClock(sp.at);
          const end = Math.max(toClock(sp.end), at);
          log.add({ ...sp, at, end, ...(sp.wait !== undefined ? { wait: Math.min(sp.wait, end - at) } : {}) });
        }
        break;
      }
      case "finish": {
        const log = this.runs.get(m.run)?.log;
        if (!log) break;
        log.anomalies = m.anomalies ?? [];
        log.adapter = m.adapter;
        if (m.terminal) log.add({ ...m.terminal, at: toClock(m.terminal.at) });
        log.finish(m.failed, m.msg);
        break;
      }
      case "reply":
        this.calls.get(m.id)?.(m);
        this.calls.delete(m.id);
        break;
    }
  }

  /**
   * call asks the worker and waits for its reply.
   * @param {ToWorker} msg
   * @returns {Promise<Reply>}
   */
  call(msg) {
    if (this.dead) return Promise.resolve({ code: 500, error: this.dead });
    const id = this.next++;
    return new Promise((res) => {
      this.calls.set(id, res);
      this.post({ ...msg, id });
    });
  }

  async close() {
    clearInterval(this.sweeper);
    clearInterval(this.watcher);
    for (const f of this.runs.values()) f.log.wake();
    await this.cellReady.catch(() => {});
    await this.stopWorker();
  }

  // expire forgets the runs finished KEEP_MS ago.
  expire() {
    const cut = Date.now() - KEEP_MS;
    for (const [run, { log }] of this.runs) {
      if (log.status !== "running" && log.finishedAt < cut) this.runs.delete(run);
    }
  }

  /**
   * @param {Start} s
   * @returns {Promise<Answer>}
   */
  async start({ run, scenario, options, spans, recv = abs(performance.now()) }) {
    // recv, when the start came in: its task (the run's start,
    // lib/otel.mjs) begins there, the cell's new SDK and the worker's
    // turn included.
    if (this.runs.has(run)) return [409, { error: `run ${run} exists`, run }];
    const f = new Followed(run);
    this.runs.set(run, f);
    /** @type {Reply} */
    let r;
    try {
      await this.newCell(JSON.stringify([scenario, Object.entries(options).sort()]));
      r = await this.call({ t: "start", run, scenario, options, recv, ...(spans ? { spans } : {}) });
    } catch (e) {
      r = { code: 500, error: `starting the SDK for a new cell: ${/** @type {Error} */ (e).message}` };
    }
    f.starting = false;
    if (r.code !== 202) {
      this.runs.delete(run);
      return [r.code ?? 500, { error: r.error, run }];
    }
    return [202, { run, accepted: now(), sdk_run: r.sdkRun }];
  }

  /**
   * timeline answers a (long) poll of a run's timeline.
   * @param {string} run
   * @param {number} after
   * @param {number} waitMs
   * @param {AbortSignal} signal
   * @returns {Promise<Answer>}
   */
  async timeline(run, after, waitMs, signal) {
    const f = this.runs.get(run);
    if (!f) return [404, { error: `no run ${run}` }];
    f.polling++;
    try {
      return [200, await f.log.poll(after, waitMs, signal)];
    } finally {
      f.polling--;
      f.lastPoll = Date.now();
    }
  }

  /**
   * remove forgets a finished run.
   * @param {string} run
   * @returns {Answer}
   */
  remove(run) {
    const f = this.runs.get(run);
    if (!f) return [404, { error: `no run ${run}` }];
    if (f.log.status === "running") return [409, { error: `run ${run} is running` }];
    this.runs.delete(run);
    return [200, { run }];
  }

  /**
   * resume resumes a run's hook once per resume id (a failed resume may be
   * retried with its id).
   * @param {string} run
   * @param {string} token
   * @param {string} resumeId
   * @param {unknown} payload
   * @returns {Promise<Answer>}
   */
  async resume(run, token, resumeId, payload) {
    const f = this.runs.get(run);
    if (!f) return [404, { error: `no run ${run}` }];
    let p = f.resumes.get(resumeId);
    if (!p) {
      // When the resume came in: its task (lib/otel.mjs) begins there.
      p = this.call({ t: "resume", run, token, payload, recv: abs(performance.now()) }).then((r) => {
        if (r.error) throw new Error(r.error);
      });
      f.resumes.set(resumeId, p);
      p.catch(() => f.resumes.delete(resumeId));
    }
    try {
      await p;
    } catch (e) {
      return [500, { error: `resume ${token}: ${/** @type {Error} */ (e).message}`, run }];
    }
    return [202, { run }];
  }
}
