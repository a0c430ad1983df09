// @ts-check
// stream-replay's cadences, read as durabench reads them
// (scenarios/cadence.go): a JSON list of [offset_ms, bytes], chunk i written
// offset_ms / speed after the writer starts with bytes bytes. A built-in
// name (steady, bursty, pauses) is the file examples/cadences/NAME.json,
// which durabench's own test holds to the generator the built-in engine
// replays (scenarios/sdk_test.go), so both replay the same chunks; any
// other value is the path of a file (relative: to the directory the
// adapter was started in, durabench's, as durabench reads it). A cadence's identity is the SHA-256 of
// its canonical form: durabench computes the cell's cadence_sha256 from
// the same option; the adapter computes it too, to check that a built-in
// file is the built-in cadence.
import { createHash } from "node:crypto";
import { openSync, closeSync, fstatSync, readSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// BUILTIN is each built-in cadence's SHA-256, as docs/engine.md lists
// them (durabench's generator never changes them).
/** @type {Record<string, string>} */
export const BUILTIN = {
  steady: "6eb911f5c28f9fa9de3cf4e7ca40eba70537f704a991954d323d5ad80ac7ed0d",
  bursty: "3f39bf4870b0530932ba588f1dc3ad5709dee281d7cfc8737ebb4d6559bb3bc0",
  pauses: "239ec9b30fd34d62f755bb36af542959acdd2faaf14e035fb716d330fb643fe4",
};

// BUILTIN_DIR holds the built-in cadences' files (the repository's
// examples/cadences).
export const BUILTIN_DIR = fileURLToPath(new URL("../../../examples/cadences/", import.meta.url));

// The bounds durabench's ParseCadence holds a cadence to.
const MAX_CHUNKS = 1 << 20;
const MAX_BYTES = 64 << 20; // a chunk's bytes, as a size option's
const MAX_FILE = 64 << 20;
const MAX_OFFSET_MS = 24 * 3600 * 1000;
const NS_PER_MS = 1e6;

/**
 * A cadence: each chunk's offset after the writer starts (ns, a whole
 * number, as durabench rounds it) and size, and its SHA-256.
 * @typedef {{ offsets: number[], bytes: number[], sha256: string }} Cadence
 */

/**
 * parseCadence reads a cadence document as durabench's ParseCadence does:
 * a JSON list of [offset_ms, bytes], offsets (ms, fractions allowed,
 * rounded to the ns) from 0 to 24 h and not decreasing, bytes a whole
 * number from 1 to 64 MB. It throws the first bad entry.
 * @param {string} text
 * @returns {Cadence}
 */
export function parseCadence(text) {
  /** @type {unknown} */
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`not a JSON list of [offset_ms, bytes]: ${/** @type {Error} */ (e).message}`);
  }
  if (!Array.isArray(raw)) throw new Error("not a JSON list of [offset_ms, bytes]");
  if (raw.length === 0 || raw.length > MAX_CHUNKS) throw new Error(`${raw.length} entries, want 1 to ${MAX_CHUNKS}`);
  /** @type {number[]} */
  const offsets = [];
  /** @type {number[]} */
  const bytes = [];
  raw.forEach((e, i) => {
    if (!Array.isArray(e) || e.length !== 2 || !e.every((x) => typeof x === "number")) {
      throw new Error(`entry ${i}: ${JSON.stringify(e)} is not [offset_ms, bytes]`);
    }
    const [ms, n] = e;
    if (!(ms >= 0 && ms <= MAX_OFFSET_MS)) throw new Error(`entry ${i}: offset_ms ${ms} is not between 0 and 24 h`);
    if (!(n >= 1 && Number.isInteger(n) && n <= MAX_BYTES)) throw new Error(`entry ${i}: bytes ${n} is not a whole number from 1 to ${MAX_BYTES}`);
    const ns = Math.round(ms * NS_PER_MS);
    if (i > 0 && ns < offsets[i - 1]) throw new Error(`entry ${i}: offset_ms ${ms} is before the previous entry's`);
    offsets.push(ns);
    bytes.push(n);
  });
  return { offsets, bytes, sha256: cadenceSHA256(offsets, bytes) };
}

/**
 * canonical is a cadence's canonical form, as durabench's Canonical
 * writes it: [[offset_ms,bytes],...] without spaces, offsets in shortest
 * decimal ms, and a final newline.
 * @param {number[]} offsets ns
 * @param {number[]} bytes
 * @returns {string}
 */
export function canonical(offsets, bytes) {
  // String() of a double is its shortest decimal, as Go's 'f', -1; an
  // offset of at least 1 ns is at least 1e-6 ms, never in exponent form.
  return `[${offsets.map((ns, i) => `[${String(ns / NS_PER_MS)},${bytes[i]}]`).join(",")}]\n`;
}

/**
 * cadenceSHA256 is the hex SHA-256 of the cadence's canonical form (a
 * stream-replay cell's cadence_sha256).
 * @param {number[]} offsets ns
 * @param {number[]} bytes
 */
export function cadenceSHA256(offsets, bytes) {
  return createHash("sha256").update(canonical(offsets, bytes)).digest("hex");
}

/**
 * readCadenceFile reads a regular file of at most 64 MB (a device or a
 * pipe named by mistake must not hang a start), with its identity.
 * @param {string} path
 * @returns {{ text: string, id: string }}
 */
function readCadenceFile(path) {
  const fd = openSync(path, "r");
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error("not a regular file");
    if (st.size > MAX_FILE) throw new Error(`${st.size} bytes, over the ${MAX_FILE >> 20} MB limit`);
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    return { text: buf.subarray(0, got).toString("utf8"), id: `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}` };
  } finally {
    closeSync(fd);
  }
}

// cache keeps the cadences read, by name or path and the file's identity
// (every start of a cell names the same one).
/** @type {Map<string, Cadence>} */
const cache = new Map();
const CACHED = 16;

/**
 * loadCadence is the built-in cadence of that name (its file in dir,
 * checked against its SHA-256), or the cadence in the file at that path
 * (relative to cwd). Its errors name the option, as durabench's do.
 * @param {string} nameOrPath
 * @param {{ dir?: string, cwd?: string }} [where] where the built-in cadences' files are, and where a relative path is
 * @returns {Cadence}
 */
export function loadCadence(nameOrPath, { dir = BUILTIN_DIR, cwd = process.cwd() } = {}) {
  const builtin = Object.hasOwn(BUILTIN, nameOrPath);
  const path = builtin ? join(dir, `${nameOrPath}.json`) : resolve(cwd, nameOrPath);
  let file;
  try {
    file = readCadenceFile(path);
  } catch (e) {
    const why = /** @type {Error} */ (e).message;
    throw new Error(builtin
      ? `option cadence: the built-in cadence ${nameOrPath}'s file ${path}: ${why}`
      : `option cadence: ${JSON.stringify(nameOrPath)} is neither a built-in cadence (${Object.keys(BUILTIN).join(", ")}) nor a readable file: ${why}`);
  }
  const key = `${path}\0${file.id}`;
  const hit = cache.get(key);
  if (hit) return hit;
  let c;
  try {
    c = parseCadence(file.text);
  } catch (e) {
    throw new Error(`option cadence: ${nameOrPath}: ${/** @type {Error} */ (e).message}`);
  }
  if (builtin && c.sha256 !== BUILTIN[nameOrPath]) {
    throw new Error(`option cadence: ${path} is not the built-in ${nameOrPath} cadence (SHA-256 ${c.sha256}, want ${BUILTIN[nameOrPath]})`);
  }
  if (cache.size >= CACHED) cache.clear();
  cache.set(key, c);
  return c;
}
