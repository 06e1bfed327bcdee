import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

/**
 * `npm run bench`: runs every bench/*.bench.ts in order (or those named on the command line, e.g. `npm run bench -- db
 * executor`) and prints their tables.
 * Each module exports `run(): Promise<void>` that prints its own table.
 */
const dir = import.meta.dirname;
const only = process.argv.slice(2);
const files = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => only.length === 0 || only.includes(f.replace(/\.bench\.ts$/, "")))
  .sort();

for (const file of files) {
  const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as { run: () => Promise<void> };
  console.log(`\n## ${file.replace(/\.bench\.ts$/, "")}\n`);
  await mod.run();
}
process.exit(0);
