// @ts-check
// The target protocol's endpoints (docs/target-protocol.md, 1.2), routed in
// one place: the requests are read and checked here, and answered by an
// Endpoints — the protocol front (lib/front.mjs), or, for a combination
// that cannot run, `unavailable` (its info says why, a start is 422, and
// it has no runs).
import { abs, now } from "./clock.mjs";
import { notFound, pathOf, readJSON, reply, serve } from "./http.mjs";
import { parseWait } from "./timeline.mjs";

/** @typedef {import("node:http").ServerResponse} ServerResponse */

/**
 * An endpoint's answer: its HTTP status and its JSON body.
 * @typedef {[number, unknown]} Answer
 */

/**
 * A well-formed start request: `spans` whether durabench asks for the
 * run's span events (1.2), `recv` when the request came in (absolute ms:
 * the run's start task begins there, lib/otel.mjs).
 * @typedef {{ run: string, scenario: string, options: Record<string, any>, spans?: boolean, recv?: number }} Start
 */

/**
 * What answers the protocol's requests; an endpoint left out is a 404.
 * @typedef {object} Endpoints
 * @property {() => unknown} info GET /v1/info
 * @property {(start: Start) => Promise<Answer>} start POST /v1/runs
 * @property {(run: string, after: number, waitMs: number, signal: AbortSignal) => Promise<Answer>} [timeline] GET /v1/runs/{run}/timeline (signal: the poller went away)
 * @property {(run: string) => Answer} [remove] DELETE /v1/runs/{run}
 * @property {(run: string, token: string, resumeId: string, payload: unknown) => Promise<Answer>} [resume] POST /v1/runs/{run}/hooks/{token}
 */

// INFO is what every /v1/info says (1.2: the adapter sends the SDK's spans).
export const INFO = { protocol: 1, minor: 2, engine: "workflow" };

/**
 * protocol is the request handler of the protocol's server.
 * @param {Endpoints} ep
 */
export function protocol(ep) {
  return serve(async (req, res) => {
    const path = pathOf(req);
    const parts = path.slice(4).split("/").map(decodeURIComponent);
    const q = new URL(String(req.url), "http://x").searchParams;
    if (req.method === "GET" && path === "/v1/info") return reply(res, 200, ep.info());
    if (req.method === "GET" && path === "/v1/clock") return reply(res, 200, { now: now() });
    if (req.method === "POST" && path === "/v1/runs") {
      const recv = abs(performance.now());
      return send(res, await start(await readJSON(req), ep.start, recv));
    }
    const run = path.startsWith("/v1/") && parts[0] === "runs" ? parts[1] : undefined;
    if (run === undefined) return notFound(req, res);
    if (req.method === "GET" && parts.length === 3 && parts[2] === "timeline" && ep.timeline) {
      const ac = new AbortController();
      res.on("close", () => ac.abort());
      const answer = await ep.timeline(run, Number(q.get("after") ?? 0) || 0, parseWait(q.get("wait") ?? ""), ac.signal);
      if (!res.destroyed) send(res, answer);
      return;
    }
    if (req.method === "DELETE" && parts.length === 2 && ep.remove) return send(res, ep.remove(run));
    if (req.method === "POST" && parts.length === 4 && parts[2] === "hooks" && ep.resume) {
      const body = await readJSON(req);
      if (!body || typeof body.resume_id !== "string" || !body.resume_id) {
        return reply(res, 400, { error: "a resume request needs resume_id" });
      }
      return send(res, await ep.resume(run, parts[3], body.resume_id, body.payload ?? ""));
    }
    return notFound(req, res);
  });
}

/**
 * start checks a start request's body (undefined: no JSON) before the
 * endpoint has it.
 * @param {any} body
 * @param {Endpoints["start"]} endpoint
 * @param {number} recv when it came in (absolute ms)
 * @returns {Promise<Answer>}
 */
async function start(body, endpoint, recv) {
  if (body === undefined) return [400, { error: "a start request is a JSON object" }];
  const { run, scenario, options, spans } = body ?? {};
  if (typeof run !== "string" || !run || typeof scenario !== "string" || !scenario) {
    return [400, { error: "a start request needs run and scenario" }];
  }
  return endpoint({ run, scenario, options: options ?? {}, ...(spans === true ? { spans } : {}), recv });
}

/**
 * @param {ServerResponse} res
 * @param {Answer} answer
 */
const send = (res, [code, body]) => reply(res, code, body);

/**
 * unavailable serves a combination that cannot run: /v1/info says why and
 * lists no scenario, a well-formed start is 422 with why.
 * @param {string} why
 * @param {string} label
 * @param {string} version
 * @returns {Endpoints}
 */
export function unavailable(why, label, version) {
  const info = { ...INFO, version, label, unavailable: why, clock: "monotonic ns since the adapter started", scenarios: [] };
  return { info: () => info, start: async () => [422, { error: why }] };
}
