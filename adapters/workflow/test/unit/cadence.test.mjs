// @ts-check
// lib/cadence.mjs: stream-replay's cadences read as durabench reads them,
// and their SHA-256 (a stream-replay cell's cadence_sha256) as durabench
// computes it.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { BUILTIN, BUILTIN_DIR, canonical, loadCadence, parseCadence } from "../../lib/cadence.mjs";

const dir = mkdtempSync(join(tmpdir(), "cadence-test-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("the built-in cadences are examples/cadences' files, with the SHA-256 durabench gives them", () => {
  const want = { steady: [200, 3980], bursty: [200, 2801], pauses: [240, 10975] };
  for (const [name, [chunks, lastMs]] of Object.entries(want)) {
    const c = loadCadence(name);
    assert.equal(c.sha256, BUILTIN[name], name);
    assert.equal(c.bytes.length, chunks, name);
    assert.equal(c.offsets.at(-1), lastMs * 1e6, name);
    assert.ok(c.bytes.every((b) => b >= 3 && b <= 8), `${name}: tokens of 3 to 8 bytes`);
  }
  assert.equal(loadCadence("steady"), loadCadence("steady"), "read once");
});

test("a cadence's SHA-256 is of its canonical form: spelled otherwise, the same cadence has the same", () => {
  // durabench's scenarios.LoadCadence of this document: its Canonical and SHA-256
  const doc = "[[0, 3], [0.5, 4], [1.0000004, 5], [1.0000005, 6], [1.0000005, 1], [12.345678912, 7], [100, 64], [1e3, 2], [86400000, 8]]";
  const c = parseCadence(doc);
  assert.equal(canonical(c.offsets, c.bytes), "[[0,3],[0.5,4],[1,5],[1.000001,6],[1.000001,1],[12.345679,7],[100,64],[1000,2],[86400000,8]]\n");
  assert.equal(c.sha256, "57b77c01f599a808720bdfcd487f80fc313bc01ad7c36b10063f71cf7631e2c2");
  assert.deepEqual(c.offsets.slice(0, 4), [0, 500_000, 1_000_000, 1_000_001], "offsets rounded to the ns");
  assert.equal(parseCadence(" [ [0.0,3] ,[5e-1,4],[1.0000004,5],[1.000001,6],[1.000001,1],[12.345679,7],[100.0,64],[1000,2],[8.64e7,8] ]\n").sha256, c.sha256);
  // steady's file as a file is steady
  const file = join(dir, "steady.json");
  copyFileSync(join(BUILTIN_DIR, "steady.json"), file);
  assert.equal(loadCadence(file).sha256, BUILTIN.steady);
});

test("a bad cadence is refused with the first bad entry, as durabench refuses it", () => {
  const cases = {
    "{}": /^not a JSON list of \[offset_ms, bytes\]/,
    "[": /^not a JSON list of \[offset_ms, bytes\]: /,
    "[]": /^0 entries, want 1 to 1048576$/,
    "[[0,1],[1]]": /^entry 1: \[1\] is not \[offset_ms, bytes\]$/,
    '[[0,1],["1",2]]': /^entry 1: \["1",2\] is not \[offset_ms, bytes\]$/,
    "[[-1,1]]": /^entry 0: offset_ms -1 is not between 0 and 24 h$/,
    "[[86400001,1]]": /^entry 0: offset_ms 86400001 is not between 0 and 24 h$/,
    "[[1e400,1]]": /^entry 0: offset_ms Infinity is not between 0 and 24 h$/,
    "[[0,0]]": /^entry 0: bytes 0 is not a whole number from 1 to 67108864$/,
    "[[0,1.5]]": /^entry 0: bytes 1.5 is not a whole number from 1 to 67108864$/,
    "[[0,67108865]]": /^entry 0: bytes 67108865 is not a whole number from 1 to 67108864$/,
    "[[5,1],[4.9,1]]": /^entry 1: offset_ms 4.9 is before the previous entry's$/,
  };
  for (const [doc, want] of Object.entries(cases)) {
    assert.throws(() => parseCadence(doc), { message: want }, doc);
  }
  // equal offsets are fine (a burst), and so is a fraction that rounds to the previous ns
  assert.deepEqual(parseCadence("[[5,1],[5,2],[5.0000001,3]]").offsets, [5e6, 5e6, 5e6]);
});

test("loadCadence names the option and the file; a changed file is read again", () => {
  assert.throws(() => loadCadence(join(dir, "missing.json")), /^Error: option cadence: ".*missing.json" is neither a built-in cadence \(steady, bursty, pauses\) nor a readable file: ENOENT/);
  assert.throws(() => loadCadence(dir), /nor a readable file: (not a regular file|EISDIR)/);
  const bad = join(dir, "bad.json");
  writeFileSync(bad, "[[0,1],[1]]");
  assert.throws(() => loadCadence(bad), { message: `option cadence: ${bad}: entry 1: [1] is not [offset_ms, bytes]` });
  const f = join(dir, "mine.json");
  writeFileSync(f, "[[0,1],[10,2]]");
  assert.deepEqual(loadCadence(f).bytes, [1, 2]);
  writeFileSync(f, "[[0,1],[10,2],[20,3]]");
  assert.deepEqual(loadCadence(f).bytes, [1, 2, 3]);
  // a relative path is the starting directory's (durabench's), not the process's now
  assert.equal(loadCadence("mine.json", { cwd: dir }), loadCadence(f));
  assert.throws(() => loadCadence("mine.json", { cwd: join(dir, "elsewhere") }), /elsewhere\/mine.json'/);
  // a built-in name whose file is not that cadence: refused, never replayed under its name
  writeFileSync(join(dir, "bursty.json"), "[[0,1]]");
  assert.throws(() => loadCadence("bursty", { dir }), /^Error: option cadence: .*bursty.json is not the built-in bursty cadence \(SHA-256 [0-9a-f]{64}, want 3f39bf48/);
  assert.throws(() => loadCadence("pauses", { dir: join(dir, "none") }), /^Error: option cadence: the built-in cadence pauses's file .*none\/pauses.json: ENOENT/);
});
