// @ts-check
// A run's spans made protocol 1.2 `span` events (docs/target-protocol.md):
// the SDK's own OpenTelemetry spans, as lib/otel.mjs collects them on the
// worker thread, each mapped onto one of durabench's critical-path
// categories (docs/critical-path.md), with its parent (the OTel span that
// holds it, in the same task) and, for a queue delivery, the queue wait it
// happened after and the publish that made it. Pure: no OTel package is
// needed here (test/unit/spans.test.mjs drives it with plain records).

/**
 * One span of a run as the processor saw it: its OTel ids, its name, its
 * start and end (absolute ms, lib/clock.mjs: abs), its attributes; `wait`
 * is its time waiting for backend capacity (ms: a pool's free connection),
 * `body` the step body's own stamps when the span is the SDK's
 * `step.execute` around a body the adapter saw run.
 * @typedef {object} Rec
 * @property {number} id the span's id in its run (1, 2, 3, …: protocol `span`)
 * @property {string} otel its OTel span id
 * @property {string | undefined} parent its OTel parent span id
 * @property {string} name
 * @property {number} at
 * @property {number | null} end null while it is open
 * @property {Record<string, any>} attrs
 * @property {number} wait
 * @property {{ stage: number, index: number, start: number, end: number } | undefined} body
 */

/**
 * A span event as the worker sends it (times absolute ms, `wait` ns; the
 * main thread converts `at` and `end` to the target clock).
 * @typedef {object} SpanEvent
 * @property {"span"} kind
 * @property {number} at
 * @property {number} end
 * @property {string} source
 * @property {string} category
 * @property {string} name
 * @property {number} span
 * @property {number} [parent]
 * @property {number} [after]
 * @property {number} [wait]
 * @property {number} [stage]
 * @property {number} [index]
 */

// The attributes the adapter puts on the root span of each task it hosts
// (lib/otel.mjs: task): which task it is, the queue message a delivery
// handles, and a start taken before the span could be (the main thread's
// receipt of a start request).
export const TASK = "durabench.task";
export const MESSAGE = "durabench.message";
export const RUN = "durabench.run";
export const AT = "durabench.at";

// The OTel attribute the SDK's queue.publish span carries the message id in.
const MESSAGE_ID = "messaging.message.id";

// World methods that change the world's state (the rest read it).
const WRITES = /^(create|update|cancel|delete|dispose|write|writeMulti|close|set|experimentalSetAttributes)/;

/**
 * categoryOf is the critical-path category of a span of the SDK by its
 * name (docs/critical-path.md): world calls by what they do — appends to a
 * run's log `write`, its log's reads `log_load`, reads of a run, step or
 * hook `run_read` —, the SDK's event loads `log_load`, its queue publishes
 * `publish`, a step body `body` (only with the body's step: `step.execute`
 * around a body the adapter saw), and everything else the SDK's own time
 * (`compute`: replay, hydration, routes, its tasks' time outside their
 * calls).
 * @param {string} name
 * @param {boolean} [hasBody] the span holds a step body the adapter stamped
 * @returns {string}
 */
export function categoryOf(name, hasBody = false) {
  if (name === "step.execute") return hasBody ? "body" : "compute";
  let c = known.get(name);
  if (c === undefined) {
    c = classify(name);
    if (known.size < 10_000) known.set(name, c);
  }
  return c;
}

// known memoizes categoryOf: a run's spans have few names (a world write's
// names its event type), thousands of times over.
/** @type {Map<string, string>} */
const known = new Map();

/**
 * classify is categoryOf's rules for a name other than step.execute.
 * @param {string} name
 * @returns {string}
 */
function classify(name) {
  if (name === "queue.publish" || name === "world.queue") return "publish";
  if (name === "workflow.loadEvents" || name.startsWith("workflow.replay.load")) return "log_load";
  const m = /^world\.(\w+)\.(\w+)/.exec(name);
  if (m) {
    const [, obj, method] = m;
    if (obj === "events") return method === "create" ? "write" : "log_load";
    return WRITES.test(method) ? "write" : "run_read";
  }
  return "compute";
}

/**
 * RunSpans collects one run's spans while it runs and makes them span
 * events when it ends (events): every span that ended, in the category its
 * name says, with its parent when that is reported too; a task the adapter
 * hosts (its root span: lib/otel.mjs task) is `compute` outside its calls,
 * and every span of the run's start task is `start`; a queue delivery's
 * task happens after a synthesized `queue_wait` span (the message's
 * publish returning → the delivery's handler starting), which happens
 * after the publish.
 */
export class RunSpans {
  constructor() {
    this.run = ""; // durabench's run id, once a task of it started
    /** @type {string[]} the OTel traces of its tasks (lib/otel.mjs) */
    this.traces = [];
    this.next = 1;
    /** @type {Map<string, Rec>} OTel span id -> the span */
    this.recs = new Map();
    this.closed = false;
  }

  /**
   * start records a span's start.
   * @param {string} otel
   * @param {string | undefined} parent
   * @param {string} name
   * @param {number} at
   * @param {Record<string, any>} attrs
   * @returns {Rec | null}
   */
  start(otel, parent, name, at, attrs) {
    if (this.closed) return null;
    /** @type {Rec} */
    const r = { id: this.next++, otel, parent, name, at: typeof attrs[AT] === "number" ? attrs[AT] : at, end: null, attrs, wait: 0, body: undefined };
    this.recs.set(otel, r);
    return r;
  }

  /**
   * end records a span's end and its attributes as they ended; `at` a
   * start the span was given (back-dated).
   * @param {string} otel
   * @param {number} end
   * @param {Record<string, any>} attrs
   * @param {number} [at]
   */
  end(otel, end, attrs, at) {
    const r = this.recs.get(otel);
    if (!r || this.closed) return;
    r.end = Math.max(end, r.at);
    r.attrs = attrs;
    if (at !== undefined && at < r.at && !(AT in attrs)) r.at = at;
  }

  /**
   * body notes that the span otel ran the body of step stage.index, from
   * start to end (the body's own stamps: the step's step_started is its
   * start).
   * @param {string} otel
   * @param {number} stage
   * @param {number} index
   * @param {number} start
   * @param {number} end
   * @returns {boolean} whether the span is one of this run's
   */
  body(otel, stage, index, start, end) {
    const r = this.recs.get(otel);
    if (!r) return false;
    r.body = { stage, index, start, end };
    return true;
  }

  /**
   * events closes the collection and returns the span events of the spans
   * that ended. `completions` maps a step ("stage.index") to its
   * step_completed time (absolute ms): the SDK's write of a step's
   * step_completed event is cut at it when the write's span runs past it
   * (the event was recorded then; the critical path ends there).
   * @param {Map<string, number>} [completions]
   * @returns {SpanEvent[]}
   */
  events(completions = new Map()) {
    this.closed = true;
    /** @type {Rec[]} */
    const ended = [];
    for (const r of this.recs.values()) if (r.end !== null) ended.push(r);
    /** @type {Map<Rec, Rec>} */
    const roots = new Map();
    /** @param {Rec} r @returns {Rec} */
    const rootOf = (r) => {
      let root = roots.get(r);
      if (root) return root;
      /** @type {Rec} */
      let x = r;
      for (let n = 0; n < 1000; n++) {
        const p = x.parent ? this.recs.get(x.parent) : undefined;
        if (!p) break;
        x = p;
      }
      roots.set(r, x);
      return x;
    };
    // The completions of the steps whose bodies each task ran.
    /** @type {Map<Rec, number[]>} */
    const done = new Map();
    for (const r of ended) {
      if (!r.body) continue;
      const c = completions.get(`${r.body.stage}.${r.body.index}`);
      if (c === undefined) continue;
      const root = rootOf(r);
      done.set(root, [...(done.get(root) ?? []), c]);
    }
    // Publishes by message id: a delivery follows the first.
    /** @type {Map<string, Rec>} */
    const published = new Map();
    for (const r of ended) {
      const m = r.attrs[MESSAGE_ID];
      if ((r.name !== "queue.publish" && r.name !== "world.queue") || typeof m !== "string") continue;
      const p = published.get(m);
      if (!p || r.at < p.at) published.set(m, r);
    }
    /** @type {Set<number>} */
    const reported = new Set(ended.map((r) => r.id));
    /** @type {SpanEvent[]} */
    const out = [];
    for (const r of ended) {
      const root = rootOf(r);
      const task = r.attrs[TASK];
      const inStart = root.attrs[TASK] === "start";
      let at = r.at;
      let end = /** @type {number} */ (r.end);
      let category = task ? (task === "start" ? "start" : "compute") : inStart ? "start" : categoryOf(r.name, r.body !== undefined);
      /** @type {SpanEvent} */
      const ev = { kind: "span", at, end, source: "sdk", category, name: r.name, span: r.id };
      if (category === "body" && r.body) {
        ev.at = r.body.start;
        ev.end = Math.max(r.body.end, r.body.start);
        ev.stage = r.body.stage;
        ev.index = r.body.index;
      }
      if (category === "write" && r.name.endsWith(" step_completed")) {
        const c = (done.get(root) ?? []).find((c) => c > at && c < end);
        if (c !== undefined) ev.end = c;
      }
      const p = r.parent ? this.recs.get(r.parent) : undefined;
      if (p && reported.has(p.id)) ev.parent = p.id;
      if (r.wait > 0) ev.wait = Math.round(Math.min(r.wait, ev.end - ev.at) * 1e6);
      const m = r.attrs[MESSAGE];
      const pub = typeof m === "string" ? published.get(m) : undefined;
      if (pub && pub.end !== null) {
        // The message's wait in the queue: its publish returning → this
        // delivery's handler starting (empty when the delivery came first).
        const id = this.next++;
        out.push({ kind: "span", at: Math.min(pub.end, at), end: at, source: "sdk", category: "queue_wait", name: "queue.wait", span: id, after: pub.id });
        ev.after = id;
      }
      out.push(ev);
    }
    this.recs.clear();
    return out;
  }
}
