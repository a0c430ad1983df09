// @ts-check
// lib/protocol.mjs and lib/http.mjs: the protocol's routing, on an
// in-process server driven with fetch, answered by endpoints that record
// what they were asked.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { close, listen, readJSON, reply, serve, urlOf } from "../../lib/http.mjs";
import { protocol, unavailable } from "../../lib/protocol.mjs";

/** @typedef {import("../../lib/protocol.mjs").Endpoints} Endpoints */

/**
 * on serves handler on a new loopback server for the tests of a describe.
 * @param {(url: string) => import("../../lib/http.mjs").Handler} handler
 */
function on(handler) {
  const s = { url: "" };
  /** @type {import("node:http").Server} */
  let server;
  before(async () => {
    server = await listen(0, "127.0.0.1");
    s.url = urlOf(server);
    server.on("request", handler(s.url));
  });
  after(() => close(server));
  return s;
}

/**
 * call sends a request; it resolves with the status and the JSON body.
 * @param {string} url
 * @param {string} method
 * @param {string | object} [body]
 * @returns {Promise<{ status: number, body: any }>}
 */
async function call(url, method, body) {
  const r = await fetch(url, { method, body: typeof body === "string" ? body : body && JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

describe("the protocol's routes", () => {
  /** @type {any[][]} what the endpoints were asked */
  const asked = [];
  /** @type {Endpoints} */
  const ep = {
    info: () => ({ engine: "test" }),
    start: async (s) => (asked.push(["start", s]), [202, { run: s.run }]),
    timeline: async (run, after, waitMs, signal) => (asked.push(["timeline", run, after, waitMs, signal.aborted]), [200, { run, events: [] }]),
    remove: (run) => (asked.push(["remove", run]), run === "boom" ? assert.fail("boom") : [200, { run }]),
    resume: async (run, token, resumeId, payload) => (asked.push(["resume", run, token, resumeId, payload]), [202, { run }]),
  };
  const s = on(() => protocol(ep));

  test("info and the clock", async () => {
    assert.deepEqual(await call(s.url + "/v1/info", "GET"), { status: 200, body: { engine: "test" } });
    const a = await call(s.url + "/v1/clock", "GET");
    const b = await call(s.url + "/v1/clock", "GET");
    assert.equal(a.status, 200);
    assert.ok(Number.isInteger(a.body.now) && b.body.now > a.body.now, "the clock is monotonic ns");
  });

  test("a start is read and checked before its endpoint has it", async () => {
    asked.length = 0;
    assert.deepEqual(await call(s.url + "/v1/runs", "POST", "{not json"), { status: 400, body: { error: "a start request is a JSON object" } });
    assert.deepEqual(await call(s.url + "/v1/runs", "POST", { run: "r" }), { status: 400, body: { error: "a start request needs run and scenario" } });
    assert.deepEqual(await call(s.url + "/v1/runs", "POST", { run: 7, scenario: "step" }), { status: 400, body: { error: "a start request needs run and scenario" } });
    assert.equal((await call(s.url + "/v1/runs", "POST", "null")).status, 400);
    assert.deepEqual(asked, []);
    assert.deepEqual(await call(s.url + "/v1/runs", "POST", { run: "r", scenario: "step" }), { status: 202, body: { run: "r" } });
    await call(s.url + "/v1/runs", "POST", { run: "r2", scenario: "fanout", options: { branches: "8" }, spans: true });
    const t = performance.timeOrigin + performance.now();
    for (const [, st] of /** @type {[string, any][]} */ (asked)) {
      const recv = /** @type {any} */ (st).recv;
      assert.ok(recv <= t && recv > t - 5000, "when the start came in, absolute ms");
      delete (/** @type {any} */ (st).recv);
    }
    assert.deepEqual(asked, [
      ["start", { run: "r", scenario: "step", options: {} }],
      ["start", { run: "r2", scenario: "fanout", options: { branches: "8" }, spans: true }],
    ]);
  });

  test("a timeline poll, a delete and a resume reach their endpoints with the request's values", async () => {
    asked.length = 0;
    assert.equal((await call(s.url + "/v1/runs/a%2Fb/timeline?after=3&wait=2s", "GET")).status, 200);
    assert.equal((await call(s.url + "/v1/runs/r/timeline", "GET")).status, 200);
    assert.equal((await call(s.url + "/v1/runs/r/timeline?after=x&wait=soon", "GET")).status, 200);
    assert.equal((await call(s.url + "/v1/runs/r/timeline?wait=1h", "GET")).status, 200);
    assert.equal((await call(s.url + "/v1/runs/r", "DELETE")).status, 200);
    assert.equal((await call(s.url + "/v1/runs/r/hooks/r-h0", "POST", { resume_id: "x", payload: "b2s=" })).status, 202);
    assert.equal((await call(s.url + "/v1/runs/r/hooks/r-h0", "POST", { resume_id: "y" })).status, 202);
    assert.deepEqual(asked, [
      ["timeline", "a/b", 3, 2000, false],
      ["timeline", "r", 0, 0, false],
      ["timeline", "r", 0, 0, false],
      ["timeline", "r", 0, 30_000, false], // a poll waits at most 30 s
      ["remove", "r"],
      ["resume", "r", "r-h0", "x", "b2s="],
      ["resume", "r", "r-h0", "y", ""],
    ]);
  });

  test("a resume needs its resume id", async () => {
    asked.length = 0;
    for (const body of ["{", { payload: "x" }, { resume_id: "" }, { resume_id: 1 }]) {
      assert.deepEqual(await call(s.url + "/v1/runs/r/hooks/t", "POST", body), { status: 400, body: { error: "a resume request needs resume_id" } });
    }
    assert.deepEqual(asked, []);
  });

  test("anything else is 404 naming the request; what an endpoint throws is 500 with why", async () => {
    for (const [method, path] of [["GET", "/v1/nope"], ["POST", "/v1/info"], ["GET", "/v1/runs"], ["PUT", "/v1/runs/r"], ["GET", "/v1/runs/r/events"], ["GET", "/v2/runs/r/timeline"], ["GET", "/"]]) {
      assert.deepEqual(await call(s.url + path, method), { status: 404, body: { error: `no endpoint ${method} ${path}` } }, `${method} ${path}`);
    }
    const r = await call(s.url + "/v1/runs/boom", "DELETE");
    assert.equal(r.status, 500);
    assert.match(r.body.error, /boom/);
    assert.equal((await call(s.url + "/v1/runs/%E0%A4%A/timeline", "GET")).status, 500, "a path that does not decode");
  });
});

describe("a target that cannot run", () => {
  const s = on(() => protocol(unavailable("why not", "workflow 5 · postgres", "5")));

  test("says why in its info, refuses a well-formed start with why, and has no runs", async () => {
    const info = await call(s.url + "/v1/info", "GET");
    assert.deepEqual(info.body, {
      protocol: 1, minor: 2, engine: "workflow", version: "5", label: "workflow 5 · postgres", unavailable: "why not",
      clock: "monotonic ns since the adapter started", scenarios: [],
    });
    assert.equal((await call(s.url + "/v1/clock", "GET")).status, 200);
    assert.deepEqual(await call(s.url + "/v1/runs", "POST", { run: "r", scenario: "step" }), { status: 422, body: { error: "why not" } });
    assert.equal((await call(s.url + "/v1/runs", "POST", { run: 7 })).status, 400);
    assert.equal((await call(s.url + "/v1/runs/r/timeline", "GET")).status, 404);
    assert.equal((await call(s.url + "/v1/runs/r", "DELETE")).status, 404);
    assert.equal((await call(s.url + "/v1/runs/r/hooks/t", "POST", { resume_id: "x" })).status, 404);
  });
});

describe("the HTTP helpers", () => {
  const s = on(() => serve(async (req, res) => {
    if (req.url === "/echo") return reply(res, 201, { got: (await readJSON(req)) ?? "no JSON" });
    if (req.url === "/late") {
      res.writeHead(200);
      res.write("partial");
    }
    throw new Error("handler failed");
  }));

  test("a JSON body is read, or undefined; a reply is JSON with its length", async () => {
    const r = await fetch(s.url + "/echo", { method: "POST", body: JSON.stringify({ a: [1] }) });
    assert.equal(r.status, 201);
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal(r.headers.get("content-length"), String(Buffer.byteLength(JSON.stringify({ got: { a: [1] } }))));
    assert.deepEqual(await r.json(), { got: { a: [1] } });
    assert.deepEqual(await call(s.url + "/echo", "POST", "{"), { status: 201, body: { got: "no JSON" } });
  });

  test("a handler that throws is a 500 with why, or a cut connection once it answered", async () => {
    assert.deepEqual(await call(s.url + "/fail", "GET"), { status: 500, body: { error: "handler failed" } });
    await assert.rejects(async () => (await fetch(s.url + "/late")).text());
  });

  test("the server's URL is its loopback address", () => {
    assert.match(s.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  });
});
