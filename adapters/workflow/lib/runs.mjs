// @ts-check
// A run as the worker thread follows it (lib/sdk.mjs): what its plan
// expects, the steps whose bodies ran here, its stream's chunks, its reads
// of the event log, and what it cost; its timeline goes to the main thread
// through its LogSink.
import { abs, fromWall } from "./clock.mjs";
import { hookToken } from "./options.mjs";

/** @typedef {import("./types.mjs").TimelineEvent} TimelineEvent */
/** @typedef {import("./types.mjs").Anomaly} Anomaly */
/** @typedef {import("./types.mjs").Cost} Cost */
/** @typedef {import("./types.mjs").FromWorker} FromWorker */
/** @typedef {import("./options.mjs").Plan} Plan */

// LogSink is a run's timeline as the worker sees it: its events and its
// end go to the main thread, which serves them (lib/front.mjs).
export class LogSink {
  /**
   * @param {string} run
   * @param {(m: FromWorker) => void} post
   */
  constructor(run, post) {
    this.run = run;
    this.post = post;
  }

  /** @param {TimelineEvent} ev */
  add(ev) {
    this.post({ t: "event", run: this.run, ev });
  }

  /**
   * finish ends the run: its terminal event, what the check found, what
   * the adapter spent, in one message.
   * @param {boolean} failed
   * @param {string} msg
   * @param {Anomaly[]} anomalies
   * @param {Cost | null} adapter
   * @param {TimelineEvent | null} terminal
   */
  finish(failed, msg, anomalies, adapter, terminal) {
    this.post({ t: "finish", run: this.run, failed, msg, anomalies, adapter, terminal });
  }
}

/**
 * A step whose body ran here.
 * @typedef {{ stage: number, index: number, attempt: number, end: number, done: boolean, inline: boolean, completed?: number }} Step
 */

export class Run {
  /**
   * @param {string} run durabench's run id
   * @param {Pick<Plan, "steps" | "chunks" | "sizes" | "hook" | "transform">} plan
   * @param {LogSink} sink
   */
  constructor(run, { steps, chunks, sizes, hook, transform }, sink) {
    this.run = run;
    /** @type {LogSink | null} its timeline, until the run is reported over */
    this.sink = sink;
    this.sdkRun = ""; // the SDK's run id, once start() returned
    this.expect = steps; // steps the run completes (the check's count)
    this.hook = hook; // the run awaits a hook
    this.hookDone = false; // its hook was received
    // The stream scenarios: the chunks the writer writes, their sizes,
    // whether the reader reads them upper-cased (stream-pipeline's
    // transform), each one's write time by index, the reader and what it
    // found.
    this.chunks = chunks;
    this.sizes = sizes;
    this.transform = transform ?? false;
    /** @type {number[]} */
    this.written = [];
    /** @type {Promise<void> | null} */
    this.reader = null;
    /** @type {Anomaly[]} */
    this.readAnomalies = [];
    /** @type {Map<string, Step>} SDK step id -> its step */
    this.steps = new Map();
    /** @type {Map<string, number>} SDK step id -> how many times its body ran */
    this.bodies = new Map();
    /** @type {Set<string>} the event log's events already applied */
    this.seen = new Set();
    // Reading the event log (lib/sdk.mjs: schedule, read, settle).
    this.reading = false;
    this.again = false; // a read was asked for during one
    this.lastRead = 0;
    this.lastFull = Date.now(); // the last read of the whole log
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
    this.settling = false;
    /** @type {string | null} the terminal event's type, once read */
    this.terminal = null;
    /** @type {TimelineEvent | null} */
    this.terminalEvent = null;
    /** @type {Anomaly | null} a terminal status read before its event */
    this.early = null;
    // What the adapter spent on the run while it ran: its host around
    // the SDK's handlers, its reads of the event log (ms).
    this.cost = { deliveries: 0, hostMs: 0, handlerMs: 0, reads: 0, readMs: 0 };
    /** @type {import("./spans.mjs").RunSpans | null} the SDK's spans of the run, while it runs (lib/otel.mjs) */
    this.spans = null;
  }

  /**
   * completions maps each completed step ("stage.index") to its
   * step_completed time (absolute ms).
   * @returns {Map<string, number>}
   */
  completions() {
    /** @type {Map<string, number>} */
    const out = new Map();
    for (const s of this.steps.values()) if (s.completed !== undefined) out.set(`${s.stage}.${s.index}`, s.completed);
    return out;
  }

  /**
   * bodyRan records a step body's run (start and end: this thread's
   * performance.now()): its start is the run's step_started; its end
   * bounds the step's completion from below.
   * @param {number} stage
   * @param {number} index
   * @param {number} attempt
   * @param {number} start
   * @param {number} end
   * @param {string} stepId
   * @param {boolean} inline a delivery of the workflow's own queue ran it
   */
  bodyRan(stage, index, attempt, start, end, stepId, inline) {
    this.sink?.add({ kind: "step_started", at: abs(start), source: "worker", stage, index, attempt });
    const prev = this.steps.get(stepId);
    this.bodies.set(stepId, (this.bodies.get(stepId) ?? 0) + 1);
    if (!prev) this.steps.set(stepId, { stage, index, attempt, end: abs(end), done: false, inline });
    else prev.attempt = attempt;
  }

  /**
   * chunkWritten records the writer's write of chunk index at t (this
   * thread's performance.now()).
   * @param {number} stage
   * @param {number} index
   * @param {number} t
   */
  chunkWritten(stage, index, t) {
    this.written[index] = abs(t);
    this.sink?.add({ kind: "chunk_written", at: abs(t), source: "worker", stage, index });
  }

  /**
   * apply turns the event log's new events into timeline events. The
   * terminal event is kept for the end (lib/sdk.mjs: settle): durabench
   * stops following a run at its terminal event.
   * @param {any[]} events
   */
  apply(events) {
    const log = this.sink;
    if (!log) return;
    for (const e of events) {
      if (this.seen.has(e.eventId)) continue;
      this.seen.add(e.eventId);
      const at = fromWall(e.createdAt);
      switch (e.eventType) {
        case "run_started":
          log.add({ kind: "run_started", at, source: "history" });
          break;
        case "hook_created":
          log.add({ kind: "hook_waiting", at, source: "history", token: hookToken(this.run) });
          break;
        case "hook_received":
          this.hookDone = true;
          log.add({ kind: "hook_received", at, source: "history", token: hookToken(this.run) });
          break;
        case "step_completed": {
          const s = this.steps.get(e.correlationId);
          if (!s || s.done) break; // a body that never ran here, or a duplicate: the check reports it
          s.done = true;
          s.completed = Math.max(at, s.end);
          log.add({ kind: "step_completed", at: s.completed, source: "history", stage: s.stage, index: s.index, attempt: s.attempt, ...(s.inline ? { inline: true } : {}) });
          break;
        }
        case "step_failed":
        case "step_retrying": {
          const s = this.steps.get(e.correlationId);
          log.add({ kind: "step_failed", at, source: "history", stage: s?.stage ?? 0, index: s?.index ?? 0, attempt: s?.attempt ?? 1, error: e.eventType });
          break;
        }
        case "run_completed":
        case "run_failed":
        case "run_cancelled":
          if (this.terminal) break;
          this.terminal = e.eventType;
          this.terminalEvent = e.eventType === "run_completed"
            ? { kind: "run_completed", at, source: "history" }
            : { kind: "run_failed", at, source: "history", error: e.eventType };
          break;
      }
    }
  }

  /**
   * spent is what the adapter spent on the run, in µs.
   * @returns {Cost}
   */
  spent() {
    /** @param {number} ms */
    const us = (ms) => Math.round(ms * 1000);
    const c = this.cost;
    return { deliveries: c.deliveries, host_us: us(c.hostMs), handler_us: us(c.handlerMs), reads: c.reads, read_us: us(c.readMs) };
  }
}

/**
 * messageRun is the SDK run id a queue message names (a workflow
 * message's runId, a step message's workflowRunId), if it is JSON.
 * @param {Buffer} body
 * @returns {string | undefined}
 */
export function messageRun(body) {
  try {
    const msg = JSON.parse(body.toString());
    return msg.runId ?? msg.workflowRunId;
  } catch {
    return undefined;
  }
}
