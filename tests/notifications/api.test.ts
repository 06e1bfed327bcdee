import { beforeAll, describe, expect, it } from "vitest";
import { GET as listChannels } from "@/app/api/projects/[id]/notifications/route";
import { DELETE as deleteChannel, PUT as putChannel } from "@/app/api/projects/[id]/notifications/[kind]/route";
import { GET as listDeliveriesRoute } from "@/app/api/projects/[id]/deliveries/route";
import { GET as listMine } from "@/app/api/me/notifications/route";
import { DELETE as deleteMine, PUT as putMine } from "@/app/api/me/notifications/[channel]/route";
import { getClient } from "@/lib/db";
import { ADMIN, call } from "../api/helpers";
import { makeUser } from "../auth/fixtures";
import { gateWorld, webhookSecret } from "./receivers";

/*
 * The notification API as a client sees it: secrets go in and never come out (responses say "set"), are not in the
 * database in plaintext, bad input is a 400 naming the field, and personal channels are only ever the caller's own.
 */

let w: Awaited<ReturnType<typeof gateWorld>>;
beforeAll(async () => {
  w = await gateWorld();
});

const secretsIn = async () => {
  const client = await getClient();
  return (await client.execute("SELECT kind, secret, config FROM notification_channels")).rows.map((r) => `${r.kind} ${r.secret} ${r.config}`).join("\n");
};

describe("project channels over HTTP", () => {
  it("a saved secret comes back only as \"set\", is encrypted in the database, and is kept when a save leaves it out", async () => {
    const secret = webhookSecret();
    const token = "xoxb-98765-43210-secretslacktoken";
    const path = `/api/projects/${w.project.id}/notifications`;
    const saved = await call(putChannel, { method: "PUT", path: `${path}/webhook`, params: { id: w.project.id, kind: "webhook" }, headers: ADMIN, body: { config: { url: "https://hooks.example.com/x?token=abc" }, secret } });
    expect(saved.status).toBe(200);
    expect(saved.json.channel).toMatchObject({ kind: "webhook", enabled: true, secret: "set", config: { url: "https://hooks.example.com/x?token=abc" } });
    const slack = await call(putChannel, { method: "PUT", path: `${path}/slack`, params: { id: w.project.id, kind: "slack" }, headers: ADMIN, body: { config: { channel: "#a" }, secret: token } });
    expect(slack.status).toBe(200);
    const answered = JSON.stringify(saved.json) + JSON.stringify(slack.json);
    expect(answered).not.toContain(secret.slice(6));
    expect(answered).not.toContain(token);

    const listed = await call(listChannels, { path, params: { id: w.project.id }, headers: ADMIN });
    expect(listed.status).toBe(200);
    expect(listed.json.channels.map((c: { kind: string; secret: string }) => [c.kind, c.secret]).sort()).toEqual([["slack", "set"], ["webhook", "set"]]);
    const text = JSON.stringify(listed.json);
    expect(text).not.toContain(token);
    expect(text).not.toContain(secret.slice(6));

    const stored = await secretsIn();
    expect(stored).not.toContain(token);
    expect(stored).not.toContain(secret.slice(6));
    expect(stored).toMatch(/slack v1\.[\w-]+\.[\w-]+\.[\w-]+/);

    // Disable without resending the token: still set.
    const off = await call(putChannel, { method: "PUT", path: `${path}/slack`, params: { id: w.project.id, kind: "slack" }, headers: ADMIN, body: { enabled: false, config: { channel: "#b" } } });
    expect(off.json.channel).toMatchObject({ enabled: false, secret: "set", config: { channel: "#b" } });
    const removed = await call(deleteChannel, { method: "DELETE", path: `${path}/slack`, params: { id: w.project.id, kind: "slack" }, headers: ADMIN });
    expect(removed.json).toEqual({ deleted: true });
    expect(await secretsIn()).not.toMatch(/^slack /m);
  });

  it("bad input is a 400 naming what to fix, and writes nothing", async () => {
    const before = await secretsIn();
    const put = (kind: string, body: unknown) =>
      call(putChannel, { method: "PUT", path: `/api/projects/${w.project.id}/notifications/${kind}`, params: { id: w.project.id, kind }, headers: ADMIN, body });
    const unknownKind = await put("pager", { config: {} });
    expect(unknownKind.status).toBe(400);
    expect(unknownKind.json.error.message).toMatch(/^kind: must be one of webhook, email, slack, telegram/);
    const badEmail = await put("email", { config: { host: "smtp.example.com", port: 99999, from: "nobody", to: [] } });
    expect(badEmail.status).toBe(400);
    expect(badEmail.json.error.message).toMatch(/config\.port: must be a port number.*config\.from: must be an email address.*config\.to: must list at least one address/);
    const badTelegram = await put("telegram", { config: { chatId: "-100123" }, secret: "not a token" });
    expect(badTelegram.status).toBe(400);
    expect(badTelegram.json.error.message).toMatch(/^secret: must be a Telegram bot token/);
    const extra = await put("webhook", { config: { url: "https://x.example.com" }, secret: webhookSecret(), surprise: 1 });
    expect(extra.status).toBe(400);
    expect(await secretsIn()).toBe(before);
  });

  it("the delivery log is for owners; its query is checked", async () => {
    const ok = await call(listDeliveriesRoute, { path: `/api/projects/${w.project.id}/deliveries?limit=5`, params: { id: w.project.id }, headers: ADMIN });
    expect(ok.status).toBe(200);
    expect(ok.json.deliveries).toEqual([]);
    const bad = await call(listDeliveriesRoute, { path: `/api/projects/${w.project.id}/deliveries?limit=1000`, params: { id: w.project.id }, headers: ADMIN });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/limit: at most 200/);
  });
});

describe("personal channels over HTTP", () => {
  it("each person sets, sees and removes only their own", async () => {
    const alice = await makeUser("Alice");
    const bob = await makeUser("Bob");
    const set = await call(putMine, { method: "PUT", path: "/api/me/notifications/email", params: { channel: "email" }, headers: alice.headers, body: { config: { address: "Alice@Example.com" } } });
    expect(set.status).toBe(200);
    expect(set.json.channel).toMatchObject({ kind: "email", config: { address: "alice@example.com" }, secret: null });
    const slack = await call(putMine, { method: "PUT", path: "/api/me/notifications/slack", params: { channel: "slack" }, headers: alice.headers, body: { config: {} } });
    expect(slack.status).toBe(400);
    expect(slack.json.error.message).toMatch(/^channel: must be one of email, telegram/);

    expect((await call(listMine, { path: "/api/me/notifications", headers: alice.headers })).json.channels).toHaveLength(1);
    expect((await call(listMine, { path: "/api/me/notifications", headers: bob.headers })).json.channels).toEqual([]);
    // Bob's delete touches Bob's channels only.
    expect((await call(deleteMine, { method: "DELETE", path: "/api/me/notifications/email", params: { channel: "email" }, headers: bob.headers })).json).toEqual({ deleted: false });
    expect((await call(listMine, { path: "/api/me/notifications", headers: alice.headers })).json.channels).toHaveLength(1);
    expect((await call(deleteMine, { method: "DELETE", path: "/api/me/notifications/email", params: { channel: "email" }, headers: alice.headers })).json).toEqual({ deleted: true });
  });
});
