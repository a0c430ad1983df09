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
