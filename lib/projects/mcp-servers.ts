import { and, asc, eq } from "drizzle-orm";
import { z } from "zod";
import { getDb, write } from "@/lib/db";
import { projectMcpServers } from "@/lib/db/schema";
import { requireProjectRole, type SessionUser } from "@/lib/auth/guard";
import { openSecret, sealSecret } from "@/lib/auth/secret-box";
import { literalHostProblem } from "@/lib/address-policy";
import { AppError, describeIssues } from "@/lib/errors";
import { newId } from "@/lib/ids";
import { serverNameSchema, serverSchema, toServer, type McpServer } from "@/lib/agents/mcp/config";

/*
 * A project's own MCP servers (its owners configure them; issue #38): the same entries as an `.mcp.json`'s. Header
 * values are secrets: stored encrypted, never shown back (a view says which headers are set). A run reads them
 * decrypted (projectMcpServers) to reach the server; its events and prompts never carry them.
 */

const PURPOSE = "project-mcp-server-headers";

export type McpServerView = { name: string; config: Record<string, unknown>; headers: Record<string, "set">; updatedAt: string };

export const saveMcpServerSchema = z.strictObject({ server: z.record(z.string(), z.unknown(), { error: "server: must be an object" }) });

type Row = typeof projectMcpServers.$inferSelect;

function toView(row: Row): McpServerView {
  const { headerNames, ...config } = row.config as Record<string, unknown> & { headerNames?: string[] };
  return { name: row.name, config, headers: Object.fromEntries((headerNames ?? []).map((h) => [h, "set" as const])), updatedAt: row.updatedAt.toISOString() };
}

export function parseServerName(value: string): string {
  const parsed = serverNameSchema.safeParse(value);
  if (!parsed.success) throw new AppError("bad_request:project", `name: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}

export async function listProjectMcpServers({ user, projectId }: { user: SessionUser; projectId: string }): Promise<McpServerView[]> {
  await requireProjectRole({ user, projectId, action: "manage" });
  const db = await getDb();
  const rows = await db.select().from(projectMcpServers).where(eq(projectMcpServers.projectId, projectId)).orderBy(asc(projectMcpServers.name));
  return rows.map(toView);
}

/** Create or replace a server (owners). A remote server's literal private address is refused here; names at call time. */
export async function saveProjectMcpServer({ user, projectId, name, input }: { user: SessionUser; projectId: string; name: string; input: z.output<typeof saveMcpServerSchema> }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  const parsed = serverSchema.safeParse(input.server);
  if (!parsed.success) throw new AppError("bad_request:project", describeIssues(parsed.error.issues.map((i) => ({ ...i, path: ["server", ...i.path] }))));
  const server = parsed.data;
  let config: Record<string, unknown>;
  let secretHeaders: string | null = null;
  if ("url" in server) {
    const problem = literalHostProblem(new URL(server.url).hostname);
    if (problem) throw new AppError("bad_request:project", `server.url: ${problem}.`);
    const names = Object.keys(server.headers);
    config = { type: server.type ?? "http", url: server.url, headerNames: names };
    if (names.length) secretHeaders = sealSecret(JSON.stringify(server.headers), PURPOSE);
  } else {
    config = { type: "stdio", command: server.command, args: server.args, env: server.env, ...(server.cwd ? { cwd: server.cwd } : {}) };
  }
  return write(async (tx) => {
    const existing = await tx.query.projectMcpServers.findFirst({ where: and(eq(projectMcpServers.projectId, projectId), eq(projectMcpServers.name, name)) });
    const values = { config, secretHeaders, updatedAt: new Date() };
    const [row] = existing
      ? await tx.update(projectMcpServers).set(values).where(eq(projectMcpServers.id, existing.id)).returning()
      : await tx.insert(projectMcpServers).values({ id: newId("mcp"), projectId, name, ...values }).returning();
    return toView(row!);
  });
}

export async function deleteProjectMcpServer({ user, projectId, name }: { user: SessionUser; projectId: string; name: string }) {
  await requireProjectRole({ user, projectId, action: "manage" });
  const deleted = await write((tx) =>
    tx.delete(projectMcpServers).where(and(eq(projectMcpServers.projectId, projectId), eq(projectMcpServers.name, name))).returning({ id: projectMcpServers.id }),
  );
  return { deleted: deleted.length > 0 };
}

/** The project's servers as a run uses them: headers decrypted. */
export async function projectMcpServersOf({ projectId }: { projectId: string }): Promise<McpServer[]> {
  const db = await getDb();
  const rows = await db.select().from(projectMcpServers).where(eq(projectMcpServers.projectId, projectId)).orderBy(asc(projectMcpServers.name));
  return rows.map((row) => {
    const { headerNames: _names, ...config } = row.config as Record<string, unknown>;
    const headers = row.secretHeaders ? (JSON.parse(openSecret(row.secretHeaders, PURPOSE)) as Record<string, string>) : {};
    return toServer(row.name, serverSchema.parse("url" in config ? { ...config, headers } : config), "project");
  });
}
