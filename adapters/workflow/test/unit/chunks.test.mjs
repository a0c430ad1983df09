// @ts-check
// lib/chunks.mjs and lib/stream.mjs: which chunk the reader got, and the
// reader of a stream run's stream.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ChunkOrder, chunkIndexer } from "../../lib/chunks.mjs";
import { LogSink, Run } from "../../lib/runs.mjs";
import { chunkBytes, readStream } from "../../lib/stream.mjs";

test("a chunk read is known by its writer's index, and a read out of order, twice or of no chunk is an anomaly", () => {
  const text = chunkIndexer(6, []);
  assert.equal(text("token 3 "), 3);
  assert.equal(text(new TextEncoder().encode("token 5 ")), 5);
  assert.equal(text({ type: "text-delta", id: "4", text: "token 4 " }), 4);
  assert.equal(text("token 6 "), -1); // the run writes 6 chunks: 0..5
  assert.equal(text("hello"), -1);
  assert.equal(chunkIndexer(2, [10])(new Uint8Array(10)), -1); // the right size, not the writer's bytes
  /** @param {number[]} indexes */
  const orderOf = (indexes) => {
    const o = new ChunkOrder();
    for (const i of indexes) o.read(i);
    return o.anomalies;
  };
  assert.deepEqual(orderOf([0, 1, 2, 3, 4, 5]), []);
  assert.deepEqual(orderOf([0, 1, 2, 3, 5, 4]), [{ kind: "stream_order", detail: "chunk 5 read at position 4" }]);
  assert.deepEqual(orderOf([0, 1, 1, 2]).map((a) => a.kind), ["stream_duplicate_chunk", "stream_order"]);
  assert.deepEqual(orderOf([0, -1, 2]).map((a) => a.kind), ["stream_unknown_chunk"]);
});

/**
 * sized is chunk i of n bytes as workflows/bench.js's chunk() writes it
 * (and durabench's engine: engine/stream.go's sizedChunk).
 * @param {number} i
 * @param {number} n
 */
function sized(i, n) {
  const b = new Uint8Array(n);
  let x = (Math.imul(i, 2654435761) + 1) >>> 0;
  for (let j = 0; j < n; j++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b[j] = 97 + (x % 26);
  }
  return b;
}

/** @param {Uint8Array} b */
const upper = (b) => b.map((c) => (c >= 97 && c <= 122 ? c - 32 : c));

test("a sized chunk is known by its size and first bytes, upper-cased by stream-pipeline's transform", () => {
  const sizes = [10, 1024];
  const plain = chunkIndexer(6, sizes);
  for (let i = 0; i < 6; i++) assert.equal(plain(sized(i, sizes[i % 2])), i);
  assert.equal(plain(upper(sized(2, 10))), -1, "an upper-cased chunk is none of a plain stream's");
  const piped = chunkIndexer(4, [16384], true);
  assert.deepEqual([3, 0, 2, 1].map((i) => piped(upper(sized(i, 16384)))), [3, 0, 2, 1]);
  assert.equal(chunkIndexer(4, [16384], true)(sized(0, 16384)), -1, "a chunk the transform did not upper-case");
});

test("stream-replay's short chunks that look alike are named in order, the first not read yet", () => {
  // every chunk 1 byte: 26 looks for 60 chunks, so each look is several chunks'
  const n = 60;
  const sizes = Array(n).fill(1);
  const indexOf = chunkIndexer(n, sizes);
  const got = Array.from({ length: n }, (_, i) => indexOf(sized(i, 1)));
  assert.deepEqual(got, got.map((_, i) => i), "read in order: each chunk its own index");
  // two that look alike: whichever is read first is the first of them
  const j = got.findIndex((_, k) => k > 0 && sized(k, 1)[0] === sized(0, 1)[0]);
  assert.ok(j > 0);
  const pair = chunkIndexer(n, sizes);
  assert.equal(pair(sized(j, 1)), 0);
  assert.equal(pair(sized(0, 1)), j);
  // read once more than there are of that look: the first again (a duplicate)
  for (let k = j + 1; k < n; k++) if (sized(k, 1)[0] === sized(0, 1)[0]) pair(sized(k, 1));
  assert.equal(pair(sized(0, 1)), 0);
});

test("a chunk's size is as read: a string's UTF-8 bytes, an array's bytes, an object's JSON", () => {
  assert.equal(chunkBytes("héllo"), 6);
  assert.equal(chunkBytes(new Uint8Array(10)), 10);
  assert.equal(chunkBytes({ id: "1" }), 10);
});

/**
 * read has a stream run of `chunks` chunks (sizes: stream-sizes') read
 * what `readable` yields; it resolves with the reader's events and the
 * run's read anomalies.
 * @param {number} chunks
 * @param {number[]} sizes
 * @param {() => AsyncIterable<unknown>} readable
 */
async function read(chunks, sizes, readable) {
  /** @type {import("../../lib/types.mjs").TimelineEvent[]} */
  const events = [];
  const st = new Run("r", { steps: 1, chunks, sizes, hook: false }, new LogSink("r", (m) => m.t === "event" && events.push(m.ev)));
  for (let i = 0; i < chunks; i++) st.written[i] = 1000 + i;
  readStream(st, { getReadable: readable });
  await st.reader;
  return { events, anomalies: st.readAnomalies };
}

test("the reader reports each chunk under its writer's index, with its write time and size", async () => {
  const { events, anomalies } = await read(3, [], async function* () {
    yield "token 0 ";
    yield "token 2 ";
    yield "token 1 ";
  });
  assert.deepEqual(events.map((e) => `${e.kind}:${e.index}`), ["step_started:1", "chunk_read:0", "chunk_read:2", "chunk_read:1", "step_completed:1"]);
  const reads = events.filter((e) => e.kind === "chunk_read");
  assert.deepEqual(reads.map((e) => e.written), [1000, 1002, 1001]);
  assert.deepEqual(reads.map((e) => e.bytes), [8, 8, 8]);
  assert.ok(events.every((e) => e.source === "sdk" && e.stage === 0));
  assert.deepEqual(anomalies, [{ kind: "stream_order", detail: "chunk 2 read at position 1" }]);
});

test("a reader that read another number of chunks, or failed, is an anomaly", async () => {
  const short = await read(3, [], async function* () {
    yield "token 0 ";
  });
  assert.deepEqual(short.anomalies, [{ kind: "stream_chunks", detail: "the reader read 1 chunks, the writer writes 3" }]);
  const failed = await read(2, [], async function* () {
    yield "token 0 ";
    throw new Error("gone");
  });
  assert.deepEqual(failed.anomalies, [{ kind: "stream_read_failed", detail: "reading the run's stream: gone" }]);
  assert.equal(failed.events.at(-1)?.kind, "chunk_read", "no end for a reader that failed");
  const unknown = await read(1, [], async function* () {
    yield "hello";
  });
  assert.deepEqual(unknown.events[1].written, unknown.events[1].at, "a chunk of no index carries its read time");
  assert.deepEqual(unknown.anomalies.map((a) => a.kind), ["stream_unknown_chunk"]);
});
