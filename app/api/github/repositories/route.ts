import { githubConfigured } from "@/lib/github/app";
import { listInstallationRepositories } from "@/lib/github/handlers";
import { json, route } from "@/lib/http";

/** Repositories the GitHub App is installed on, for "connect a repository" (any signed-in user may create a project). */
export const GET = route(async () => json({ configured: githubConfigured(), repositories: await listInstallationRepositories() }));
