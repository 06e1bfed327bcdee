import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { git, makeRepo } from "./harness";

/**
 * A repository whose .mcp.json declares the notes server (its bundle committed under .tools/); `marker`, an extra
 * argument the server ignores, tells its processes apart from other tests'.
 */
export function repoWithNotesServer(marker?: string): string {
  const repo = makeRepo();
  fs.mkdirSync(path.join(repo, ".tools"));
  execFileSync(path.resolve("node_modules/.bin/esbuild"), [
    path.resolve("tests/fixtures/mcp/notes-server.mjs"),
    "--bundle",
    "--platform=node",
    "--format=esm",
    "--minify",
    `--outfile=${path.join(repo, ".tools", "notes-server.mjs")}`,
    "--log-level=warning",
  ]);
  fs.writeFileSync(path.join(repo, ".mcp.json"), JSON.stringify({ mcpServers: { notes: { command: "node", args: [".tools/notes-server.mjs", ...(marker ? [marker] : [])] } } }));
  // The server's call log lives in the workspace; it is not part of the change.
  fs.writeFileSync(path.join(repo, ".gitignore"), ".mcp-calls.log\n.mcp-release\n");
  git(repo, "add", ".");
  git(repo, "commit", "-q", "-m", "notes MCP server");
  return repo;
}
