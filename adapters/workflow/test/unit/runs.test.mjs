// @ts-check
// lib/runs.mjs: a run as the worker follows it, and its timeline's messages
// to the main thread.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LogSink, Run } from "../../lib/runs.mjs";

/** @typedef {import("../../lib/types.mjs").FromWorker} FromWorker */

/**
 * newRun is a run whose sink's messages are in posts.
 * @param {ConstructorParameters<typeof Run>[1]} [plan]
 */
function newRun(plan = { steps: 2, sizes: [], hook: false }) {
  /** @type {FromWorker[]} */
  const posts = [];
  const st = new Run("r", plan, new LogSink("r", (m) => posts.push(m)));
  /** events is what the run's timeline got. */
  const events = () => posts.flatMap((m) => (m.t === "event" ? [m.ev] : []));
  return { st, posts, events };
}

const at = (/** @type {number} */ t) => performance.timeOrigin + t;

test("a new run expects its plan and has spent nothing", () => {
  const { st } = newRun({ steps: 3, chunks: 5, sizes: [10], hook: true });
  assert.equal(st.expect, 3);
  assert.equal(st.chunks, 5);
  assert.deepEqual(st.sizes, [10]);
  assert.equal(st.hook, true);
  assert.equal(st.terminal, null);
  assert.deepEqual(st.spent(), { deliveries: 0, host_us: 0, handler_us: 0, reads: 0, read_us: 0 });
});

test("a step body is its step_started, once per execution; its end bounds its completion", () => {
  const { st, events } = newRun();
  st.bodyRan(0, 1, 1, 10, 20, "s1", false);
  st.bodyRan(0, 1, 2, 30, 40, "s1", false); // a retry
  st.bodyRan(0, 0, 1, 11, 12, "s0", true);
  assert.deepEqual(events(), [
    { kind: "step_started", at: at(10), source: "worker", stage: 0, index: 1, attempt: 1 },
    { kind: "step_started", at: at(30), source: "worker", stage: 0, index: 1, attempt: 2 },
    { kind: "step_started", at: at(11), source: "worker", stage: 0, index: 0, attempt: 1 },
  ]);
  assert.deepEqual(st.bodies, new Map([["s1", 2], ["s0", 1]]));
  assert.deepEqual(st.steps.get("s1"), { stage: 0, index: 1, attempt: 2, end: at(20), done: false, inline: false });
  // completed (in the log) before the body's end: reported at the body's end
  st.apply([{ eventId: "e1", eventType: "step_completed", correlationId: "s1", createdAt: new Date(1000) }]);
  st.apply([{ eventId: "e2", eventType: "step_completed", correlationId: "s0", createdAt: new Date(performance.timeOrigin + 1e6) }]);
  const done = events().slice(3);
  assert.deepEqual(done[0], { kind: "step_completed", at: at(20), source: "history", stage: 0, index: 1, attempt: 2 });
  assert.deepEqual(done[1], { kind: "step_completed", at: Math.floor(performance.timeOrigin + 1e6) + 0.5, source: "history", stage: 0, index: 0, attempt: 1, inline: true });
});

test("the event log's events become timeline events once; the terminal one is kept for the end", () => {
  const { st, events, posts } = newRun({ steps: 1, sizes: [], hook: true });
  const t = new Date("2025-01-01T00:00:00.000Z");
  const w = t.getTime() + 0.5;
  const log = [
    { eventId: "1", eventType: "run_started", createdAt: t },
    { eventId: "2", eventType: "hook_created", createdAt: t },
    { eventId: "3", eventType: "hook_received", createdAt: t },
    { eventId: "4", eventType: "step_completed", correlationId: "never-ran-here", createdAt: t },
    { eventId: "5", eventType: "step_retrying", correlationId: "unknown", createdAt: t },
    { eventId: "6", eventType: "run_completed", createdAt: t },
    { eventId: "7", eventType: "run_failed", createdAt: t },
  ];
  st.apply(log);
  st.apply(log); // read again: nothing new
  assert.deepEqual(events(), [
    { kind: "run_started", at: w, source: "history" },
    { kind: "hook_waiting", at: w, source: "history", token: "r-h0" },
    { kind: "hook_received", at: w, source: "history", token: "r-h0" },
    { kind: "step_failed", at: w, source: "history", stage: 0, index: 0, attempt: 1, error: "step_retrying" },
  ]);
  assert.equal(st.hookDone, true);
  assert.equal(st.terminal, "run_completed");
  assert.deepEqual(st.terminalEvent, { kind: "run_completed", at: w, source: "history" });
  assert.ok(posts.every((m) => m.t === "event"));
  // a run reported over applies nothing more
  st.sink = null;
  st.apply([{ eventId: "8", eventType: "run_started", createdAt: t }]);
  assert.equal(events().length, 4);
});

test("a failed or cancelled run's terminal event is run_failed, with the event's type", () => {
  const { st } = newRun();
  st.apply([{ eventId: "1", eventType: "run_cancelled", createdAt: new Date(5) }]);
  assert.deepEqual(st.terminalEvent, { kind: "run_failed", at: 5.5, source: "history", error: "run_cancelled" });
});

test("a chunk's write is stamped and in the timeline", () => {
  const { st, events } = newRun({ steps: 1, chunks: 2, sizes: [], hook: false });
  st.chunkWritten(0, 1, 7);
  assert.equal(st.written[1], at(7));
  assert.deepEqual(events(), [{ kind: "chunk_written", at: at(7), source: "worker", stage: 0, index: 1 }]);
});

test("what the run cost is reported in µs; finish is one message", () => {
  const { st, posts } = newRun();
  Object.assign(st.cost, { deliveries: 3, hostMs: 1.2345, handlerMs: 10, reads: 2, readMs: 0.0004 });
  assert.deepEqual(st.spent(), { deliveries: 3, host_us: 1235, handler_us: 10000, reads: 2, read_us: 0 });
  st.sink?.finish(false, "run_completed", [], st.spent(), { kind: "run_completed", at: 1, source: "history" });
  assert.deepEqual(posts, [{ t: "finish", run: "r", failed: false, msg: "run_completed", anomalies: [], adapter: st.spent(), terminal: { kind: "run_completed", at: 1, source: "history" } }]);
});
