// @ts-check
// lib/load.mjs: --sdk resolved to a directory, whether its SDK can serve
// what was asked, and workflow build's output found — on a directory laid
// out like an installed SDK (no SDK is loaded here).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { bundles, isRelease, pkgVersion, sdkDir, unreadSwitches, whyUnavailable, workflowIds } from "../../lib/load.mjs";
import { SCENARIOS } from "../../lib/options.mjs";

const dir = mkdtempSync(join(tmpdir(), "durabench-workflow-load-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * @param {string} path under dir
 * @param {string} text
 */
function write(path, text) {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), text);
}

write("node_modules/workflow/package.json", JSON.stringify({ version: "9.9.9" }));
write("node_modules/workflow/dist/a.js", "const x = process.env.WORKFLOW_TURBO;");
write("node_modules/@workflow/world-local/package.json", JSON.stringify({ version: "1.2.3" }));
write("node_modules/@workflow/world-local/dist/b.mjs", 'if (env["WORKFLOW_VM"]) {}\n// WORKFLOW_MAX_INLINE_STEPS in a comment is no reading');
write("node_modules/@workflow/core/node_modules/dep/c.js", "process.env.WORKFLOW_OPTIMISTIC_INLINE_START"); // a dependency's, not the SDK's

test("--sdk is a version under sdk/ or a path with the workflow package installed", () => {
  assert.equal(sdkDir(dir), dir);
  assert.throws(() => sdkDir("0.0.0-none"), { message: /^--sdk 0\.0\.0-none: .*sdk\/0\.0\.0-none has no installed workflow package/ });
  assert.throws(() => sdkDir(join(dir, "node_modules")), { message: /^--sdk .*: .* has no installed workflow package/ });
});

test("a bare --sdk is a version under sdk/, unless none is and a directory of that name is here", () => {
  assert.equal(isRelease("4.8.9"), true);
  assert.equal(isRelease("0.0.0-none"), true, "neither: a version, whose error says make engines");
  assert.equal(isRelease("./4.8.9"), false);
  assert.equal(isRelease("/abs/dir"), false);
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    assert.equal(isRelease("node_modules"), false, "a directory here, no such version");
  } finally {
    process.chdir(cwd);
  }
});

test("a package's version is its package.json's, or none", () => {
  assert.equal(pkgVersion(dir, "workflow"), "9.9.9");
  assert.equal(pkgVersion(dir, "@workflow/world-local"), "1.2.3");
  assert.equal(pkgVersion(dir, "@workflow/world-postgres"), "");
});

test("a switch is read where the SDK's own packages name it as code does", () => {
  const all = ["WORKFLOW_TURBO", "WORKFLOW_VM", "WORKFLOW_MAX_INLINE_STEPS", "WORKFLOW_OPTIMISTIC_INLINE_START"];
  assert.deepEqual(unreadSwitches(dir, all), ["WORKFLOW_MAX_INLINE_STEPS", "WORKFLOW_OPTIMISTIC_INLINE_START"]);
  assert.deepEqual(unreadSwitches(dir, []), []);
});

test("what the SDK cannot serve is unavailable, with why", () => {
  assert.equal(whyUnavailable(dir, "local", { WORKFLOW_TURBO: "0" }), "");
  assert.match(whyUnavailable(dir, "postgres", {}), /^workflow 9\.9\.9 has no world-postgres in /);
  assert.equal(
    whyUnavailable(dir, "local", { WORKFLOW_TURBO: "0", WORKFLOW_NOPE: "1" }),
    "workflow 9.9.9 does not read WORKFLOW_NOPE (no file of its packages names it): the cells would measure its default",
  );
});

test("the build's output: flow (.mjs before .js), step where there is one, the manifest's workflow ids", () => {
  assert.throws(() => bundles(dir), { message: /no flow\.js or flow\.mjs: run `npx workflow build`/ });
  /** @type {Record<string, { workflowId: string }>} */
  const file = {};
  for (const { workflow } of Object.values(SCENARIOS)) file[workflow] = { workflowId: `id-${workflow}` };
  write(".well-known/workflow/v1/manifest.json", JSON.stringify({ workflows: { "workflows/bench.js": file } }));
  write(".well-known/workflow/v1/flow.js", "");
  write(".well-known/workflow/v1/flow.mjs", "");
  const b = bundles(dir);
  assert.equal(b.flow, join(dir, ".well-known/workflow/v1/flow.mjs"));
  assert.equal(b.step, undefined);
  const ids = workflowIds(b.manifest);
  assert.equal(ids["hook-step"], "id-hookStep");
  assert.equal(ids["stream-sizes"], "id-stream");
  assert.deepEqual(Object.keys(ids), Object.keys(SCENARIOS));
  delete file.race;
  assert.throws(() => workflowIds({ workflows: { "workflows/bench.js": file } }), { message: "manifest.json: no workflow for scenario race" });
});
