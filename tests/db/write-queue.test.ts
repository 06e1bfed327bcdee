import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/*
 * Every write of this process goes through its one write queue (write(), writeGrouped, the executor's serialize()).
 * A write straight on the client's pool, made while the queue's writer holds a transaction open between two awaits,
 * waits in SQLite's busy handler, which blocks the event loop the writer needs to finish: the process stalls for the
 * busy timeout and the write fails with SQLITE_BUSY (seen as failed decision acknowledgements under 20 parallel runs).
 */

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name) ? [p] : [];
  });
}

/** The start-up backfill runs inside the database's `ready`, before anything else can write. */
const ALLOWED = new Set([path.join("lib", "db", "repository-key.ts")]);

describe("the write queue", () => {
  it("no module writes on the pool directly: inserts, updates and deletes run on a transaction of write() (tx)", () => {
    const root = path.resolve(__dirname, "../..");
    const offenders: string[] = [];
    for (const file of ["lib", "inngest", "app"].flatMap((d) => sources(path.join(root, d)))) {
      const rel = path.relative(root, file);
      if (ALLOWED.has(rel)) continue;
      const text = fs.readFileSync(file, "utf8");
      for (const m of text.matchAll(/\b(?:db|\(await getDb\(\)\))\s*\.\s*(insert|update|delete)\s*\(/g)) {
        offenders.push(`${rel}:${text.slice(0, m.index).split("\n").length} ${m[1]}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
