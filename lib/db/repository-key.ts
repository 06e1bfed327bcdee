import { eq, isNull } from "drizzle-orm";
import type { LibSQLDatabase } from "drizzle-orm/libsql";
import { log } from "@/lib/log";
import * as schema from "./schema";
import type { RepositoryBinding } from "./schema";

/*
 * The key that makes "one project per repository" a database constraint (projects.repository_key is unique). A local
 * binding is keyed by its stored path, which the binding check has already turned into the realpath; a GitHub binding
 * by GitHub's repository id, or by its lowercased owner/name while no id is known.
 */

export function githubNameKey({ owner, repo }: { owner: string; repo: string }): string {
  return `github:${owner}/${repo}`.toLowerCase();
}

export function githubIdKey(repositoryId: number): string {
  return `github:${repositoryId}`;
}

export function repositoryKeyOf(binding: RepositoryBinding): string {
  if (binding.type === "local") return `local:${binding.path}`;
  return binding.repositoryId ? githubIdKey(binding.repositoryId) : githubNameKey(binding);
}

/** A write refused by the repository key's unique index. */
export function isRepositoryKeyConflict(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    if (/UNIQUE constraint failed: projects\.repository_key/.test(String((e as { message?: unknown }).message ?? e))) return true;
  }
  return false;
}

/**
 * Projects created before the key existed get theirs once, after migrations. Where two old projects share a
 * repository the older keeps the key; the other stays unkeyed (logged) until an owner rebinds it.
 */
export async function backfillRepositoryKeys(db: LibSQLDatabase<typeof schema>): Promise<void> {
  const rows = await db
    .select({ id: schema.projects.id, repository: schema.projects.repository })
    .from(schema.projects)
    .where(isNull(schema.projects.repositoryKey))
    .orderBy(schema.projects.createdAt);
  for (const row of rows) {
    try {
      await db.update(schema.projects).set({ repositoryKey: repositoryKeyOf(row.repository) }).where(eq(schema.projects.id, row.id));
    } catch (error) {
      if (!isRepositoryKeyConflict(error)) throw error;
      log.warn("a project shares its repository with an older project; rebind it to another repository", { projectId: row.id });
    }
  }
}
