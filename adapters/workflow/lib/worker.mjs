// @ts-check
// The worker thread's entry (lib/front.mjs starts one for every cell): it
// runs the SDK — its routes on a loopback server of their own (world-local's
// queue and world-postgres' worker deliver there), the runs, the history
// reads — and answers the main thread's calls.
import { parentPort, workerData } from "node:worker_threads";
import { close, listen, urlOf } from "./http.mjs";
import { openSDK } from "./load.mjs";
import { patchWorldPool, setUpTracing } from "./otel.mjs";
import { warn } from "./process.mjs";
import { Adapter } from "./sdk.mjs";

/** @typedef {import("./types.mjs").WorkerData} WorkerData */
/** @typedef {import("./types.mjs").ToWorker} ToWorker */
/** @typedef {import("./types.mjs").FromWorker} FromWorker */
/** @typedef {import("./types.mjs").Reply} Reply */

/**
 * @param {import("node:worker_threads").MessagePort} port
 * @param {WorkerData} data
 */
async function main(port, { dir, flags, switches, cwd }) {
  const server = await listen(0, "127.0.0.1");
  const base = urlOf(server);
  process.env.WORKFLOW_LOCAL_BASE_URL = base;
  process.env.WORKFLOW_EMBEDDED_BASE_URL = base; // world-local of the 4.0.1 betas (lib/world.mjs localNames)
  // world-local 4.0.1-beta.7 (workflow 4.0.1-beta.13) reads no base URL, only PORT.
  process.env.PORT = String(new URL(base).port);
  // The SDK's spans (lib/otel.mjs), registered before the SDK loads: each
  // run's go to it (adapter, below, once the SDK is loaded).
  /** @type {Adapter | undefined} */
  let adapter;
  const tracing = flags.spans ? setUpTracing(dir, (run) => adapter?.runs.get(run)?.spans ?? null, (run, id) => adapter?.sdkRunOf(run, id)) : null;
  const sdk = await openSDK(dir);
  if (tracing) {
    tracing.instrumentQueue(sdk.world);
    if (flags.world === "postgres") {
      // world-postgres traces none of its calls: the adapter does.
      tracing.instrumentWorld(sdk.world);
      patchWorldPool(tracing, dir);
    }
  }
  /** @param {FromWorker} m */
  const post = (m) => port.postMessage(m);
  adapter = new Adapter(sdk, flags, switches, post, cwd, tracing);
  const a = adapter;
  server.on("request", a.routes(base));
  port.on("message", async (/** @type {ToWorker & { id: number }} */ m) => {
    /** @param {Reply} r */
    const answer = (r) => post({ t: "reply", id: m.id, ...r });
    try {
      switch (m.t) {
        case "start":
          return answer(await a.startRun(m.run, m.scenario, m.options, m.recv, m.spans));
        case "resume":
          await a.resume(m.run, m.token, m.payload, m.recv);
          return answer({});
        case "abandon":
          a.abandon(m.run);
          return;
        case "close":
          // Everything this thread serves is closed before it exits on
          // its own: terminating a worker while its HTTP parser was
          // handing a queue delivery to JavaScript aborted the process
          // (Node 20: "FATAL ERROR: v8::ToLocalChecked Empty MaybeLocal"),
          // leaving its data dir behind.
          await a.close();
          close(server);
          await sdk.world.close?.();
          answer({});
          setImmediate(() => process.exit(0));
          return;
      }
    } catch (e) {
      answer({ code: 500, error: /** @type {Error} */ (e).message });
    }
  });
  post({ t: "ready", info: a.info() });
}

if (!parentPort) throw new Error("lib/worker.mjs is the SDK's worker thread: adapter.mjs starts it");
main(parentPort, workerData).catch((e) => {
  warn(`SDK worker: ${e.stack || e.message}`);
  process.exit(1);
});
