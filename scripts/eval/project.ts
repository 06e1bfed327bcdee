import fs from "node:fs";
import path from "node:path";
import { createClient } from "@libsql/client";
import { getEnv } from "@/lib/env";

/*
 * The app `npm run eval` reports to. The eval runs on its own database, so a project id given to `--from-history` is
 * looked up, read-only, in the app's database (GATEHOUSE_EVAL_APP_DATABASE_URL, else gatehouse.db in
 * GATEHOUSE_EVAL_APP_DATA_DIR — both set by `npm run eval` from the caller's DATABASE_URL / GATEHOUSE_DATA_DIR).
 */

export function appDataDir(): string | null {
  const dir = getEnv().GATEHOUSE_EVAL_APP_DATA_DIR;
  return dir ? path.resolve(dir) : null;
}

export type ProjectRepository =
  | { projectId: string; path: string; github?: undefined }
  | { projectId: string; path?: undefined; github: { owner: string; repo: string; installationId?: number } };

/** An app project's repository: its local path, or the GitHub repository (mined through its merged pull requests). */
export async function projectRepository(projectId: string): Promise<ProjectRepository> {
  const env = getEnv();
  const dataDir = appDataDir();
  const url = env.GATEHOUSE_EVAL_APP_DATABASE_URL ?? (dataDir ? `file:${path.join(dataDir, "gatehouse.db")}` : null);
  if (!url) throw new Error(`${projectId} is not a directory, and the app's database is unknown: run through \`npm run eval\`, or set GATEHOUSE_EVAL_APP_DATA_DIR.`);
  if (url.startsWith("file:") && !fs.existsSync(url.slice("file:".length))) throw new Error(`${projectId} is not a directory, and there is no app database at ${url}.`);
  const client = createClient({ url, authToken: env.DATABASE_AUTH_TOKEN });
  try {
    const rows = await client.execute({ sql: "select repository from projects where id = ?", args: [projectId] });
    const raw = rows.rows[0]?.repository;
    if (typeof raw !== "string") throw new Error(`No project ${projectId} in the app's database (${url}).`);
    const repository = JSON.parse(raw) as { type: string; path?: string; owner?: string; repo?: string; installationId?: number };
    if (repository.type === "github" && repository.owner && repository.repo) {
      return { projectId, github: { owner: repository.owner, repo: repository.repo, installationId: repository.installationId } };
    }
    if (repository.type !== "local" || !repository.path) throw new Error(`Project ${projectId} has no repository Gatehouse can mine.`);
    return { projectId, path: repository.path };
  } finally {
    client.close();
  }
}
