// @ts-check
// lib/flags.mjs: the command line and the cells' label.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_SDK, label, parseFlags } from "../../lib/flags.mjs";

test("no flags: world-local on the default SDK, on a free loopback port", () => {
  assert.deepEqual(parseFlags([]), {
    help: false, buildOnly: false, host: "127.0.0.1", port: 0, world: "local", pgURL: undefined, pgNoFsync: false,
    sdk: DEFAULT_SDK, env: {}, maxBranches: 1024, maxSteps: 1024, maxChunks: 10000, spans: true,
  });
});

test("every flag is read", () => {
  const f = parseFlags([
    "--addr", "[::1]:8080", "--world=postgres", "--pg-url", "postgres://x", "--pg-no-fsync", "--sdk", "5.0.0-beta.55",
    "--env", "WORKFLOW_TURBO=0", "--env", "WORKFLOW_VM=quickjs=x", "--max-branches", "8", "--max-steps", "9", "--max-chunks", "10", "-h",
    "--build-only", "--spans", "off",
  ]);
  assert.deepEqual(f, {
    help: true, buildOnly: true, host: "[::1]", port: 8080, world: "postgres", pgURL: "postgres://x", pgNoFsync: true, sdk: "5.0.0-beta.55",
    env: { WORKFLOW_TURBO: "0", WORKFLOW_VM: "quickjs=x" }, maxBranches: 8, maxSteps: 9, maxChunks: 10, spans: false,
  });
  assert.equal(parseFlags(["--addr", ":9"]).host, "127.0.0.1", "an address without a host is loopback");
});

test("a bad flag is an error naming it", () => {
  /** @type {[string[], RegExp][]} */
  const bad = [
    [["--world", "mongo"], /^--world mongo: want local or postgres$/],
    [["--spans", "yes"], /^--spans yes: want on or off$/],
    [["--env", "WORKFLOW_TURBO"], /^--env "WORKFLOW_TURBO": want NAME=VALUE$/],
    [["--env", "=1"], /^--env "=1": want NAME=VALUE$/],
    [["--max-branches", "0"], /^--max-branches 0: want a positive integer$/],
    [["--max-steps", "many"], /^--max-steps many: want a positive integer$/],
    [["--max-chunks", "1.5"], /^--max-chunks 1.5: want a positive integer$/],
    [["--addr", "localhost"], /^--addr localhost: want host:port$/],
    [["--nope"], /'--nope'/],
    [["--sdk"], /'--sdk <value>' argument missing/],
    [["extra"], /^unexpected argument "extra"$/],
  ];
  for (const [argv, want] of bad) assert.throws(() => parseFlags(argv), { message: want }, argv.join(" "));
});

test("the label names the SDK, its switches (short) and the world", () => {
  assert.equal(label("4.8.9", {}, "local"), "workflow 4.8.9 · local");
  assert.equal(
    label("5.0.0-beta.55", { WORKFLOW_RESILIENT_STEP_DISPATCH: "1", WORKFLOW_MAX_INLINE_STEPS: "4", WORKFLOW_NOT_A_SWITCH: "x" }, "postgres"),
    "workflow 5.0.0-beta.55 · rsd=1 · max-inline=4 · not_a_switch=x · postgres",
  );
});

test("the label of a build names its content hash after the version", () => {
  assert.equal(label("4.8.9", {}, "local", "1f0c2a9e4b7d"), "workflow 4.8.9+1f0c2a9e4b7d · local");
  assert.equal(label("4.8.9", { WORKFLOW_TURBO: "0" }, "postgres", ""), "workflow 4.8.9 · turbo=0 · postgres");
});
