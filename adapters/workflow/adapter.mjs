// durabench-target-workflow: the Workflow SDK (npm `workflow`) served over
// the durabench target protocol (docs/target-protocol.md). durabench starts it
// as
//
//	durabench-target-workflow --addr 127.0.0.1:0 [--world local|postgres] [--sdk VERSION|PATH] [--env NAME=VALUE]…
//
// It hosts the handlers the SDK's `workflow build` made of workflows/bench.js
// on one node:http server, next to the protocol's endpoints, starts runs with
// the SDK's start(), and prints its URL once it listens. SIGTERM stops it and
// removes what it started (the world-local data dir, a throwaway PostgreSQL).
// See README.md.
import { AsyncLocalStorage } from "node:async_hooks";
import http from "node:http";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { RunLog, KEEP_MS, parseWait } from "./lib/timeline.mjs";
import { checkHistory, isTerminal, readEvents } from "./lib/history.mjs";
import { startPostgres } from "./lib/pgserver.mjs";
import { ChunkOrder, chunkIndexer } from "./lib/chunks.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const NAME = "durabench-target-workflow";
// DEFAULT_SDK is the version built by make engines when --sdk is not given.
export const DEFAULT_SDK = "4.8.9";
// READ_GAP_MS: a run's event log is read at most this often (each flow or
// step delivery asks for a read; they are coalesced), and every
// FALLBACK_MS without one. Reading delays when durabench hears of an event,
// never its timestamp (the log's own).
const READ_GAP_MS = Number(process.env.DURABENCH_WORKFLOW_READ_GAP_MS) || 50;
const FALLBACK_MS = 1000;
// FULL_EVERY_MS: a running run's whole event log is read this often at
// least (between, a read is its status only; see read).
const FULL_EVERY_MS = 5000;
// SETTLE_MS: once a terminal event is readable, the log is read once more
// this much later before the run is reported over, so duplicate terminal
// events written by concurrent deliveries are in the check.
const SETTLE_MS = 250;
// ABANDON_MS: a running run whose timeline durabench has not asked for in
// this long is one it stopped following (cut by the cell timeout): the
// adapter cancels it in the SDK.
const ABANDON_MS = Number(process.env.DURABENCH_WORKFLOW_ABANDON_MS) || 30_000;

function fail(code, msg) {
  process.stderr.write(`${NAME}: ${msg}\n`);
  process.exit(code);
}

// now is the target clock: monotonic ns since the adapter started
// (performance.now() of the main thread, which serves the protocol).
const now = () => Math.round(performance.now() * 1e6);
// The SDK runs in a worker thread (its own event loop: a wide fan-out keeps
// the SDK's loop busy for seconds, and the protocol's answers and clock
// must not wait behind it). The worker stamps times as absolute ms
// (performance.timeOrigin + performance.now(), 0.25 µs resolution); the
// main thread converts them to its clock, never after now.
const abs = (t) => performance.timeOrigin + t;
const toClock = (ms) => Math.min(Math.round((ms - performance.timeOrigin) * 1e6), now());
// fromWall is an event-log Date (wall clock, ms) as absolute ms: the middle
// of its millisecond.
const fromWall = (d) => new Date(d).getTime() + 0.5;

export function parseFlags(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      addr: { type: "string", default: "127.0.0.1:0" },
      world: { type: "string", default: "local" },
      "pg-url": { type: "string" },
      "pg-no-fsync": { type: "boolean", default: false },
      sdk: { type: "string", default: DEFAULT_SDK },
      env: { type: "string", multiple: true, default: [] },
      "max-branches": { type: "string", default: "1024" },
      "max-steps": { type: "string", default: "1024" },
      "max-chunks": { type: "string", default: "10000" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (positionals.length) throw new Error(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (!["local", "postgres"].includes(values.world)) throw new Error(`--world ${values.world}: want local or postgres`);
  const env = {};
  for (const kv of values.env) {
    const i = kv.indexOf("=");
    if (i <= 0) throw new Error(`--env ${JSON.stringify(kv)}: want NAME=VALUE`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const int = (flag) => {
    const v = Number(values[flag]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} ${values[flag]}: want a positive integer`);
    return v;
  };
  const m = /^(.*):(\d+)$/.exec(values.addr);
  if (!m) throw new Error(`--addr ${values.addr}: want host:port`);
  return {
    help: values.help,
    host: m[1] || "127.0.0.1",
    port: Number(m[2]),
    world: values.world,
    pgURL: values["pg-url"],
    pgNoFsync: values["pg-no-fsync"],
    sdk: values.sdk,
    env,
    maxBranches: int("max-branches"),
    maxSteps: int("max-steps"),
    maxChunks: int("max-chunks"),
  };
}

const USAGE = `usage: ${NAME} [--addr HOST:PORT] [--world local|postgres] [--pg-url URL] [--sdk VERSION|PATH] [--env NAME=VALUE]…
  --addr          address to listen on (port 0: a free port; default 127.0.0.1:0)
  --world         local (default: world-local, a fresh data dir under a temp dir) or postgres
  --pg-url        world-postgres database (default: a throwaway PostgreSQL from the system's binaries)
  --pg-no-fsync   turn fsync off in the throwaway PostgreSQL (default on, as a user's server runs)
  --sdk           SDK version built by make engines (sdk/VERSION: ${DEFAULT_SDK} by default), or the path
                  of a directory laid out like one (package.json, node_modules, workflow build's output)
  --env           an SDK switch, NAME=VALUE (repeatable), e.g. WORKFLOW_RESILIENT_STEP_DISPATCH=1
  --max-branches  largest fanout declared in /v1/info (default 1024)
  --max-steps     longest sequential declared in /v1/info (default 1024)
  --max-chunks    most chunks a stream scenario's writer writes, declared in /v1/info (default 10000)
`;

// sdkDir resolves --sdk: a version under sdk/, or a directory.
export function sdkDir(sdk) {
  const dir = sdk.includes("/") || sdk.startsWith(".") ? resolve(sdk) : join(here, "sdk", sdk);
  if (!existsSync(join(dir, "node_modules", "workflow", "package.json"))) {
    throw new Error(`--sdk ${sdk}: ${dir} has no installed workflow package (make engines builds sdk/<version>/; a path needs npm install there)`);
  }
  return dir;
}

// bundles finds workflow build's output: 4.x writes flow.js and step.js
// (CommonJS), 5.0 flow.mjs only (steps run from the flow route).
function bundles(dir) {
  const base = join(dir, ".well-known", "workflow", "v1");
  const pick = (name) => [".mjs", ".js"].map((ext) => join(base, name + ext)).find(existsSync);
  const flow = pick("flow");
  if (!flow) throw new Error(`${base}: no flow.js or flow.mjs: run \`npx workflow build\` in ${dir} (make engines does)`);
  return { flow, step: pick("step"), manifest: JSON.parse(readFileSync(join(base, "manifest.json"), "utf8")) };
}

async function load(req, file) {
  if (file.endsWith(".mjs")) return import(pathToFileURL(file).href);
  return req(file);
}

// workflowIds maps each scenario to its workflow's id in the build's manifest.
function workflowIds(manifest) {
  const byName = {};
  for (const file of Object.values(manifest.workflows ?? {})) {
    for (const [name, w] of Object.entries(file)) byName[name] = w.workflowId;
  }
  const ids = {
    fanout: byName.fanout, sequential: byName.sequential, step: byName.step, "hook-step": byName.hookStep,
    race: byName.race, payload: byName.payload,
    "stream-latency": byName.stream, "stream-overhead": byName.stream, "stream-sizes": byName.stream,
  };
  for (const [s, id] of Object.entries(ids)) if (!id) throw new Error(`manifest.json: no workflow for scenario ${s}`);
  return ids;
}

// intOption reads an integer option (default def) within [1, max].
function intOption(opts, name, def, max) {
  const raw = opts?.[name];
  if (raw === undefined || raw === "") return def;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 1) throw new Unsupported(`option ${name}=${raw}: want a positive integer`);
  if (v > max) throw new Unsupported(`option ${name}=${v} is over its limit ${max}`);
  return v;
}

// durationOption reads a Go duration option in ms.
function durationOption(opts, name, def) {
  const raw = opts?.[name];
  if (raw === undefined || raw === "") return def;
  const ms = parseWait(raw);
  if (ms === 0 && !/^0+(\.0+)?(ns|us|µs|ms|s|m|h)?$/.test(raw)) throw new Unsupported(`option ${name}=${raw}: want a duration such as 10ms`);
  return ms;
}

// unitHash maps s to [0, 1) (FNV-1a).
function unitHash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 2 ** 32;
}

// sizesOption reads stream-sizes' chunk sizes: "64/1KB/16KB/64KB" (KB =
// 1024 bytes, MB = 1024 KB), each at least 1 byte and at most 16 MB.
export function sizesOption(opts, def, name = "sizes") {
  const raw = opts?.[name] === undefined || opts[name] === "" ? def : opts[name];
  return raw.split("/").map((part) => {
    const m = /^(\d+)(B|KB|MB)?$/i.exec(part.trim());
    const n = m ? Number(m[1]) * ({ b: 1, kb: 1024, mb: 1024 * 1024 }[(m[2] ?? "b").toLowerCase()]) : 0;
    if (n < 1 || n > 16 * 1024 * 1024) throw new Unsupported(`option ${name}=${raw}: want sizes such as 64/1KB/16KB, each 1 B to 16 MB`);
    return n;
  });
}

// chunkBytes is a chunk's size as read: a string's UTF-8 bytes, an array's
// bytes, an object's JSON.
function chunkBytes(c) {
  if (typeof c === "string") return Buffer.byteLength(c);
  if (ArrayBuffer.isView(c)) return c.byteLength;
  return Buffer.byteLength(JSON.stringify(c));
}

// READER_GRACE_MS: how long after a stream run's terminal event the
// adapter waits for its reader to finish before it reports the run (with
// an anomaly when the reader did not).
const READER_GRACE_MS = 10_000;

class Unsupported extends Error {}

// route tells a step body which delivery runs it (its route and queue): a
// step run by a delivery of the workflow queue ran inline, in the
// orchestrator's own task (5.0), with no queue hop before it.
const route = new AsyncLocalStorage();

// SHORT abbreviates the SDK's switches in a cell's label.
const SHORT = {
  WORKFLOW_RESILIENT_STEP_DISPATCH: "rsd",
  WORKFLOW_TURBO: "turbo",
  WORKFLOW_MAX_INLINE_STEPS: "max-inline",
  WORKFLOW_OPTIMISTIC_INLINE_START: "ois",
  WORKFLOW_VM: "vm",
};

// label is how reports name the adapter's cells: `workflow 5.0.0-beta.55 ·
// rsd=1 · local`.
export function label(version, switches, world) {
  const sw = Object.entries(switches).map(([k, v]) => `${SHORT[k] ?? k.replace(/^WORKFLOW_/, "").toLowerCase()}=${v}`);
  return ["workflow " + version, ...sw, world].join(" · ");
}

export async function main(argv) {
  let flags;
  try {
    flags = parseFlags(argv);
  } catch (e) {
    process.stderr.write(`${NAME}: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  if (flags.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  let dir;
  try {
    dir = sdkDir(flags.sdk);
  } catch (e) {
    fail(2, e.message);
  }
  // The SDK resolves its world package (WORKFLOW_TARGET_WORLD) from the
  // working directory (which a worker thread cannot change: set here).
  process.chdir(dir);
  const cleanups = [];
  const cleanup = async () => {
    while (cleanups.length) {
      try {
        await cleanups.pop()();
      } catch (e) {
        process.stderr.write(`${NAME}: cleanup: ${e.message}\n`);
      }
    }
  };
  const stopOn = () => {
    let stopping = false;
    const stop = async () => {
      if (stopping) return;
      stopping = true;
      // The clean-up has 20 s; then the process exits regardless.
      setTimeout(() => process.exit(0), 20_000).unref();
      await cleanup();
      process.exit(0);
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    // An adapter whose parent died (durabench killed, or a lost SIGTERM)
    // stops rather than keep its engine and data dir for good.
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) stop();
    }, 1000).unref();
  };

  // The protocol's server, on the main thread.
  const server = http.createServer();
  server.keepAliveTimeout = 65_000;
  server.on("connection", (s) => s.setNoDelay(true));
  await new Promise((res, rej) => {
    server.once("error", rej);
    server.listen(flags.port, flags.host, res);
  });
  const addr = server.address();
  const url = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
  cleanups.push(() => new Promise((res) => {
    server.close(() => res());
    server.closeAllConnections?.();
  }));

  // The SDK's own switches, then the world's configuration. A
  // combination that cannot run is served, every cell skipped with why:
  // 5.0 has no world-postgres; a switch this SDK never reads would label
  // cells that measure the default path as if they measured the switch.
  const switches = { ...flags.env };
  const version = pkgVersion(dir, "workflow");
  const unread = unreadSwitches(dir, Object.keys(switches));
  const why = flags.world === "postgres" && !existsSync(join(dir, "node_modules", "@workflow", "world-postgres", "package.json"))
    ? `workflow ${version} has no world-postgres in ${dir} (the published 5.0 betas of @workflow/world-postgres fail: "Event id is not slot-numbered")`
    : unread.length > 0
      ? `workflow ${version} does not read ${unread.join(", ")} (no file of its packages names it): the cells would measure its default`
      : "";
  if (why) {
    process.stderr.write(`${NAME}: ${why}\n`);
    server.on("request", (req, res) => unavailable(req, res, why, label(version, switches, flags.world), version));
    stopOn();
    process.stdout.write(url + "\n");
    return;
  }
  Object.assign(process.env, switches);
  try {
    if (flags.world === "local") {
      const data = mkdtempSync(join(tmpdir(), "durabench-workflow-"));
      cleanups.push(() => rmSync(data, { recursive: true, force: true }));
      process.env.WORKFLOW_TARGET_WORLD = "local";
      process.env.WORKFLOW_LOCAL_DATA_DIR = join(data, "cell-1");
      flags.dataRoot = data;
    } else {
      let pgURL = flags.pgURL;
      if (!pgURL) {
        const pg = await startPostgres({ fsync: !flags.pgNoFsync });
        cleanups.push(() => pg.stop());
        pgURL = pg.url;
      }
      process.env.WORKFLOW_TARGET_WORLD = "@workflow/world-postgres";
      process.env.WORKFLOW_POSTGRES_URL = pgURL;
      await bootstrapPostgres(dir, pgURL);
    }
  } catch (e) {
    await cleanup();
    fail(1, e.message);
  }

  // The QuickJS VM (5.0's WORKFLOW_VM=quickjs) compiles WebAssembly that
  // uses extended constant expressions, a V8 feature Node 20 keeps behind
  // --experimental-wasm-extended-const, which NODE_OPTIONS refuses. V8's
  // flags are the process's: set here, before the worker compiles it.
  if (switches.WORKFLOW_VM === "quickjs") v8.setFlagsFromString("--experimental-wasm-extended-const");
  // The SDK, its routes' server and the history reader, on a worker
  // thread (it inherits this environment); a new one for every cell.
  const front = new Front(() => new Worker(fileURLToPath(import.meta.url), { workerData: { dir, flags, switches } }), flags);
  let info;
  try {
    info = await front.ready;
  } catch (e) {
    await cleanup();
    fail(1, `loading the SDK from ${dir}: ${e.message}`);
  }
  cleanups.push(() => front.close());
  server.on("request", (req, res) => front.handle(req, res, info));
  stopOn();
  process.stdout.write(url + "\n");
}

// Front serves the protocol on the main thread: the runs' timelines, the
// resumes' dedupe, the clock; the worker starts runs and reports events.
export class Front {
  constructor(spawnWorker, flags) {
    this.spawnWorker = spawnWorker;
    this.flags = flags;
    this.logs = new Map(); // durabench run id -> RunLog
    this.resumes = new Map(); // durabench run id -> Map(resume id -> promise)
    this.calls = new Map(); // call id -> resolve
    this.next = 1;
    this.cells = 1;
    this.ready = this.spawn();
    this.cellReady = this.ready;
    this.sweeper = setInterval(() => this.expire(), 30_000);
    this.sweeper.unref();
    this.watcher = setInterval(() => this.abandoned(), Math.min(5_000, ABANDON_MS));
    this.watcher.unref();
  }

  // abandoned cancels in the SDK the running runs durabench stopped
  // following (none of their timelines asked for in ABANDON_MS: durabench
  // polls a run it follows at least every 10 s): a run cut by the cell
  // timeout would otherwise go on competing with the next runs of the
  // same cell — a warm-up run cut at the timeout with the measured runs
  // after it. Its timeline ends failed ("abandoned").
  abandoned() {
    const cut = Date.now() - ABANDON_MS;
    for (const [run, l] of this.logs) {
      if (l.status !== "running" || l.polling > 0 || l.lastPoll > cut || l.abandoned) continue;
      l.abandoned = true;
      process.stderr.write(`${NAME}: run ${run} not followed for ${ABANDON_MS / 1000} s: cancelled\n`);
      this.worker.postMessage({ t: "abandon", run });
    }
  }

  // spawn starts the SDK's worker thread; it resolves with its info once
  // the SDK is loaded. A worker that exits when nobody stopped it (out of
  // memory, a crash) fails the runs it held with why, at once.
  spawn() {
    const worker = this.spawnWorker();
    this.worker = worker;
    this.dead = null;
    worker.on("message", (m) => worker === this.worker && this.message(m));
    worker.on("error", (e) => {
      process.stderr.write(`${NAME}: SDK worker: ${e.stack || e.message}\n`);
      worker.lastError = e;
    });
    worker.once("exit", (code) => {
      if (worker !== this.worker || worker.stopping) return;
      this.dead = `the SDK's worker thread exited (code ${code}${worker.lastError ? `: ${worker.lastError.message}` : ""})`;
      process.stderr.write(`${NAME}: ${this.dead}\n`);
      this.failRunning(this.dead);
    });
    return new Promise((res, rej) => {
      worker.once("message", (m) => (m.t === "ready" ? res(m.info) : rej(new Error(`the SDK's worker said ${m.t} first`))));
      worker.once("error", rej);
      worker.once("exit", (code) => rej(new Error(`the SDK's worker exited (${code})`)));
    });
  }

  // failRunning ends every running run's timeline failed, with why, and
  // answers the calls waiting on the worker.
  failRunning(why) {
    const at = now();
    for (const l of this.logs.values()) {
      // A run whose start is still under way is answered by its call.
      if (l.status !== "running" || l.starting) continue;
      l.add({ kind: "run_failed", at, source: "worker", error: why });
      l.finish(true, why);
    }
    for (const res of this.calls.values()) res({ code: 500, error: why });
    this.calls.clear();
  }

  // stopWorker stops the current worker: it closes what it serves and
  // exits on its own, or is terminated after 10 s.
  async stopWorker() {
    const worker = this.worker;
    worker.stopping = true;
    const exited = new Promise((r) => worker.once("exit", r));
    await Promise.race([this.call({ t: "close" }).then(() => exited), new Promise((r) => setTimeout(r, 10_000))]);
    await worker.terminate();
  }

  // newCell gives a start of another scenario or other options than the
  // last one (a new cell: durabench runs cells one after another) a new
  // SDK: the old worker is stopped with whatever it was still doing (runs
  // cut by the last cell's timeout, their queued deliveries: minutes of
  // work after a 256-branch fan-out on 4.8.9 · local), and on world-local
  // a new data dir (world-local slows down as its dir fills). A cell's
  // first start waits for it (about a second: a warm-up run absorbs it).
  newCell(key) {
    if (this.cellKey === undefined || this.cellKey === key) {
      this.cellKey = key;
      return this.cellReady;
    }
    this.cellKey = key;
    this.cellReady = this.cellReady.then(async () => {
      this.failRunning("cut: the next cell started; the run was stopped with the SDK that ran it");
      await this.stopWorker();
      if (this.flags.dataRoot) {
        const old = process.env.WORKFLOW_LOCAL_DATA_DIR;
        this.cells++;
        process.env.WORKFLOW_LOCAL_DATA_DIR = join(this.flags.dataRoot, `cell-${this.cells}`);
        rm(old, { recursive: true, force: true }).catch(() => {});
      }
      return this.spawn();
    });
    return this.cellReady;
  }

  message(m) {
    switch (m.t) {
      case "event": {
        const log = this.logs.get(m.run);
        if (log) log.add({ ...m.ev, at: toClock(m.ev.at), ...(m.ev.written !== undefined ? { written: toClock(m.ev.written) } : {}) });
        break;
      }
      case "finish": {
        const log = this.logs.get(m.run);
        if (!log) break;
        log.anomalies = m.anomalies ?? [];
        log.adapter = m.adapter;
        if (m.terminal) log.add({ ...m.terminal, at: toClock(m.terminal.at) });
        log.finish(m.failed, m.msg);
        break;
      }
      case "reply":
        this.calls.get(m.id)?.(m);
        this.calls.delete(m.id);
        break;
    }
  }

  // call asks the worker and waits for its reply.
  call(msg) {
    if (this.dead) return Promise.resolve({ code: 500, error: this.dead });
    const id = this.next++;
    return new Promise((res) => {
      this.calls.set(id, res);
      this.worker.postMessage({ ...msg, id });
    });
  }

  async close() {
    clearInterval(this.sweeper);
    clearInterval(this.watcher);
    for (const l of this.logs.values()) l.wake();
    await this.cellReady.catch(() => {});
    await this.stopWorker();
  }

  expire() {
    const cut = Date.now() - KEEP_MS;
    for (const [run, l] of this.logs) {
      if (l.status !== "running" && l.finishedAt < cut) {
        this.logs.delete(run);
        this.resumes.delete(run);
      }
    }
  }

  async handle(req, res, info) {
    const path = req.url.split("?")[0];
    try {
      const parts = path.slice(4).split("/").map(decodeURIComponent);
      const q = new URL(req.url, "http://x").searchParams;
      if (req.method === "GET" && path === "/v1/info") return reply(res, 200, info);
      if (req.method === "GET" && path === "/v1/clock") return reply(res, 200, { now: now() });
      if (req.method === "POST" && path === "/v1/runs") return await this.start(req, res);
      if (path.startsWith("/v1/") && parts[0] === "runs" && parts.length === 3 && parts[2] === "timeline" && req.method === "GET") {
        const log = this.logs.get(parts[1]);
        if (!log) return reply(res, 404, { error: `no run ${parts[1]}` });
        const ac = new AbortController();
        res.on("close", () => ac.abort());
        log.polling = (log.polling ?? 0) + 1;
        let tl;
        try {
          tl = await log.poll(Number(q.get("after") ?? 0) || 0, parseWait(q.get("wait") ?? ""), ac.signal);
        } finally {
          log.polling--;
          log.lastPoll = Date.now();
        }
        if (!res.destroyed) reply(res, 200, tl);
        return;
      }
      if (path.startsWith("/v1/") && parts[0] === "runs" && parts.length === 2 && req.method === "DELETE") {
        const log = this.logs.get(parts[1]);
        if (!log) return reply(res, 404, { error: `no run ${parts[1]}` });
        if (log.status === "running") return reply(res, 409, { error: `run ${parts[1]} is running` });
        this.logs.delete(parts[1]);
        this.resumes.delete(parts[1]);
        return reply(res, 200, { run: parts[1] });
      }
      if (path.startsWith("/v1/") && parts[0] === "runs" && parts.length === 4 && parts[2] === "hooks" && req.method === "POST") {
        return await this.resume(req, res, parts[1], parts[3]);
      }
      return reply(res, 404, { error: `no endpoint ${req.method} ${path}` });
    } catch (e) {
      if (!res.headersSent) reply(res, 500, { error: String(e?.message ?? e) });
      else res.destroy();
    }
  }

  async start(req, res) {
    let body;
    try {
      body = JSON.parse((await readBody(req)).toString());
    } catch {
      return reply(res, 400, { error: "a start request is a JSON object" });
    }
    const { run, scenario, options } = body ?? {};
    if (typeof run !== "string" || !run || typeof scenario !== "string" || !scenario) {
      return reply(res, 400, { error: "a start request needs run and scenario" });
    }
    if (this.logs.has(run)) return reply(res, 409, { error: `run ${run} exists`, run });
    const log = new RunLog(run);
    log.lastPoll = Date.now();
    log.starting = true;
    this.logs.set(run, log);
    let r;
    try {
      await this.newCell(JSON.stringify([scenario, Object.entries(options ?? {}).sort()]));
      r = await this.call({ t: "start", run, scenario, options: options ?? {} });
    } catch (e) {
      r = { code: 500, error: `starting the SDK for a new cell: ${e.message}` };
    }
    log.starting = false;
    if (r.code !== 202) {
      this.logs.delete(run);
      return reply(res, r.code, { error: r.error, run });
    }
    reply(res, 202, { run, accepted: now(), sdk_run: r.sdkRun });
  }

  async resume(req, res, run, token) {
    let body;
    try {
      body = JSON.parse((await readBody(req)).toString());
    } catch {
      body = null;
    }
    if (!body || typeof body.resume_id !== "string" || !body.resume_id) {
      return reply(res, 400, { error: "a resume request needs resume_id" });
    }
    if (!this.logs.has(run)) return reply(res, 404, { error: `no run ${run}` });
    let ids = this.resumes.get(run);
    if (!ids) this.resumes.set(run, (ids = new Map()));
    let p = ids.get(body.resume_id);
    if (!p) {
      p = this.call({ t: "resume", run, token, payload: body.payload ?? "" }).then((r) => {
        if (r.error) throw new Error(r.error);
      });
      ids.set(body.resume_id, p);
      p.catch(() => ids.delete(body.resume_id)); // a failed resume may be retried with its id
    }
    try {
      await p;
    } catch (e) {
      return reply(res, 500, { error: `resume ${token}: ${e.message}`, run });
    }
    reply(res, 202, { run });
  }
}

// workerMain runs the SDK: its routes on a loopback server of their own
// (world-local's queue and world-postgres' worker deliver there), the runs,
// the history reads; it reports to the main thread.
async function workerMain() {
  const { dir, flags, switches } = workerData;
  const server = http.createServer();
  server.keepAliveTimeout = 65_000;
  server.on("connection", (s) => s.setNoDelay(true));
  await new Promise((res) => server.listen(0, "127.0.0.1", res));
  const base = `http://127.0.0.1:${server.address().port}`;
  process.env.WORKFLOW_LOCAL_BASE_URL = base;
  const sdk = await openSDK(dir);
  const adapter = new Adapter(sdk, flags, { world: flags.world, switches }, (m) => parentPort.postMessage(m));
  server.on("request", (req, res) => adapter.handle(req, res, base));
  parentPort.on("message", async (m) => {
    const answer = (r) => parentPort.postMessage({ t: "reply", id: m.id, ...r });
    try {
      switch (m.t) {
        case "start":
          return answer(await adapter.startRun(m.run, m.scenario, m.options));
        case "resume":
          await sdk.api.resumeHook(m.token, { payload: m.payload });
          adapter.resumed(m.run);
          return answer({});
        case "abandon":
          adapter.abandon(m.run);
          return;
        case "close":
          // Everything this thread serves is closed before it exits on
          // its own: terminating a worker while its HTTP parser was
          // handing a queue delivery to JavaScript aborted the process
          // (Node 20: "FATAL ERROR: v8::ToLocalChecked Empty MaybeLocal"),
          // leaving its data dir behind.
          await adapter.close();
          server.close();
          server.closeAllConnections();
          await sdk.world.close?.();
          answer({});
          setImmediate(() => process.exit(0));
          return;
      }
    } catch (e) {
      answer({ code: 500, error: e.message });
    }
  });
  parentPort.postMessage({ t: "ready", info: adapter.info() });
}

// bootstrapPostgres creates world-postgres' schema with the package's own
// bootstrap bin.
async function bootstrapPostgres(dir, pgURL) {
  const { spawnSync } = await import("node:child_process");
  const pkgFile = join(dir, "node_modules", "@workflow", "world-postgres", "package.json");
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  const bin = pkg.bin?.bootstrap;
  if (!bin) throw new Error(`${pkgFile}: no bootstrap bin`);
  const r = spawnSync(process.execPath, [join(dirname(pkgFile), bin)], {
    env: { ...process.env, WORKFLOW_POSTGRES_URL: pgURL, DATABASE_URL: pgURL },
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`world-postgres bootstrap: ${(r.stderr || r.stdout || "").trim().split("\n").slice(-3).join(" ")}`);
}

// pkgVersion is the version of package name installed in dir ("" if none).
// unreadSwitches is the names of switches no JavaScript file of the SDK's
// packages (workflow, @workflow/*) in dir reads: switches with no effect.
export function unreadSwitches(dir, names) {
  const left = new Set(names);
  const walk = (d) => {
    let entries;
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (left.size === 0) return;
      const p = join(d, e.name);
      if (e.name === "node_modules") continue;
      let st;
      try {
        st = statSync(p); // follows the links of a --sdk=PATH install
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p);
      else if (/\.(m|c)?js$/.test(e.name)) {
        const text = readFileSync(p, "utf8");
        // Read as code does: a property (process.env.NAME) or a string
        // ("NAME", 'NAME'); a comment's `NAME` is no reading.
        for (const n of left) if (new RegExp(`\\.${n}\\b|["']${n}["']`).test(text)) left.delete(n);
      }
    }
  };
  const nm = join(dir, "node_modules");
  walk(join(nm, "workflow"));
  let scoped = [];
  try {
    scoped = readdirSync(join(nm, "@workflow"));
  } catch {}
  for (const p of scoped) walk(join(nm, "@workflow", p));
  return names.filter((n) => left.has(n));
}

function pkgVersion(dir, name) {
  try {
    return JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return "";
  }
}

// openSDK loads the SDK from dir: start() and the world from its packages,
// the flow (and 4.x step) handlers from its build.
async function openSDK(dir) {
  const req = createRequire(join(dir, "package.json"));
  const b = bundles(dir);
  const api = await import(pathToFileURL(req.resolve("workflow/api")).href);
  const runtime = await import(pathToFileURL(req.resolve("workflow/runtime")).href);
  const flow = await load(req, b.flow);
  const step = b.step ? await load(req, b.step) : null;
  const world = await runtime.getWorld();
  await world.start?.();
  const worldPkg = process.env.WORKFLOW_TARGET_WORLD === "local" ? "@workflow/world-local" : process.env.WORKFLOW_TARGET_WORLD;
  return {
    version: pkgVersion(dir, "workflow"),
    worldVersion: pkgVersion(dir, worldPkg),
    api,
    runtime,
    world,
    ids: workflowIds(b.manifest),
    flow: flow.POST,
    step: step?.POST ?? null,
  };
}

// LogSink is a run's timeline as the worker sees it: its events and its
// end go to the main thread, which serves them (Front).
class LogSink {
  constructor(run, post) {
    this.run = run;
    this.post = post;
  }

  add(ev) {
    this.post({ t: "event", run: this.run, ev });
  }

  // finish ends the run: its terminal event, what the check found, what
  // the adapter spent, in one message.
  finish(failed, msg, anomalies, adapter, terminal) {
    this.post({ t: "finish", run: this.run, failed, msg, anomalies, adapter, terminal });
  }
}

// Adapter runs the SDK's side of the protocol (on the worker thread): it
// starts runs, hosts the SDK's routes, reads and checks the event logs.
export class Adapter {
  constructor(sdk, flags, label, post) {
    this.sdk = sdk;
    this.flags = flags;
    this.label = label;
    this.post = post;
    this.logs = new Map(); // durabench run id -> LogSink (while running)
    this.runs = new Map(); // durabench run id -> run state (while running)
    this.bySdkRun = new Map(); // SDK run id -> durabench run id
    this.closed = false;
    globalThis.__durabench = { stepBody: (...a) => this.stepBody(...a), chunkWritten: (...a) => this.chunkWritten(...a) };
    this.fallback = setInterval(() => {
      for (const st of this.runs.values()) this.schedule(st);
    }, FALLBACK_MS);
    this.fallback.unref();
  }

  info() {
    const sw = Object.entries(this.label.switches).map(([k, v]) => `${k}=${v}`);
    return {
      protocol: 1,
      minor: 1,
      engine: "workflow",
      version: this.sdk.version,
      label: label(this.sdk.version, this.label.switches, this.label.world),
      clock: "monotonic ns since the adapter started (performance.now()); event-log times converted from their wall-clock ms",
      world: `${this.label.world === "local" ? "world-local" : "world-postgres"} ${this.sdk.worldVersion}`,
      switches: sw,
      scenarios: [
        { name: "fanout", max: { branches: this.flags.maxBranches } },
        { name: "sequential", max: { steps: this.flags.maxSteps } },
        { name: "step" },
        { name: "hook-step" },
        { name: "race", max: { branches: this.flags.maxBranches } },
        { name: "payload", max: { steps: this.flags.maxSteps } },
        { name: "stream-latency", max: { chunks: this.flags.maxChunks } },
        { name: "stream-overhead", max: { chunks: this.flags.maxChunks } },
        { name: "stream-sizes", max: { chunks: this.flags.maxChunks } },
      ],
    };
  }

  async close() {
    this.closed = true;
    clearInterval(this.fallback);
  }

  // stepBody is called by every step body (workflows/bench.js), in this
  // process: its start is the run's step_started (source worker); its end
  // bounds the step's completion from below.
  stepBody(run, stage, index, attempt, start, end, stepId) {
    const st = this.runs.get(run);
    const log = this.logs.get(run);
    if (!st || !log) return;
    log.add({ kind: "step_started", at: abs(start), source: "worker", stage, index, attempt });
    const prev = st.steps.get(stepId);
    st.bodies.set(stepId, (st.bodies.get(stepId) ?? 0) + 1);
    // A step run by a delivery of the workflow's own queue ran inline.
    const inline = /wkf_workflow_/.test(route.getStore()?.queue ?? "");
    if (!prev) st.steps.set(stepId, { stage, index, attempt, end: abs(end), done: false, inline });
    else prev.attempt = attempt;
  }

  // chunkWritten is called by the stream writer's body before each write.
  chunkWritten(run, stage, index, t) {
    const st = this.runs.get(run);
    const log = this.logs.get(run);
    if (!st || !log) return;
    st.written[index] = abs(t);
    log.add({ kind: "chunk_written", at: abs(t), source: "worker", stage, index });
  }

  // readStream reads a stream run's stream as the SDK's users do (the
  // run's getReadable()), reported as the stage's reader (index 1, source
  // sdk): each chunk's read time with its writer's index and stamp (the
  // chunk says which it is: lib/chunks.mjs) and its size. A chunk read
  // out of order, twice or not the writer's is an anomaly of the run.
  readStream(st, sdkRun) {
    const log = this.logs.get(st.run);
    const indexOf = chunkIndexer(st.chunks, st.sizes);
    const order = new ChunkOrder();
    st.reader = (async () => {
      log.add({ kind: "step_started", at: abs(performance.now()), source: "sdk", stage: 0, index: 1, attempt: 1 });
      let i = 0;
      for await (const c of sdkRun.getReadable()) {
        const at = abs(performance.now());
        const w = indexOf(c);
        order.read(w);
        const index = w >= 0 ? w : i;
        log.add({ kind: "chunk_read", at, source: "sdk", stage: 0, index, written: (w >= 0 && st.written[w]) || at, bytes: chunkBytes(c) });
        i++;
      }
      log.add({ kind: "step_completed", at: abs(performance.now()), source: "sdk", stage: 0, index: 1, attempt: 1 });
      st.readAnomalies.push(...order.anomalies);
      if (i !== st.chunks) st.readAnomalies.push({ kind: "stream_chunks", detail: `the reader read ${i} chunks, the writer writes ${st.chunks}` });
    })().catch((e) => {
      st.readAnomalies.push(...order.anomalies, { kind: "stream_read_failed", detail: `reading the run's stream: ${e.message}` });
    });
  }

  async handle(req, res, base) {
    const path = req.url.split("?")[0];
    try {
      if (path.startsWith("/.well-known/workflow/v1/")) return await this.sdkRoute(req, res, base, path);
      return reply(res, 404, { error: `no endpoint ${req.method} ${path}` });
    } catch (e) {
      if (!res.headersSent) reply(res, 500, { error: String(e?.message ?? e) });
      else res.destroy();
    }
  }

  // sdkRoute hands a queue delivery to the SDK's handler, then asks for a
  // read of the event logs it may have written.
  async sdkRoute(req, res, base, path) {
    const t0 = performance.now();
    const name = path.slice("/.well-known/workflow/v1/".length).split("/")[0];
    const handler = name === "flow" ? this.sdk.flow : name === "step" ? this.sdk.step : null;
    if (!handler) return reply(res, 404, { error: `no SDK route ${path}` });
    const body = await readBody(req);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const queue = String(req.headers["x-vqs-queue-name"] ?? "");
    const t1 = performance.now();
    const r = await route.run({ name, queue }, () => handler(new Request(base + req.url, { method: req.method, headers, body: hasBody ? body : undefined })));
    const t2 = performance.now();
    const out = Buffer.from(await r.arrayBuffer());
    const h = {};
    r.headers.forEach((v, k) => (h[k] = v));
    res.writeHead(r.status, h);
    res.end(out);
    let runId;
    try {
      const msg = JSON.parse(body.toString());
      runId = msg.runId ?? msg.workflowRunId;
    } catch {
      // not a JSON message: read every run
    }
    const run = runId && this.bySdkRun.get(runId);
    const st = run && this.runs.get(run);
    if (st) {
      // The adapter's own share of this delivery: the request's and the
      // response's conversions around the SDK's handler.
      st.cost.deliveries++;
      st.cost.hostMs += t1 - t0 + (performance.now() - t2);
      st.cost.handlerMs += t2 - t1;
    }
    if (st) this.schedule(st);
    else for (const st of this.runs.values()) this.schedule(st);
  }

  // startRun starts a run: 202 with the SDK's run id once start()
  // returned (the run is durable), 422 for what the SDK cannot run.
  async startRun(run, scenario, options) {
    let args, steps, chunks, sizes = [];
    try {
      const body = durationOption(options, "body", 0);
      switch (scenario) {
        case "race": {
          steps = intOption(options, "branches", 4, this.flags.maxBranches);
          const jitter = durationOption(options, "jitter", 0);
          // Each branch's extra duration, uniform in [0, jitter): drawn from
          // the run id and the branch (a run replays its own draws).
          const draws = Array.from({ length: steps }, (_, i) => (jitter > 0 ? jitter * unitHash(`${run}/${i}`) : 0));
          args = [run, steps, body, draws];
          steps += 1;
          break;
        }
        case "payload": {
          steps = intOption(options, "steps", 10, this.flags.maxSteps);
          const shape = options?.shape || "sequence";
          if (shape !== "sequence" && shape !== "fanout") throw new Unsupported(`option shape=${shape}: want sequence or fanout`);
          const sizes = sizesOption(options, "10KB", "size");
          if (sizes.length !== 1) throw new Unsupported(`option size=${options.size}: want one size such as 10KB`);
          const size = sizes[0];
          args = [run, steps, size, shape === "fanout"];
          break;
        }
        case "stream-latency":
        case "stream-overhead":
        case "stream-sizes": {
          // The book's defaults (durabench list): the writer's chunks and
          // pacing; stream-overhead's shape; stream-sizes' sizes.
          const def = { "stream-latency": 20, "stream-overhead": 300, "stream-sizes": 60 }[scenario];
          chunks = intOption(options, "chunks", def, this.flags.maxChunks);
          const shape = scenario === "stream-overhead" ? (options?.shape || "text") : "text";
          if (shape !== "text" && shape !== "structured") throw new Unsupported(`option shape=${shape}: want text or structured`);
          if (scenario === "stream-sizes") sizes = sizesOption(options, "64/1KB/16KB/64KB");
          steps = 1; // the writer; the reader is the adapter
          args = [run, chunks, durationOption(options, "interval", 10), shape, sizes];
          break;
        }
        case "fanout":
          steps = intOption(options, "branches", 20, this.flags.maxBranches);
          args = [run, steps, body];
          break;
        case "sequential":
          steps = intOption(options, "steps", 50, this.flags.maxSteps);
          args = [run, steps, body];
          break;
        case "step":
          steps = 1;
          args = [run, body];
          break;
        case "hook-step":
          steps = 1;
          args = [run, `${run}-h0`, body];
          break;
        default:
          throw new Unsupported(`workflow does not run scenario ${scenario}`);
      }
    } catch (e) {
      if (e instanceof Unsupported) return { code: 422, error: e.message };
      throw e;
    }
    const log = new LogSink(run, this.post);
    this.logs.set(run, log);
    const st = { run, sdkRun: "", chunks, sizes, written: [], reader: null, readAnomalies: [], steps: new Map(), bodies: new Map(), expect: steps, seen: new Set(), reading: false, again: false, lastRead: 0, timer: null, terminal: null, statusEarly: false, hook: scenario === "hook-step", hookDone: false, lastFull: Date.now(), settled: null, settledR: null, cost: { deliveries: 0, hostMs: 0, handlerMs: 0, reads: 0, readMs: 0 } };
    st.settled = new Promise((r) => (st.settledR = r));
    this.runs.set(run, st);
    let r;
    try {
      r = await this.sdk.api.start({ workflowId: this.sdk.ids[scenario] }, args);
    } catch (e) {
      this.logs.delete(run);
      this.runs.delete(run);
      return { code: 500, error: `start: ${e.message}` };
    }
    st.sdkRun = r.runId;
    this.bySdkRun.set(r.runId, run);
    if (chunks !== undefined) this.readStream(st, r);
    this.schedule(st);
    return { code: 202, sdkRun: r.runId };
  }

  // abandon drops a run durabench stopped following and cancels it in the
  // SDK; its timeline ends failed.
  abandon(run) {
    const st = this.runs.get(run);
    const log = this.logs.get(run);
    if (!st) return;
    this.runs.delete(run);
    this.logs.delete(run);
    this.bySdkRun.delete(st.sdkRun);
    clearTimeout(st.timer);
    st.settledR?.();
    if (!st.terminal) {
      Promise.resolve()
        .then(() => this.sdk.api.getRun(st.sdkRun).cancel())
        .catch((e) => process.stderr.write(`${NAME}: cancelling ${st.sdkRun}: ${e.message}\n`));
    }
    const why = "abandoned: durabench stopped following the run; cancelled in the SDK";
    log?.finish(true, why, [], null, { kind: "run_failed", at: abs(performance.now()), source: "worker", error: why });
  }

  // resumed asks for a read of a run whose hook was resumed.
  resumed(run) {
    const st = this.runs.get(run);
    if (st) this.schedule(st);
  }

  // schedule asks for a read of st's event log: now, or READ_GAP_MS after
  // the last one; one read at a time per run.
  schedule(st) {
    if (!st.sdkRun || this.closed) return;
    if (st.reading) {
      st.again = true;
      return;
    }
    if (st.timer) return;
    const wait = Math.max(0, st.lastRead + READ_GAP_MS - Date.now());
    st.timer = setTimeout(() => {
      st.timer = null;
      this.read(st);
    }, wait);
  }

  async read(st) {
    if (this.runs.get(st.run) !== st) return;
    st.reading = true;
    st.again = false;
    st.lastRead = Date.now();
    try {
      // The status first, then the log: a terminal status whose terminal
      // event the log read after it does not hold is an anomaly.
      // Reading the whole log costs the SDK (it shares the process and,
      // on world-local, the data dir): it is read when the run's status
      // says it is over, while a hook is awaited, and every FULL_EVERY_MS
      // in case a status lags; otherwise only the status is read.
      const t0 = performance.now();
      const run = await this.sdk.world.runs.get(st.sdkRun, { resolveData: "none" });
      const over = ["completed", "failed", "cancelled"].includes(run.status);
      const full = over || (st.hook && !st.hookDone) || Date.now() - st.lastFull >= FULL_EVERY_MS;
      if (full) {
        st.lastFull = Date.now();
        this.apply(st, await readEvents(this.sdk.world, st.sdkRun));
      }
      // What the reads cost while the run ran (the check's reads after
      // its terminal event are not in its times).
      if (!st.terminal) {
        st.cost.reads++;
        st.cost.readMs += performance.now() - t0;
      }
      if (full && !st.terminal && over && !st.statusEarly) {
        st.statusEarly = true;
        st.early = { kind: "status_before_terminal", detail: `status ${run.status} read before a terminal event was readable` };
      }
      if (st.terminal && !st.settling) {
        st.settling = true;
        setTimeout(() => this.settle(st), SETTLE_MS);
      }
    } catch (e) {
      process.stderr.write(`${NAME}: reading run ${st.run} (${st.sdkRun}): ${e.message}\n`);
    } finally {
      st.reading = false;
      if (st.again && !st.settling) this.schedule(st);
    }
  }

  // apply turns the event log's new events into timeline events.
  apply(st, events) {
    const log = this.logs.get(st.run);
    if (!log) return;
    for (const e of events) {
      if (st.seen.has(e.eventId)) continue;
      st.seen.add(e.eventId);
      const at = fromWall(e.createdAt);
      switch (e.eventType) {
        case "run_started":
          log.add({ kind: "run_started", at, source: "history" });
          break;
        case "hook_created":
          log.add({ kind: "hook_waiting", at, source: "history", token: `${st.run}-h0` });
          break;
        case "hook_received":
          st.hookDone = true;
          log.add({ kind: "hook_received", at, source: "history", token: `${st.run}-h0` });
          break;
        case "step_completed": {
          const s = st.steps.get(e.correlationId);
          if (!s || s.done) break; // a body that never ran here, or a duplicate: the check reports it
          s.done = true;
          log.add({ kind: "step_completed", at: Math.max(at, s.end), source: "history", stage: s.stage, index: s.index, attempt: s.attempt, ...(s.inline ? { inline: true } : {}) });
          break;
        }
        case "step_failed":
        case "step_retrying": {
          const s = st.steps.get(e.correlationId);
          log.add({ kind: "step_failed", at, source: "history", stage: s?.stage ?? 0, index: s?.index ?? 0, attempt: s?.attempt ?? 1, error: e.eventType });
          break;
        }
        case "run_completed":
        case "run_failed":
        case "run_cancelled":
          // The terminal event goes out with the history's check (settle):
          // durabench stops following a run at its terminal event.
          if (st.terminal) break;
          st.terminal = e.eventType;
          st.terminalEvent = e.eventType === "run_completed"
            ? { kind: "run_completed", at, source: "history" }
            : { kind: "run_failed", at, source: "history", error: e.eventType };
          break;
      }
    }
  }

  // settle reads the log once more, checks it, and ends the run.
  async settle(st) {
    const log = this.logs.get(st.run);
    this.runs.delete(st.run);
    this.bySdkRun.delete(st.sdkRun);
    if (!log) return st.settledR();
    if (st.reader) {
      // The reader's last chunk_read must go out before the terminal event.
      let timer;
      const done = await Promise.race([st.reader.then(() => true), new Promise((r) => (timer = setTimeout(() => r(false), READER_GRACE_MS)))]);
      clearTimeout(timer);
      if (!done) st.readAnomalies.push({ kind: "stream_unfinished", detail: `the run's stream was still open ${READER_GRACE_MS / 1000} s after its terminal event` });
    }
    let anomalies = [];
    try {
      const run = await this.sdk.world.runs.get(st.sdkRun, { resolveData: "none" });
      const events = await readEvents(this.sdk.world, st.sdkRun);
      this.apply(st, events);
      anomalies = checkHistory(events, st.expect, run.status, st.bodies);
    } catch (e) {
      anomalies = [{ kind: "unreadable", detail: `the event log could not be read again: ${e.message}` }];
    }
    if (st.early) anomalies.unshift(st.early);
    anomalies.push(...st.readAnomalies);
    const us = (ms) => Math.round(ms * 1000);
    const cost = {
      deliveries: st.cost.deliveries, host_us: us(st.cost.hostMs), handler_us: us(st.cost.handlerMs),
      reads: st.cost.reads, read_us: us(st.cost.readMs),
    };
    this.logs.delete(st.run);
    log.finish(st.terminal !== "run_completed", st.terminal, anomalies, cost, st.terminalEvent);
    st.settledR();
  }
}

// unavailable serves a combination that cannot run: /v1/info says why
// (`unavailable`) and lists no scenario, a start is 422.
function unavailable(req, res, why, lab, version) {
  const path = req.url.split("?")[0];
  if (req.method === "GET" && path === "/v1/info") {
    return reply(res, 200, { protocol: 1, minor: 1, engine: "workflow", version, label: lab, unavailable: why, clock: "monotonic ns since the adapter started", scenarios: [] });
  }
  if (req.method === "GET" && path === "/v1/clock") return reply(res, 200, { now: now() });
  if (req.method === "POST" && path === "/v1/runs") {
    // A well-formed start is refused with why; a malformed one is 400, as
    // a target that can run answers it.
    return readBody(req).then((b) => {
      let start;
      try {
        start = JSON.parse(b.toString());
      } catch {}
      if (typeof start?.run !== "string" || !start.run || typeof start?.scenario !== "string" || !start.scenario) {
        return reply(res, 400, { error: "a start request needs run and scenario" });
      }
      reply(res, 422, { error: why });
    });
  }
  return reply(res, 404, { error: `no endpoint ${req.method} ${path}` });
}

function readBody(req) {
  return new Promise((res, rej) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => res(Buffer.concat(chunks)));
    req.on("error", rej);
  });
}

function reply(res, code, v) {
  const b = JSON.stringify(v);
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(b) });
  res.end(b);
}

if (!isMainThread && workerData?.dir) {
  workerMain().catch((e) => {
    process.stderr.write(`${NAME}: SDK worker: ${e.stack || e.message}\n`);
    process.exit(1);
  });
} else if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((e) => fail(1, e.stack || e.message));
}
