import fs from "node:fs";
import path from "node:path";
import { generateSQLiteDrizzleJson, generateSQLiteMigration } from "drizzle-kit/api";
import { describe, expect, it } from "vitest";
import { migrationsFolder } from "@/lib/db";
import * as appSchema from "@/lib/db/schema";
import * as executorSchema from "@/lib/executor/schema";

/*
 * The schema files (lib/db/schema.ts, lib/executor/schema.ts) and the committed migrations describe one database: what
 * drizzle-kit would generate from the schema against the newest migration's snapshot is nothing. A declaration edited
 * without a migration (or a migration whose declaration was lost) fails here, before a later `npm run db:generate`
 * silently undoes it.
 */

describe("the schema and the migrations", () => {
  it("agree: drizzle-kit finds nothing to migrate", async () => {
    const folder = migrationsFolder();
    const journal = JSON.parse(fs.readFileSync(path.join(folder, "meta", "_journal.json"), "utf8")) as { entries: Array<{ idx: number; tag: string }> };
    const last = journal.entries.at(-1)!;
    const snapshot = JSON.parse(fs.readFileSync(path.join(folder, "meta", `${String(last.idx).padStart(4, "0")}_snapshot.json`), "utf8"));
    expect(fs.existsSync(path.join(folder, `${last.tag}.sql`))).toBe(true);
    const current = await generateSQLiteDrizzleJson({ ...appSchema, ...executorSchema });
    expect(await generateSQLiteMigration(snapshot, current)).toEqual([]);
  });
});
