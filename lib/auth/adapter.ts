import type { Adapter, AdapterAccount, AdapterUser } from "@auth/core/adapters";
import { DrizzleAdapter } from "@auth/drizzle-adapter";
import { getDb, serialize } from "@/lib/db";
import { accounts, sessions, users, verificationTokens } from "@/lib/db/schema";
import { newId } from "@/lib/ids";
import { singleLine } from "@/lib/plain-text";

type Method = keyof Adapter;

const READS: Method[] = ["getUser", "getUserByEmail", "getUserByAccount", "getSessionAndUser"];
const WRITES: Method[] = [
  "createUser",
  "updateUser",
  "deleteUser",
  "linkAccount",
  "unlinkAccount",
  "createSession",
  "updateSession",
  "deleteSession",
  "createVerificationToken",
  "useVerificationToken",
];

/**
 * The Drizzle adapter on our own tables. The database opens asynchronously, so the adapter is created on first use.
 * Writes go through the process's write queue (one SQLite writer). Users get our `usr_` ids, and the provider's
 * access/refresh/id tokens are not stored: Gatehouse only needs to know who signed in, and a token kept in plain text
 * would be a secret at rest.
 */
export function gatehouseAdapter(): Adapter {
  let inner: Promise<Adapter> | undefined;
  const get = () =>
    (inner ??= getDb().then((db) =>
      DrizzleAdapter(db, { usersTable: users, accountsTable: accounts, sessionsTable: sessions, verificationTokensTable: verificationTokens }),
    ));
  const call = async (method: Method, args: unknown[]) => {
    const adapter = await get();
    const fn = adapter[method] as (...a: unknown[]) => Promise<unknown>;
    return WRITES.includes(method) ? serialize(() => fn(...args)) : fn(...args);
  };
  const adapter = Object.fromEntries([...READS, ...WRITES].map((m) => [m, (...args: unknown[]) => call(m, args)])) as Adapter;
  // The provider's display name is shown in lists and terminals: one line, no control characters.
  adapter.createUser = (user: AdapterUser) =>
    call("createUser", [{ ...user, ...(user.name ? { name: singleLine(user.name) } : {}), id: newId("usr") }]) as Promise<AdapterUser>;
  adapter.linkAccount = (account: AdapterAccount) =>
    call("linkAccount", [
      {
        userId: account.userId,
        type: account.type,
        provider: account.provider,
        providerAccountId: account.providerAccountId,
        scope: account.scope,
        token_type: account.token_type,
      },
    ]) as Promise<undefined>;
  return adapter;
}
