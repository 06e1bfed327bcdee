import { describe, expect, it, vi } from "vitest";
import * as validateRoute from "@/app/api/mermaid/validate/route";
import { ADMIN, call } from "../api/helpers";

/**
 * Issue #29, finding 2: a diagram within the limits whose parse still runs out of time is refused as too complex (a
 * 422, unprocessable:mermaid; the planner gets the same MermaidTooComplexError as an invalid diagram), not answered
 * after a minute. The limit is cut to 5 ms here, so an ordinary diagram of 500 tags (the most
 * the limits let through) runs out.
 */
vi.mock("@/lib/mermaid/limits", async (importOriginal) => {
  const original = await importOriginal<typeof import("@/lib/mermaid/limits")>();
  return { ...original, DIAGRAM_LIMITS: { ...original.DIAGRAM_LIMITS, parseMs: 5 } };
});

const SLOW = `flowchart TD\n  A["${"<b>".repeat(500)}x"] --> B`;

describe("a parse that runs out of time", () => {
  it("is a 422 for POST /api/mermaid/validate saying the diagram is too complex", async () => {
    const res = await call(validateRoute.POST, { method: "POST", headers: ADMIN, body: { source: SLOW } });
    expect(res.status).toBe(422);
    expect(res.json.error).toMatchObject({ code: "unprocessable:mermaid", message: "Diagram too complex: parsing took longer than 0.005 s. Simplify it or split it." });
  });
});
