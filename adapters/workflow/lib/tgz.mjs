// @ts-check
// npm package tarballs (`npm pack`, `pnpm pack`: a gzipped tar whose files
// sit under one top directory, `package/`) read without a tar tool: their
// package.json, and a digest of what they hold that names the build
// whatever packed it when (file names, modes and bytes; no times, no
// owners, no gzip level).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";

/**
 * A file of a tarball.
 * @typedef {{ path: string, mode: number, data: Buffer }} Entry
 */

/**
 * field reads a NUL-terminated string field of a tar header.
 * @param {Buffer} h
 * @param {number} off
 * @param {number} len
 */
function field(h, off, len) {
  const b = h.subarray(off, off + len);
  const end = b.indexOf(0);
  return b.subarray(0, end < 0 ? len : end).toString("utf8");
}

/**
 * octal reads a numeric field of a tar header (octal text, or base-256
 * when its first byte has the high bit set).
 * @param {Buffer} h
 * @param {number} off
 * @param {number} len
 */
function octal(h, off, len) {
  if (h[off] & 0x80) {
    let n = 0;
    for (let i = off + 1; i < off + len; i++) n = n * 256 + h[i];
    return n;
  }
  const s = field(h, off, len).trim();
  return s ? parseInt(s, 8) : 0;
}

/**
 * untar lists the regular files of an uncompressed tar archive (ustar,
 * with pax and GNU long names), directories and links left out.
 * @param {Buffer} tar
 * @returns {Entry[]}
 */
export function untar(tar) {
  /** @type {Entry[]} */
  const out = [];
  let off = 0;
  /** @type {string | undefined} */
  let longName;
  while (off + 512 <= tar.length) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = octal(h, 124, 12);
    const type = String.fromCharCode(h[156] || 0x30);
    const data = tar.subarray(off + 512, off + 512 + size);
    if (data.length < size) throw new Error("truncated tar archive");
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === "x") {
      // A pax header: its path= record names the next file.
      const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString("utf8"));
      if (m) longName = m[1];
      continue;
    }
    if (type === "L") {
      longName = data.toString("utf8").replace(/\0+$/, "");
      continue;
    }
    if (type === "g") continue;
    const prefix = field(h, 345, 155);
    const path = longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    longName = undefined;
    if (type === "0" || type === "\0" || type === "7") out.push({ path, mode: octal(h, 100, 8) & 0o777, data: Buffer.from(data) });
  }
  return out;
}

/**
 * readTgz lists the files of the tarball at file.
 * @param {string} file
 * @returns {Entry[]}
 */
export function readTgz(file) {
  let tar;
  try {
    tar = gunzipSync(readFileSync(file));
  } catch (e) {
    throw new Error(`${file}: not a gzipped tarball (${/** @type {Error} */ (e).message})`);
  }
  return untar(tar);
}

/**
 * inner is a tarball path without its top directory (`package/`).
 * @param {string} path
 */
const inner = (path) => path.slice(path.indexOf("/") + 1);

/**
 * A package tarball as the build takes it: its package's name, version
 * and package.json, the digest of its files and npm's integrity of its
 * bytes.
 * @typedef {{ file: string, name: string, version: string, manifest: any, digest: string, integrity: string }} Tarball
 */

/**
 * readPackage reads a package tarball: its package.json (at the top
 * directory's root) and its digest.
 * @param {string} file
 * @returns {Tarball}
 */
export function readPackage(file) {
  const bytes = readFileSync(file);
  let entries;
  try {
    entries = untar(gunzipSync(bytes));
  } catch (e) {
    throw new Error(`${file}: not a gzipped tarball (${/** @type {Error} */ (e).message})`);
  }
  const pj = entries.find((e) => inner(e.path) === "package.json" && e.path.indexOf("/") === e.path.lastIndexOf("/"));
  if (!pj) throw new Error(`${file}: no package.json in the tarball (not an npm package)`);
  let m;
  try {
    m = JSON.parse(pj.data.toString("utf8"));
  } catch (e) {
    throw new Error(`${file}: its package.json does not parse (${/** @type {Error} */ (e).message})`);
  }
  if (typeof m.name !== "string" || typeof m.version !== "string") throw new Error(`${file}: its package.json has no name or version`);
  const integrity = "sha512-" + createHash("sha512").update(bytes).digest("base64");
  return { file, name: m.name, version: m.version, manifest: m, digest: digest(entries), integrity };
}

/**
 * canonical is JSON with every object's keys sorted: package.json as it
 * means, whatever order its packer wrote the keys in (pnpm pack writes a
 * package's rewritten dependencies in an order that changes from one pack
 * to the next).
 * @param {unknown} v
 * @returns {string}
 */
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const o = /** @type {Record<string, unknown>} */ (v);
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * digest is the sha256 of a tarball's files, in path order: each one's
 * path under the top directory, mode and bytes (the package's own
 * package.json as canonical JSON). Two packs of the same files have one
 * digest whatever their times, compression or package.json key order;
 * one byte changed changes it.
 * @param {Entry[]} entries
 * @returns {string}
 */
export function digest(entries) {
  const h = createHash("sha256");
  const sorted = [...entries].sort((a, b) => (inner(a.path) < inner(b.path) ? -1 : inner(a.path) > inner(b.path) ? 1 : 0));
  for (const e of sorted) {
    let data = e.data;
    if (inner(e.path) === "package.json") {
      try {
        data = Buffer.from(canonical(JSON.parse(data.toString("utf8"))));
      } catch {
        // not JSON: its bytes
      }
    }
    h.update(`${inner(e.path)}\0${e.mode.toString(8)}\0${data.length}\0`);
    h.update(data);
  }
  return h.digest("hex");
}
