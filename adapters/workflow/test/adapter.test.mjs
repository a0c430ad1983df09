// @ts-check
// The adapter process itself on the SDK make engines built (sdk/4.8.9 by
// default; WORKFLOW_TEST_SDK picks another), world-local, driven over the
// protocol as durabench drives it. The modules' own tests, which need no
// SDK, are under test/unit/.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const sdk = process.env.WORKFLOW_TEST_SDK ?? "4.8.9";

/**
 * A timeline answer as the tests read it.
 * @typedef {{ run: string, status: string, events: any[], error?: string, anomalies?: any[] }} Timeline
 */

/**
 * json is a response's JSON body.
 * @param {Promise<Response>} r
 * @returns {Promise<any>}
 */
const json = async (r) => (await r).json();

const built = existsSync(join(here, "..", "sdk", sdk, ".well-known", "workflow", "v1", "manifest.json"));

describe(`the adapter on SDK ${sdk}, world-local`, { skip: built ? false : `sdk/${sdk} is not built: make engines` }, () => {
  /** @type {import("node:child_process").ChildProcessByStdio<null, import("node:stream").Readable, null>} */
  let proc;
  /** @type {string} */
  let url;
  /**
   * @param {string} method
   * @param {string} path
   * @param {object} [body]
   * @returns {Promise<{ status: number, body: any }>}
   */
  const call = async (method, path, body) => {
    const r = await fetch(url + path, { method, headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) });
    return { status: r.status, body: await r.json().catch(() => null) };
  };
  /**
   * @param {string} run
   * @returns {Promise<Timeline>}
   */
  const follow = async (run) => {
    let after = 0;
    /** @type {any[]} */
    const events = [];
    for (;;) {
      /** @type {{ status: number, body: Timeline }} */
      const { status, body } = await call("GET", `/v1/runs/${run}/timeline?after=${after}&wait=10s`);
      assert.equal(status, 200);
      assert.equal(body.run, run);
      events.push(...body.events);
      after = events.length;
      if (body.events.some((e) => e.kind === "hook_waiting")) {
        const tok = body.events.find((e) => e.kind === "hook_waiting").token;
        for (let i = 0; i < 2; i++) {
          const r = await call("POST", `/v1/runs/${run}/hooks/${tok}`, { resume_id: `drv/${tok}`, payload: "b2s=" });
          assert.equal(r.status, 202);
        }
      }
      if (body.status !== "running") return { ...body, events };
    }
  };

  before(async () => {
    proc = spawn(process.execPath, [join(here, "..", "adapter.mjs"), "--sdk", sdk], { stdio: ["ignore", "pipe", "inherit"] });
    url = await new Promise((res, rej) => {
      let out = "";
      proc.stdout.on("data", (b) => {
        out += b;
        if (out.includes("\n")) res(out.split("\n")[0]);
      });
      proc.once("exit", (code) => rej(new Error(`adapter exited ${code} before it was ready`)));
    });
  });
  after(async () => {
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((res) => proc.once("exit", res));
    proc.kill("SIGTERM");
    assert.equal(await exited, 0, "SIGTERM stops the adapter cleanly");
  });

  test("info names the SDK, its world and the scenarios", async () => {
    const { body } = await call("GET", "/v1/info");
    assert.equal(body.protocol, 1);
    assert.equal(body.minor, 2, "1.2: span events");
    assert.equal(body.engine, "workflow");
    assert.equal(body.version, sdk);
    assert.match(body.world, /^world-local \d/);
    assert.match(body.label, new RegExp(`^workflow ${sdk.replace(/\./g, "\\.")} · local$`));
    assert.deepEqual(/** @type {{ name: string }[]} */ (body.scenarios).map((s) => s.name), ["fanout", "sequential", "step", "hook-step", "race", "payload", "stream-latency", "stream-overhead", "stream-sizes", "stream-replay", "stream-pipeline"]);
    assert.deepEqual(body.scenarios.find((/** @type {any} */ s) => s.name === "stream-pipeline").max, { chunks: 10000 });
  });

  test("a fan-out of 8: every step started and completed once, the terminal event before the status", async () => {
    const start = await call("POST", "/v1/runs", { run: "t-fan", scenario: "fanout", options: { branches: "8" }, spans: true });
    assert.equal(start.status, 202);
    assert.equal(start.body.run, "t-fan");
    const tl = await follow("t-fan");
    assert.equal(tl.status, "completed");
    assert.deepEqual(tl.events.map((e) => e.seq), tl.events.map((_, i) => i + 1));
    /** @param {string} kind */
    const idx = (kind) => tl.events.filter((e) => e.kind === kind).map((e) => e.index).sort((a, b) => a - b);
    assert.deepEqual(idx("step_started"), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(idx("step_completed"), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.equal(tl.events.at(-1).kind, "run_completed");
    for (const e of tl.events.filter((e) => e.kind === "step_completed")) {
      const s = tl.events.find((x) => x.kind === "step_started" && x.index === e.index);
      assert.ok(s.at <= e.at, `step ${e.index} completes before it starts`);
      assert.equal(s.source, "worker");
    }
    // anomalies, when the SDK wrote any, are named
    for (const a of tl.anomalies ?? []) assert.ok(a.kind && a.detail);
    // The SDK's spans (1.2, asked for), all before the terminal event: each step's
    // body with its step, starting at its step_started; every delivery
    // (5.0 runs steps inline: fewer than the steps) after its queue wait,
    // after the publish of its message.
    const spans = tl.events.filter((e) => e.kind === "span");
    assert.ok(spans.length > 8 * 4, `${spans.length} spans`);
    const ids = new Map(spans.map((e) => [e.span, e]));
    assert.equal(ids.size, spans.length, "span ids are unique");
    const cats = ["start", "queue_wait", "log_load", "write", "publish", "run_read", "compute", "body", "contention", "unattributed"];
    for (const e of spans) {
      assert.ok(cats.includes(e.category), `${e.name}: category ${e.category}`);
      assert.ok(e.end >= e.at, `${e.name}: end >= at`);
      if (e.parent !== undefined) assert.ok(ids.has(e.parent), `${e.name}: its parent is reported`);
      if (e.after !== undefined) assert.ok(ids.has(e.after), `${e.name}: what it follows is reported`);
    }
    for (const s of tl.events.filter((e) => e.kind === "step_started")) {
      const b = spans.find((e) => e.category === "body" && e.index === s.index && e.at === s.at);
      assert.ok(b, `step ${s.index}: a body span at its start`);
      assert.ok(b.parent !== undefined, `step ${s.index}: its body is in a task`);
    }
    const deliveries = spans.filter((e) => /^queue\.deliver /.test(e.name));
    assert.ok(deliveries.length >= 1, "the run's deliveries");
    for (const d of deliveries) assert.equal(ids.get(d.after)?.category, "queue_wait", `${d.name} ${d.span}: after its queue wait`);
    for (const w of spans.filter((e) => e.category === "queue_wait")) assert.match(ids.get(w.after)?.name ?? "", /^(queue\.publish|world\.queue)$/);
    assert.ok(spans.some((e) => e.category === "start"), "the run's start");
    assert.ok(spans.some((e) => e.category === "write" && /step_completed$/.test(e.name)), "the steps' completions written");
  });

  test("a hook-step resumes once however often it is resumed with one id", async () => {
    assert.equal((await call("POST", "/v1/runs", { run: "t-hook", scenario: "hook-step", spans: true })).status, 202);
    const tl = await follow("t-hook");
    assert.equal(tl.status, "completed");
    assert.deepEqual(tl.events.filter((e) => e.kind !== "step_started" && e.kind !== "span").map((e) => e.kind),
      ["run_started", "hook_waiting", "hook_received", "step_completed", "run_completed"]);
    assert.equal(tl.events.filter((e) => e.kind === "hook_received").length, 1);
    // The resume is a task of the run: hook.resume's spans are the run's.
    assert.ok(tl.events.some((e) => e.kind === "span" && e.name === "hook.resume"), "the resume's task");
  });

  test("a repeated run id is 409, an unknown scenario or an option over its limit 422", async () => {
    assert.equal((await call("POST", "/v1/runs", { run: "t-fan", scenario: "fanout" })).status, 409);
    assert.equal((await call("POST", "/v1/runs", { run: "t-x", scenario: "stream-nope" })).status, 422);
    assert.equal((await call("POST", "/v1/runs", { run: "t-w", scenario: "stream-replay", options: { cadence: "/no/such/cadence.json" } })).status, 422);
    assert.equal((await call("POST", "/v1/runs", { run: "t-z", scenario: "stream-sizes", options: { sizes: "1KB/huge" } })).status, 422);
    assert.equal((await call("POST", "/v1/runs", { run: "t-y", scenario: "fanout", options: { branches: "100000" } })).status, 422);
    assert.equal((await call("GET", "/v1/runs/t-x/timeline?after=0")).status, 404);
  });

  test("a stream-sizes run: every chunk written once and read once, with its size and its write time, out of order only as an anomaly", async () => {
    const start = await call("POST", "/v1/runs", { run: "t-stream", scenario: "stream-sizes", options: { chunks: "6", interval: "2ms", sizes: "10/1KB" } });
    assert.equal(start.status, 202);
    const tl = await follow("t-stream");
    assert.equal(tl.status, "completed");
    const written = tl.events.filter((e) => e.kind === "chunk_written");
    const read = tl.events.filter((e) => e.kind === "chunk_read");
    assert.deepEqual(written.map((e) => e.index), [0, 1, 2, 3, 4, 5]);
    // Each chunk read is known by what it holds (a chunk reported under its
    // place in the read would carry another's size and write time). 5.0's
    // world-local now and then hands two chunks over swapped: the run then
    // says so, naming the first chunk out of place, and nothing else.
    assert.deepEqual(read.map((e) => e.index).sort(), [0, 1, 2, 3, 4, 5]);
    const outOfPlace = read.findIndex((e, at) => e.index !== at);
    const anomalies = tl.anomalies ?? [];
    if (outOfPlace < 0) assert.deepEqual(anomalies, []);
    else assert.deepEqual(anomalies, [{ kind: "stream_order", detail: `chunk ${read[outOfPlace].index} read at position ${outOfPlace}` }]);
    assert.deepEqual(read.map((e) => e.bytes), read.map((e) => [10, 1024][e.index % 2]));
    for (const r of read) {
      assert.equal(r.written, written[r.index].at, `chunk ${r.index} carries its write time`);
      assert.ok(r.at >= r.written, `chunk ${r.index} read before it was written`);
    }
    // the writer is the SDK's step (index 0), the reader the run's readable (index 1)
    const steps = tl.events.filter((e) => e.kind === "step_completed").map((e) => `${e.index}:${e.source}`).sort();
    assert.deepEqual(steps, ["0:history", "1:sdk"]);
    // the terminal event comes after the last chunk read
    assert.equal(tl.events.at(-1).kind, "run_completed");
  });

  /**
   * checkStream checks a stream run's timeline: each chunk written once
   * and read once, under its writer's index, with its size and its write
   * time; out of order only as an anomaly; the steps and the terminal
   * event last.
   * @param {Timeline} tl
   * @param {number[]} sizes each chunk's size
   * @param {string[]} steps the steps completed, index:source, sorted
   */
  const checkStream = (tl, sizes, steps) => {
    assert.equal(tl.status, "completed");
    const written = tl.events.filter((e) => e.kind === "chunk_written");
    const read = tl.events.filter((e) => e.kind === "chunk_read");
    const all = sizes.map((_, i) => i);
    assert.deepEqual(written.map((e) => e.index), all);
    assert.deepEqual(read.map((e) => e.index).sort((a, b) => a - b), all);
    const outOfPlace = read.findIndex((e, at) => e.index !== at);
    const anomalies = tl.anomalies ?? [];
    if (outOfPlace < 0) assert.deepEqual(anomalies, []);
    else assert.deepEqual(anomalies, [{ kind: "stream_order", detail: `chunk ${read[outOfPlace].index} read at position ${outOfPlace}` }]);
    assert.deepEqual(read.map((e) => e.bytes), read.map((e) => sizes[e.index]));
    for (const r of read) {
      assert.equal(r.written, written[r.index].at, `chunk ${r.index} carries its write time`);
      assert.ok(r.at >= r.written, `chunk ${r.index} read before it was written`);
    }
    assert.deepEqual(tl.events.filter((e) => e.kind === "step_completed").map((e) => `${e.index}:${e.source}`).sort(), steps);
    assert.equal(tl.events.at(-1).kind, "run_completed");
    return { written, read };
  };

  test("a stream-replay run writes the cadence: chunk i at its offset / speed after the writer's start, with its size", async () => {
    const { loadCadence } = await import("../lib/cadence.mjs");
    const bursty = loadCadence("bursty");
    const speed = 4;
    // bursty's file by a path relative to the directory the adapter was started in (this one), as durabench names it
    const file = relative(process.cwd(), join(here, "..", "..", "..", "examples", "cadences", "bursty.json"));
    const start = await call("POST", "/v1/runs", { run: "t-replay", scenario: "stream-replay", options: { cadence: file, speed: String(speed) } });
    assert.equal(start.status, 202);
    const tl = await follow("t-replay");
    const { written } = checkStream(tl, bursty.bytes, ["0:history", "1:sdk"]);
    const writer = tl.events.find((e) => e.kind === "step_started" && e.index === 0);
    // (the last one 700 ms after the writer's start: bursty's 2.8 s at speed 4)
    for (const w of written) {
      const due = writer.at + bursty.offsets[w.index] / speed;
      assert.ok(w.at >= due - 1e5, `chunk ${w.index} written ${(due - w.at) / 1e6} ms before it is due`);
    }
  });

  test("a stream-pipeline run: the writer's stream through the transform step, read upper-cased with the writer's times", async () => {
    const start = await call("POST", "/v1/runs", { run: "t-pipe", scenario: "stream-pipeline", options: { chunks: "8", size: "4KB" } });
    assert.equal(start.status, 202);
    const tl = await follow("t-pipe");
    // writer (0) and transform (2) are the SDK's steps, the reader (1) the run's readable
    checkStream(tl, Array(8).fill(4096), ["0:history", "1:sdk", "2:history"]);
    const transform = tl.events.find((e) => e.kind === "step_started" && e.index === 2);
    assert.equal(transform.source, "worker");
    const last = tl.events.filter((e) => e.kind === "chunk_read").at(-1);
    assert.ok(last.at >= tl.events.filter((e) => e.kind === "chunk_written").at(-1).at);
  });

  test("a finished run's timeline stays until it is deleted", async () => {
    assert.equal((await call("GET", "/v1/runs/t-fan/timeline?after=0")).status, 200);
    assert.equal((await call("DELETE", "/v1/runs/t-fan")).status, 200);
    assert.equal((await call("GET", "/v1/runs/t-fan/timeline?after=0")).status, 404);
  });
});

// spawnAdapter starts the adapter with args and resolves with the process
// and its URL once it printed it.
/**
 * @param {string[]} args
 * @param {Record<string, string>} [env]
 */
async function spawnAdapter(args, env = {}) {
  const proc = spawn(process.execPath, [join(here, "..", "adapter.mjs"), ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  let errText = "";
  proc.stderr.on("data", (b) => (errText += b));
  /** @type {string} */
  const url = await new Promise((res, rej) => {
    let out = "";
    proc.stdout.on("data", (b) => {
      out += b;
      if (out.includes("\n")) res(out.split("\n")[0]);
    });
    proc.once("exit", (code) => rej(new Error(`adapter exited ${code} before it was ready: ${errText}`)));
  });
  const stop = async () => {
    if (proc.exitCode !== null) return proc.exitCode;
    const exited = new Promise((res) => proc.once("exit", res));
    proc.kill("SIGTERM");
    return exited;
  };
  return { proc, url, stop, stderr: () => errText };
}

describe(`SDK ${sdk}'s switches`, { skip: built ? false : `sdk/${sdk} is not built: make engines` }, () => {
  const dir = join(here, "..", "sdk", sdk);
  const is5 = sdk.startsWith("5.");

  test("a switch is read by the SDK's packages or named as unread", async () => {
    const { unreadSwitches } = await import("../lib/load.mjs");
    const five = ["WORKFLOW_RESILIENT_STEP_DISPATCH", "WORKFLOW_TURBO", "WORKFLOW_MAX_INLINE_STEPS", "WORKFLOW_VM"];
    // 4.8.9 has none of 5.0's switches; 5.0 reads them all.
    assert.deepEqual(unreadSwitches(dir, [...five, "WORKFLOW_NOT_A_SWITCH"]), is5 ? ["WORKFLOW_NOT_A_SWITCH"] : [...five, "WORKFLOW_NOT_A_SWITCH"]);
  });

  test("a switch the SDK does not read makes the target unavailable, with why, never a run of its default", async () => {
    const a = await spawnAdapter(["--sdk", sdk, "--env", "WORKFLOW_NOT_A_SWITCH=1"]);
    try {
      const info = await json(fetch(a.url + "/v1/info"));
      assert.match(info.unavailable, /does not read WORKFLOW_NOT_A_SWITCH/);
      assert.match(info.label, /not_a_switch=1/);
      const r = await fetch(a.url + "/v1/runs", { method: "POST", body: JSON.stringify({ run: "x", scenario: "step" }) });
      assert.equal(r.status, 422);
      const bad = await fetch(a.url + "/v1/runs", { method: "POST", body: JSON.stringify({ run: 7 }) });
      assert.equal(bad.status, 400, "a malformed start is 400 even where no start can run");
    } finally {
      assert.equal(await a.stop(), 0);
    }
  });

  test("WORKFLOW_VM=quickjs runs a fan-out on the QuickJS VM (Node 20 needs a V8 flag the adapter sets)", { skip: is5 ? false : "5.0's switch" }, async () => {
    const a = await spawnAdapter(["--sdk", sdk, "--env", "WORKFLOW_VM=quickjs"]);
    try {
      const info = await json(fetch(a.url + "/v1/info"));
      assert.equal(info.unavailable, undefined);
      assert.match(info.label, / · vm=quickjs · local$/);
      const r = await fetch(a.url + "/v1/runs", { method: "POST", body: JSON.stringify({ run: "q", scenario: "fanout", options: { branches: "4" } }) });
      assert.equal(r.status, 202);
      /** @type {Timeline} */
      let tl;
      for (let after = 0; ; ) {
        tl = await json(fetch(`${a.url}/v1/runs/q/timeline?after=${after}&wait=10s`));
        after += tl.events.length;
        if (tl.status !== "running") break;
      }
      assert.equal(tl.status, "completed", `the run ${tl.status}: ${a.stderr()}`);
    } finally {
      assert.equal(await a.stop(), 0);
    }
  });
});

describe(`SDK ${sdk}: runs durabench stopped following`, { skip: built ? false : `sdk/${sdk} is not built: make engines` }, () => {
  test("a running run nobody polls is cancelled in the SDK and its timeline ends failed (abandoned)", async () => {
    const a = await spawnAdapter(["--sdk", sdk], { DURABENCH_WORKFLOW_ABANDON_MS: "1500" });
    try {
      // a hook-step run waits for its hook for ever: never resumed, never polled
      const r = await fetch(a.url + "/v1/runs", { method: "POST", body: JSON.stringify({ run: "lost", scenario: "hook-step" }) });
      assert.equal(r.status, 202);
      await new Promise((res) => setTimeout(res, 4000));
      const tl = await json(fetch(`${a.url}/v1/runs/lost/timeline?after=0`));
      assert.equal(tl.status, "failed");
      assert.match(tl.error, /abandoned/);
      assert.equal(tl.events.at(-1).kind, "run_failed", "the terminal event is in the timeline with the status");
      assert.match(a.stderr(), /run lost not followed for 1.5 s: cancelled/);
    } finally {
      assert.equal(await a.stop(), 0);
    }
  });
});

describe(`SDK ${sdk}: a new SDK for every cell`, { skip: built ? false : `sdk/${sdk} is not built: make engines` }, () => {
  test("a run still running when the next cell starts ends failed (cut) with the SDK that ran it; the new cell's run completes", async () => {
    const a = await spawnAdapter(["--sdk", sdk]);
    try {
      /** @param {object} body */
      const post = (body) => fetch(a.url + "/v1/runs", { method: "POST", body: JSON.stringify(body) });
      assert.equal((await post({ run: "waits", scenario: "hook-step" })).status, 202); // never resumed
      assert.equal((await post({ run: "next", scenario: "fanout", options: { branches: "4" } })).status, 202);
      /** @type {Timeline} */
      let tl;
      for (let after = 0; ; ) {
        tl = await json(fetch(`${a.url}/v1/runs/next/timeline?after=${after}&wait=10s`));
        after += tl.events.length;
        if (tl.status !== "running") break;
      }
      assert.equal(tl.status, "completed");
      const cut = await json(fetch(`${a.url}/v1/runs/waits/timeline?after=0`));
      assert.equal(cut.status, "failed");
      assert.match(cut.error, /^cut: the next cell started/);
      assert.equal(cut.events.at(-1).kind, "run_failed");
    } finally {
      assert.equal(await a.stop(), 0);
    }
  });
});

// --sdk DIR of package tarballs, built by the adapter (test/sdkbuild.mjs):
// it installs from the registry, so it runs in make test-targets (which
// names the SDK: WORKFLOW_TEST_SDK), once, with 4.8.9. `node --test test/`
// runs test/sdkbuild.mjs itself.
if (process.env.WORKFLOW_TEST_SDK === "4.8.9") await import("./sdkbuild.mjs");
