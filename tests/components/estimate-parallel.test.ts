import { describe, expect, it } from "vitest";
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { EstimateSummary } from "@/components/run/estimate-table";
import { estimateRun } from "@/lib/runs/estimate-model";

/*
 * Issue #31, item 6: "the cost and time estimate on the plan card accounts for parallel work". The card's estimate
 * (components/run/estimate-table.tsx EstimateSummary, on the plan gate's approval card) rendered from the estimate the
 * plan gate makes, for three independent tasks at limits.maxConcurrentTasks 3 and at 1.
 */

const plan = {
  tasks: [
    { id: "T1", title: "a", description: "", dependsOn: [], files: ["a"], checks: [] },
    { id: "T2", title: "b", description: "", dependsOn: [], files: ["b"], checks: [] },
    { id: "T3", title: "c", description: "", dependsOn: [], files: ["c"], checks: [] },
  ],
};
const base = { plan, planVersion: 1, planning: { tokens: 0, costUsd: 0, wallMs: 0 }, models: { implementation: "demo:default", validation: "demo:default" }, history: [] };

/** The card's text, tags dropped. */
const text = (html: string) => html.replace(/<[^>]+>/g, " ").replaceAll("&#x27;", "'").replace(/\s+/g, " ");

describe("the estimate on the plan card", () => {
  it("says the tasks run side by side, in how many rounds, and counts implementation's time by them; one at a time it says nothing of it", () => {
    const three = estimateRun({ ...base, maxConcurrentTasks: 3 });
    const shown = text(renderToStaticMarkup(createElement(EstimateSummary, { estimate: three })));
    expect(shown).toContain("Tasks run side by side (up to 3 at once, in 1 round): implementation's time counts size");
    expect(shown).toContain("tokens and cost count every task");
    const one = estimateRun({ ...base, maxConcurrentTasks: 1 });
    expect(text(renderToStaticMarkup(createElement(EstimateSummary, { estimate: one })))).not.toContain("side by side");
    // The implementation row's time is shorter side by side; its tokens are the same.
    expect(three.stages.implementation.wallMs.high).toBeLessThan(one.stages.implementation.wallMs.high);
    expect(three.stages.implementation.tokens).toEqual(one.stages.implementation.tokens);
  });
});
