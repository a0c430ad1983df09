// @ts-check
// durabench-target-workflow: the Workflow SDK (npm `workflow`) served over
// the durabench target protocol (docs/target-protocol.md). durabench starts it
// as
//
//	durabench-target-workflow --addr 127.0.0.1:0 [--world local|postgres] [--sdk VERSION|PATH] [--env NAME=VALUE]…
//
// --sdk PATH may be a directory of the SDK's package tarballs or a checkout
// of its monorepo: the adapter then builds the SDK directory first, once
// per content hash (lib/build.mjs), and its cells carry the hash.
//
// It serves the protocol on the main thread (lib/front.mjs) and runs the SDK
// on a worker thread (lib/worker.mjs), prints its URL once it listens, and
// removes what it started (the world-local data dir, a throwaway PostgreSQL)
// when SIGTERM stops it. This file only wires the modules under lib/
// together; README.md says what each does.
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import { Worker } from "node:worker_threads";
import { parseFlags, label, USAGE } from "./lib/flags.mjs";
import { Front } from "./lib/front.mjs";
import { close, listen, urlOf } from "./lib/http.mjs";
import { abortBuilds, BuildError } from "./lib/build.mjs";
import { pkgVersion, resolveSDK, whyUnavailable } from "./lib/load.mjs";
import { Cleanups, fail, NAME, stopOn, warn } from "./lib/process.mjs";
import { protocol, unavailable } from "./lib/protocol.mjs";
import { setUpWorld } from "./lib/world.mjs";

/** @typedef {import("./lib/types.mjs").Flags} Flags */

/** @param {string[]} argv */
export async function main(argv) {
  /** @type {Flags} */
  let flags;
  try {
    flags = parseFlags(argv);
  } catch (e) {
    process.stderr.write(`${NAME}: ${/** @type {Error} */ (e).message}\n${USAGE}`);
    process.exit(2);
  }
  if (flags.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  // --sdk: a build from tarballs or a checkout is made here, before the
  // adapter listens (durabench waits for its URL while it writes to stderr,
  // which the build does every 20 s; --build-only makes it beforehand).
  // Stopped mid-build, it leaves nothing half made.
  const stopBuild = () => {
    abortBuilds();
    process.exit(143);
  };
  process.once("SIGTERM", stopBuild).once("SIGINT", stopBuild);
  /** @type {import("./lib/load.mjs").ResolvedSDK} */
  let sdk;
  try {
    sdk = await resolveSDK(flags.sdk, warn);
  } catch (e) {
    fail(e instanceof BuildError ? 1 : 2, /** @type {Error} */ (e).message);
  }
  process.off("SIGTERM", stopBuild).off("SIGINT", stopBuild);
  const { dir, build } = sdk;
  const hash = build?.hash;
  if (flags.buildOnly) {
    process.stdout.write(`${dir}${build ? ` workflow ${build.version}+${build.hash}` : ""}\n`);
    process.exit(0);
  }
  // /v1/info of a build names its content hash (sdk_hash, and in the label).
  /** @param {any} info */
  const withHash = (info) => (hash ? { ...info, sdk_hash: hash, label: label(info.version, switches, flags.world, hash) } : info);
  // The SDK resolves its world package (WORKFLOW_TARGET_WORLD) from the
  // working directory (which a worker thread cannot change: set here).
  // The one it was started in (durabench's) is where an option's relative
  // path (stream-replay's cadence file) is.
  const cwd = process.cwd();
  process.chdir(dir);
  const cleanups = new Cleanups();
  const server = await listen(flags.port, flags.host);
  const url = urlOf(server);
  cleanups.push(() => close(server));
  /** @param {import("./lib/protocol.mjs").Endpoints} endpoints */
  const serve = (endpoints) => {
    server.on("request", protocol(endpoints));
    stopOn(cleanups);
    process.stdout.write(url + "\n");
  };

  // The SDK's own switches, then the world's configuration. A
  // combination that cannot run is served, every cell skipped with why.
  const switches = { ...flags.env };
  const why = whyUnavailable(dir, flags.world, switches);
  if (why) {
    warn(why);
    const version = pkgVersion(dir, "workflow");
    const ep = unavailable(why, label(version, switches, flags.world, hash), version);
    const info = withHash(ep.info());
    return serve({ ...ep, info: () => info });
  }
  Object.assign(process.env, switches);
  let world;
  try {
    world = await setUpWorld(flags, dir, cleanups);
  } catch (e) {
    await cleanups.run();
    fail(1, /** @type {Error} */ (e).message);
  }

  // The QuickJS VM (5.0's WORKFLOW_VM=quickjs) compiles WebAssembly that
  // uses extended constant expressions, a V8 feature Node 20 keeps behind
  // --experimental-wasm-extended-const, which NODE_OPTIONS refuses. V8's
  // flags are the process's: set here, before the worker compiles it.
  if (switches.WORKFLOW_VM === "quickjs") v8.setFlagsFromString("--experimental-wasm-extended-const");
  // The SDK, its routes' server and the history reader, on a worker
  // thread (it inherits this environment); a new one for every cell.
  /** @type {import("./lib/types.mjs").WorkerData} */
  const workerData = { dir, flags, switches, cwd };
  const front = new Front(() => new Worker(new URL("./lib/worker.mjs", import.meta.url), { workerData }), world);
  let info;
  try {
    info = await front.ready;
  } catch (e) {
    await cleanups.run();
    fail(1, `loading the SDK from ${dir}: ${/** @type {Error} */ (e).message}`);
  }
  cleanups.push(() => front.close());
  serve(front.endpoints(withHash(info)));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((e) => fail(1, e.stack || e.message));
}
