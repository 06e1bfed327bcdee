import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { createClient } from "@libsql/client";
import { getClient, migrationsFolder } from "@/lib/db";
import { getEnv, type Env } from "@/lib/env";
import { AppError } from "@/lib/errors";

/*
 * `npm run backup` / `npm run restore`: the libSQL database file and the few files of the data directory that cannot be
 * recreated (the owner-sign-in secret and the executor key). The database copy is taken online with SQLite's
 * `VACUUM INTO`, a consistent snapshot of one transaction while the app keeps running (WAL mode: readers and the one
 * writer are not blocked). Worktrees, GitHub cache clones and the trash are not backed up: a waiting run's work is
 * committed to its branch, and clones are fetched again. Rebuilding from git (`npm run rebuild-from-git`) stays the
 * last resort when there is no backup.
 */

const DB_FILE = "gatehouse.db";
/** Data-directory files that are secrets of this install: restored with mode 0600. */
const SECRET_FILES = ["auth-secret", "executor-key"] as const;
const MANIFEST = "manifest.json";

export type BackupManifest = {
  format: 1;
  createdAt: string;
  /** Migrations applied to the copied database (drizzle's journal): restore refuses a backup from a newer app. */
  migrations: number;
  files: Array<{ name: string; bytes: number; sha256: string }>;
};

const sha256 = (file: string) => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");

/** The database file behind DATABASE_URL, or a clear error for a remote libSQL server (Turso has its own backups). */
function databaseFile(env: Env): string {
  const url = env.databaseUrl;
  if (!url.startsWith("file:")) {
    throw new AppError(
      "bad_request:backup",
      `DATABASE_URL is a libSQL server (${url.replace(/\/\/[^@]*@/, "//***@").split("?")[0]}): back it up with the server's own tools (Turso: point-in-time restore, or \`turso db shell <db> .dump\`). npm run backup copies a local database file.`,
    );
  }
  return url.slice("file:".length).split("?")[0]!;
}

async function migrationCount(url: string): Promise<number> {
  const client = createClient({ url });
  try {
    const rs = await client.execute("SELECT count(*) AS n FROM __drizzle_migrations");
    return Number(rs.rows[0]?.n ?? 0);
  } catch {
    return 0;
  } finally {
    client.close();
  }
}

/**
 * Write a backup into a new directory `<into>/gatehouse-backup-<time>` and return its path. Safe while the app runs.
 */
export async function createBackup({ into, env = getEnv(), now = new Date() }: { into: string; env?: Env; now?: Date }): Promise<{ dir: string; manifest: BackupManifest }> {
  databaseFile(env);
  const dir = path.join(path.resolve(into), `gatehouse-backup-${now.toISOString().replace(/[:.]/g, "-")}`);
  if (fs.existsSync(dir)) throw new AppError("conflict:backup", `${dir} already exists: choose another directory.`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    const target = path.join(dir, DB_FILE);
    // One transaction's snapshot, written as a compact, WAL-free database file.
    await (await getClient()).execute({ sql: "VACUUM INTO ?", args: [target] });
    for (const name of SECRET_FILES) {
      const source = path.join(env.dataDir, name);
      if (fs.existsSync(source)) fs.copyFileSync(source, path.join(dir, name));
      if (fs.existsSync(path.join(dir, name))) fs.chmodSync(path.join(dir, name), 0o600);
    }
    const files = [DB_FILE, ...SECRET_FILES]
      .filter((name) => fs.existsSync(path.join(dir, name)))
      .map((name) => ({ name, bytes: fs.statSync(path.join(dir, name)).size, sha256: sha256(path.join(dir, name)) }));
    const manifest: BackupManifest = { format: 1, createdAt: now.toISOString(), migrations: await migrationCount(`file:${target}`), files };
    fs.writeFileSync(path.join(dir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    return { dir, manifest };
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

function readManifest(dir: string): BackupManifest {
  const file = path.join(dir, MANIFEST);
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    throw new AppError("bad_request:backup", `${dir} is not a Gatehouse backup: ${MANIFEST} is missing or not JSON (${(error as Error).message}).`);
  }
  const m = parsed as Partial<BackupManifest>;
  if (m.format !== 1 || !Array.isArray(m.files) || typeof m.migrations !== "number") {
    throw new AppError("bad_request:backup", `${dir}/${MANIFEST} is not a backup manifest this version understands.`);
  }
  const allowed = new Set<string>([DB_FILE, ...SECRET_FILES]);
  for (const f of m.files) {
    if (!f || typeof f.name !== "string" || !allowed.has(f.name) || typeof f.sha256 !== "string") {
      throw new AppError("bad_request:backup", `${dir}/${MANIFEST} names a file a backup never holds: ${JSON.stringify(f?.name)}.`);
    }
  }
  if (!m.files.some((f) => f.name === DB_FILE)) throw new AppError("bad_request:backup", `${dir} holds no database.`);
  return m as BackupManifest;
}

/**
 * Put a backup in place: verified first (every file's checksum), then copied into the data directory. The app must be
 * stopped. Refuses to overwrite an existing database unless `force`; the one it replaces is kept beside it.
 */
export async function restoreBackup({ from, env = getEnv(), force = false }: { from: string; env?: Env; force?: boolean }): Promise<{ replaced: string | null; files: string[] }> {
  const dir = path.resolve(from);
  const manifest = readManifest(dir);
  for (const f of manifest.files) {
    const file = path.join(dir, f.name);
    if (!fs.existsSync(file) || sha256(file) !== f.sha256) {
      throw new AppError("bad_request:backup", `${f.name} in ${dir} does not match its checksum: the backup is damaged or was changed. Nothing was restored.`);
    }
  }
  const dbFile = databaseFile(env);
  const ours = await migrationCount(`file:${path.join(dir, DB_FILE)}`);
  const known = fs.readdirSync(migrationsFolder()).filter((f) => f.endsWith(".sql")).length;
  if (ours > known) {
    throw new AppError("bad_request:backup", `The backup's database has ${ours} migrations; this app knows ${known}. Restore it with the newer app version it came from.`);
  }
  let replaced: string | null = null;
  if (fs.existsSync(dbFile)) {
    if (!force) throw new AppError("conflict:backup", `${dbFile} exists. Stop the app, then run restore with --force to replace it (the current file is kept as a .before-restore copy).`);
    replaced = `${dbFile}.before-restore-${Date.now()}`;
    fs.renameSync(dbFile, replaced);
  }
  // A WAL or shared-memory file of the replaced database must not be replayed onto the restored one.
  for (const suffix of ["-wal", "-shm"]) fs.rmSync(`${dbFile}${suffix}`, { force: true });
  fs.mkdirSync(path.dirname(dbFile), { recursive: true });
  fs.mkdirSync(env.dataDir, { recursive: true });
  fs.copyFileSync(path.join(dir, DB_FILE), dbFile);
  const restored = [dbFile];
  for (const f of manifest.files) {
    if (f.name === DB_FILE) continue;
    const target = path.join(env.dataDir, f.name);
    fs.copyFileSync(path.join(dir, f.name), target);
    fs.chmodSync(target, 0o600);
    restored.push(target);
  }
  return { replaced, files: restored };
}
