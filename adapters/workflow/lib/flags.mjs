// @ts-check
// The adapter's flags, its usage, and the label reports name its cells by.
import { parseArgs } from "node:util";
import { NAME } from "./process.mjs";

/** @typedef {import("./types.mjs").Flags} Flags */

// DEFAULT_SDK is the version built by make engines when --sdk is not given.
export const DEFAULT_SDK = "4.8.9";

/**
 * parseFlags reads the command line; a bad flag throws an error naming it.
 * @param {string[]} argv
 * @returns {Flags}
 */
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
      "build-only": { type: "boolean", default: false },
      spans: { type: "string", default: "on" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (positionals.length) throw new Error(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const world = values.world;
  if (world !== "local" && world !== "postgres") throw new Error(`--world ${world}: want local or postgres`);
  /** @type {Record<string, string>} */
  const env = {};
  for (const kv of values.env) {
    const i = kv.indexOf("=");
    if (i <= 0) throw new Error(`--env ${JSON.stringify(kv)}: want NAME=VALUE`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  /** @param {"max-branches" | "max-steps" | "max-chunks"} flag */
  const int = (flag) => {
    const v = Number(values[flag]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} ${values[flag]}: want a positive integer`);
    return v;
  };
  if (values.spans !== "on" && values.spans !== "off") throw new Error(`--spans ${values.spans}: want on or off`);
  const m = /^(.*):(\d+)$/.exec(values.addr);
  if (!m) throw new Error(`--addr ${values.addr}: want host:port`);
  return {
    help: values.help ?? false,
    buildOnly: values["build-only"],
    host: m[1] || "127.0.0.1",
    port: Number(m[2]),
    world,
    pgURL: values["pg-url"],
    pgNoFsync: values["pg-no-fsync"],
    sdk: values.sdk,
    env,
    maxBranches: int("max-branches"),
    maxSteps: int("max-steps"),
    maxChunks: int("max-chunks"),
    spans: values.spans === "on",
  };
}

export const USAGE = `usage: ${NAME} [--addr HOST:PORT] [--world local|postgres] [--pg-url URL] [--sdk VERSION|PATH] [--env NAME=VALUE]… [--spans on|off] [--build-only]
  --addr          address to listen on (port 0: a free port; default 127.0.0.1:0)
  --world         local (default: world-local, a fresh data dir under a temp dir) or postgres
  --pg-url        world-postgres database (default: a throwaway PostgreSQL from the system's binaries)
  --pg-no-fsync   turn fsync off in the throwaway PostgreSQL (default on, as a user's server runs)
  --sdk           SDK version built by make engines (sdk/VERSION: ${DEFAULT_SDK} by default); the path
                  of a directory laid out like one (package.json, node_modules, workflow build's output);
                  a directory of the SDK's package tarballs (npm pack, pnpm pack: *.tgz, at least
                  workflow and @workflow/core); or a checkout of the SDK's monorepo with its packages
                  built (pnpm-workspace.yaml, packages/*): the adapter builds those itself, once per
                  content hash, under .cache/sdk/HASH (DURABENCH_WORKFLOW_CACHE)
  --build-only    make the --sdk build (tarballs, a checkout), print its directory and hash, and exit
  --env           an SDK switch, NAME=VALUE (repeatable), e.g. WORKFLOW_RESILIENT_STEP_DISPATCH=1
  --max-branches  largest fanout declared in /v1/info (default 1024)
  --max-steps     longest sequential declared in /v1/info (default 1024)
  --max-chunks    most chunks a stream scenario's writer writes, declared in /v1/info (default 10000)
  --spans         on (default): report the SDK's OpenTelemetry spans as span events (protocol 1.2,
                  docs/critical-path.md); off: none (a tracer provider is not even registered)
`;

// SHORT abbreviates the SDK's switches in a cell's label.
/** @type {Record<string, string>} */
const SHORT = {
  WORKFLOW_RESILIENT_STEP_DISPATCH: "rsd",
  WORKFLOW_TURBO: "turbo",
  WORKFLOW_MAX_INLINE_STEPS: "max-inline",
  WORKFLOW_OPTIMISTIC_INLINE_START: "ois",
  WORKFLOW_VM: "vm",
};

/**
 * label is how reports name the adapter's cells: `workflow 5.0.0-beta.55 ·
 * rsd=1 · local`; an SDK the adapter built from tarballs or a checkout
 * carries its content hash after its version, `workflow 4.8.9+1f0c2a9e4b7d
 * · local`, so two builds of one version are never taken for each other.
 * @param {string} version
 * @param {Record<string, string>} switches
 * @param {string} world
 * @param {string} [hash] the build's content hash
 * @returns {string}
 */
export function label(version, switches, world, hash) {
  const sw = Object.entries(switches).map(([k, v]) => `${SHORT[k] ?? k.replace(/^WORKFLOW_/, "").toLowerCase()}=${v}`);
  return ["workflow " + version + (hash ? "+" + hash : ""), ...sw, world].join(" · ");
}
