// @ts-check
// fix-lock.mjs DIR…: drops cbor-extract's optional platform packages from
// each DIR/package-lock.json. On this registry those packages answer 404, so
// npm leaves them out of the lockfile but keeps them listed under
// cbor-extract's optionalDependencies, and `npm ci` then refuses the
// lockfile as out of sync. cbor-extract falls back to its JavaScript
// decoder without them. Run it after every `npm install --package-lock-only`
// (README.md, "Adding an SDK version").
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

for (const dir of process.argv.slice(2)) {
  const file = join(dir, "package-lock.json");
  const lock = JSON.parse(readFileSync(file, "utf8"));
  let n = 0;
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (!path.endsWith("node_modules/cbor-extract") || !entry.optionalDependencies) continue;
    for (const dep of Object.keys(entry.optionalDependencies)) {
      if (!lock.packages[`${path.slice(0, -"cbor-extract".length)}${dep}`]) {
        delete entry.optionalDependencies[dep];
        n++;
      }
    }
    if (Object.keys(entry.optionalDependencies).length === 0) delete entry.optionalDependencies;
  }
  writeFileSync(file, JSON.stringify(lock, null, 2) + "\n");
  console.log(`${file}: ${n} missing optional packages of cbor-extract dropped`);
}
