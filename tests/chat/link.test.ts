import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { GET as listLinks, POST as createCode } from "@/app/api/me/chat-links/route";
import { DELETE as unlink } from "@/app/api/me/chat-links/[id]/route";
import { linkedUser, redeemLinkCode } from "@/lib/chat/link";
import { getDb, write } from "@/lib/db";
import { chatLinkCodes } from "@/lib/db/schema";
import { call } from "../api/helpers";
import { makeUser } from "../auth/fixtures";

/* Account linking: a one-time code from Settings makes a chat account act as that user, and only that user. */

describe("linking a chat account with a one-time code", () => {
  it("a code from POST /api/me/chat-links links one chat account once; the account then acts as its user only", async () => {
    const alice = await makeUser("Alice");
    const created = await call(createCode, { method: "POST", path: "/api/me/chat-links", headers: alice.headers });
    expect(created.status).toBe(201);
    expect(created.json.code).toMatch(/^[0-9A-HJKMNP-TV-Z]{10}$/);
    // Only the code's hash is stored.
    const db = await getDb();
    expect(JSON.stringify(await db.select().from(chatLinkCodes))).not.toContain(created.json.code);

    const slack = { provider: "slack" as const, externalId: "T1:U1", displayName: "alice" };
    expect(await linkedUser(slack)).toBeNull();
    expect(await redeemLinkCode({ identity: slack, code: created.json.code.toLowerCase() })).toMatchObject({ userId: alice.id });
    expect(await linkedUser(slack)).toMatchObject({ id: alice.id });
    // Used up: the same code links no second account.
    const other = { provider: "telegram" as const, externalId: "42" };
    expect(await redeemLinkCode({ identity: other, code: created.json.code })).toBeNull();
    expect(await linkedUser(other)).toBeNull();

    const listed = await call(listLinks, { path: "/api/me/chat-links", headers: alice.headers });
    expect(listed.json.accounts).toEqual([expect.objectContaining({ provider: "slack", externalId: "T1:U1", displayName: "alice" })]);
    const bob = await makeUser("Bob");
    expect((await call(listLinks, { path: "/api/me/chat-links", headers: bob.headers })).json.accounts).toEqual([]);
    const id = listed.json.accounts[0].id;
    // Bob cannot unlink Alice's account; Alice can.
    expect((await call(unlink, { method: "DELETE", path: `/api/me/chat-links/${id}`, params: { id }, headers: bob.headers })).json).toEqual({ deleted: false });
    expect(await linkedUser(slack)).toMatchObject({ id: alice.id });
    expect((await call(unlink, { method: "DELETE", path: `/api/me/chat-links/${id}`, params: { id }, headers: alice.headers })).json).toEqual({ deleted: true });
    expect(await linkedUser(slack)).toBeNull();
  });

  it("an expired code links nothing; creating a code needs a signed-in user", async () => {
    const carol = await makeUser("Carol");
    const created = await call(createCode, { method: "POST", path: "/api/me/chat-links", headers: carol.headers });
    await write((tx) => tx.update(chatLinkCodes).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(chatLinkCodes.userId, carol.id)));
    expect(await redeemLinkCode({ identity: { provider: "slack", externalId: "T1:U9" }, code: created.json.code })).toBeNull();
    expect((await call(createCode, { method: "POST", path: "/api/me/chat-links" })).status).toBe(401);
  });
});
