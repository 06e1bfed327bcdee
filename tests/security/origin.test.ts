import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import * as runsRoute from "@/app/api/runs/route";
import { resetEnvCache } from "@/lib/env";
import { requestHost } from "@/lib/auth/request-url";
import { call, makeWorld, ORIGIN, sessionCookie, type World } from "../auth/fixtures";

/* Finding 4: `Origin: null` on a cookie-authenticated POST gave a 500 ("Invalid URL"); X-Forwarded-Host was always believed. */

let world: World;

beforeAll(async () => {
  world = await makeWorld();
});

afterEach(() => {
  delete process.env.GATEHOUSE_TRUST_PROXY;
  resetEnvCache();
  vi.restoreAllMocks();
});

const post = async (headers: Record<string, string>) =>
  call(runsRoute.POST, {
    method: "POST",
    path: "/api/runs",
    headers: { cookie: await sessionCookie(world.approver.id), ...headers },
    body: { projectId: world.project.id, request: "origin check" },
  });

describe("finding 4: Origin null and forwarded hosts", () => {
  it("Origin: null on a cookie POST is a 403, not a 500, and logs no error", async () => {
    const errors = vi.spyOn(console, "error");
    for (const origin of ["null", "not a url", "http://", "file://", "http://127.0.0.1:3000/path"]) {
      const res = await post({ origin });
      expect(res.status, origin).toBe(403);
      expect(res.json.error.code, origin).toBe("forbidden:api");
    }
    expect(errors).not.toHaveBeenCalled();
  });

  it("a forged X-Forwarded-Host is ignored unless GATEHOUSE_TRUST_PROXY is set", async () => {
    const forged = { origin: "https://evil.example", "x-forwarded-host": "evil.example" };
    expect((await post(forged)).status).toBe(403);
    expect(requestHost(new Headers({ host: "127.0.0.1:3000", "x-forwarded-host": "evil.example" }))).toBe("127.0.0.1:3000");

    process.env.GATEHOUSE_TRUST_PROXY = "true";
    resetEnvCache();
    expect(requestHost(new Headers({ host: "10.0.0.5:3000", "x-forwarded-host": "gatehouse.example, proxy" }))).toBe("gatehouse.example");
    const viaProxy = await post({ origin: "https://gatehouse.example", "x-forwarded-host": "gatehouse.example" });
    expect(viaProxy.status).toBe(201);
  });

  it("the app's own origin is still accepted", async () => {
    expect((await post({ origin: ORIGIN })).status).toBe(201);
  });
});
