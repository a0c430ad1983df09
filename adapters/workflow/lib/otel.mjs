// @ts-check
// The SDK's own OpenTelemetry spans, collected on the worker thread (where
// the SDK runs) and made each run's protocol 1.2 `span` events
// (lib/spans.mjs). The official OpenTelemetry JS packages, installed with
// the SDK (sdk/VERSION's package.json; lib/build.mjs adds them to an --sdk
// build): @opentelemetry/api — the SDK loads it itself, `import()` in
// @workflow/core's telemetry and world-local's, or its bundled copy in the
// `workflow build` output; copies of one major version share the API's
// global registry — with a tracer provider of @opentelemetry/sdk-trace-base
// whose one span processor keeps each ended span in its run (in process:
// no exporter, no network), and the async-hooks context manager, so that a
// span's parent is the span active where it started. No propagator is set:
// the SDK's trace carriers stay empty, and each task the adapter hosts —
// a run's start, a queue delivery, a hook's resume — is a trace of its own,
// rooted at a span the adapter opens (task) and mapped to its run.
//
// world-local wraps its storage calls in spans (`world.events.create
// step_completed`, `world.runs.get`, …); world-postgres does not, so the
// adapter wraps its world's calls the same way (instrumentWorld), and
// measures each call's wait for a connection of its pg pool (patchPool:
// `contention`).
import { createRequire } from "node:module";
import { join } from "node:path";
import { abs } from "./clock.mjs";
import { warn } from "./process.mjs";
import { AT, MESSAGE, RUN, RunSpans, TASK } from "./spans.mjs";

/** @typedef {import("./spans.mjs").Rec} Rec */

// The OTel packages an SDK directory must hold for spans (sdk/*/package.json).
export const OTEL_PACKAGES = {
  "@opentelemetry/api": "1.9.0",
  "@opentelemetry/core": "2.12.1",
  "@opentelemetry/sdk-trace-base": "2.12.1",
  "@opentelemetry/context-async-hooks": "2.12.1",
};

/**
 * hrMs is an OTel HrTime ([s, ns] since the epoch) in ms.
 * @param {[number, number]} t
 */
const hrMs = (t) => t[0] * 1e3 + t[1] / 1e6;

export class Tracing {
  /**
   * @param {any} api @opentelemetry/api
   * @param {any} core @opentelemetry/core
   * @param {(run: string) => RunSpans | null} spansOf a run's spans, while it runs
   * @param {(run: string, sdkRun: string) => void} [sdkRun] tells the adapter a run's SDK run id, as soon as the run's start task queues its first message
   */
  constructor(api, core, spansOf, sdkRun = () => {}) {
    this.api = api;
    this.core = core;
    this.spansOf = spansOf;
    this.sdkRun = sdkRun;
    /** @type {Map<string, RunSpans>} OTel trace id -> its run's spans */
    this.traces = new Map();
    /** @type {Map<string, Rec>} OTel span id -> the span, while it is open */
    this.open = new Map();
    this.tracer = api.trace.getTracer("durabench");
  }

  /**
   * The span processor (@opentelemetry/sdk-trace-base's SpanProcessor):
   * each span of a traced run is stamped when it starts and ends on the
   * adapter's clock (the span's own start is Date.now(), ms), kept in its
   * run (RunSpans) with its OTel parent.
   */
  processor() {
    return {
      /** @param {any} span */
      onStart: (span) => {
        const t = abs(performance.now());
        const trace = span.spanContext().traceId;
        let rs = this.traces.get(trace);
        if (!rs) {
          const run = span.attributes?.[RUN];
          rs = typeof run === "string" ? this.spansOf(run) ?? undefined : undefined;
          if (!rs) return;
          rs.run = /** @type {string} */ (run);
          rs.traces.push(trace);
          this.traces.set(trace, rs);
        }
        const parent = span.parentSpanContext?.spanId ?? span.parentSpanId;
        const r = rs.start(span.spanContext().spanId, parent, span.name, t, span.attributes ?? {});
        if (r) this.open.set(r.otel, r);
      },
      /** @param {any} span */
      onEnd: (span) => {
        const t = abs(performance.now());
        const id = span.spanContext().spanId;
        if (!this.open.delete(id)) return;
        const rs = this.traces.get(span.spanContext().traceId);
        // A span given its start (a back-dated one: 5.0's stream spans).
        const at = span._startTimeProvided && Array.isArray(span.startTime) ? hrMs(span.startTime) : undefined;
        rs?.end(id, t, span.attributes ?? {}, at);
      },
      forceFlush: () => Promise.resolve(),
      shutdown: () => Promise.resolve(),
    };
  }

  /**
   * done forgets a finished run's traces (its spans still open are
   * forgotten as they end).
   * @param {RunSpans} rs
   */
  done(rs) {
    rs.closed = true;
    for (const t of rs.traces) this.traces.delete(t);
    rs.traces.length = 0;
  }

  /**
   * task runs fn as a task of run: in a new trace whose root span, name,
   * is the task (`start`, or `compute` outside the SDK's spans under it).
   * @template T
   * @param {string} run durabench's run id
   * @param {string} name
   * @param {Record<string, any>} attrs the task's (TASK, MESSAGE, AT)
   * @param {() => Promise<T>} fn
   * @returns {Promise<T>}
   */
  task(run, name, attrs, fn) {
    const { api } = this;
    const span = this.tracer.startSpan(name, { root: true, attributes: { ...attrs, [RUN]: run } });
    return api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, span), async () => {
      try {
        return await fn();
      } finally {
        span.end();
      }
    });
  }

  /**
   * untraced runs fn with tracing suppressed: the adapter's own reads of a
   * run (its status, its event log, its stream) are none of its spans.
   * @template T
   * @param {() => T} fn
   * @returns {T}
   */
  untraced(fn) {
    const { api, core } = this;
    return api.context.with(core.suppressTracing(api.ROOT_CONTEXT), fn);
  }

  /**
   * active is the open span of a traced run active here, if any.
   * @returns {Rec | undefined}
   */
  active() {
    const span = this.api.trace.getActiveSpan();
    return span ? this.open.get(span.spanContext().spanId) : undefined;
  }

  /**
   * bodyRan tells the span active in a step body (the SDK's step.execute)
   * which step's body ran in it, and when.
   * @param {RunSpans | undefined} rs
   * @param {number} stage
   * @param {number} index
   * @param {number} start absolute ms
   * @param {number} end absolute ms
   */
  bodyRan(rs, stage, index, start, end) {
    const r = this.active();
    if (r && rs) rs.body(r.otel, stage, index, start, end);
  }

  /**
   * runOf is the run whose task is active here, if any.
   * @returns {RunSpans | undefined}
   */
  activeRun() {
    const span = this.api.trace.getActiveSpan();
    return span ? this.traces.get(span.spanContext().traceId) : undefined;
  }

  /**
   * instrumentQueue wraps the world's queue() in a span, `world.queue`
   * (`publish`), with the message id it returns: the SDK publishes in a
   * span of its own (`queue.publish`), except a run's start (4.8.9, 5.0),
   * whose queue call is then the only publish its first delivery can
   * follow. A message of a run whose start task is active tells the
   * adapter the run's SDK id (sdkRun): world-local delivers the run's
   * first message before start() has returned it.
   * @param {any} world
   */
  instrumentQueue(world) {
    const f = world.queue;
    if (typeof f !== "function") return;
    const tracer = this.tracer;
    world.queue = (/** @type {any[]} */ ...args) => {
      const rs = this.activeRun();
      if (!rs) return f.apply(world, args);
      const id = args[1]?.runId ?? args[1]?.workflowRunId;
      if (typeof id === "string" && rs.run) this.sdkRun(rs.run, id);
      return tracer.startActiveSpan("world.queue", (/** @type {any} */ span) => {
        /** @type {Promise<any>} */
        let r;
        try {
          r = Promise.resolve(f.apply(world, args));
        } catch (e) {
          span.end();
          throw e;
        }
        return r.then(
          (v) => {
            if (typeof v?.messageId === "string") span.setAttribute("messaging.message.id", v.messageId);
            span.end();
            return v;
          },
          (e) => {
            span.end();
            throw e;
          },
        );
      });
    };
  }

  /**
   * instrumentWorld wraps the storage calls of a world that traces none
   * (world-postgres) as world-local wraps its own: a span per call, named
   * `world.<object>.<method>` (`world.events.create <eventType>`).
   * @param {any} world
   */
  instrumentWorld(world) {
    const tracer = this.tracer;
    for (const obj of ["runs", "events", "hooks", "steps"]) {
      const o = world[obj];
      if (!o || typeof o !== "object") continue;
      /** @type {Record<string, any>} */
      const w = {};
      for (const key of Object.keys(o)) {
        const f = o[key];
        if (typeof f !== "function") {
          w[key] = f;
          continue;
        }
        w[key] = (/** @type {any[]} */ ...args) => {
          let name = `world.${obj}.${key}`;
          if (obj === "events" && key === "create" && typeof args[1]?.eventType === "string") name += ` ${args[1].eventType}`;
          return tracer.startActiveSpan(name, (/** @type {any} */ span) => {
            let r;
            try {
              r = f.apply(o, args);
            } catch (e) {
              span.end();
              throw e;
            }
            if (r && typeof r.then === "function") return r.finally(() => span.end());
            span.end();
            return r;
          });
        };
      }
      world[obj] = w;
    }
  }

  /**
   * patchPool makes every checkout of a pg pool's connection made in a
   * traced span count as that span's wait (`contention`): pg-pool's
   * connect, from the call to the connection handed over.
   * @param {any} Pool pg-pool's class
   */
  patchPool(Pool) {
    const orig = Pool.prototype.connect;
    if (orig.durabench) return;
    const tracing = this;
    /** @param {any} [cb] */
    const connect = function (cb) {
      const r = tracing.active();
      // @ts-ignore: this is the pool
      if (!r) return orig.call(this, cb);
      const t0 = performance.now();
      const took = () => (r.wait += performance.now() - t0);
      // @ts-ignore
      if (cb) return orig.call(this, (/** @type {any[]} */ ...a) => (took(), cb(...a)));
      // @ts-ignore
      return orig.call(this).then((/** @type {any} */ c) => (took(), c));
    };
    connect.durabench = true;
    Pool.prototype.connect = connect;
  }
}

/**
 * setUpTracing registers a tracer provider for the SDK in dir (on this
 * thread: the API's registry is global to it) whose spans go to their runs'
 * RunSpans; null, with a warning, when dir lacks the OTel packages (an SDK
 * directory made before them: `npm install` them there).
 * @param {string} dir
 * @param {(run: string) => RunSpans | null} spansOf
 * @param {(run: string, sdkRun: string) => void} [sdkRun]
 * @returns {Tracing | null}
 */
export function setUpTracing(dir, spansOf, sdkRun) {
  const req = createRequire(join(dir, "package.json"));
  let api, core, base, hooks;
  try {
    api = req("@opentelemetry/api");
    core = req("@opentelemetry/core");
    base = req("@opentelemetry/sdk-trace-base");
    hooks = req("@opentelemetry/context-async-hooks");
  } catch (e) {
    warn(`no spans: ${dir} lacks the OpenTelemetry packages (${Object.keys(OTEL_PACKAGES).join(", ")}): ${/** @type {Error} */ (e).message.split("\n")[0]}`);
    return null;
  }
  const tracing = new Tracing(api, core, spansOf, sdkRun);
  const provider = new base.BasicTracerProvider({ sampler: new base.AlwaysOnSampler(), spanProcessors: [tracing.processor()] });
  api.context.setGlobalContextManager(new hooks.AsyncLocalStorageContextManager().enable());
  api.trace.setGlobalTracerProvider(provider);
  return tracing;
}

/**
 * patchWorldPool finds world-postgres' pg-pool in dir and patches it
 * (Tracing.patchPool); false when there is none.
 * @param {Tracing} tracing
 * @param {string} dir
 * @returns {boolean}
 */
export function patchWorldPool(tracing, dir) {
  try {
    const wp = createRequire(join(dir, "node_modules", "@workflow", "world-postgres", "package.json"));
    const pg = wp.resolve("pg");
    tracing.patchPool(createRequire(pg)("pg-pool"));
    return true;
  } catch (e) {
    warn(`world-postgres' pool not patched (no contention measured): ${/** @type {Error} */ (e).message.split("\n")[0]}`);
    return false;
  }
}

export { TASK, MESSAGE, AT };
