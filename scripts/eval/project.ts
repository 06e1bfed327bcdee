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

export type ProjectRepository = { projectId: string; path: string };

/** The local repository of an app project, or an error saying why it cannot be mined. */
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
    const repository = JSON.parse(raw) as { type: string; path?: string; owner?: string; repo?: string };
    if (repository.type !== "local" || !repository.path) {
      throw new Error(
        `Project ${projectId} is on GitHub (${repository.owner}/${repository.repo}): mining its merged pull requests is not supported yet — clone it and pass the clone's path.`,
      );
    }
    return { projectId, path: repository.path };
  } finally {
    client.close();
  }
}
