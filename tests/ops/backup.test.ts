import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEnv, parseEnv } from "@/lib/env";
import { getExecutorKey } from "@/lib/security/executor-key";
import { getAuthSecret } from "@/lib/auth/secret";
import { createProject } from "@/lib/projects/queries";
import { ensureLocalOwner } from "@/lib/db/queries/users";
import { createRun } from "@/lib/db/queries/runs";
import { appendEvent } from "@/lib/db/event-store";
import { createBackup, restoreBackup } from "@/lib/ops/backup";

let into: string;
let runId: string;

beforeAll(async () => {
  into = fs.mkdtempSync(path.join(os.tmpdir(), "gh-backups-"));
  getExecutorKey();
  getAuthSecret();
  const owner = await ensureLocalOwner();
  const project = await createProject({ name: "backed up", ownerId: owner.id, repository: { type: "local", path: "/tmp/x" } });
  runId = (await createRun({ projectId: project.id, userId: owner.id, request: "Keep me", config: {} })).id;
  await appendEvent(runId, { type: "RUN_STARTED", payload: {} });
});

afterAll(() => fs.rmSync(into, { recursive: true, force: true }));

/** A second install's environment: its own, empty data directory. */
function freshInstall() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gh-restore-"));
  return parseEnv({ GATEHOUSE_DATA_DIR: dataDir, NODE_ENV: "test" });
}

async function eventsIn(dbFile: string, run: string) {
  const client = createClient({ url: `file:${dbFile}` });
  try {
    return (await client.execute({ sql: "SELECT sequence, type FROM workflow_events WHERE workflow_run_id = ? ORDER BY sequence", args: [run] })).rows.map((r) => `${r.sequence}:${r.type}`);
  } finally {
    client.close();
  }
}

describe("backup and restore", () => {
  it("a backup taken while the app writes is a consistent copy; restored into a new install it holds the run and the secrets", async () => {
    // Appends keep going while the backup is taken: the copy is one transaction's snapshot, never a torn file.
    const writing = Promise.all(Array.from({ length: 20 }, (_, i) => appendEvent(runId, { type: "ARTIFACT_CREATED", payload: { type: "note", path: `n${i}.md` } })));
    const { dir, manifest } = await createBackup({ into });
    await writing;
    expect(manifest.files.map((f) => f.name).sort()).toEqual(["auth-secret", "executor-key", "gatehouse.db"]);
    expect(manifest.migrations).toBeGreaterThan(0);
    expect(fs.statSync(path.join(dir, "executor-key")).mode & 0o777).toBe(0o600);

    const env = freshInstall();
    const { files, replaced } = await restoreBackup({ from: dir, env });
    expect(replaced).toBeNull();
    expect(files).toContain(path.join(env.dataDir, "gatehouse.db"));
    const restored = await eventsIn(path.join(env.dataDir, "gatehouse.db"), runId);
    // A prefix of the live log with no gap: RUN_CREATED, RUN_STARTED, then however many appends the snapshot caught.
    expect(restored.slice(0, 2)).toEqual(["1:RUN_CREATED", "2:RUN_STARTED"]);
    expect(restored).toEqual(restored.map((_, i) => `${i + 1}:${restored[i]!.split(":")[1]}`));
    expect(fs.readFileSync(path.join(env.dataDir, "executor-key"), "utf8")).toBe(fs.readFileSync(path.join(getEnv().dataDir, "executor-key"), "utf8"));
    expect(fs.statSync(path.join(env.dataDir, "auth-secret")).mode & 0o777).toBe(0o600);
  });

  it("refuses to overwrite a database without --force, and with it keeps the replaced file", async () => {
    const { dir } = await createBackup({ into, now: new Date(Date.now() + 1000) });
    const env = freshInstall();
    fs.writeFileSync(path.join(env.dataDir, "gatehouse.db"), "an existing database");
    await expect(restoreBackup({ from: dir, env })).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/--force/) });
    expect(fs.readFileSync(path.join(env.dataDir, "gatehouse.db"), "utf8")).toBe("an existing database");
    const { replaced } = await restoreBackup({ from: dir, env, force: true });
    expect(fs.readFileSync(replaced!, "utf8")).toBe("an existing database");
    expect(await eventsIn(path.join(env.dataDir, "gatehouse.db"), runId)).toContain("1:RUN_CREATED");
  });

  it("a damaged or foreign backup is refused before anything is copied", async () => {
    const { dir } = await createBackup({ into, now: new Date(Date.now() + 2000) });
    const env = freshInstall();
    fs.appendFileSync(path.join(dir, "executor-key"), "x");
    await expect(restoreBackup({ from: dir, env })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/executor-key .*checksum/) });
    expect(fs.readdirSync(env.dataDir)).toEqual([]);

    const foreign = fs.mkdtempSync(path.join(os.tmpdir(), "gh-foreign-"));
    fs.writeFileSync(path.join(foreign, "manifest.json"), JSON.stringify({ format: 1, migrations: 1, files: [{ name: "../../etc/passwd", sha256: "x" }] }));
    await expect(restoreBackup({ from: foreign, env })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/never holds/) });
    await expect(restoreBackup({ from: path.join(foreign, "missing"), env })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/not a Gatehouse backup/) });
  });

  it("a remote libSQL database is not copied: the message says to use the server's own backups", async () => {
    const env = parseEnv({ DATABASE_URL: "libsql://example.turso.io", DATABASE_AUTH_TOKEN: "t".repeat(20), NODE_ENV: "test" });
    await expect(createBackup({ into, env })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/Turso/) });
  });
});
