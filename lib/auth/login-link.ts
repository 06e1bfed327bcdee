import crypto from "node:crypto";
import { and, eq, gt, lte } from "drizzle-orm";
import { write } from "@/lib/db";
import { verificationTokens } from "@/lib/db/schema";
import { sha256 } from "./secret";

const IDENTIFIER = "local-owner-login";
const TTL_MS = 24 * 60 * 60 * 1000;

/** Create a one-time sign-in token for the local owner (printed at start, as Jupyter does). Only its hash is stored. */
export async function createLoginToken(): Promise<string> {
  const token = crypto.randomBytes(24).toString("base64url");
  await write(async (tx) => {
    // Links minted again and again (npm run sign-in-link) and never opened leave no rows behind past their expiry.
    await tx.delete(verificationTokens).where(and(eq(verificationTokens.identifier, IDENTIFIER), lte(verificationTokens.expires, new Date())));
    await tx.insert(verificationTokens).values({
      identifier: IDENTIFIER,
      token: sha256(token),
      expires: new Date(Date.now() + TTL_MS),
    });
  });
  return token;
}

/**
 * A fresh one-time owner sign-in link on `publicUrl`. Tokens live in the database (hashed), not in the server's memory,
 * so another process on the same database — `npm run sign-in-link` — mints links the running server accepts.
 */
export async function createLoginLink({ publicUrl }: { publicUrl: string }): Promise<string> {
  const token = await createLoginToken();
  return `${publicUrl.replace(/\/+$/, "")}/signin?token=${token}`;
}

/** Consume a one-time token: true once, false ever after (or when unknown/expired). */
export async function consumeLoginToken(token: string): Promise<boolean> {
  if (!token || token.length > 200) return false;
  return write(async (tx) => {
    const deleted = await tx
      .delete(verificationTokens)
      .where(
        and(
          eq(verificationTokens.identifier, IDENTIFIER),
          eq(verificationTokens.token, sha256(token)),
          gt(verificationTokens.expires, new Date()),
        ),
      )
      .returning();
    return deleted.length === 1;
  });
}
