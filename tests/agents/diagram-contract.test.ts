import { afterEach, describe, expect, it } from "vitest";
import { runValidator } from "@/lib/agents/validator";
import { extractConstraints } from "@/lib/mermaid";
import { createScriptedModel } from "@/lib/ai/scripted-model";
import { createTempSandbox } from "@/tests/agents/helpers/temp-sandbox";
import { planOf } from "@/tests/agents/helpers/plan";

/** Item 2 of #35: the plan's diagram is a contract Gatehouse checks itself, not only prose for the reviewer. */

let sandbox: Awaited<ReturnType<typeof createTempSandbox>> | null = null;
afterEach(async () => {
  await sandbox?.destroy();
  sandbox = null;
});

/** A reviewer that passes everything with a full score: only Gatehouse's own checks can fail the validation. */
const lenient = () => createScriptedModel({ respond: () => ({ text: JSON.stringify({ passed: true, alignmentScore: 10, findings: [], feedback: "", rationale: "ok" }) }) });

async function validateWith(mermaid: string) {
  const plan = { ...planOf({ tasks: [{ id: "T1", files: ["app/", "lib/", "db/"] }] }), mermaid, constraints: await extractConstraints(mermaid) };
  return runValidator({ plan, request: "Users", sandbox: sandbox!, modelId: "demo:scripted", model: lenient(), context: {} });
}

const FLOW = [
  "flowchart TD",
  '  L["Login page (/login)"] --> U["GET /api/users/:id"]',
  "  U --> S[[AuthService]]",
  "  S --> D[(User Store)]",
  // What a person said (the demo planner's boxes): never routes, even with a path in them.
  '  A["Answer: keep /legacy"] --> L',
  '  F["Feedback: drop /old-login"] --> L',
  "  L --> W[Write the request note]",
].join("\n");

describe("the plan's diagram checked by code", () => {
  it("a route with no page or handler and a component never defined fail validation, each named; the person's boxes are not routes", async () => {
    sandbox = await createTempSandbox({ "app/login/page.tsx": "export default function Page() { return null; }\n" });
    await sandbox.writeFile("lib/user-store.ts", "export const users = new Map();\n");
    const r = await validateWith(FLOW);
    expect(r.passed).toBe(false);
    const check = r.planChecks.find((c) => c.kind === "diagram")!;
    expect(check.passed).toBe(false);
    expect(check.detail).toContain('route "GET /api/users/:id" has no page or handler for /api/users/:id');
    expect(check.detail).toContain('component "AuthService" is never defined');
    // Present: the login page (a Next.js page) and the store (a file of that name); the Answer/Feedback boxes are not checked.
    expect(check.detail).not.toMatch(/Login page|User Store|legacy|old-login|request note/);
    expect(r.findings).toContainEqual({ severity: "major", criterion: "plan:diagram", evidence: check.detail });
    expect(r.report).toContain("**failed** — diagram:");
  });

  it("once the handler (a dynamic route segment) and the component exist, the diagram check passes", async () => {
    sandbox = await createTempSandbox({ "app/login/page.tsx": "export default function Page() { return null; }\n" });
    await sandbox.writeFile("lib/user-store.ts", "export const users = new Map();\n");
    await sandbox.writeFile("app/api/users/[id]/route.ts", "export async function GET() { return Response.json({}); }\n");
    await sandbox.writeFile("lib/auth.ts", "export class AuthService {}\n");
    const r = await validateWith(FLOW);
    expect(r.planChecks.find((c) => c.kind === "diagram")).toMatchObject({ passed: true, detail: expect.stringContaining("2 route(s), 2 component(s)") });
    expect(r.passed).toBe(true);
  });

  it("a handler found by its path in source code counts; an ER entity missing from the schema is named", async () => {
    sandbox = await createTempSandbox({ "db/schema.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY);\n" });
    await sandbox.writeFile("lib/server.ts", 'router.get("/api/health", handler);\n');
    const er = "erDiagram\n  USER ||--o{ ORDER_ITEM : places\n  USER {\n    int id PK\n  }";
    const r = await validateWith(er);
    const check = r.planChecks.find((c) => c.kind === "diagram")!;
    expect(check.passed).toBe(false);
    expect(check.detail).toContain('entity "ORDER_ITEM" is missing from the schema');
    expect(check.detail).not.toContain('"USER"');
    await sandbox.writeFile("db/schema.sql", "CREATE TABLE users (id INTEGER PRIMARY KEY);\nCREATE TABLE order_items (id INTEGER);\n");
    expect((await validateWith(er)).planChecks.find((c) => c.kind === "diagram")!.passed).toBe(true);
    const health = await validateWith('flowchart TD\n  H["GET /api/health"] --> M["GET /api/metrics"]');
    expect(health.planChecks.find((c) => c.kind === "diagram")!.detail).toBe('The plan\'s diagram is not met: route "GET /api/metrics" has no page or handler for /api/metrics.');
  });
});
