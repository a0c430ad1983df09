// @ts-check
// HTTP helpers shared by the protocol's server (main thread) and the SDK
// routes' server (worker thread).
import http from "node:http";

/** @typedef {(req: http.IncomingMessage, res: http.ServerResponse) => unknown} Handler */

/**
 * listen starts a node:http server on host:port (port 0: a free one),
 * with Nagle off on every socket (the clock round trip stays small).
 * @param {number} port
 * @param {string} host
 * @returns {Promise<http.Server>}
 */
export async function listen(port, host) {
  const server = http.createServer();
  server.keepAliveTimeout = 65_000;
  server.on("connection", (s) => s.setNoDelay(true));
  await new Promise((res, rej) => {
    server.once("error", rej);
    server.listen(port, host, () => res(undefined));
  });
  return server;
}

/**
 * urlOf is a listening server's URL.
 * @param {http.Server} server
 * @returns {string}
 */
export function urlOf(server) {
  const addr = /** @type {import("node:net").AddressInfo} */ (server.address());
  return `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
}

/**
 * close stops a server and its connections.
 * @param {http.Server} server
 * @returns {Promise<void>}
 */
export function close(server) {
  return new Promise((res) => {
    server.close(() => res());
    server.closeAllConnections?.();
  });
}

/**
 * serve wraps a handler: what it throws is a 500 with the error (or, once
 * the answer started, the connection cut).
 * @param {Handler} handler
 * @returns {(req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>}
 */
export function serve(handler) {
  return async (req, res) => {
    try {
      await handler(req, res);
    } catch (e) {
      if (!res.headersSent) reply(res, 500, { error: String(/** @type {any} */ (e)?.message ?? e) });
      else res.destroy();
    }
  };
}

/**
 * pathOf is a request's path, without its query.
 * @param {http.IncomingMessage} req
 * @returns {string}
 */
export const pathOf = (req) => String(req.url).split("?")[0];

/**
 * notFound answers a request no endpoint serves.
 * @param {http.IncomingMessage} req
 * @param {http.ServerResponse} res
 */
export const notFound = (req, res) => reply(res, 404, { error: `no endpoint ${req.method} ${pathOf(req)}` });

/**
 * readBody reads a request's body.
 * @param {http.IncomingMessage} req
 * @returns {Promise<Buffer>}
 */
export function readBody(req) {
  return new Promise((res, rej) => {
    /** @type {Buffer[]} */
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => res(Buffer.concat(chunks)));
    req.on("error", rej);
  });
}

/**
 * readJSON reads a request's body as JSON: undefined when it cannot be
 * read or is no JSON.
 * @param {http.IncomingMessage} req
 * @returns {Promise<any>}
 */
export async function readJSON(req) {
  try {
    return JSON.parse((await readBody(req)).toString());
  } catch {
    return undefined;
  }
}

/**
 * reply answers with v as JSON.
 * @param {http.ServerResponse} res
 * @param {number} code
 * @param {unknown} v
 */
export function reply(res, code, v) {
  const b = JSON.stringify(v);
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(b) });
  res.end(b);
}

/**
 * headersOf is a request's headers as a fetch Headers.
 * @param {http.IncomingMessage} req
 * @returns {Headers}
 */
export function headersOf(req) {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
    else if (v !== undefined) headers.set(k, v);
  }
  return headers;
}
