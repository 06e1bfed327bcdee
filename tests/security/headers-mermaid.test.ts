import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { NextRequest } from "next/server";
import nextConfig from "@/next.config";
import { proxy } from "@/proxy";
import * as healthRoute from "@/app/api/health/route";
import * as runsRoute from "@/app/api/runs/route";
import * as projectsRoute from "@/app/api/projects/route";
import * as approveRoute from "@/app/api/runs/[id]/approve/route";
import { getDb, write } from "@/lib/db";
import { gates } from "@/lib/db/schema";
import { appendEventsTx } from "@/lib/db/event-store";
import { newId } from "@/lib/ids";
import { sanitizeDiagram, validateMermaid } from "@/lib/mermaid";
import * as validateRoute from "@/app/api/mermaid/validate/route";
import { ADMIN, call, makeRepo } from "../api/helpers";

/* Finding 5: an <img src=http://…> in a diagram label passed validation and was fetched by the browser with a Referer. */

function directives(csp: string | null): Map<string, string> {
  return new Map((csp ?? "").split(";").map((d) => d.trim()).filter(Boolean).map((d) => [d.split(/\s+/)[0]!, d] as [string, string]));
}

describe("finding 5: security headers", () => {
  it("every page gets a CSP with a fresh nonce (also on the request, where Next reads it), img-src 'self' data: and frame-ancestors 'none'", () => {
    const a = proxy(new NextRequest("http://127.0.0.1:3000/runs/run_1"));
    const b = proxy(new NextRequest("http://127.0.0.1:3000/signin"));
    const csp = directives(a.headers.get("content-security-policy"));
    expect(csp.get("img-src")).toBe("img-src 'self' data:");
    expect(csp.get("frame-ancestors")).toBe("frame-ancestors 'none'");
    expect(csp.get("object-src")).toBe("object-src 'none'");
    const nonce = /'nonce-([^']+)'/.exec(csp.get("script-src") ?? "")?.[1];
    expect(nonce).toMatch(/^[A-Za-z0-9+/=]{20,}$/);
    expect(csp.get("script-src")).not.toContain("'unsafe-inline'");
    expect(b.headers.get("content-security-policy")).not.toContain(nonce);
    // NextResponse.next({ request: { headers } }) forwards request headers as x-middleware-request-*.
    expect(a.headers.get("x-middleware-request-content-security-policy")).toBe(a.headers.get("content-security-policy"));
    expect(a.headers.get("x-middleware-request-x-nonce")).toBe(nonce);
    expect(a.headers.get("x-content-type-options")).toBe("nosniff");
    expect(a.headers.get("referrer-policy")).toBe("no-referrer");
  });

  it("next.config sends nosniff and the referrer policy everywhere, and a deny-all CSP on API, event and static responses", async () => {
    const rules = await nextConfig.headers!();
    const all = rules.find((r) => r.source === "/:path*")!;
    expect(Object.fromEntries(all.headers.map((h) => [h.key, h.value]))).toMatchObject({
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
    });
    for (const source of ["/api/:path*", "/e/:path*"]) {
      const csp = rules.find((r) => r.source === source)?.headers.find((h) => h.key === "content-security-policy")?.value;
      expect(directives(csp ?? null).get("default-src"), source).toBe("default-src 'none'");
      expect(csp, source).toContain("frame-ancestors 'none'");
    }
  });

  it("API responses from route() carry the headers, errors included", async () => {
    for (const res of [await call(healthRoute.GET), await call(runsRoute.GET), await call(runsRoute.GET, { headers: ADMIN })]) {
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    }
  });
});

describe("finding 5: external URLs in diagram labels", () => {
  const hostile = [
    "flowchart TD",
    '  A["<img src=http://evil.example/p.png> Plan"] --> B["see https://evil.example/x and <a href=\'//evil.example\'>here</a>"]',
    '  B --> C["<img src=\'data:image/svg+xml;base64,AAAA\'>ok"]',
    '  click A href "https://evil.example/click"',
  ].join("\n");

  it("sanitizeDiagram drops images, links and URLs but keeps a valid diagram", async () => {
    const clean = sanitizeDiagram(hostile);
    expect(clean).not.toMatch(/evil\.example|<img|<a\b|href|data:image/i);
    expect(clean).toContain("Plan");
    expect((await validateMermaid(clean)).kind).toBe("flowchart");
    // Harmless labels pass unchanged.
    const plain = "flowchart TD\n  A[Read config] -->|x < 3| B{Valid?}\n  style A fill:#f9f";
    expect(sanitizeDiagram(plain)).toBe(plain);
  });

  it("a parse error does not echo a configured secret pasted as the diagram (found by the fuzz test)", async () => {
    const secret = process.env.GATEHOUSE_ADMIN_TOKEN!;
    const res = await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: { source: `${secret}\n  A --> B` } });
    expect(res.json.valid).toBe(false);
    expect(JSON.stringify(res.json)).not.toContain(secret.slice(0, 8));
    expect(res.json.error.message).toContain("[REDACTED]");
  });

  it("an edited plan is stored without the external image", async () => {
    const project = await call(projectsRoute.POST, { method: "POST", headers: ADMIN, body: { name: "csp", repository: { type: "local", path: makeRepo() } } });
    const created = await call(runsRoute.POST, { method: "POST", headers: ADMIN, body: { projectId: project.json.project.id, request: "img" } });
    const runId = created.json.run.id as string;
    const gateId = newId("gate");
    await write(async (tx) => {
      await appendEventsTx(tx, runId, [
        { type: "RUN_STARTED", payload: {} },
        { type: "STAGE_STARTED", payload: { stage: "planning" } },
      ]);
      await tx.insert(gates).values({ id: gateId, workflowRunId: runId, gateNumber: 1, kind: "plan" });
      await appendEventsTx(tx, runId, [{ type: "APPROVAL_REQUESTED", payload: { gateId, gateNumber: 1, kind: "plan" } }]);
    });
    const res = await call(approveRoute.POST, {
      method: "POST",
      headers: ADMIN,
      params: { id: runId },
      body: { gateId, editedPlan: { mermaid: hostile } },
    });
    expect(res.status).toBe(200);
    const db = await getDb();
    const [gate] = await db.select().from(gates).where(eq(gates.id, gateId));
    expect(JSON.stringify(gate)).not.toContain("evil.example");
    expect(JSON.stringify(gate)).toContain("Plan");
  });
});
