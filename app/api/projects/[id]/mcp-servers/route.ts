import { json, route } from "@/lib/http";
import { listProjectMcpServers } from "@/lib/projects/mcp-servers";

export const dynamic = "force-dynamic";

/** The project's MCP servers (owners): their config, and which headers are set (never their values). */
export const GET = route<{ id: string }>(async ({ params, user }) => {
  return json({ servers: await listProjectMcpServers({ user, projectId: params.id }) });
});
