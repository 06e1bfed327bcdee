import { describe, expect, it } from "vitest";
import { resolveRunConfig, runConfigSchema, type RunConfig } from "@/lib/workflow";
import { deadlineFor, defaultResponse } from "./deadlines";

const config = (deadlines: unknown) => runConfigSchema.parse({ deadlines }) as RunConfig;
const issues = (deadlines: unknown) => {
  const parsed = runConfigSchema.safeParse({ deadlines });
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
};

describe("config.deadlines", () => {
  it("is optional: no deadline unless one is configured", () => {
    expect(runConfigSchema.parse({}).deadlines).toBeUndefined();
    expect(deadlineFor({ config: runConfigSchema.parse({}) as RunConfig, subject: "plan", now: 0 })).toBeNull();
    expect(deadlineFor({ config: config({ fix: { after: "1h", onTimeout: { action: "cancel" } } }), subject: "plan", now: 0 })).toBeNull();
  });

  it("refuses what cannot work, saying what to write instead", () => {
    expect(issues({ plan: { after: "soon", onTimeout: { action: "cancel" } } })).toEqual([
      'deadlines.plan.after: must be a duration such as "30s", "10m", "2h" or "3d"',
    ]);
    expect(issues({ plan: { after: "1h", remind: ["10 minutes"], onTimeout: { action: "cancel" } } })[0]).toMatch(/^deadlines\.plan\.remind\.0: must be a reminder point/);
    expect(issues({ budget: { after: "1h", onTimeout: { action: "default", answer: "raise" } } })).toEqual([
      'deadlines.budget.onTimeout: a budget gate has no default decision; use "escalate" or "cancel"',
    ]);
    expect(issues({ fix: { after: "1h", onTimeout: { action: "default", answer: "approve" } } })).toEqual([
      "deadlines.fix.onTimeout.answer: must be one of: retry, accept, cancel",
    ]);
    expect(issues({ plan: { after: "1h", onTimeout: { action: "escalate", to: { team: "x" } } } })[0]).toMatch(/^deadlines\.plan\.onTimeout\.to: must be \{role/);
    expect(issues({ gate: { after: "1h", onTimeout: { action: "cancel" } } })[0]).toMatch(/gate/);
    // A question's default is free text: any answer is accepted.
    expect(issues({ clarification: { after: "1h", onTimeout: { action: "default", answer: "French" } } })).toEqual([]);
  });

  it("fixes the times when the decision opens: reminders after it opened or before the deadline, in order, inside the window", () => {
    const now = 1_000_000;
    const info = deadlineFor({
      config: config({ plan: { after: "2h", remind: ["30m before", "1h", "3h", "1h before", "2h before"], onTimeout: { action: "escalate", to: { role: "owner" } } } }),
      subject: "plan",
      now,
    });
    // "1h" and "1h before" are the same point (once); "3h" is past the deadline and "2h before" is the opening: dropped.
    expect(info).toEqual({ at: now + 7_200_000, reminders: [now + 3_600_000, now + 5_400_000], onTimeout: { action: "escalate", to: { role: "owner" } } });
  });
});

describe("deadlines in a project's defaults and a run's own config", () => {
  const routing = { planner: "demo:default", implementer: "demo:default", validator: "demo:default" };
  it("merge per key, and a run's onTimeout replaces the project's whole (never a mix of two actions)", () => {
    const resolved = resolveRunConfig({
      projectDefaults: { deadlines: { plan: { after: "1d", remind: ["1h before"], onTimeout: { action: "escalate", to: { role: "owner" } } } } },
      input: { deadlines: { plan: { onTimeout: { action: "default", answer: "reject" } } } },
      defaultRouting: routing,
    });
    expect(resolved.success).toBe(true);
    expect(resolved.data!.deadlines!.plan).toEqual({ after: "1d", remind: ["1h before"], onTimeout: { action: "default", answer: "reject" } });
  });
});


describe("a question's declared default, fitted to the question", () => {
  const single = { responseType: "single_choice", options: ["English", "French"] };
  const multiple = { responseType: "multiple_choice", options: ["api", "cli", "ui"] };
  it("names an option (trimmed, any case): that option is the typed answer", () => {
    expect(defaultResponse(single, "  french ")).toEqual({ response: "French", outsideOptions: false });
    expect(defaultResponse(multiple, "UI, api, ui")).toEqual({ response: ["ui", "api"], outsideOptions: false });
  });
  it("names no option: given as free text and marked outside the options", () => {
    expect(defaultResponse(single, "German")).toEqual({ response: "German", outsideOptions: true });
    expect(defaultResponse(multiple, "api, desktop")).toEqual({ response: "api, desktop", outsideOptions: true });
    expect(defaultResponse(multiple, " , ")).toEqual({ response: " , ", outsideOptions: true });
  });
  it("free text, a file, or a choice without options: the default as written", () => {
    expect(defaultResponse({ responseType: "text", options: null }, "German")).toEqual({ response: "German", outsideOptions: false });
    expect(defaultResponse({ responseType: "file", options: [] }, "none")).toEqual({ response: "none", outsideOptions: false });
    expect(defaultResponse({ responseType: "single_choice", options: [] }, "x")).toEqual({ response: "x", outsideOptions: false });
  });
});
