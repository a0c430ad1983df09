// @ts-check
// lib/spans.mjs: the SDK's OTel spans made span events — each span's
// category, its parent, the queue waits between a publish and its
// delivery, a body's stamps, and what is left out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AT, categoryOf, MESSAGE, RunSpans, TASK } from "../../lib/spans.mjs";

test("a span's category is what its name says it does", () => {
  /** @type {[string, string][]} */
  const cases = [
    ["queue.publish", "publish"],
    ["world.queue", "publish"],
    ["world.events.create step_started", "write"],
    ["world.events.create run_created", "write"],
    ["world.events.create", "write"],
    ["world.events.list", "log_load"],
    ["world.events.get", "log_load"],
    ["workflow.loadEvents", "log_load"],
    ["workflow.replay.load", "log_load"],
    ["world.runs.get", "run_read"],
    ["world.runs.list", "run_read"],
    ["world.hooks.getByToken", "run_read"],
    ["world.steps.get", "run_read"],
    ["world.runs.create", "write"],
    ["world.runs.cancel", "write"],
    ["world.hooks.dispose", "write"],
    ["world.streams.write", "write"],
    ["world.streams.get", "run_read"],
    ["step.execute", "compute"],
    ["step.execute noop", "compute"],
    ["step.hydrate", "compute"],
    ["workflow.replay", "compute"],
    ["WORKFLOW workflow//./workflows/bench//fanout", "compute"],
    ["STEP step//./workflows/bench//noop", "compute"],
    ["workflow.route.flow", "compute"],
    ["hook.resume", "compute"],
  ];
  for (const [name, cat] of cases) assert.equal(categoryOf(name), cat, name);
  assert.equal(categoryOf("step.execute", true), "body", "step.execute around a body the adapter saw run");
});

/**
 * spans records a tree of spans: [otel, parent, name, at, end, attrs].
 * @param {RunSpans} rs
 * @param {[string, string | undefined, string, number, number | null, Record<string, any>?][]} list
 */
function record(rs, list) {
  for (const [otel, parent, name, at, , attrs] of list) rs.start(otel, parent, name, at, attrs ?? {});
  for (const [otel, , , , end, attrs] of list) if (end !== null) rs.end(otel, end, attrs ?? {});
}

/**
 * byName maps a span's name to its event (the first of that name).
 * @param {import("../../lib/spans.mjs").SpanEvent[]} evs
 */
const byName = (evs) => new Map([...evs].reverse().map((e) => [e.name, e]));

test("a run's start task is all `start`; a delivery follows its queue wait, which follows the publish of its message", () => {
  const rs = new RunSpans();
  record(rs, [
    ["s", undefined, "run.start", 10, 20, { [TASK]: "start", [AT]: 9.5 }],
    ["s1", "s", "workflow.start fanout", 11, 19],
    ["s2", "s1", "world.events.create run_created", 12, 15],
    ["s3", "s1", "world.queue", 12, 18, { "messaging.message.id": "msg_1" }],
    ["f", undefined, "queue.deliver flow", 21, 40, { [TASK]: "flow", [MESSAGE]: "msg_1" }],
    ["f1", "f", "WORKFLOW fanout", 22, 39],
    ["f2", "f1", "world.events.create run_started", 23, 25],
    ["f3", "f1", "workflow.loadEvents", 25, 27],
    ["f4", "f3", "world.events.list", 25.5, 26.5],
    ["f5", "f1", "queue.publish", 30, 32, { "messaging.message.id": "msg_2" }],
    ["f6", "f5", "world.queue", 30.5, 31.5, { "messaging.message.id": "msg_2" }],
    ["d", undefined, "queue.deliver step", 31, 50, { [TASK]: "step", [MESSAGE]: "msg_2" }],
  ]);
  const evs = rs.events();
  const n = byName(evs);
  for (const name of ["run.start", "workflow.start fanout", "world.events.create run_created", "world.queue"]) {
    assert.equal(n.get(name)?.category, "start", `${name}: a call of the run's start is the start's`);
  }
  assert.equal(n.get("run.start")?.at, 9.5, "a task given its start (the request's receipt) starts there");
  assert.equal(n.get("run.start")?.parent, undefined);
  assert.equal(n.get("workflow.start fanout")?.parent, n.get("run.start")?.span);
  const flow = /** @type {any} */ (n.get("queue.deliver flow"));
  assert.equal(flow.category, "compute");
  const waits = evs.filter((e) => e.category === "queue_wait");
  assert.equal(waits.length, 2, "a queue wait per delivery whose publish is known");
  const w1 = /** @type {any} */ (waits.find((w) => w.span === flow.after));
  assert.deepEqual([w1.at, w1.end, w1.after], [18, 21, n.get("world.queue")?.span], "publish returning → handler starting, after the publish");
  const step = /** @type {any} */ (n.get("queue.deliver step"));
  const w2 = /** @type {any} */ (waits.find((w) => w.span === step.after));
  assert.deepEqual([w2.at, w2.end, w2.after], [31, 31, n.get("queue.publish")?.span], "a delivery before its publish returned: an empty wait, after the first publish of the message");
  assert.equal(n.get("WORKFLOW fanout")?.category, "compute");
  assert.equal(n.get("world.events.create run_started")?.category, "write");
  assert.equal(n.get("workflow.loadEvents")?.category, "log_load");
  assert.equal(n.get("world.events.list")?.parent, n.get("workflow.loadEvents")?.span);
  assert.equal(n.get("queue.publish")?.category, "publish");
  // Ids are unique, every reference names a span reported.
  const ids = new Set(evs.map((e) => e.span));
  assert.equal(ids.size, evs.length);
  for (const e of evs) {
    if (e.parent !== undefined) assert.ok(ids.has(e.parent), `${e.name}: parent ${e.parent}`);
    if (e.after !== undefined) assert.ok(ids.has(e.after), `${e.name}: after ${e.after}`);
    assert.ok(e.end >= e.at, `${e.name}: end >= at`);
    assert.equal(e.kind, "span");
    assert.equal(e.source, "sdk");
  }
  assert.equal(rs.closed, true);
  assert.equal(rs.start("late", undefined, "x", 60, {}), null, "nothing is recorded once the spans went out");
});

test("a step's body is its stamps, with its step; its step_completed write is cut at the completion", () => {
  const rs = new RunSpans();
  record(rs, [
    ["d", undefined, "queue.deliver step", 100, 130, { [TASK]: "step" }],
    ["d1", "d", "STEP noop", 101, 129],
    ["d2", "d1", "world.events.create step_started", 102, 105],
    ["d3", "d1", "step.execute", 106, 110],
    ["d4", "d1", "world.events.create step_completed", 111, 120],
    ["d5", "d1", "queue.publish", 121, 128],
  ]);
  assert.equal(rs.body("d3", 0, 7, 106.5, 109.5), true);
  assert.equal(rs.body("nope", 0, 7, 1, 2), false, "a span not of this run");
  const n = byName(rs.events(new Map([["0.7", 115]])));
  const body = /** @type {any} */ (n.get("step.execute"));
  assert.deepEqual([body.category, body.at, body.end, body.stage, body.index, body.parent], ["body", 106.5, 109.5, 0, 7, n.get("STEP noop")?.span]);
  const w = /** @type {any} */ (n.get("world.events.create step_completed"));
  assert.deepEqual([w.category, w.at, w.end], ["write", 111, 115], "the write recorded the completion at 115: the path ends there");
  assert.equal(n.get("world.events.create step_started")?.end, 105);
});

test("a write is cut only at a completion of a step its own task ran", () => {
  const rs = new RunSpans();
  record(rs, [
    ["a", undefined, "queue.deliver step", 0, 30, { [TASK]: "step" }],
    ["a1", "a", "step.execute", 1, 2],
    ["a2", "a", "world.events.create step_completed", 3, 20],
    ["b", undefined, "queue.deliver step", 0, 30, { [TASK]: "step" }],
    ["b1", "b", "step.execute", 1, 2],
    ["b2", "b", "world.events.create step_completed", 3, 20],
  ]);
  rs.body("a1", 0, 0, 1, 2);
  rs.body("b1", 0, 1, 1, 2);
  const evs = rs.events(new Map([["0.0", 10], ["0.1", 25]]));
  const writes = evs.filter((e) => e.category === "write").map((e) => e.end).sort((x, y) => x - y);
  assert.deepEqual(writes, [10, 20], "b's completion (25) is after its write: left as it is");
});

test("a span still open is left out, and so is a reference to it; a wait is ns within the span", () => {
  const rs = new RunSpans();
  record(rs, [
    ["d", undefined, "queue.deliver flow", 0, null, { [TASK]: "flow", [MESSAGE]: "msg_9" }],
    ["d1", "d", "world.events.create run_completed", 1, 3],
    ["d2", "d", "world.runs.get", 4, 5],
  ]);
  const r = /** @type {any} */ (rs.recs.get("d1"));
  r.wait = 0.5;
  /** @type {any} */ (rs.recs.get("d2")).wait = 9;
  const evs = rs.events();
  assert.deepEqual(evs.map((e) => e.name), ["world.events.create run_completed", "world.runs.get"]);
  assert.equal(evs[0].parent, undefined, "its parent is not reported");
  assert.equal(evs[0].wait, 500_000, "0.5 ms waiting for a connection");
  assert.equal(evs[1].wait, 1_000_000, "never more than the span");
  assert.equal(evs[1].category, "run_read");
});

test("a back-dated span starts where it was given; a task's own start wins", () => {
  const rs = new RunSpans();
  rs.start("x", undefined, "workflow.stream.read", 50, {});
  rs.end("x", 51, {}, 40);
  rs.start("t", undefined, "run.start", 50, { [TASK]: "start", [AT]: 45 });
  rs.end("t", 60, { [TASK]: "start", [AT]: 45 }, 30);
  const n = byName(rs.events());
  assert.equal(n.get("workflow.stream.read")?.at, 40);
  assert.equal(n.get("run.start")?.at, 45);
});
