import { ApiClient } from "../client";
import { configPath, normalizeUrl, saveCredentials } from "../config";
import type { Ctx } from "../context";
import { CLI, CliError, EXIT } from "../errors";
import type { Project } from "../types";

/** Ask for (or take) a server URL and token, check them against the server, and store them 0600. */
export async function login(ctx: Ctx, opts: { url?: string; token?: string }) {
  const interactive = !opts.url || !opts.token;
  const url = normalizeUrl(
    opts.url ?? ((await ctx.prompter.ask("Server URL [http://127.0.0.1:3000]: ")) || "http://127.0.0.1:3000"),
  );
  const token = opts.token ?? (await ctx.prompter.askHidden("API token (from the dashboard, or GATEHOUSE_ADMIN_TOKEN): "));
  if (!token) throw new CliError(EXIT.usage, "The token is empty; paste an API token.");
  // The token is stored only once the server accepts it.
  const { projects } = await new ApiClient({ url, token }).get<{ projects: Project[] }>("/api/projects");
  const file = saveCredentials({ env: ctx.env, credentials: { url, token } });
  ctx.result({ url, configFile: file, projects: projects.length });
  ctx.say(`Logged in to ${url} (${projects.length} project${projects.length === 1 ? "" : "s"}). Saved to ${file} (mode 600).`);
  if (interactive && !ctx.json) ctx.say(`Next: ${CLI} projects`);
  return configPath({ env: ctx.env });
}
