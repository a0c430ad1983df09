// @ts-check
// The reader of a stream run's stream: the adapter reads it as the SDK's
// users do (the run's getReadable()), reported as the stage's reader (index
// 1, source sdk): each chunk's read time with its writer's index and stamp
// (the chunk says which it is: lib/chunks.mjs) and its size. A chunk read
// out of order, twice or not the writer's is an anomaly of the run.
import { abs } from "./clock.mjs";
import { ChunkOrder, chunkIndexer } from "./chunks.mjs";

/** @typedef {import("./runs.mjs").Run} Run */

/**
 * chunkBytes is a chunk's size as read: a string's UTF-8 bytes, an
 * array's bytes, an object's JSON.
 * @param {unknown} c
 * @returns {number}
 */
export function chunkBytes(c) {
  if (typeof c === "string") return Buffer.byteLength(c);
  if (ArrayBuffer.isView(c)) return c.byteLength;
  return Buffer.byteLength(JSON.stringify(c));
}

/**
 * readStream starts reading the stream of st's SDK run (st.reader ends
 * with the stream; what it found wrong is in st.readAnomalies).
 * @param {Run} st
 * @param {{ getReadable(): AsyncIterable<unknown> }} sdkRun
 */
export function readStream(st, sdkRun) {
  const log = st.sink;
  if (!log) return;
  const chunks = st.chunks ?? 0;
  const indexOf = chunkIndexer(chunks, st.sizes, st.transform);
  const order = new ChunkOrder();
  st.reader = (async () => {
    log.add({ kind: "step_started", at: abs(performance.now()), source: "sdk", stage: 0, index: 1, attempt: 1 });
    let i = 0;
    for await (const c of sdkRun.getReadable()) {
      const at = abs(performance.now());
      const w = indexOf(c);
      order.read(w);
      const index = w >= 0 ? w : i;
      log.add({ kind: "chunk_read", at, source: "sdk", stage: 0, index, written: (w >= 0 && st.written[w]) || at, bytes: chunkBytes(c) });
      i++;
    }
    log.add({ kind: "step_completed", at: abs(performance.now()), source: "sdk", stage: 0, index: 1, attempt: 1 });
    st.readAnomalies.push(...order.anomalies);
    if (i !== chunks) st.readAnomalies.push({ kind: "stream_chunks", detail: `the reader read ${i} chunks, the writer writes ${chunks}` });
  })().catch((e) => {
    st.readAnomalies.push(...order.anomalies, { kind: "stream_read_failed", detail: `reading the run's stream: ${e.message}` });
  });
}
