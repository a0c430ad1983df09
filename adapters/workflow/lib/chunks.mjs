// @ts-check
// Which chunk of a stream run the reader got, from the chunk itself: the
// SDK's readable may hand chunks over in another order than they were
// written (5.0.0-beta.55's world-local, now and then: its reader polls the
// chunk files while a batch of them is still being written in parallel),
// and a chunk reported under its position in the read would carry another
// chunk's write time and size. The writer (workflows/bench.js, chunk())
// makes every chunk tell its index: "token N " in text, {id: "N"} when
// structured, and for sized chunks (stream-sizes, stream-replay,
// stream-pipeline) bytes whose first ones follow from N, upper-cased by
// stream-pipeline's transform. A sized chunk shorter than its prefix may
// look like another of its size (stream-replay's 3-byte tokens): of the
// chunks it may be, it is the first not read yet.

// sizedPrefix is the first bytes of a sized chunk i, as
// workflows/bench.js's chunk() writes them (same generator: keep the two
// in step; the adapter's stream-sizes test fails if they part), upper-cased
// when upper.
/**
 * @param {number} i
 * @param {number} n
 * @param {boolean} upper
 * @returns {string}
 */
function sizedPrefix(i, n, upper) {
  const a = upper ? 65 : 97;
  let x = (Math.imul(i, 2654435761) + 1) >>> 0;
  let s = "";
  for (let j = 0; j < n; j++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    s += String.fromCharCode(a + (x % 26));
  }
  return s;
}

const PREFIX = 12;

/**
 * chunkIndexer returns a function from a chunk as read to the index its
 * writer gave it, or -1 when it is none of the run's chunks.
 * @param {number} chunks how many chunks the writer writes
 * @param {number[]} sizes the chunks' sizes, rotated (none: text or objects)
 * @param {boolean} [upper] the sized chunks are read upper-cased (stream-pipeline)
 * @returns {(c: unknown) => number}
 */
export function chunkIndexer(chunks, sizes, upper = false) {
  /** @type {Map<string, number[]> | null} each signature's chunks, in index order */
  let bySig = null;
  /** @type {Set<number>} the sized chunks already named */
  const named = new Set();
  /** @param {ArrayBufferView} c */
  const sized = (c) => {
    if (!bySig) {
      bySig = new Map();
      for (let i = 0; i < chunks; i++) {
        const size = sizes[i % sizes.length];
        const sig = `${size}:${sizedPrefix(i, Math.min(PREFIX, size), upper)}`;
        const same = bySig.get(sig);
        if (same) same.push(i);
        else bySig.set(sig, [i]);
      }
    }
    const head = Buffer.from(c.buffer, c.byteOffset, Math.min(PREFIX, c.byteLength)).toString("latin1");
    const may = bySig.get(`${c.byteLength}:${head}`);
    if (!may) return -1;
    // The first of them not read yet; all read: the first (read twice).
    const i = may.find((j) => !named.has(j)) ?? may[0];
    named.add(i);
    return i;
  };
  return (c) => {
    let i = -1;
    if (typeof c === "string") {
      const m = /^token (\d+) $/.exec(c);
      if (m) i = Number(m[1]);
    } else if (ArrayBuffer.isView(c)) {
      if (sizes.length > 0) i = sized(c);
      else {
        const m = /^token (\d+) $/.exec(Buffer.from(c.buffer, c.byteOffset, c.byteLength).toString());
        if (m) i = Number(m[1]);
      }
    } else if (c && typeof c === "object" && "id" in c && /^\d+$/.test(String(c.id ?? ""))) {
      i = Number(c.id);
    }
    return Number.isInteger(i) && i >= 0 && i < chunks ? i : -1;
  };
}

// ChunkOrder follows the writer's indexes of a stream's chunks in the
// order they were read and says what was wrong with it: a chunk read out
// of order, read twice, or none of the run's.
export class ChunkOrder {
  constructor() {
    this.seen = new Set();
    this.position = 0;
    /** @type {import("./types.mjs").Anomaly[]} */
    this.anomalies = [];
    this.outOfOrder = false; // a chunk was read out of order (only the first is named)
  }

  /**
   * read records that the chunk at the next position was the writer's
   * index (-1: unknown).
   * @param {number} index
   */
  read(index) {
    const at = this.position++;
    if (index < 0) {
      if (!this.anomalies.some((a) => a.kind === "stream_unknown_chunk"))
        this.anomalies.push({ kind: "stream_unknown_chunk", detail: `the chunk read at position ${at} is none the writer wrote` });
      return;
    }
    if (this.seen.has(index)) {
      this.anomalies.push({ kind: "stream_duplicate_chunk", detail: `chunk ${index} read again at position ${at}` });
      return;
    }
    this.seen.add(index);
    if (index !== at && !this.outOfOrder) {
      this.outOfOrder = true;
      this.anomalies.push({ kind: "stream_order", detail: `chunk ${index} read at position ${at}` });
    }
  }
}
