// @ts-check
// lib/options.mjs: the scenarios' options, their defaults (the scenario
// book's, compared with `durabench list` when bin/durabench is built), and
// the plans they make.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadCadence } from "../../lib/cadence.mjs";
import { dues, Options, plan, SCENARIOS, scenariosInfo, unitHash, Unsupported } from "../../lib/options.mjs";

const limits = { maxBranches: 1024, maxSteps: 1024, maxChunks: 10000 };

test("a start without options runs the book's defaults", () => {
  const steady = loadCadence("steady");
  /** @type {Record<string, { workflow: string, args: any[], steps: number, chunks?: number, sizes?: number[], hook?: boolean, transform?: boolean }>} */
  const want = {
    fanout: { workflow: "fanout", args: ["r", 20, 0], steps: 20 },
    sequential: { workflow: "sequential", args: ["r", 50, 0], steps: 50 },
    step: { workflow: "step", args: ["r", 0], steps: 1 },
    "hook-step": { workflow: "hookStep", args: ["r", "r-h0", 0], steps: 1, hook: true },
    race: { workflow: "race", args: ["r", 4, 0, [0, 0, 0, 0]], steps: 5 },
    payload: { workflow: "payload", args: ["r", 10, 10240, false], steps: 10 },
    "stream-latency": { workflow: "stream", args: ["r", 20, 10, "text", []], steps: 1, chunks: 20 },
    "stream-overhead": { workflow: "stream", args: ["r", 300, 10, "text", []], steps: 1, chunks: 300 },
    "stream-sizes": { workflow: "stream", args: ["r", 60, 10, "text", [64, 1024, 16384, 65536]], steps: 1, chunks: 60, sizes: [64, 1024, 16384, 65536] },
    // steady: a chunk every 20 ms at speed 1, each its own size
    "stream-replay": { workflow: "replay", args: ["r", steady.offsets.map((_, i) => 20 * i), steady.bytes], steps: 1, chunks: 200, sizes: steady.bytes },
    // 64 × 16 KB = 1 MB, as fast as the stream takes it; writer and transform are the SDK's steps
    "stream-pipeline": { workflow: "pipeline", args: ["r", 64, 0, 16384], steps: 2, chunks: 64, sizes: [16384], transform: true },
  };
  assert.deepEqual(Object.keys(SCENARIOS), Object.keys(want));
  for (const [scenario, w] of Object.entries(want)) {
    assert.deepEqual(plan(scenario, {}, limits, "r"), { sizes: [], hook: false, ...w }, scenario);
    assert.deepEqual(plan(scenario, undefined, limits, "r"), plan(scenario, {}, limits, "r"), `${scenario}: no options`);
  }
});

test("an option given overrides its default; an empty one is the default", () => {
  assert.deepEqual(plan("fanout", { branches: "8", body: "5ms" }, limits, "r").args, ["r", 8, 5]);
  assert.deepEqual(plan("fanout", { branches: "" }, limits, "r").args, ["r", 20, 0]);
  assert.deepEqual(plan("payload", { steps: "3", size: "1KB", shape: "fanout" }, limits, "r").args, ["r", 3, 1024, true]);
  const s = plan("stream-overhead", { chunks: "7", interval: "2ms", shape: "structured" }, limits, "r");
  assert.deepEqual(s.args, ["r", 7, 2, "structured", []]);
  assert.equal(s.chunks, 7);
  // shape is stream-overhead's option only
  assert.deepEqual(plan("stream-latency", { shape: "structured" }, limits, "r").args[3], "text");
  assert.deepEqual(plan("stream-sizes", { sizes: "10/1KB", chunks: "6" }, limits, "r").sizes, [10, 1024]);
  assert.deepEqual(plan("stream-pipeline", { chunks: "8", size: "1MB", interval: "5ms" }, limits, "r").args, ["r", 8, 5, 1 << 20]);
});

test("stream-replay replays the cadence named, or the file given, at its speed", () => {
  const bursty = loadCadence("bursty");
  const p = plan("stream-replay", { cadence: "bursty", speed: "4" }, limits, "r");
  assert.deepEqual(p.args, ["r", dues(bursty.offsets, 4), bursty.bytes]);
  assert.equal(p.chunks, 200);
  assert.equal(p.args[1][199], 2801 / 4, "bursty's last chunk, at 2.801 s, is due 700.25 ms in at speed 4");
  // a file, by its path: the same cadence as its built-in name
  const file = fileURLToPath(new URL("../../../../examples/cadences/pauses.json", import.meta.url));
  assert.deepEqual(plan("stream-replay", { cadence: file }, limits, "r").args, plan("stream-replay", { cadence: "pauses" }, limits, "r").args);
  // a relative path is where the adapter was started (durabench's directory), not the SDK's where it runs
  const repo = fileURLToPath(new URL("../../../../", import.meta.url));
  assert.deepEqual(plan("stream-replay", { cadence: "examples/cadences/pauses.json" }, limits, "r", repo).args, plan("stream-replay", { cadence: "pauses" }, limits, "r").args);
});

test("a cadence's offsets at a speed are due as durabench divides a duration: truncated to the ns", () => {
  assert.deepEqual(dues([0, 1_000_000, 1_500_001], 1), [0, 1, 1.500001]);
  assert.deepEqual(dues([1_000_000, 1_500_001, 7], 3), [0.333333, 0.5, 0.000002]);
  // a quotient the float division would round up is truncated all the same
  const big = 86_400_000_000_000 - 1; // 24 h − 1 ns
  assert.equal(dues([big], 1000)[0], Math.floor(big / 1000) / 1e6);
  assert.ok(dues([big], 1000)[0] * 1e6 * 1000 <= big);
});

test("race's jitter draws are the run's own, in [0, jitter)", () => {
  const a = plan("race", { branches: "3", jitter: "100ms" }, limits, "run-1").args[3];
  assert.deepEqual(plan("race", { branches: "3", jitter: "100ms" }, limits, "run-1").args[3], a);
  assert.notDeepEqual(plan("race", { branches: "3", jitter: "100ms" }, limits, "run-2").args[3], a);
  for (const d of a) assert.ok(d >= 0 && d < 100);
  assert.equal(a[1], 100 * unitHash("run-1/1"));
});

test("what the SDK cannot run is Unsupported, with the option and why", () => {
  /** @param {string} scenario @param {Record<string, any>} options */
  const why = (scenario, options, lim = limits) => {
    try {
      plan(scenario, options, lim, "r");
    } catch (e) {
      assert.ok(e instanceof Unsupported, `${scenario} ${JSON.stringify(options)}: ${e}`);
      return e.message;
    }
    assert.fail(`${scenario} ${JSON.stringify(options)} planned`);
  };
  assert.equal(why("stream-nope", {}), "workflow does not run scenario stream-nope");
  assert.equal(why("__proto__", {}), "workflow does not run scenario __proto__");
  assert.equal(why("constructor", {}), "workflow does not run scenario constructor");
  assert.equal(why("fanout", { branches: "100000" }), "option branches=100000 is over its limit 1024");
  assert.equal(why("fanout", { branches: "0" }), "option branches=0: want a positive integer");
  assert.equal(why("sequential", { steps: "1.5" }), "option steps=1.5: want a positive integer");
  assert.equal(why("stream-latency", { chunks: "11" }, { ...limits, maxChunks: 10 }), "option chunks=11 is over its limit 10");
  assert.equal(why("step", { body: "soon" }), "option body=soon: want a duration such as 10ms");
  assert.equal(why("race", { jitter: "5" }), "option jitter=5: want a duration such as 10ms");
  assert.equal(why("payload", { shape: "tree" }), "option shape=tree: want sequence or fanout");
  assert.equal(why("payload", { size: "1KB/2KB" }), "option size=1KB/2KB: want one size such as 10KB");
  assert.equal(why("stream-overhead", { shape: "json" }), "option shape=json: want text or structured");
  assert.equal(why("stream-sizes", { sizes: "1KB/huge" }), "option sizes=1KB/huge: want sizes such as 64/1KB/16KB, each 1 B to 16 MB");
  assert.equal(why("stream-sizes", { sizes: "17MB" }), "option sizes=17MB: want sizes such as 64/1KB/16KB, each 1 B to 16 MB");
  assert.equal(why("stream-replay", { speed: "0" }), "option speed=0: want a positive integer");
  assert.equal(why("stream-replay", { speed: "fast" }), "option speed=fast: want a positive integer");
  assert.match(why("stream-replay", { cadence: "/no/such.json" }), /^option cadence: "\/no\/such.json" is neither a built-in cadence \(steady, bursty, pauses\) nor a readable file: ENOENT/);
  assert.equal(why("stream-replay", { cadence: "steady" }, { ...limits, maxChunks: 100 }), "option cadence=steady: 200 chunks, over the limit 100 (--max-chunks)");
  assert.equal(why("stream-pipeline", { chunks: "65" }, { ...limits, maxChunks: 64 }), "option chunks=65 is over its limit 64");
  assert.equal(why("stream-pipeline", { size: "1KB/2KB" }), "option size=1KB/2KB: want one size such as 16KB");
  // body is read whatever the scenario, before the scenario is known
  assert.equal(why("nope", { body: "x" }), "option body=x: want a duration such as 10ms");
});

test("a default is never held against the adapter's limit", () => {
  assert.equal(plan("fanout", {}, { ...limits, maxBranches: 10 }, "r").steps, 20);
  assert.equal(new Options({}, { x: "0s" }, limits).duration("x"), 0);
  assert.equal(new Options({}, {}, limits).duration("jitter"), 0, "an option the scenario does not have is 0");
});

test("info lists the scenarios in order, each with its bounded option's limit", () => {
  assert.deepEqual(scenariosInfo({ maxBranches: 1, maxSteps: 2, maxChunks: 3 }), [
    { name: "fanout", max: { branches: 1 } },
    { name: "sequential", max: { steps: 2 } },
    { name: "step" },
    { name: "hook-step" },
    { name: "race", max: { branches: 1 } },
    { name: "payload", max: { steps: 2 } },
    { name: "stream-latency", max: { chunks: 3 } },
    { name: "stream-overhead", max: { chunks: 3 } },
    { name: "stream-sizes", max: { chunks: 3 } },
    { name: "stream-replay" },
    { name: "stream-pipeline", max: { chunks: 3 } },
  ]);
});

// durabench is the binary make build writes (the repository's bin/).
const durabench = fileURLToPath(new URL("../../../../bin/durabench", import.meta.url));

test("the defaults are the scenario book's, as durabench list prints them", { skip: existsSync(durabench) ? false : `no ${durabench}: make build` }, () => {
  const out = execFileSync(durabench, ["list"], { encoding: "utf8" });
  /** @type {Record<string, Record<string, string>>} */
  const book = {};
  /** @type {Record<string, string> | null} */
  let options = null;
  for (const line of out.split("\n")) {
    const scenario = /^ {2}(\S+) — /.exec(line);
    if (scenario) {
      options = book[scenario[1]] = {};
      continue;
    }
    const option = /^ {6}(\w+)\s+.*?\bdefault (\S+)/.exec(line);
    if (options && option) options[option[1]] = option[2];
    if (!line.startsWith("  ")) options = null;
  }
  for (const [name, s] of Object.entries(SCENARIOS)) {
    assert.ok(book[name], `durabench list has no scenario ${name}`);
    assert.deepEqual(s.defaults, book[name], `${name}: the adapter's defaults against the book's`);
  }
});
