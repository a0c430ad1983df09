// @ts-check
// The SDK's side of the adapter, on the worker thread: it hosts the SDK's
// routes (world-local's queue and world-postgres' worker deliver there),
// starts runs with start(), reads and checks their event logs, and sends
// their spans when asked (lib/otel.mjs).
import { AsyncLocalStorage } from "node:async_hooks";
import { abs } from "./clock.mjs";
import { label } from "./flags.mjs";
import { checkHistory, readEvents, recordEvents } from "./history.mjs";
import { headersOf, notFound, pathOf, readBody, reply, serve } from "./http.mjs";
import { plan, scenariosInfo, Unsupported } from "./options.mjs";
import { INFO } from "./protocol.mjs";
import { warn } from "./process.mjs";
import { LogSink, messageRun, Run } from "./runs.mjs";
import { AT, MESSAGE, RunSpans, TASK } from "./spans.mjs";
import { readStream } from "./stream.mjs";

/** @typedef {import("node:http").IncomingMessage} IncomingMessage */
/** @typedef {import("node:http").ServerResponse} ServerResponse */
/** @typedef {import("./types.mjs").Flags} Flags */
/** @typedef {import("./types.mjs").FromWorker} FromWorker */
/** @typedef {import("./types.mjs").Reply} Reply */
/** @typedef {import("./types.mjs").Anomaly} Anomaly */
/** @typedef {import("./load.mjs").SDK} SDK */
/** @typedef {import("./otel.mjs").Tracing} Tracing */

// READ_GAP_MS: a run's event log is read at most this often (each flow or
// step delivery asks for a read; they are coalesced), and every
// FALLBACK_MS without one. Reading delays when durabench hears of an event,
// never its timestamp (the log's own).
const READ_GAP_MS = Number(process.env.DURABENCH_WORKFLOW_READ_GAP_MS) || 50;
const FALLBACK_MS = 1000;
// FULL_EVERY_MS: a running run's whole event log is read this often at
// least (between, a read is its status only; see read).
const FULL_EVERY_MS = 5000;
// SETTLE_MS: once a terminal event is readable, the log is read once more
// this much later before the run is reported over, so duplicate terminal
// events written by concurrent deliveries are in the check.
const SETTLE_MS = 250;
// READER_GRACE_MS: how long after a stream run's terminal event the
// adapter waits for its reader to finish before it reports the run (with
// an anomaly when the reader did not).
const READER_GRACE_MS = 10_000;
// ROUTES is where the SDK's handlers are served.
const ROUTES = "/.well-known/workflow/v1/";

// route tells a step body which delivery runs it (its route and queue): a
// step run by a delivery of the workflow queue ran inline, in the
// orchestrator's own task (5.0), with no queue hop before it.
/** @type {AsyncLocalStorage<{ name: string, queue: string }>} */
const route = new AsyncLocalStorage();

export class Adapter {
  /**
   * @param {SDK} sdk
   * @param {Flags} flags
   * @param {Record<string, string>} switches the SDK's switches (--env)
   * @param {(m: FromWorker) => void} post tells the main thread
   * @param {string} [cwd] where an option's relative path is (the adapter's starting directory)
   * @param {Tracing | null} [tracing] the SDK's spans, collected per run (lib/otel.mjs)
   */
  constructor(sdk, flags, switches, post, cwd = process.cwd(), tracing = null) {
    this.sdk = sdk;
    this.flags = flags;
    this.switches = switches;
    this.post = post;
    this.cwd = cwd;
    this.tracing = tracing;
    /** @type {Map<string, Run>} durabench run id -> the run, while it runs */
    this.runs = new Map();
    /** @type {Map<string, string>} SDK run id -> durabench run id */
    this.bySdkRun = new Map();
    this.closed = false;
    // The step bodies (workflows/bench.js) call these, in this thread.
    /** @type {any} */ (globalThis).__durabench = {
      /** @type {Adapter["stepBody"]} */
      stepBody: (...a) => this.stepBody(...a),
      /** @type {Adapter["chunkWritten"]} */
      chunkWritten: (...a) => this.chunkWritten(...a),
    };
    this.fallback = setInterval(() => {
      for (const st of this.runs.values()) this.schedule(st);
    }, FALLBACK_MS);
    this.fallback.unref();
  }

  info() {
    const { world, maxBranches, maxSteps, maxChunks } = this.flags;
    return {
      ...INFO,
      version: this.sdk.version,
      label: label(this.sdk.version, this.switches, world),
      clock: "monotonic ns since the adapter started (performance.now()); event-log times converted from their wall-clock ms",
      world: `${world === "local" ? "world-local" : "world-postgres"} ${this.sdk.worldVersion}`,
      switches: Object.entries(this.switches).map(([k, v]) => `${k}=${v}`),
      scenarios: scenariosInfo({ maxBranches, maxSteps, maxChunks }),
    };
  }

  async close() {
    this.closed = true;
    clearInterval(this.fallback);
  }

  /**
   * stepBody is called by every step body as it ends.
   * @param {string} run
   * @param {number} stage
   * @param {number} index
   * @param {number} attempt
   * @param {number} start
   * @param {number} end
   * @param {string} stepId
   */
  stepBody(run, stage, index, attempt, start, end, stepId) {
    // A step run by a delivery of the workflow's own queue ran inline.
    const inline = /wkf_workflow_/.test(route.getStore()?.queue ?? "");
    const st = this.runs.get(run);
    st?.bodyRan(stage, index, attempt, start, end, stepId, inline);
    if (st?.spans) this.tracing?.bodyRan(st.spans, stage, index, abs(start), abs(end)); // its step.execute span
  }

  /**
   * chunkWritten is called by the stream writer's body before each write.
   * @param {string} run
   * @param {number} stage
   * @param {number} index
   * @param {number} t
   */
  chunkWritten(run, stage, index, t) {
    this.runs.get(run)?.chunkWritten(stage, index, t);
  }

  /**
   * routes is the request handler of the SDK routes' server at base.
   * @param {string} base
   */
  routes(base) {
    return serve((req, res) => {
      const path = pathOf(req);
      return path.startsWith(ROUTES) ? this.sdkRoute(req, res, base, path) : notFound(req, res);
    });
  }

  /**
   * sdkRoute hands a queue delivery to the SDK's handler, then asks for a
   * read of the event logs it may have written. A delivery of a run the
   * adapter follows is a task of that run (lib/otel.mjs): its spans are
   * the run's, and it happens after its message's wait in the queue.
   * @param {IncomingMessage} req
   * @param {ServerResponse} res
   * @param {string} base
   * @param {string} path
   */
  async sdkRoute(req, res, base, path) {
    const t0 = performance.now();
    const name = path.slice(ROUTES.length).split("/")[0];
    const handler = name === "flow" ? this.sdk.flow : name === "step" ? this.sdk.step : null;
    if (!handler) return reply(res, 404, { error: `no SDK route ${path}` });
    const body = await readBody(req);
    const headers = headersOf(req);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const queue = String(req.headers["x-vqs-queue-name"] ?? "");
    const runId = messageRun(body); // none (not a JSON message): every run is read
    const run = runId && this.bySdkRun.get(runId);
    const st = run ? this.runs.get(run) : undefined;
    const t1 = performance.now();
    const call = () => route.run({ name, queue }, () => handler(new Request(base + req.url, { method: req.method, headers, body: hasBody ? body : undefined })));
    const message = String(req.headers["x-vqs-message-id"] ?? "");
    const r = await this.traced(st, `queue.deliver ${name}`, { [TASK]: name, [AT]: abs(t0), ...(message ? { [MESSAGE]: message } : {}) }, call);
    const t2 = performance.now();
    const out = Buffer.from(await r.arrayBuffer());
    /** @type {Record<string, string>} */
    const h = {};
    r.headers.forEach((v, k) => (h[k] = v));
    res.writeHead(r.status, h);
    res.end(out);
    if (st) {
      // The adapter's own share: the conversions around the SDK's handler.
      st.cost.deliveries++;
      st.cost.hostMs += t1 - t0 + (performance.now() - t2);
      st.cost.handlerMs += t2 - t1;
      this.schedule(st);
    } else for (const st of this.runs.values()) this.schedule(st);
  }

  /**
   * startRun starts a run: 202 with the SDK's run id once start()
   * returned (the run is durable), 422 for what the SDK cannot run.
   * @param {string} run
   * @param {string} scenario
   * @param {Record<string, any>} options
   * @param {number} [recv] when the main thread received the start (absolute ms): the start task's start
   * @param {boolean} [spans] durabench asks for the run's spans (they are collected only then)
   * @returns {Promise<Reply>}
   */
  async startRun(run, scenario, options, recv, spans = false) {
    let p;
    try {
      p = plan(scenario, options, this.flags, run, this.cwd);
    } catch (e) {
      if (e instanceof Unsupported) return { code: 422, error: e.message };
      throw e;
    }
    const st = new Run(run, p, new LogSink(run, this.post));
    if (this.tracing && spans) st.spans = new RunSpans();
    this.runs.set(run, st);
    let r;
    try {
      const start = () => this.sdk.api.start({ workflowId: this.sdk.ids[scenario] }, p.args);
      r = await this.traced(st, "run.start", { [TASK]: "start", ...(recv ? { [AT]: recv } : {}) }, start);
    } catch (e) {
      this.runs.delete(run);
      return { code: 500, error: `start: ${/** @type {Error} */ (e).message}` };
    }
    st.sdkRun = r.runId;
    this.bySdkRun.set(r.runId, run);
    if (st.chunks !== undefined) this.untraced(() => readStream(st, r));
    this.schedule(st);
    return { code: 202, sdkRun: r.runId };
  }

  /**
   * sdkRunOf learns a run's SDK run id before start() returned it (its
   * start task queued its first message, lib/otel.mjs): the first
   * delivery, which may come first, is then a task of the run.
   * @param {string} run @param {string} sdkRun
   */
  sdkRunOf(run, sdkRun) {
    if (this.runs.has(run) && !this.bySdkRun.has(sdkRun)) this.bySdkRun.set(sdkRun, run);
  }

  /**
   * abandon drops a run durabench stopped following and cancels it in the
   * SDK; its timeline ends failed.
   * @param {string} run
   */
  abandon(run) {
    const st = this.runs.get(run);
    if (!st) return;
    const log = st.sink;
    st.sink = null;
    this.runs.delete(run);
    this.bySdkRun.delete(st.sdkRun);
    this.dropSpans(st);
    if (st.timer) clearTimeout(st.timer);
    if (!st.terminal) {
      Promise.resolve()
        .then(() => this.untraced(() => this.sdk.api.getRun(st.sdkRun).cancel()))
        .catch((e) => warn(`cancelling ${st.sdkRun}: ${e.message}`));
    }
    const why = "abandoned: durabench stopped following the run; cancelled in the SDK";
    log?.finish(true, why, [], null, { kind: "run_failed", at: abs(performance.now()), source: "worker", error: why });
  }

  /**
   * resume resumes a run's hook (a task of the run: its spans are the
   * run's), then asks for a read of the run.
   * @param {string} run @param {string} token @param {any} payload
   * @param {number} [recv] its receipt on the main thread (absolute ms): the task's start
   */
  async resume(run, token, payload, recv) {
    const st = this.runs.get(run);
    const call = () => this.sdk.api.resumeHook(token, { payload });
    await this.traced(st, "run.resume", { [TASK]: "resume", ...(recv ? { [AT]: recv } : {}) }, call);
    if (st) this.schedule(st);
  }

  /**
   * traced runs call as a task of st's run when its spans are collected
   * (lib/otel.mjs: task); untraced runs fn outside every run's spans (the
   * adapter's own reads).
   * @template T
   * @param {Run | undefined} st
   * @param {string} name
   * @param {Record<string, any>} attrs
   * @param {() => Promise<T>} call
   * @returns {Promise<T>}
   */
  traced(st, name, attrs, call) {
    return st?.spans && this.tracing ? this.tracing.task(st.run, name, attrs, call) : call();
  }

  /** @template T @param {() => T} fn @returns {T} */
  untraced(fn) {
    return this.tracing ? this.tracing.untraced(fn) : fn();
  }

  /** @param {Run} st dropSpans forgets a run's spans (sent or not) */
  dropSpans(st) {
    if (st.spans) this.tracing?.done(st.spans);
    st.spans = null;
  }

  /**
   * schedule asks for a read of st's event log: now, or READ_GAP_MS after
   * the last one; one read at a time per run.
   * @param {Run} st
   */
  schedule(st) {
    if (!st.sdkRun || this.closed) return;
    if (st.reading) {
      st.again = true;
      return;
    }
    if (st.timer) return;
    const wait = Math.max(0, st.lastRead + READ_GAP_MS - Date.now());
    st.timer = setTimeout(() => {
      st.timer = null;
      this.untraced(() => this.read(st));
    }, wait);
  }

  /** @param {Run} st */
  async read(st) {
    if (this.runs.get(st.run) !== st) return;
    st.reading = true;
    st.again = false;
    st.lastRead = Date.now();
    try {
      // The status first, then the log: a terminal status whose terminal
      // event the log read after it does not hold is an anomaly.
      // Reading the whole log costs the SDK (it shares the process and,
      // on world-local, the data dir): it is read when the run's status
      // says it is over, while a hook is awaited, and every FULL_EVERY_MS
      // in case a status lags; otherwise only the status is read.
      const t0 = performance.now();
      const run = await this.sdk.world.runs.get(st.sdkRun, { resolveData: "none" });
      const over = ["completed", "failed", "cancelled"].includes(run.status);
      const full = over || (st.hook && !st.hookDone) || Date.now() - st.lastFull >= FULL_EVERY_MS;
      if (full) {
        st.lastFull = Date.now();
        const events = await readEvents(this.sdk.world, st.sdkRun);
        if (!this.sdk.runEvents) events.push(...recordEvents(run));
        st.apply(events);
      }
      // What the reads cost while the run ran (the check's reads after
      // its terminal event are not in its times).
      if (!st.terminal) {
        st.cost.reads++;
        st.cost.readMs += performance.now() - t0;
      }
      if (full && !st.terminal && over && !st.early) {
        st.early = { kind: "status_before_terminal", detail: `status ${run.status} read before a terminal event was readable` };
      }
      if (st.terminal && !st.settling) {
        st.settling = true;
        setTimeout(() => this.untraced(() => this.settle(st)), SETTLE_MS);
      }
    } catch (e) {
      warn(`reading run ${st.run} (${st.sdkRun}): ${/** @type {Error} */ (e).message}`);
    } finally {
      st.reading = false;
      if (st.again && !st.settling) this.schedule(st);
    }
  }

  /**
   * settle reads the log once more, checks it, and ends the run.
   * @param {Run} st
   */
  async settle(st) {
    this.runs.delete(st.run);
    this.bySdkRun.delete(st.sdkRun);
    const log = st.sink;
    if (!log) return;
    if (st.reader) {
      // The reader's last chunk_read must go out before the terminal event.
      /** @type {ReturnType<typeof setTimeout> | undefined} */
      let timer;
      const done = await Promise.race([st.reader.then(() => true), new Promise((r) => (timer = setTimeout(() => r(false), READER_GRACE_MS)))]);
      clearTimeout(timer);
      if (!done) st.readAnomalies.push({ kind: "stream_unfinished", detail: `the run's stream was still open ${READER_GRACE_MS / 1000} s after its terminal event` });
    }
    /** @type {Anomaly[]} */
    let anomalies = [];
    try {
      const run = await this.sdk.world.runs.get(st.sdkRun, { resolveData: "none" });
      const events = await readEvents(this.sdk.world, st.sdkRun);
      if (!this.sdk.runEvents) events.push(...recordEvents(run));
      st.apply(events);
      anomalies = checkHistory(events, st.expect, run.status, st.bodies);
    } catch (e) {
      anomalies = [{ kind: "unreadable", detail: `the event log could not be read again: ${/** @type {Error} */ (e).message}` }];
    }
    if (st.early) anomalies.unshift(st.early);
    anomalies.push(...st.readAnomalies);
    st.sink = null;
    // The run's spans go before its terminal event (durabench stops
    // following a run there); a span still open now is left out.
    if (st.spans) {
      const spans = st.spans.events(st.completions());
      this.dropSpans(st);
      if (spans.length) this.post({ t: "spans", run: st.run, spans });
    }
    log.finish(st.terminal !== "run_completed", st.terminal ?? "", anomalies, st.spent(), st.terminalEvent);
  }
}
