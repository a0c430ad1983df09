// @ts-check
// Which chunk of a stream run the reader got, from the chunk itself: the
// SDK's readable may hand chunks over in another order than they were
// written (5.0.0-beta.55's world-local, now and then: its reader polls the
// chunk files while a batch of them is still being written in parallel),
// and a chunk reported under its position in the read would carry another
// chunk's write time and size. The writer (workflows/bench.js, chunk())
// makes every chunk tell its index: "token N " in text, {id: "N"} when
// structured, and for stream-sizes bytes whose first ones follow from N.

// sizedPrefix is the first bytes of stream-sizes' chunk i, as
// workflows/bench.js's chunk() writes them (same generator: keep the two
// in step; the adapter's stream-sizes test fails if they part).
/**
 * @param {number} i
 * @param {number} n
 * @returns {string}
 */
function sizedPrefix(i, n) {
  let x = (Math.imul(i, 2654435761) + 1) >>> 0;
  let s = "";
  for (let j = 0; j < n; j++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    s += String.fromCharCode(97 + (x % 26));
  }
  return s;
}

const PREFIX = 12;

/**
 * chunkIndexer returns a function from a chunk as read to the index its
 * writer gave it, or -1 when it is none of the run's chunks.
 * @param {number} chunks how many chunks the writer writes
 * @param {number[]} sizes stream-sizes' sizes (none: text or objects)
 * @returns {(c: unknown) => number}
 */
export function chunkIndexer(chunks, sizes) {
  /** @type {Map<string, number> | null} */
  let bySig = null;
  /** @param {ArrayBufferView} c */
  const sized = (c) => {
    if (!bySig) {
      bySig = new Map();
      for (let i = 0; i < chunks; i++) {
        const size = sizes[i % sizes.length];
        bySig.set(`${size}:${sizedPrefix(i, Math.min(PREFIX, size))}`, i);
      }
    }
    const head = Buffer.from(c.buffer, c.byteOffset, Math.min(PREFIX, c.byteLength)).toString("latin1");
    return bySig.get(`${c.byteLength}:${head}`) ?? -1;
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
