import { json, readJson, route } from "@/lib/http";
import { deleteProjectMcpServer, parseServerName, saveMcpServerSchema, saveProjectMcpServer } from "@/lib/projects/mcp-servers";

export const dynamic = "force-dynamic";

/** Create or replace the project's MCP server of this name (owners): `{server: {command, args, env} | {url, headers}}`. */
export const PUT = route<{ id: string; name: string }>(async ({ request, params, user }) => {
  const name = parseServerName(params.name);
  const input = await readJson(request, saveMcpServerSchema);
  return json({ server: await saveProjectMcpServer({ user, projectId: params.id, name, input }) });
});

export const DELETE = route<{ id: string; name: string }>(async ({ params, user }) => {
  const name = parseServerName(params.name);
  return json(await deleteProjectMcpServer({ user, projectId: params.id, name }));
});
