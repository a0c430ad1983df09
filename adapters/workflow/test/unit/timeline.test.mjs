// @ts-check
// lib/timeline.mjs: a run's timeline, its long polls, Go durations.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseWait, RunLog } from "../../lib/timeline.mjs";

test("parseWait reads Go durations, bounded by 30 s", () => {
  assert.equal(parseWait("5s"), 5000);
  assert.equal(parseWait("250ms"), 250);
  assert.equal(parseWait("1m30s"), 30_000);
  assert.equal(parseWait("1.5s"), 1500);
  assert.equal(parseWait(""), 0);
  assert.equal(parseWait("soon"), 0);
});

test("a long poll waits for an event, answers at once for a waiting hook or a finished run", async () => {
  const log = new RunLog("r");
  let t = Date.now();
  assert.deepEqual((await log.poll(0, 120)).events, []);
  assert.ok(Date.now() - t >= 100, "an empty poll waits its wait");
  t = Date.now();
  setTimeout(() => log.add({ kind: "hook_waiting", at: 1, source: "history", token: "x" }), 30);
  const tl = await log.poll(0, 5000);
  assert.equal(tl.events[0].kind, "hook_waiting");
  assert.ok(Date.now() - t < 1000);
  log.add({ kind: "run_completed", at: 2, source: "history" });
  log.finish(false);
  t = Date.now();
  assert.equal((await log.poll(2, 5000)).status, "completed");
  assert.ok(Date.now() - t < 100);
});
