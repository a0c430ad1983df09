// @ts-check
// A throwaway PostgreSQL server for world-postgres, as durabench's
// world/postgres/pgserver makes one for the Go adapters: the system's own
// initdb and postgres (on PATH or under /usr/lib/postgresql/*/bin), a fresh
// cluster in a temporary directory on a free loopback port, the same
// benchmark settings (fsync on unless asked), run as "postgres" (or
// "nobody") when this process is root. postgres runs under a guardian shell
// reading a pipe from this process: when the pipe closes — stop(), or this
// process ending however it ends — the guardian stops postgres and removes
// the directory.
import { execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";

const GUARDIAN = `bin=$1 data=$2 log=$3 dir=$4
shift 4
"$bin/postgres" -D "$data" "$@" >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid"
exec 1>/dev/null
while read -r _; do :; done
kill -QUIT "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
rm -rf "$dir"
`;

/**
 * findBinaries is the directory of the system's initdb and postgres.
 * @returns {string}
 */
export function findBinaries() {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
  }
  try {
    const versions = readdirSync("/usr/lib/postgresql").filter((v) => /^\d+/.test(v)).sort((a, b) => parseFloat(b) - parseFloat(a));
    for (const v of versions) {
      const dir = `/usr/lib/postgresql/${v}/bin`;
      if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
    }
  } catch {
    // no /usr/lib/postgresql
  }
  throw new Error("no PostgreSQL server binaries (initdb, postgres) on PATH or under /usr/lib/postgresql/*/bin: install them (apt-get install postgresql) or give --pg-url");
}

/**
 * account is who runs PostgreSQL when this process is root (null: this
 * process's user).
 * @returns {{ name: string, uid: number, gid: number } | null}
 */
function account() {
  if (process.getuid?.() !== 0) return null;
  for (const name of ["postgres", "nobody"]) {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { name, uid, gid };
    } catch {
      // no such user
    }
  }
  throw new Error("running as root and there is no postgres or nobody user to run PostgreSQL as");
}

/** @returns {Promise<number>} */
function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {import("node:net").AddressInfo} */ (s.address());
      s.close(() => res(port));
    });
  });
}

/**
 * startPostgres starts a server and waits until it accepts connections.
 * @param {{ fsync?: boolean }} [options]
 * @returns {Promise<{ url: string, stop: () => Promise<void>, dir: string }>}
 */
export async function startPostgres({ fsync = true } = {}) {
  const bin = findBinaries();
  const as = account();
  const dir = mkdtempSync(join("/tmp", "durabench-pg-"));
  const owner = as ? { uid: as.uid, gid: as.gid } : {};
  if (as) chownSync(dir, as.uid, as.gid);
  const env = { PATH: process.env.PATH ?? "", LC_ALL: "C", LANG: "C", TZ: "UTC" };
  const data = join(dir, "data");
  try {
    execFileSync(join(bin, "initdb"), ["-D", data, "-U", "durabench", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"], {
      cwd: dir, env, ...owner, stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    const err = /** @type {Error & { stderr?: Buffer }} */ (e);
    throw new Error(`initdb as ${as?.name ?? "this user"}: ${String(err.stderr ?? err.message).trim().split("\n").slice(-3).join(" ")}`);
  }
  const port = await freePort();
  const settings = {
    listen_addresses: "127.0.0.1", port: String(port), unix_socket_directories: "", max_connections: "300",
    shared_buffers: "256MB", max_wal_size: "4GB", checkpoint_timeout: "30min", wal_level: "minimal", max_wal_senders: "0",
    max_parallel_workers_per_gather: "0", jit: "off", autovacuum_naptime: "5s", log_checkpoints: "off", log_min_messages: "warning",
    ...(fsync ? { fsync: "on" } : { fsync: "off", synchronous_commit: "off", full_page_writes: "off" }),
  };
  const args = [bin, data, join(dir, "postgres.log"), dir];
  for (const [k, v] of Object.entries(settings)) args.push("-c", `${k}=${v}`);
  const guard = spawn("/bin/sh", ["-c", GUARDIAN, "pgserver-guardian", ...args], {
    cwd: dir, env, ...owner, detached: true, stdio: ["pipe", "pipe", "ignore"],
  });
  guard.unref();
  /** @type {any} */ (guard.stdout).unref?.();
  const url = `postgres://durabench@127.0.0.1:${port}/postgres?sslmode=disable`;
  /** @type {() => Promise<void>} */
  const stop = () => new Promise((res) => {
    if (guard.exitCode !== null) return res();
    guard.once("exit", () => res());
    guard.stdin.end();
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (await accepts(port)) break;
    if (guard.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`PostgreSQL did not start on port ${port} (log: ${join(dir, "postgres.log")})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, stop, dir };
}

// accepts reports whether the server answers a startup message on port
// (a TCP connect alone succeeds before it is ready): it waits for the
// server's first byte back, 'R' (authentication) once it accepts sessions.
/**
 * @param {number} port
 * @returns {Promise<boolean>}
 */
function accepts(port) {
  return new Promise((res) => {
    const s = net.connect(port, "127.0.0.1");
    /** @param {boolean} ok */
    const done = (ok) => {
      s.destroy();
      res(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once("error", () => done(false));
    s.once("connect", () => {
      const params = Buffer.from("user\0durabench\0database\0postgres\0\0");
      const msg = Buffer.alloc(8 + params.length);
      msg.writeInt32BE(msg.length, 0);
      msg.writeInt32BE(196608, 4);
      params.copy(msg, 8);
      s.write(msg);
    });
    s.once("data", (b) => done(b[0] === 0x52)); // 'R'; 'E' while starting up
  });
}
