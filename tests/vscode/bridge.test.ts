import { describe, expect, it } from "vitest";
import type { GatehouseApi } from "@/extensions/vscode/src/core/api";
import { bridgeFetch } from "@/extensions/vscode/src/core/bridge";

/**
 * Issue #29, finding 9: the run panel's bridge let `/api/%2e%2e/settings` through its `/api/`-only rule — a URL parser
 * (fetch's, the server's) resolves `%2e%2e` as `..`, so the request reached /settings with the user's token. The
 * path is now checked as the server will route it, and what is sent is that checked form.
 */

/** An API whose client records what it was asked to fetch, and the URL a real fetch would resolve it to. */
function recordingApi() {
  const sent: Array<{ path: string; reaches: string }> = [];
  const api = {
    client: {
      fetch: async (path: string) => {
        sent.push({ path, reaches: new URL(`http://gatehouse.test${path}`).pathname });
        return new Response("{}", { status: 200, headers: { "content-type": "application/json" } });
      },
    },
  } as unknown as GatehouseApi;
  return { api, sent };
}

const REFUSED = /^The panel's request was refused: url must be a path under \/api\/ of the Gatehouse server\.$/;

describe("the VS Code bridge's /api/-only rule", () => {
  it("refuses paths that leave /api/ once decoded or resolved, and sends nothing for them", async () => {
    const { api, sent } = recordingApi();
    for (const url of [
      "/api/%2e%2e/settings",
      "/api/%2e%2e/v1/checkpoint/x/async",
      "/api/%2E%2E/settings",
      "/api/.%2e/settings",
      "/api/runs/%2e%2e/%2e%2e/settings",
      "/api/%2fauth/session",
      "/api/auth%2fsession",
      "/api/%252e%252e/settings",
      "/api/..\\settings",
      "/api\\..\\settings",
      "/api/./auth/session",
      "/api/runs/../../settings",
      "/api/%61uth/session",
      "/api/auth",
      "/api/x/\t../../settings",
      "/api",
    ]) {
      const refused = await bridgeFetch({ api, message: { type: "fetch", id: 7, url } });
      expect(refused, url).toMatchObject({ id: 7, status: 400 });
      expect(JSON.parse(refused.body).error.message, url).toMatch(REFUSED);
    }
    expect(sent).toEqual([]);
  });

  it("sends API paths with their query, and every one reaches a path under /api/", async () => {
    const { api, sent } = recordingApi();
    for (const url of ["/api/projects", "/api/runs/run_1/events?after=0&limit=2000", "/api/runs?q=a%2Fb..c&cursor=x%2e", "/api/run-groups/g_1"]) {
      expect((await bridgeFetch({ api, message: { type: "fetch", id: 1, url } })).status, url).toBe(200);
    }
    expect(sent.map((s) => s.path)).toEqual(["/api/projects", "/api/runs/run_1/events?after=0&limit=2000", "/api/runs?q=a%2Fb..c&cursor=x%2e", "/api/run-groups/g_1"]);
    for (const { reaches } of sent) expect(reaches.startsWith("/api/")).toBe(true);
  });
});
