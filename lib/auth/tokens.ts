import crypto from "node:crypto";
import { and, desc, eq, isNull } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { apiTokens } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { redact } from "@/lib/redact";
import { sha256 } from "./secret";

/** New tokens: a prefix that names Gatehouse (the old `gh_pat_` read as a GitHub token). */
export const API_TOKEN_PREFIX = "gatehouse_api_";
/** Tokens created before the prefix changed keep working until revoked. */
export const LEGACY_API_TOKEN_PREFIXES = ["gh_pat_"] as const;

/** Create an API token: the token is returned once; only its SHA-256 is stored. */
export async function createApiToken({ userId, name }: { userId: string; name: string }) {
  const token = `${API_TOKEN_PREFIX}${crypto.randomBytes(24).toString("base64url")}`;
  const id = newId("tok");
  // A name is free text: a key pasted into it is redacted before it is stored (issue #29.7).
  const stored = redact(name);
  await write(async (tx) => {
    await tx.insert(apiTokens).values({ id, userId, name: stored, tokenHash: sha256(token), prefix: token.slice(0, API_TOKEN_PREFIX.length + 4) });
  });
  return { id, token, name: stored };
}

export async function revokeApiToken({ id, userId }: { id: string; userId: string }): Promise<boolean> {
  return write(async (tx) => {
    const rows = await tx
      .update(apiTokens)
      .set({ revokedAt: new Date() })
      .where(and(eq(apiTokens.id, id), eq(apiTokens.userId, userId), isNull(apiTokens.revokedAt)))
      .returning({ id: apiTokens.id });
    return rows.length === 1;
  });
}

/** The user id behind a live (not revoked) token, or null. */
export async function resolveApiToken(token: string): Promise<string | null> {
  const known = [API_TOKEN_PREFIX, ...LEGACY_API_TOKEN_PREFIXES].some((prefix) => token.startsWith(prefix));
  if (!known || token.length > 200) return null;
  const db = await getDb();
  const row = await db.query.apiTokens.findFirst({
    where: and(eq(apiTokens.tokenHash, sha256(token)), isNull(apiTokens.revokedAt)),
  });
  return row?.userId ?? null;
}

/** A user's tokens (never the token or its hash): name, the first characters to recognise it, dates. */
export async function listApiTokens({ userId }: { userId: string }) {
  const db = await getDb();
  const rows = await db
    .select({
      id: apiTokens.id,
      name: apiTokens.name,
      prefix: apiTokens.prefix,
      createdAt: apiTokens.createdAt,
      lastUsedAt: apiTokens.lastUsedAt,
      revokedAt: apiTokens.revokedAt,
    })
    .from(apiTokens)
    .where(eq(apiTokens.userId, userId))
    .orderBy(desc(apiTokens.createdAt));
  return rows.map((r) => ({
    ...r,
    // Names stored before they were redacted on write (issue #29.7) are redacted here.
    name: redact(r.name),
    createdAt: r.createdAt.toISOString(),
    lastUsedAt: r.lastUsedAt?.toISOString() ?? null,
    revokedAt: r.revokedAt?.toISOString() ?? null,
  }));
}
