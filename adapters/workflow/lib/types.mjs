// @ts-check
// The types the adapter's modules share (JSDoc only: this module exports
// nothing at run time). The SDK's own objects are typed `any`: its packages
// are loaded at run time from sdk/VERSION (--sdk), never installed here.

/**
 * The adapter's flags, as lib/flags.mjs parses them; they cross to the
 * worker thread as they are (workerData).
 * @typedef {object} Flags
 * @property {boolean} help
 * @property {boolean} buildOnly make the --sdk build, print it and exit
 * @property {string} host
 * @property {number} port
 * @property {"local" | "postgres"} world
 * @property {string | undefined} pgURL
 * @property {boolean} pgNoFsync
 * @property {string} sdk
 * @property {Record<string, string>} env the SDK's switches (--env)
 * @property {number} maxBranches
 * @property {number} maxSteps
 * @property {number} maxChunks
 * @property {boolean} spans report the SDK's OpenTelemetry spans (protocol 1.2 span events; --spans off: none)
 */

/**
 * A timeline event (docs/target-protocol.md). Its `at` (and `written`) is
 * absolute ms on the worker thread (lib/clock.mjs: abs), the target
 * clock's ns once the main thread has it.
 * @typedef {object} TimelineEvent
 * @property {string} kind
 * @property {number} at
 * @property {string} source
 * @property {number} [seq]
 * @property {number} [stage]
 * @property {number} [index]
 * @property {number} [attempt]
 * @property {string} [token]
 * @property {string} [error]
 * @property {number} [written]
 * @property {number} [bytes]
 * @property {boolean} [inline]
 * @property {number} [end] a span's end (lib/spans.mjs)
 * @property {string} [category] a span's critical-path category
 * @property {string} [name] a span's name
 * @property {number} [span] a span's id in its run
 * @property {number} [parent] the span holding it
 * @property {number} [after] the span it happens after
 * @property {number} [wait] its wait for backend capacity (ns)
 */

/**
 * Something wrong with a run's history or stream.
 * @typedef {{ kind: string, detail: string }} Anomaly
 */

/**
 * What the adapter itself spent on a run (its timeline's `adapter`).
 * @typedef {{ deliveries: number, host_us: number, handler_us: number, reads: number, read_us: number }} Cost
 */

/**
 * What the worker thread tells the main thread.
 * @typedef {{ t: "ready", info: object }
 *   | { t: "event", run: string, ev: TimelineEvent }
 *   | { t: "spans", run: string, spans: import("./spans.mjs").SpanEvent[] }
 *   | { t: "finish", run: string, failed: boolean, msg: string, anomalies: Anomaly[], adapter: Cost | null, terminal: TimelineEvent | null }
 *   | { t: "reply", id: number } & Reply} FromWorker
 */

/**
 * What the main thread asks of the worker thread (a call has an id the
 * worker's reply carries).
 * @typedef {{ t: "start", run: string, scenario: string, options: Record<string, any>, recv?: number, spans?: boolean }
 *   | { t: "resume", run: string, token: string, payload: any, recv?: number }
 *   | { t: "abandon", run: string }
 *   | { t: "close" }} ToWorker
 */

/**
 * The worker's answer to a call: an HTTP status and an error, or the SDK's
 * run id of a started run.
 * @typedef {{ code?: number, error?: string, sdkRun?: string }} Reply
 */

/**
 * What a worker thread is started with (workerData): the SDK's directory
 * (the process's working directory), and the directory the adapter was
 * started in, where an option's relative path is.
 * @typedef {{ dir: string, flags: Flags, switches: Record<string, string>, cwd: string }} WorkerData
 */

export {};
