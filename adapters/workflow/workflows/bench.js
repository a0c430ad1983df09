// The scenario book's workloads (docs/engine.md#the-scenario-book) as Workflow
// SDK workflows, built by the SDK's own `workflow build` into the handlers the
// adapter hosts (adapter.mjs). Every step is a no-op that stamps its body's
// start and end inside the step function, on the adapter's clock
// (performance.now(), the same process), and hands them to the adapter through
// globalThis: the step bundle is a separate copy of the SDK, the process is
// the same. `run` is durabench's run id; `bodyMs` the scenario's `body` option.
import { createHook, getStepMetadata, getWritable } from "workflow";

export async function noop(run, stage, index, bodyMs) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  if (bodyMs > 0) await new Promise((r) => setTimeout(r, bodyMs));
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, stage, index, attempt, start, end, stepId);
  return index;
}

// payloadStep is a no-op step that takes `data` (size bytes) and returns
// as many bytes: the SDK serializes both into its event log.
export async function payloadStep(run, stage, index, data) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  const out = data.length > 0 ? String.fromCharCode(97 + ((stage + index) % 26)) + data.slice(1) : data;
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, stage, index, attempt, start, end, stepId);
  return out;
}

// fanout: one stage of `branches` parallel steps.
export async function fanout(run, branches, bodyMs) {
  "use workflow";
  const done = await Promise.all(Array.from({ length: branches }, (_, i) => noop(run, 0, i, bodyMs)));
  return done.length;
}

// sequential: a chain of `steps` steps, each its own stage.
export async function sequential(run, steps, bodyMs) {
  "use workflow";
  for (let s = 0; s < steps; s++) {
    await noop(run, s, 0, bodyMs);
  }
  return steps;
}

// race: a race of `branches` steps (stage 0, each sleeping bodyMs plus its
// jitter), then one step (stage 1) as soon as the first completes; the
// run ends once the others completed too (the book's race: losers are
// never stranded).
export async function race(run, branches, bodyMs, jitterMs) {
  "use workflow";
  const all = jitterMs.map((j, i) => noop(run, 0, i, bodyMs + j));
  await Promise.race(all);
  await noop(run, 1, 0, bodyMs);
  await Promise.all(all);
  return branches;
}

// payload: `steps` steps that each take and return `size` bytes, one after
// another (each gets the previous step's output; stage i) or all at once
// (stage 0).
export async function payload(run, steps, size, fanout) {
  "use workflow";
  const input = "x".repeat(size);
  if (fanout) {
    await Promise.all(Array.from({ length: steps }, (_, i) => payloadStep(run, 0, i, input)));
    return steps;
  }
  let data = input;
  for (let s = 0; s < steps; s++) data = await payloadStep(run, s, 0, data);
  return steps;
}

// step: one step.
export async function step(run, bodyMs) {
  "use workflow";
  await noop(run, 0, 0, bodyMs);
  return 1;
}

// hook-step: wait on one hook (stage 0), then one step (stage 1).
export async function hookStep(run, token, bodyMs) {
  "use workflow";
  const hook = createHook({ token });
  await hook;
  await noop(run, 1, 0, bodyMs);
  return 1;
}

// chunk is the stream's chunk i as durabench's built-in engine makes it
// (engine/stream.go): a text delta "token i ", a small structured object,
// or, when the scenario sets sizes (stream-sizes; stream-replay: each
// chunk's; stream-pipeline: one), exactly sizes[i mod n] bytes of filler
// that differs from chunk to chunk (so nothing compresses it away).
function chunk(i, shape, sizes) {
  if (sizes.length > 0) {
    const b = new Uint8Array(sizes[i % sizes.length]);
    let x = (Math.imul(i, 2654435761) + 1) >>> 0;
    for (let j = 0; j < b.length; j++) {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      b[j] = 97 + (x % 26);
    }
    return b;
  }
  if (shape === "structured") return { type: "text-delta", id: String(i), text: `token ${i} ` };
  return `token ${i} `;
}

// until resolves once performance.now() reaches t. A timer may fire up to
// a millisecond early (Node measures its delay from the event loop's
// cached time, in whole ms): it sleeps again for what is left, so a chunk
// is never written before it is due.
async function until(t) {
  for (let wait = t - performance.now(); wait > 0; wait = t - performance.now()) {
    await new Promise((r) => setTimeout(r, wait));
  }
}

// writeChunks writes n chunks to writer, chunk i when it is due (dueMs(i)
// after start), each one's write time stamped before its write, then
// closes it.
async function writeChunks(run, writer, start, n, dueMs, data) {
  for (let i = 0; i < n; i++) {
    await until(start + dueMs(i));
    const c = data(i);
    globalThis.__durabench?.chunkWritten(run, 0, i, performance.now());
    await writer.write(c);
  }
  await writer.close();
}

// streamWrite writes the run's stream (getWritable: the SDK's stream of
// the run, which the adapter reads with the run's getReadable()): chunk i
// when it is due, intervalMs apart from the body's start, then closes it.
// Each chunk's write time is stamped before its write.
export async function streamWrite(run, chunks, intervalMs, shape, sizes) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  await writeChunks(run, getWritable().getWriter(), start, chunks, (i) => i * intervalMs, (i) => chunk(i, shape, sizes));
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, 0, 0, attempt, start, end, stepId);
  return chunks;
}

// stream: the stream scenarios (stream-latency, stream-overhead,
// stream-sizes): one writer step; the reader is the adapter, reading the
// run's stream as the SDK's users do.
export async function stream(run, chunks, intervalMs, shape, sizes) {
  "use workflow";
  await streamWrite(run, chunks, intervalMs, shape, sizes);
  return chunks;
}

// replayWrite writes the run's stream at a cadence: chunk i at dueMs[i]
// after the body's start (the cadence's offset divided by the speed),
// sizes[i] bytes, as the built-in engine replays it.
export async function replayWrite(run, dueMs, sizes) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  await writeChunks(run, getWritable().getWriter(), start, sizes.length, (i) => dueMs[i], (i) => chunk(i, "text", sizes));
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, 0, 0, attempt, start, end, stepId);
  return sizes.length;
}

// replay: stream-replay, one writer step replaying a cadence; the reader
// is the adapter, as in stream.
export async function replay(run, dueMs, sizes) {
  "use workflow";
  await replayWrite(run, dueMs, sizes);
  return sizes.length;
}

// pipelineWrite is stream-pipeline's writer (stage 0, index 0): as the SDK
// suite's stream steps do, it returns a stream, which the SDK writes to a
// stream of the run and hands to the next step. Its chunks are `size`
// bytes each; chunk i is made when the SDK's pipe asks for it (no chunk
// waits in the step's own queue) and not before it is due (intervalMs × i
// after the body's start), its write time stamped as it is handed over.
// The body ends when it returns the stream: the SDK writes it after.
export async function pipelineWrite(run, chunks, intervalMs, size) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  let i = 0;
  const out = new ReadableStream(
    {
      async pull(controller) {
        await until(start + i * intervalMs);
        const c = chunk(i, "text", [size]);
        globalThis.__durabench?.chunkWritten(run, 0, i, performance.now());
        controller.enqueue(c);
        if (++i === chunks) controller.close();
      },
    },
    { highWaterMark: 0 },
  );
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, 0, 0, attempt, start, end, stepId);
  return out;
}

// pipelineTransform is stream-pipeline's transform step (stage 0, index
// 2): it takes the writer's stream, upper-cases each chunk in a
// TransformStream (as the SDK suite's transform step does) and writes
// the result to the run's stream, which the adapter reads (index 1).
export async function pipelineTransform(run, input) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const upper = new TransformStream({
    transform(c, controller) {
      controller.enqueue(encoder.encode(decoder.decode(c, { stream: true }).toUpperCase()));
    },
  });
  await input.pipeThrough(upper).pipeTo(getWritable());
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, 0, 2, attempt, start, end, stepId);
  return 1;
}

// pipeline: stream-pipeline, the SDK suite's stream through a transform
// step: the writer's stream passed to the transform step, whose output is
// the run's stream.
export async function pipeline(run, chunks, intervalMs, size) {
  "use workflow";
  const raw = await pipelineWrite(run, chunks, intervalMs, size);
  await pipelineTransform(run, raw);
  return chunks;
}
