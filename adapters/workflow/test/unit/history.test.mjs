// @ts-check
// lib/history.mjs: the check of a finished run's event log.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkHistory, recordEvents } from "../../lib/history.mjs";

test("checkHistory finds duplicate terminal events, missing and duplicate steps, a status disagreeing", () => {
  /** @param {string} eventType @param {string} [correlationId] */
  const ev = (eventType, correlationId) => ({ eventType, correlationId });
  const clean = [ev("run_started"), ev("step_started", "s1"), ev("step_completed", "s1"), ev("run_completed")];
  assert.deepEqual(checkHistory(clean, 1, "completed", new Map([["s1", 1]])), []);
  const dup = [...clean, ev("run_completed"), ev("run_completed")];
  assert.deepEqual(checkHistory(dup, 1, "completed", new Map()), [{ kind: "duplicate_terminal", detail: "run_completed x3" }]);
  const kinds = checkHistory(
    [ev("step_started", "s1"), ev("step_started", "s1"), ev("step_started", "s2"), ev("step_completed", "s1"), ev("step_completed", "s1")],
    2, "completed", new Map([["s1", 2]]),
  ).map((a) => a.kind);
  assert.deepEqual(kinds, ["duplicate_step_started", "duplicate_step_completed", "missing_step_completed", "step_count", "duplicate_step_body", "missing_terminal"]);
  assert.deepEqual(checkHistory([ev("run_failed")], 0, "completed", new Map()).map((a) => a.kind), ["status_mismatch"]);
});

test("the 4.0.1 betas' run events come from the run's record", () => {
  const started = new Date(1000), done = new Date(2000);
  assert.deepEqual(recordEvents({ status: "pending" }), []);
  assert.deepEqual(recordEvents({ status: "running", startedAt: started }).map((e) => e.eventType), ["run_started"]);
  const ev = recordEvents({ status: "completed", startedAt: started, completedAt: done });
  assert.deepEqual(ev.map((e) => [e.eventType, e.createdAt]), [["run_started", started], ["run_completed", done]]);
  assert.deepEqual(checkHistory(ev, 0, "completed", new Map()), []);
});
