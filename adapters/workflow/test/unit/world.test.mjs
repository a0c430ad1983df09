// @ts-check
// lib/world.mjs (world-local's data dirs, one per cell) and lib/process.mjs
// (what the adapter removes when it stops).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dirname } from "node:path";
import { test } from "node:test";
import { Cleanups } from "../../lib/process.mjs";
import { EMBEDDED, LOCAL, localNames, localWorld } from "../../lib/world.mjs";

test("world-local gets a new data dir for every cell, the last one removed, all removed at the end", async () => {
  const saved = { world: process.env.WORKFLOW_TARGET_WORLD, data: process.env.WORKFLOW_LOCAL_DATA_DIR };
  try {
    const cleanups = new Cleanups();
    const world = localWorld(cleanups);
    assert.equal(process.env.WORKFLOW_TARGET_WORLD, "local");
    const first = String(process.env.WORKFLOW_LOCAL_DATA_DIR);
    assert.match(first, /durabench-workflow-[^/]+\/cell-1$/);
    mkdirSync(first); // as world-local makes it
    world.newCell();
    const second = String(process.env.WORKFLOW_LOCAL_DATA_DIR);
    assert.equal(second, first.replace(/cell-1$/, "cell-2"));
    for (let i = 0; i < 50 && existsSync(first); i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(!existsSync(first), "the last cell's data dir is removed");
    assert.ok(existsSync(dirname(first)));
    await cleanups.run();
    assert.ok(!existsSync(dirname(first)), "the root is removed with the adapter");
  } finally {
    for (const [name, v] of [["WORKFLOW_TARGET_WORLD", saved.world], ["WORKFLOW_LOCAL_DATA_DIR", saved.data]]) {
      if (v === undefined) delete process.env[String(name)];
      else process.env[String(name)] = v;
    }
  }
});

test("clean-ups run the last added first, each once, past one that fails", async () => {
  const cleanups = new Cleanups();
  /** @type {string[]} */
  const ran = [];
  cleanups.push(() => ran.push("first"));
  cleanups.push(() => {
    throw new Error("boom (expected by the test)");
  });
  cleanups.push(async () => ran.push("last"));
  await cleanups.run();
  await cleanups.run();
  assert.deepEqual(ran, ["last", "first"]);
});

test("world-local is the embedded world where its config reads WORKFLOW_EMBEDDED_DATA_DIR (4.0.1 betas)", () => {
  const dir = mkdtempSync(join(tmpdir(), "names-"));
  try {
    assert.deepEqual(localNames(dir), LOCAL);
    const d = join(dir, "node_modules", "@workflow", "world-local", "dist");
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "config.js"), "process.env.WORKFLOW_LOCAL_DATA_DIR");
    assert.deepEqual(localNames(dir), LOCAL);
    writeFileSync(join(d, "config.js"), "process.env.WORKFLOW_EMBEDDED_DATA_DIR");
    assert.deepEqual(localNames(dir), EMBEDDED);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
