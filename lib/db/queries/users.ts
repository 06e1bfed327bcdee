import { eq } from "drizzle-orm";
import { getDb, write } from "@/lib/db";
import { users } from "@/lib/db/schema";

export type User = typeof users.$inferSelect;

/** The local owner account of a single-machine install (sign-in by admin token, password or one-time link). */
export const LOCAL_OWNER_ID = "usr_local_owner";

export async function ensureLocalOwner(): Promise<User> {
  const db = await getDb();
  const existing = await db.query.users.findFirst({ where: eq(users.id, LOCAL_OWNER_ID) });
  if (existing) return existing;
  return write(async (tx) => {
    await tx.insert(users).values({ id: LOCAL_OWNER_ID, name: "Owner" }).onConflictDoNothing();
    return (await tx.query.users.findFirst({ where: eq(users.id, LOCAL_OWNER_ID) }))!;
  });
}

export async function getUser({ id }: { id: string }): Promise<User | null> {
  const db = await getDb();
  return (await db.query.users.findFirst({ where: eq(users.id, id) })) ?? null;
}
