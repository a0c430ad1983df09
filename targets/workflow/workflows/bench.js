// The scenario book's workloads (docs/engine.md#the-scenario-book) as Workflow
// SDK workflows, built by the SDK's own `workflow build` into the handlers the
// adapter hosts (adapter.mjs). Every step is a no-op that stamps its body's
// start and end inside the step function, on the adapter's clock
// (performance.now(), the same process), and hands them to the adapter through
// globalThis: the step bundle is a separate copy of the SDK, the process is
// the same. `run` is durabench's run id; `bodyMs` the scenario's `body` option.
import { createHook, getStepMetadata } from "workflow";

export async function noop(run, stage, index, bodyMs) {
  "use step";
  const start = performance.now();
  const { attempt, stepId } = getStepMetadata();
  if (bodyMs > 0) await new Promise((r) => setTimeout(r, bodyMs));
  const end = performance.now();
  globalThis.__durabench?.stepBody(run, stage, index, attempt, start, end, stepId);
  return index;
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
