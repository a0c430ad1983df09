// @ts-check
// measure.mjs: the adapter's own share of what it measures. It starts the
// adapter, runs fan-outs one after another over the protocol, and prints per
// run the SDK's own event-log times (run_started -> last step_completed, ->
// run_completed) next to what the adapter spent on the run: its host around
// the SDK's handlers (converting each delivery's request and response) and
// its reads of the event log while the run ran (wall time of asynchronous
// reads: an upper bound of their share, they overlap the SDK's own work).
// Then the same with the adapter reading the log
// 20x less often (DURABENCH_WORKFLOW_READ_GAP_MS=1000), so the reads' effect
// on the SDK's own times shows.
//
//	node measure.mjs [--sdk 4.8.9] [--world local] [--branches 64] [--runs 5]
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    sdk: { type: "string", default: "4.8.9" },
    world: { type: "string", default: "local" },
    branches: { type: "string", default: "64" },
    runs: { type: "string", default: "5" },
  },
});

/**
 * A run's row: the SDK's times, what the adapter spent (ms).
 * @typedef {{ ttls: number, ttc: number, deliveries: number, host: number, handler: number, reads: number, read: number, anomalies: string }} Row
 */

/**
 * session runs the fan-outs on one adapter process, its log read every
 * readGap ms (undefined: the adapter's default).
 * @param {number} [readGap]
 * @returns {Promise<Row[]>}
 */
async function session(readGap) {
  const env = { ...process.env, ...(readGap ? { DURABENCH_WORKFLOW_READ_GAP_MS: String(readGap) } : {}) };
  const proc = spawn(process.execPath, [join(here, "adapter.mjs"), "--sdk", values.sdk, "--world", values.world], { env, stdio: ["ignore", "pipe", "inherit"] });
  /** @type {string} */
  const url = await new Promise((res, rej) => {
    let out = "";
    proc.stdout.on("data", (b) => {
      out += b;
      if (out.includes("\n")) res(out.split("\n")[0]);
    });
    proc.once("exit", (c) => rej(new Error(`adapter exited ${c}`)));
  });
  /**
   * @param {string} method
   * @param {string} path
   * @param {object} [body]
   * @returns {Promise<any>}
   */
  const call = async (method, path, body) => (await fetch(url + path, { method, body: body && JSON.stringify(body) })).json();
  /** @type {Row[]} */
  const rows = [];
  for (let i = 0; i <= Number(values.runs); i++) {
    const run = `m${readGap ?? 0}-${i}`;
    await call("POST", "/v1/runs", { run, scenario: "fanout", options: { branches: values.branches } });
    /** @type {import("./lib/types.mjs").TimelineEvent[]} */
    const events = [];
    let tl;
    do {
      tl = await call("GET", `/v1/runs/${run}/timeline?after=${events.length}&wait=10s`);
      events.push(...tl.events);
    } while (tl.status === "running");
    if (i === 0) continue; // warm-up
    /** @param {string} kind */
    const at = (kind) => events.filter((e) => e.kind === kind).map((e) => e.at);
    const start = at("run_started")[0];
    /** @param {number} ns */
    const ms = (ns) => ns / 1e6;
    const a = tl.adapter;
    rows.push({
      ttls: ms(Math.max(...at("step_completed")) - start),
      ttc: ms(at("run_completed")[0] - start),
      deliveries: a.deliveries,
      host: a.host_us / 1000,
      handler: a.handler_us / 1000,
      reads: a.reads,
      read: a.read_us / 1000,
      anomalies: (tl.anomalies ?? []).map((/** @type {import("./lib/types.mjs").Anomaly} */ x) => `${x.kind}: ${x.detail}`).join("; "),
    });
  }
  const exited = new Promise((r) => proc.once("exit", r));
  proc.kill("SIGTERM");
  await exited;
  return rows;
}

/** @param {number[]} xs */
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
/** @param {number} x */
const f = (x) => x.toFixed(1);
console.log(`workflow ${values.sdk} · ${values.world}, fan-out ${values.branches}, ${values.runs} runs each (medians, ms)`);
console.log("log reads every   TTLS (log)  TTC (log)  deliveries  host   handlers  reads  reading  host+reading / TTC");
for (const gap of [undefined, 1000]) {
  const rows = await session(gap);
  /** @param {Exclude<keyof Row, "anomalies">} k */
  const m = (k) => med(rows.map((r) => r[k]));
  console.log(
    `${String(gap ?? 50).padStart(7)} ms  ${f(m("ttls")).padStart(12)} ${f(m("ttc")).padStart(10)} ${String(m("deliveries")).padStart(11)} ${f(m("host")).padStart(6)} ${f(m("handler")).padStart(9)} ${String(m("reads")).padStart(6)} ${f(m("read")).padStart(8)}  ${((100 * (m("host") + m("read"))) / m("ttc")).toFixed(1)}%`,
  );
  for (const r of rows) if (r.anomalies) console.log(`  anomalies: ${r.anomalies}`);
}
