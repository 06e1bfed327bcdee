import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/lib/errors";
import type { RepositoryBinding } from "@/lib/db/schema";

/** A local binding must point at an existing git repository; a GitHub binding is checked when GitHub is configured. */
export async function validateRepositoryBinding(repository: RepositoryBinding): Promise<void> {
  if (repository.type !== "local") return;
  const dir = path.resolve(repository.path);
  const stat = await fs.stat(dir).catch(() => null);
  if (!stat?.isDirectory()) {
    throw new AppError("bad_request:project", `repository.path: ${dir} is not a directory on this machine.`);
  }
  const git = await fs.stat(path.join(dir, ".git")).catch(() => null);
  if (!git) throw new AppError("bad_request:project", `repository.path: ${dir} is not a git repository (no .git).`);
}
