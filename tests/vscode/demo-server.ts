/*
 * A demo Gatehouse server for the VS Code host check (extensions/vscode/scripts/code-server-check.sh): the app's real
 * route handlers and the embedded executor with the demo model (tests/cli/server.ts), one project and runs in several
 * states. Prints {"url","token"} on one line, then starts one more run that will wait for approval once the editor is
 * up (so the extension has something to notify about). Not a test: run with tsx.
 */
import "./../setup";
import { startApiServer } from "../cli/server";
import { newProject } from "../workflow/harness";

const server = await startApiServer();
const { project } = await newProject(server.user);
const token = process.env.GATEHOUSE_ADMIN_TOKEN!;
const start = (request: string, planning: "auto" | "manual") =>
  fetch(`${server.url}/api/runs`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ projectId: project.id, request, config: { trustMode: { planning } } }),
  }).then((r) => r.json());
await start("Add a greeting note", "auto");
await start("Write the release note", "manual");
await start("Pick letters [ask-multi: Which letters? | a | b | c]", "auto");
console.log(JSON.stringify({ url: server.url, token }));
const later = Number(process.env.DEMO_LATER_RUN_MS ?? 30_000);
setTimeout(() => void start("Document the API tokens", "manual"), later);
process.on("SIGTERM", () => void server.close().then(() => process.exit(0)));
