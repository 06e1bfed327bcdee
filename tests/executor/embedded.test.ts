import { afterAll, describe, expect, it } from "vitest";
import { getExecutorStatus, stopExecutor, type FetchHandler } from "@/lib/executor";
import { resetEnvCache } from "@/lib/env";
import { startServer, waitForRuns } from "./harness";

/** Gatehouse's own app: the inngest/ client and functions, the /api/inngest route, and the embedded start. */

afterAll(async () => {
  await stopExecutor();
});

describe("embedded mode", () => {
  it("reports no running executor before start", async () => {
    resetEnvCache();
    expect(await getExecutorStatus()).toEqual({ mode: "embedded", running: false });
  });

  it("starts in-process, syncs /api/inngest, and runs a function from an event sent with inngest.send()", async () => {
    const { startEmbeddedExecutor } = await import("@/inngest/embedded");
    const { inngest } = await import("@/inngest");
    await startEmbeddedExecutor();
    const status = await getExecutorStatus();
    expect(status).toMatchObject({ mode: "embedded", running: true });
    expect(status.apps?.[0]).toMatchObject({ appId: "gatehouse", error: null });
    expect(status.apps?.[0]?.functions).toBeGreaterThanOrEqual(1);

    const { ids } = await inngest.send({ name: "gatehouse/health.ping", data: { from: "test" } });
    expect(ids).toHaveLength(1);
    const [run] = await waitForRuns("health-check");
    expect(run?.output).toMatchObject({ ok: true, ping: { from: "test" } });
  });

  it("the Next route /api/inngest answers the executor over HTTP", async () => {
    const route = await import("@/app/api/inngest/route");
    const server = await startServer();
    server.setHandler((request) => {
      const method = request.method as "GET" | "POST" | "PUT";
      return (route[method] as unknown as FetchHandler)(request);
    });
    const { Executor, sendEvents } = await import("@/lib/executor");
    const { ownSigningKey } = await import("@/lib/security/executor-key");
    const executor = new Executor({
      // Signed with the app's signing key (made from the executor key), as the embedded executor calls it.
      apps: [{ url: server.serveUrl, signingKey: ownSigningKey() }],
      pollMs: 50,
      log: () => {},
    });
    try {
      await stopExecutor();
      await executor.start();
      const status = await executor.status();
      expect(status.apps.find((a) => a.url === server.serveUrl)).toMatchObject({ appId: "gatehouse", error: null });
      await sendEvents({ name: "gatehouse/health.ping", data: { from: "http" } });
      const runs = await waitForRuns("health-check", { count: 2 });
      // The app moved to the server's URL: the old registration is gone, so the ping started exactly one run.
      expect(runs).toHaveLength(2);
      expect((await executor.status()).apps.filter((a) => a.appId === "gatehouse")).toHaveLength(1);
      expect(runs.map((r) => r.output)).toContainEqual(expect.objectContaining({ ok: true, ping: { from: "http" } }));
    } finally {
      await executor.stop();
      await server.close();
    }
  });
});

describe("embedded endpoints are Gatehouse's executor's alone", () => {
  it("/api/inngest refuses to run or register functions without the executor's signature; /e/:key takes only the executor key", async () => {
    const route = await import("@/app/api/inngest/route");
    const events = await import("@/app/e/[key]/route");
    const { EXECUTOR_KEY_HEADER, getExecutorKey } = await import("@/lib/security/executor-key");
    const url = "http://127.0.0.1:3000/api/inngest?fnId=gatehouse-run-workflow&stepId=step";
    const forged = JSON.stringify({ event: { name: "run/started", data: { runId: "run_x" } }, events: [], steps: {}, version: 2, ctx: {} });
    const post = await (route.POST as unknown as FetchHandler)(new Request(url, { method: "POST", body: forged, headers: { "content-type": "application/json" } }));
    expect(post.status).toBe(401);
    const wrong = await (route.PUT as unknown as FetchHandler)(
      new Request("http://127.0.0.1:3000/api/inngest", { method: "PUT", body: "{}", headers: { [EXECUTOR_KEY_HEADER]: "guess" } }),
    );
    expect(wrong.status).toBe(401);

    const send = (key: string) =>
      events.POST(new Request(`http://127.0.0.1:3000/e/${key}`, { method: "POST", body: JSON.stringify([{ name: "run/cancelled", data: { runId: "run_x" } }]) }), {
        params: Promise.resolve({ key }),
      });
    expect((await send("NO_EVENT_KEY_SET")).status).toBe(401);
    const ok = await send(getExecutorKey());
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ status: 200, ids: [expect.any(String)] });
  });
});

describe("configuration", () => {
  it("GATEHOUSE_EXECUTOR_APPS lists extra serve URLs", async () => {
    const { configuredAppUrls } = await import("@/lib/executor");
    process.env.GATEHOUSE_EXECUTOR_APPS = " http://127.0.0.1:4000/api/inngest, http://127.0.0.1:4001/api/inngest ,";
    resetEnvCache();
    try {
      expect(configuredAppUrls()).toEqual(["http://127.0.0.1:4000/api/inngest", "http://127.0.0.1:4001/api/inngest"]);
    } finally {
      delete process.env.GATEHOUSE_EXECUTOR_APPS;
      resetEnvCache();
    }
  });

  it("reports inngest mode when INNGEST_* settings are present", async () => {
    await stopExecutor();
    process.env.INNGEST_EVENT_KEY = "test-event-key";
    resetEnvCache();
    try {
      expect(await getExecutorStatus()).toEqual({ mode: "inngest", running: false });
    } finally {
      delete process.env.INNGEST_EVENT_KEY;
      resetEnvCache();
    }
  });
});
