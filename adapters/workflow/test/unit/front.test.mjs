// @ts-check
// lib/front.mjs: the protocol front on a fake SDK worker (an EventEmitter
// that answers the front's calls as the worker thread does): starts,
// timelines, deletes, resumes' dedupe, a new SDK for every cell, a worker
// that dies, runs nobody follows.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { test } from "node:test";
import { Front } from "../../lib/front.mjs";

/** @typedef {import("../../lib/types.mjs").ToWorker & { id?: number }} Sent */
/** @typedef {import("../../lib/types.mjs").Reply} Reply */

// FakeWorker is an SDK worker thread: it is ready at once, answers each
// call with what answer returns (nothing: no answer yet), and exits when
// closed or terminated.
class FakeWorker extends EventEmitter {
  /** @param {(m: Sent) => Reply | undefined} answer */
  constructor(answer) {
    super();
    this.answer = answer;
    /** @type {Sent[]} */
    this.sent = [];
    this.exited = false;
    setImmediate(() => this.emit("message", { t: "ready", info: { engine: "fake" } }));
  }

  /** @param {Sent} m */
  postMessage(m) {
    this.sent.push(m);
    const r = m.t === "close" ? {} : this.answer(m);
    const id = m.id;
    if (r && id !== undefined) setImmediate(() => this.say({ t: "reply", id, ...r }));
    if (m.t === "close") setImmediate(() => this.exit(0));
  }

  /** @param {import("../../lib/types.mjs").FromWorker} m */
  say(m) {
    this.emit("message", m);
  }

  /** @param {number} code */
  exit(code) {
    if (this.exited) return;
    this.exited = true;
    this.emit("exit", code);
  }

  async terminate() {
    this.exit(1);
  }
}

/**
 * newFront is a front whose workers answer with answer; workers lists
 * every worker it started, cells counts the world's new cells.
 * @param {(m: Sent) => Reply | undefined} [answer]
 */
async function newFront(answer = (m) => (m.t === "start" ? { code: 202, sdkRun: `sdk-${m.run}` } : m.t === "resume" ? {} : undefined)) {
  /** @type {FakeWorker[]} */
  const workers = [];
  const world = { cells: 0, newCell() { this.cells++; } };
  const front = new Front(() => {
    const w = new FakeWorker(answer);
    workers.push(w);
    return /** @type {any} */ (w);
  }, world);
  const info = await front.ready;
  const ep = front.endpoints(info);
  const signal = new AbortController().signal;
  /** @param {string} run */
  const timeline = async (run) => /** @type {any} */ (await /** @type {NonNullable<typeof ep.timeline>} */ (ep.timeline)(run, 0, 0, signal));
  return { front, ep, workers, world, timeline, info };
}

test("a run is started in the worker, its events and its end are its timeline, and it is deleted once over", async () => {
  const { front, ep, workers, timeline, info } = await newFront();
  try {
    assert.deepEqual(info, { engine: "fake" });
    assert.deepEqual(ep.info(), info);
    const [code, body] = await ep.start({ run: "r", scenario: "step", options: {} });
    assert.equal(code, 202);
    assert.deepEqual(/** @type {any} */ (body).sdk_run, "sdk-r");
    const { recv, ...sent } = /** @type {any} */ (workers[0].sent[0]);
    assert.deepEqual(sent, { t: "start", run: "r", scenario: "step", options: {}, id: 1 });
    assert.ok(Math.abs(recv - (performance.timeOrigin + performance.now())) < 5000, "the start's receipt, absolute ms");
    assert.deepEqual(await ep.start({ run: "r", scenario: "step", options: {} }), [409, { error: "run r exists", run: "r" }]);
    // worker times (absolute ms) become the target clock (ns), never after now
    const w = workers[0];
    w.say({ t: "event", run: "r", ev: { kind: "run_started", at: performance.timeOrigin + performance.now() - 5, source: "history" } });
    w.say({ t: "event", run: "nobody", ev: { kind: "run_started", at: 0, source: "history" } });
    const [, tl] = await timeline("r");
    assert.equal(tl.status, "running");
    assert.equal(tl.events.length, 1);
    assert.ok(tl.events[0].at > 0 && tl.events[0].at <= performance.now() * 1e6);
    assert.deepEqual(/** @type {any} */ (ep.remove)?.("r"), [409, { error: "run r is running" }]);
    w.say({ t: "finish", run: "r", failed: false, msg: "run_completed", anomalies: [{ kind: "k", detail: "d" }], adapter: null, terminal: { kind: "run_completed", at: performance.timeOrigin, source: "history" } });
    const [, done] = await timeline("r");
    assert.equal(done.status, "completed");
    assert.deepEqual(done.anomalies, [{ kind: "k", detail: "d" }]);
    assert.equal(done.events.at(-1).kind, "run_completed");
    assert.deepEqual(ep.remove?.("r"), [200, { run: "r" }]);
    assert.deepEqual(ep.remove?.("r"), [404, { error: "no run r" }]);
    assert.deepEqual(await timeline("r"), [404, { error: "no run r" }]);
  } finally {
    await front.close();
  }
});

test("a start the worker refuses is answered with its code and forgotten", async () => {
  const { front, ep, timeline } = await newFront((m) => (m.t === "start" ? { code: 422, error: "no such scenario" } : undefined));
  try {
    assert.deepEqual(await ep.start({ run: "x", scenario: "nope", options: {} }), [422, { error: "no such scenario", run: "x" }]);
    assert.equal((await timeline("x"))[0], 404);
  } finally {
    await front.close();
  }
});

test("a resume id resumes once; a failed resume may be retried with its id", async () => {
  let fail = true;
  const { front, ep, workers } = await newFront((m) => {
    if (m.t === "start") return { code: 202, sdkRun: "s" };
    if (m.t === "resume") return fail ? { error: "not yet" } : {};
  });
  const resume = /** @type {NonNullable<typeof ep.resume>} */ (ep.resume);
  try {
    await ep.start({ run: "h", scenario: "hook-step", options: {} });
    assert.deepEqual(await resume("nobody", "t", "id", ""), [404, { error: "no run nobody" }]);
    assert.deepEqual(await resume("h", "h-h0", "id-1", "p"), [500, { error: "resume h-h0: not yet", run: "h" }]);
    fail = false;
    const answers = await Promise.all([resume("h", "h-h0", "id-1", "p"), resume("h", "h-h0", "id-1", "p"), resume("h", "h-h0", "id-1", "p")]);
    assert.deepEqual(answers, [[202, { run: "h" }], [202, { run: "h" }], [202, { run: "h" }]]);
    assert.deepEqual(await resume("h", "h-h0", "id-2", "p"), [202, { run: "h" }]);
    const resumes = workers[0].sent.filter((m) => m.t === "resume");
    assert.equal(resumes.length, 3, "the failed one, id-1 once more, id-2");
    const { recv, ...r1 } = /** @type {any} */ (resumes[1]);
    assert.deepEqual(r1, { t: "resume", run: "h", token: "h-h0", payload: "p", id: resumes[1].id });
    assert.ok(Math.abs(recv - (performance.timeOrigin + performance.now())) < 5000, "the resume's receipt, absolute ms: its task starts there");
  } finally {
    await front.close();
  }
});

test("another scenario or other options start a new cell: the runs still running are cut, a new SDK and world serve it", async () => {
  const { front, ep, workers, world, timeline } = await newFront();
  try {
    await ep.start({ run: "a", scenario: "fanout", options: { branches: "4" } });
    await ep.start({ run: "b", scenario: "fanout", options: { branches: "4" } });
    assert.equal(workers.length, 1, "the same cell");
    await ep.start({ run: "c", scenario: "fanout", options: { branches: "8" } });
    assert.equal(workers.length, 2);
    assert.equal(world.cells, 1);
    assert.ok(workers[0].exited && workers[0].sent.some((m) => m.t === "close"), "the last cell's SDK was closed");
    assert.equal(workers[1].sent[0].t, "start");
    for (const run of ["a", "b"]) {
      const [, tl] = await timeline(run);
      assert.equal(tl.status, "failed");
      assert.match(tl.error, /^cut: the next cell started/);
      assert.equal(tl.events.at(-1).kind, "run_failed");
    }
    assert.equal((await timeline("c"))[1].status, "running");
  } finally {
    await front.close();
  }
});

test("a worker that dies fails the runs it held and the calls waiting on it, with why", async () => {
  const { front, ep, workers, timeline } = await newFront((m) => (m.t === "start" ? { code: 202, sdkRun: "s" } : undefined));
  try {
    await ep.start({ run: "a", scenario: "step", options: {} });
    const waiting = /** @type {NonNullable<typeof ep.resume>} */ (ep.resume)("a", "t", "id", ""); // never answered
    workers[0].emit("error", new Error("out of memory (expected by the test)"));
    workers[0].exit(1);
    const [, tl] = await timeline("a");
    assert.equal(tl.status, "failed");
    assert.equal(tl.error, "the SDK's worker thread exited (code 1: out of memory (expected by the test))");
    assert.deepEqual(await waiting, [500, { error: `resume t: ${tl.error}`, run: "a" }]);
    assert.deepEqual(await ep.start({ run: "b", scenario: "step", options: {} }), [500, { error: tl.error, run: "b" }]);
  } finally {
    // No close: the worker is gone (close would wait 10 s for its exit).
    clearInterval(front.sweeper);
    clearInterval(front.watcher);
  }
});

test("a running run nobody polled for ABANDON_MS is abandoned in the SDK, once", async () => {
  const { front, ep, workers } = await newFront();
  try {
    await ep.start({ run: "lost", scenario: "hook-step", options: {} });
    await ep.start({ run: "kept", scenario: "hook-step", options: {} });
    const lost = /** @type {import("../../lib/front.mjs").Followed} */ (front.runs.get("lost"));
    lost.lastPoll = 0;
    front.abandoned();
    front.abandoned();
    assert.deepEqual(workers[0].sent.filter((m) => m.t === "abandon"), [{ t: "abandon", run: "lost" }]);
    assert.equal(lost.abandoned, true);
  } finally {
    await front.close();
  }
});
