import crypto from "node:crypto";
import { and, eq, gt } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { chatIdentities, chatLinkCodes, users, type ChatProvider } from "@/lib/db/schema";
import type { SessionUser } from "@/lib/auth/guard";
import { newUlid } from "@/lib/ids";

/*
 * Linking a chat account to a Gatehouse user. A person asks the Settings page for a one-time code (valid 10 minutes,
 * only its hash stored) and sends it to the Slack slash command or the Telegram bot; from then on that chat account
 * acts as that user, and only as that user: every press goes through the user's own role rules. An unlinked account
 * changes nothing.
 */

export const LINK_CODE_TTL_MS = 10 * 60 * 1000;
export const CHAT_PROVIDERS = ["slack", "telegram"] as const satisfies readonly ChatProvider[];

/** Who is pressing: the chat account, as the provider names it. */
export type ChatIdentity = { provider: ChatProvider; externalId: string; displayName?: string | null };

const hashCode = (code: string) => crypto.createHash("sha256").update(code.trim().toUpperCase()).digest("hex");

/** A new code for this user (earlier unused codes of theirs stay valid until they expire). */
export async function createLinkCode({ user }: { user: SessionUser }): Promise<{ code: string; expiresAt: string }> {
  // 10 characters of Crockford base32 (no I, L, O, U): 50 bits, easy to type on a phone.
  const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  const bytes = crypto.randomBytes(10);
  const code = Array.from(bytes, (b) => alphabet[b % 32]).join("");
  const expiresAt = new Date(Date.now() + LINK_CODE_TTL_MS);
  await write((tx) => tx.insert(chatLinkCodes).values({ codeHash: hashCode(code), userId: user.id, expiresAt }));
  return { code, expiresAt: expiresAt.toISOString() };
}

/**
 * Redeem a code for a chat account: the code is used up (deleted in the same transaction that links, so a code links
 * one account once), and the account now acts as the code's user. A chat account already linked is re-linked.
 */
export async function redeemLinkCode({ identity, code }: { identity: ChatIdentity; code: string }): Promise<{ userId: string; name: string | null } | null> {
  const hash = hashCode(code);
  return write(async (tx) => {
    const [used] = await tx
      .delete(chatLinkCodes)
      .where(and(eq(chatLinkCodes.codeHash, hash), gt(chatLinkCodes.expiresAt, new Date())))
      .returning();
    if (!used) return null;
    await tx
      .insert(chatIdentities)
      .values({ id: `chi_${newUlid().toLowerCase()}`, provider: identity.provider, externalId: identity.externalId, displayName: identity.displayName ?? null, userId: used.userId })
      .onConflictDoUpdate({
        target: [chatIdentities.provider, chatIdentities.externalId],
        set: { userId: used.userId, displayName: identity.displayName ?? null },
      });
    const user = await tx.query.users.findFirst({ where: eq(users.id, used.userId) });
    return { userId: used.userId, name: user?.name ?? null };
  });
}

/** The user a chat account acts as, or null when it is not linked. */
export async function linkedUser(identity: ChatIdentity): Promise<SessionUser | null> {
  const db = await getDb();
  const [row] = await db
    .select({ id: users.id, name: users.name })
    .from(chatIdentities)
    .innerJoin(users, eq(users.id, chatIdentities.userId))
    .where(and(eq(chatIdentities.provider, identity.provider), eq(chatIdentities.externalId, identity.externalId)));
  // `via: api-token`: it is not a browser session, so no same-origin check applies (the request is signed instead).
  return row ? { id: row.id, name: row.name, via: "api-token" } : null;
}

export type LinkedAccountView = { id: string; provider: ChatProvider; externalId: string; displayName: string | null; linkedAt: string };

export async function listLinkedAccounts({ user }: { user: SessionUser }): Promise<LinkedAccountView[]> {
  const db = await getDb();
  const rows = await db.select().from(chatIdentities).where(eq(chatIdentities.userId, user.id));
  return rows.map((r) => ({ id: r.id, provider: r.provider, externalId: r.externalId, displayName: r.displayName, linkedAt: r.createdAt.toISOString() }));
}

/** Unlink one of the caller's own chat accounts (someone else's id deletes nothing). */
export async function unlinkAccount({ user, id }: { user: SessionUser; id: string }): Promise<{ deleted: boolean }> {
  const deleted = await write((tx) =>
    tx.delete(chatIdentities).where(and(eq(chatIdentities.id, id), eq(chatIdentities.userId, user.id))).returning({ id: chatIdentities.id }),
  );
  return { deleted: deleted.length > 0 };
}
