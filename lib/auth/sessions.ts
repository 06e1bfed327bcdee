import crypto from "node:crypto";
import { and, eq, gt, lt } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { sessions } from "@/lib/db/schema";
import { sha256 } from "./secret";

/**
 * Server-side sessions behind the JWT cookie. Auth.js signs the cookie (Credentials needs its JWT strategy), and a
 * signed JWT alone cannot be taken back: signing out only asked the browser to forget it. So every sign-in records a
 * random session id (in the Auth.js `sessions` table, hashed; the JWT carries the id), every use of the cookie checks
 * that the record is still there, and signing out deletes it. A session lasts 30 days from sign-in.
 */
export const SESSION_MAX_AGE_SECONDS = 30 * 24 * 60 * 60;
/** A session seen live is believed for this long without asking the database again (per process). */
const LIVE_CACHE_MS = 5_000;
const MAX_CACHED = 10_000;

const globalForSessions = globalThis as unknown as { __gatehouseLiveSessions?: Map<string, number> };
const liveCache = () => (globalForSessions.__gatehouseLiveSessions ??= new Map());

/** Record a new session for a user who just signed in; returns the id the JWT carries. */
export async function startSession({ userId }: { userId: string }): Promise<string> {
  const id = crypto.randomBytes(32).toString("base64url");
  const now = Date.now();
  await write(async (tx) => {
    // Sign-ins are rare: clear the expired records here instead of on a schedule.
    await tx.delete(sessions).where(lt(sessions.expires, new Date(now)));
    await tx.insert(sessions).values({ sessionToken: sha256(id), userId, expires: new Date(now + SESSION_MAX_AGE_SECONDS * 1000) });
  });
  return id;
}

/** Whether a session id is still recorded and unexpired (false for a signed-out one). */
export async function sessionIsLive(id: string): Promise<boolean> {
  const cache = liveCache();
  const now = Date.now();
  if ((cache.get(id) ?? 0) > now) return true;
  const db = await getDb();
  const row = await db.query.sessions.findFirst({
    columns: { sessionToken: true },
    where: and(eq(sessions.sessionToken, sha256(id)), gt(sessions.expires, new Date(now))),
  });
  if (!row) {
    cache.delete(id);
    return false;
  }
  if (cache.size >= MAX_CACHED) cache.clear();
  cache.set(id, now + LIVE_CACHE_MS);
  return true;
}

/** Sign-out: the session's record goes, so its cookie no longer signs anyone in (here at once, elsewhere within 5 s). */
export async function endSession(id: string): Promise<void> {
  liveCache().delete(id);
  await write(async (tx) => {
    await tx.delete(sessions).where(eq(sessions.sessionToken, sha256(id)));
  });
}
