// @ts-check
// Reading a run's history from the world's event log, and checking it: per
// run, every step started and completed exactly once, exactly one terminal
// event, and the run's status agreeing with its terminal event. What does not
// hold is an anomaly, reported in the run's timeline answer
// (docs/target-protocol.md, "anomalies").

/** @typedef {import("./types.mjs").Anomaly} Anomaly */

/**
 * An event of the world's event log (the fields read here).
 * @typedef {{ eventType: string, correlationId?: string, eventId?: string, createdAt?: Date | string }} HistoryEvent
 */

/**
 * readEvents returns every event of the SDK run, oldest first.
 * @param {any} world the SDK's world
 * @param {string} runId the SDK's run id
 * @returns {Promise<HistoryEvent[]>}
 */
export async function readEvents(world, runId) {
  /** @type {HistoryEvent[]} */
  const out = [];
  let cursor;
  for (;;) {
    /** @type {{ data: HistoryEvent[], hasMore: boolean, cursor?: string }} */
    const page = await world.events.list({
      runId,
      pagination: { limit: 1000, sortOrder: "asc", ...(cursor ? { cursor } : {}) },
      resolveData: "none",
    });
    out.push(...page.data);
    if (!page.hasMore || !page.cursor) return out;
    cursor = page.cursor;
  }
}

/**
 * recordEvents makes the run's own events from its record, for SDKs whose
 * event log holds none (the 4.0.1 betas: their log has only step, hook and
 * wait events; the run's start and end are its record's startedAt,
 * completedAt and status): run_started at startedAt and, once the status
 * is terminal, run_completed/failed/cancelled at completedAt (updatedAt if
 * none). Later SDKs write them to the log, and get none from here.
 * @param {any} run the world's run record
 * @returns {HistoryEvent[]}
 */
export function recordEvents(run) {
  /** @type {HistoryEvent[]} */
  const out = [];
  if (run.startedAt) out.push(/** @type {any} */ ({ eventId: "record:run_started", eventType: "run_started", createdAt: run.startedAt }));
  if (["completed", "failed", "cancelled"].includes(run.status)) {
    out.push(/** @type {any} */ ({ eventId: "record:run_terminal", eventType: `run_${run.status}`, createdAt: run.completedAt ?? run.updatedAt }));
  }
  return out;
}

const TERMINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);
/** @param {string} type */
export const isTerminal = (type) => TERMINAL.has(type);

/**
 * checkHistory returns the anomalies of a finished run's event log.
 * `steps` is how many steps the scenario runs; `status` the run's status
 * as the world reports it; `bodies` maps a step id to how many times its
 * body ran in this process.
 * @param {HistoryEvent[]} events
 * @param {number} steps
 * @param {string | undefined} status
 * @param {Map<string, number>} bodies
 * @returns {Anomaly[]}
 */
export function checkHistory(events, steps, status, bodies) {
  /** @type {Anomaly[]} */
  const out = [];
  /** @type {Map<string | undefined, number>} */
  const started = new Map();
  /** @type {Map<string | undefined, number>} */
  const completed = new Map();
  /** @type {string[]} */
  const terminal = [];
  for (const e of events) {
    if (e.eventType === "step_started") started.set(e.correlationId, (started.get(e.correlationId) ?? 0) + 1);
    if (e.eventType === "step_completed") completed.set(e.correlationId, (completed.get(e.correlationId) ?? 0) + 1);
    if (isTerminal(e.eventType)) terminal.push(e.eventType);
  }
  for (const [id, n] of started) {
    if (n > 1) out.push({ kind: "duplicate_step_started", detail: `${id}: step_started x${n}` });
  }
  for (const [id, n] of completed) {
    if (n > 1) out.push({ kind: "duplicate_step_completed", detail: `${id}: step_completed x${n}` });
  }
  for (const id of started.keys()) {
    if (!completed.has(id)) out.push({ kind: "missing_step_completed", detail: `${id}: started, never completed` });
  }
  if (completed.size !== steps) {
    out.push({ kind: "step_count", detail: `${completed.size} steps completed, the scenario runs ${steps}` });
  }
  for (const [id, n] of bodies) {
    if (n > 1) out.push({ kind: "duplicate_step_body", detail: `${id}: body ran x${n}` });
  }
  if (terminal.length === 0) {
    out.push({ kind: "missing_terminal", detail: "no terminal event" });
  } else if (terminal.length > 1) {
    /** @type {Record<string, number>} */
    const counts = {};
    for (const t of terminal) counts[t] = (counts[t] ?? 0) + 1;
    out.push({
      kind: "duplicate_terminal",
      detail: Object.entries(counts).map(([t, n]) => `${t} x${n}`).join(", "),
    });
  }
  if (terminal.length > 0 && status) {
    /** @type {Record<string, string>} */
    const statusOf = { run_completed: "completed", run_failed: "failed", run_cancelled: "cancelled" };
    const want = statusOf[terminal[0]];
    if (status !== want) out.push({ kind: "status_mismatch", detail: `status ${status}, terminal event ${terminal[0]}` });
  }
  return out;
}
