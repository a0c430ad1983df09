// @ts-check
// The scenarios the adapter runs, in one place: each one's workflow in
// workflows/bench.js, its options with the scenario book's defaults (as
// `durabench list` prints them; test/unit/options.test.mjs compares the
// two when bin/durabench is built), the option bounded by the adapter's
// limit (--max-…, declared in /v1/info), and how its options become the
// workflow's arguments (plan).
import { loadCadence } from "./cadence.mjs";
import { parseWait } from "./timeline.mjs";

// Unsupported is what the SDK cannot run (a start answered 422).
export class Unsupported extends Error {}

/** @typedef {{ maxBranches: number, maxSteps: number, maxChunks: number }} Limits */
/** @typedef {"branches" | "steps" | "chunks"} Bounded */

/** @type {Record<Bounded, keyof Limits>} */
const LIMIT = { branches: "maxBranches", steps: "maxSteps", chunks: "maxChunks" };

/**
 * A start's plan: what the worker starts and what the run's check expects.
 * @typedef {object} Plan
 * @property {string} workflow the workflow's export in workflows/bench.js
 * @property {any[]} args the workflow's arguments
 * @property {number} steps how many steps the run completes (the history check's count)
 * @property {number} [chunks] a stream scenario: how many chunks its writer writes
 * @property {number[]} sizes the chunks' sizes, rotated (stream-sizes; stream-replay: each chunk's;
 *   stream-pipeline: its one size), none for text chunks
 * @property {boolean} [transform] stream-pipeline: the chunks read are the writer's upper-cased
 * @property {boolean} hook the run awaits a hook
 */

/**
 * @typedef {object} Scenario
 * @property {string} workflow its workflow's export in workflows/bench.js
 * @property {Bounded} [max] the option the adapter's limit bounds
 * @property {Record<string, string>} defaults its options' defaults, as the book writes them
 * @property {(o: Options, run: string) => Partial<Plan> & { args: any[], steps: number }} plan
 */

// hookToken is the token of a hook-step run's hook.
/** @param {string} run */
export const hookToken = (run) => `${run}-h0`;

/**
 * stream is a stream scenario (one writer step; the reader is the
 * adapter): stream-overhead's shape and stream-sizes' sizes are options
 * only where the book has them.
 * @param {Record<string, string>} defaults
 * @returns {Scenario}
 */
const stream = (defaults) => ({
  workflow: "stream",
  max: "chunks",
  defaults,
  plan(o, run) {
    const chunks = o.int("chunks");
    const shape = "shape" in defaults ? o.choice("shape", ["text", "structured"]) : "text";
    const sizes = "sizes" in defaults ? o.sizes("sizes") : [];
    return { args: [run, chunks, o.duration("interval"), shape, sizes], steps: 1, chunks, sizes };
  },
});

// SCENARIOS in the order /v1/info lists them.
/** @type {Record<string, Scenario>} */
export const SCENARIOS = {
  fanout: {
    workflow: "fanout",
    max: "branches",
    defaults: { branches: "20", body: "0s" },
    plan(o, run) {
      const n = o.int("branches");
      return { args: [run, n, o.body], steps: n };
    },
  },
  sequential: {
    workflow: "sequential",
    max: "steps",
    defaults: { steps: "50", body: "0s" },
    plan(o, run) {
      const n = o.int("steps");
      return { args: [run, n, o.body], steps: n };
    },
  },
  step: {
    workflow: "step",
    defaults: { body: "0s" },
    plan: (o, run) => ({ args: [run, o.body], steps: 1 }),
  },
  "hook-step": {
    workflow: "hookStep",
    defaults: { body: "0s" },
    plan: (o, run) => ({ args: [run, hookToken(run), o.body], steps: 1, hook: true }),
  },
  race: {
    workflow: "race",
    max: "branches",
    defaults: { branches: "4", body: "0s", jitter: "0s" },
    plan(o, run) {
      const n = o.int("branches");
      const jitter = o.duration("jitter");
      // Each branch's extra duration, uniform in [0, jitter): drawn from
      // the run id and the branch (a run replays its own draws).
      const draws = Array.from({ length: n }, (_, i) => (jitter > 0 ? jitter * unitHash(`${run}/${i}`) : 0));
      return { args: [run, n, o.body, draws], steps: n + 1 };
    },
  },
  payload: {
    workflow: "payload",
    max: "steps",
    defaults: { size: "10KB", steps: "10", shape: "sequence" },
    plan(o, run) {
      const n = o.int("steps");
      const shape = o.choice("shape", ["sequence", "fanout"]);
      const sizes = o.sizes("size");
      if (sizes.length !== 1) throw new Unsupported(`option size=${o.given("size")}: want one size such as 10KB`);
      return { args: [run, n, sizes[0], shape === "fanout"], steps: n };
    },
  },
  "stream-latency": stream({ chunks: "20", interval: "10ms" }),
  "stream-overhead": stream({ chunks: "300", interval: "10ms", shape: "text" }),
  "stream-sizes": stream({ sizes: "64/1KB/16KB/64KB", chunks: "60", interval: "10ms" }),
  // stream-replay: one writer step writes chunk i of the cadence at its
  // offset / speed after the body's start, with its size (the adapter's
  // --max-chunks bounds the cadence's length: it has no option to declare).
  "stream-replay": {
    workflow: "replay",
    defaults: { cadence: "steady", speed: "1" },
    plan(o, run) {
      const name = String(o.given("cadence") ?? o.defaults.cadence);
      let c;
      try {
        c = loadCadence(name, { cwd: o.cwd });
      } catch (e) {
        throw new Unsupported(/** @type {Error} */ (e).message);
      }
      const speed = o.int("speed");
      const chunks = c.bytes.length;
      if (chunks > o.limits.maxChunks) throw new Unsupported(`option cadence=${name}: ${chunks} chunks, over the limit ${o.limits.maxChunks} (--max-chunks)`);
      return { args: [run, dues(c.offsets, speed), c.bytes], steps: 1, chunks, sizes: c.bytes };
    },
  },
  // stream-pipeline: the SDK suite's stream through a transform step. The
  // writer step returns a stream of `chunks` chunks of `size` bytes, the
  // transform step takes it, upper-cases each chunk (a TransformStream) and
  // writes it to the run's stream, which the adapter reads.
  "stream-pipeline": {
    workflow: "pipeline",
    max: "chunks",
    defaults: { chunks: "64", size: "16KB", interval: "0s" },
    plan(o, run) {
      const chunks = o.int("chunks");
      const sizes = o.sizes("size");
      if (sizes.length !== 1) throw new Unsupported(`option size=${o.given("size")}: want one size such as 16KB`);
      return { args: [run, chunks, o.duration("interval"), sizes[0]], steps: 2, chunks, sizes, transform: true };
    },
  },
};

/**
 * dues are the cadence's chunks' due times at speed, in ms after the
 * writer's start: each offset (ns) divided by speed and truncated to the
 * ns, as durabench's StreamSpec.Due divides a time.Duration.
 * @param {number[]} offsets ns
 * @param {number} speed
 * @returns {number[]}
 */
export function dues(offsets, speed) {
  return offsets.map((ns) => {
    let q = Math.trunc(ns / speed);
    if (q * speed > ns) q--; // a quotient the division rounded up
    return q / 1e6;
  });
}

/**
 * plan reads a start's options: what to start, or Unsupported (422).
 * @param {string} scenario
 * @param {Record<string, any> | undefined} options
 * @param {Limits} limits
 * @param {string} run
 * @param {string} [cwd] where an option's relative path is (stream-replay's cadence file)
 * @returns {Plan}
 */
export function plan(scenario, options, limits, run, cwd = process.cwd()) {
  const s = Object.hasOwn(SCENARIOS, scenario) ? SCENARIOS[scenario] : undefined;
  // body is read first, whatever the scenario (0 where it has none).
  const o = new Options(options, s?.defaults ?? {}, limits, cwd);
  if (!s) throw new Unsupported(`workflow does not run scenario ${scenario}`);
  return { sizes: [], hook: false, ...s.plan(o, run), workflow: s.workflow };
}

/**
 * scenariosInfo is /v1/info's scenarios: each with the limit of its
 * bounded option.
 * @param {Limits} limits
 */
export function scenariosInfo(limits) {
  return Object.entries(SCENARIOS).map(([name, s]) => (s.max ? { name, max: { [s.max]: limits[LIMIT[s.max]] } } : { name }));
}

// Options reads a start's options: the value given, or the scenario's
// default (never checked against the limit) when it is missing or "".
export class Options {
  /**
   * @param {Record<string, any> | undefined} options
   * @param {Record<string, string>} defaults
   * @param {Limits} limits
   * @param {string} [cwd] where an option's relative path is
   */
  constructor(options, defaults, limits, cwd = process.cwd()) {
    this.options = options;
    this.defaults = defaults;
    this.limits = limits;
    this.cwd = cwd;
    // body: each step's fixed duration, ms.
    this.body = this.duration("body");
  }

  /**
   * given is the option's value as the start gave it, or undefined.
   * @param {string} name
   * @returns {any}
   */
  given(name) {
    const raw = this.options?.[name];
    return raw === undefined || raw === null || raw === "" ? undefined : raw;
  }

  /**
   * int reads an integer option of at least 1, within the adapter's limit
   * when it has one (branches, steps, chunks).
   * @param {Bounded | "speed"} name
   * @returns {number}
   */
  int(name) {
    const raw = this.given(name);
    if (raw === undefined) return Number(this.defaults[name]);
    const v = Number(raw);
    if (!Number.isInteger(v) || v < 1) throw new Unsupported(`option ${name}=${raw}: want a positive integer`);
    const max = name === "speed" ? Infinity : this.limits[LIMIT[name]];
    if (v > max) throw new Unsupported(`option ${name}=${v} is over its limit ${max}`);
    return v;
  }

  /**
   * duration reads a Go duration option in ms (0 for an option the
   * scenario does not have).
   * @param {string} name
   * @returns {number}
   */
  duration(name) {
    const raw = this.given(name) ?? this.defaults[name];
    if (raw === undefined) return 0;
    const ms = parseWait(raw);
    if (ms === 0 && !/^0+(\.0+)?(ns|us|µs|ms|s|m|h)?$/.test(raw)) throw new Unsupported(`option ${name}=${raw}: want a duration such as 10ms`);
    return ms;
  }

  /**
   * choice reads an option that is one of allowed.
   * @param {string} name
   * @param {string[]} allowed
   * @returns {string}
   */
  choice(name, allowed) {
    const v = this.given(name) ?? this.defaults[name];
    if (!allowed.includes(v)) throw new Unsupported(`option ${name}=${v}: want ${allowed.join(" or ")}`);
    return v;
  }

  /**
   * sizes reads a list of byte sizes: "64/1KB/16KB/64KB" (KB = 1024
   * bytes, MB = 1024 KB), each at least 1 byte and at most 16 MB.
   * @param {string} name
   * @returns {number[]}
   */
  sizes(name) {
    return parseSizes(name, String(this.given(name) ?? this.defaults[name]));
  }
}

/**
 * parseSizes reads sizes option `name`'s value raw.
 * @param {string} name
 * @param {string} raw
 * @returns {number[]}
 */
export function parseSizes(name, raw) {
  return raw.split("/").map((part) => {
    const m = /^(\d+)(B|KB|MB)?$/i.exec(part.trim());
    /** @type {Record<string, number>} */
    const unit = { b: 1, kb: 1024, mb: 1024 * 1024 };
    const n = m ? Number(m[1]) * unit[(m[2] ?? "b").toLowerCase()] : 0;
    if (n < 1 || n > 16 * 1024 * 1024) throw new Unsupported(`option ${name}=${raw}: want sizes such as 64/1KB/16KB, each 1 B to 16 MB`);
    return n;
  });
}

/**
 * unitHash maps s to [0, 1) (FNV-1a).
 * @param {string} s
 * @returns {number}
 */
export function unitHash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 2 ** 32;
}
