import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { implementerChunks } from "@/lib/db/schema";
import { autoPlanning, launch, newProject, tasksRequest, useWorkflowHarness } from "./harness";
import { expectCompleted } from "./parallel-fixtures";

/**
 * Issue #31, item 2: each parallel task has its own implementer conversation — "the request, the plan, its task, what
 * its dependencies changed". Read from the conversations the run stored (implementer_chunks: every session's messages,
 * never shortened). Through the real workflow on the embedded executor, in strict cloud mode.
 */

const h = useWorkflowHarness();

const TASKS = [
  "# Sessions",
  "- [ ] T1: Write alpha",
  "  Files: alpha.txt",
  "- [ ] T2: Write beta",
  "  Files: beta.txt",
  "- [ ] T3: Write the summary (after T1, T2)",
  "  Files: summary.txt",
  "",
].join("\n");

/** The text of a stored message (string content, or its text parts). */
function textOf(message: unknown): string {
  const content = (message as { content?: unknown }).content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("\n");
  return "";
}

describe("a parallel task's own implementer session", () => {
  it("opens with the request, the plan, its one task, and — for a task with dependencies — what their merges changed", { timeout: 180_000 }, async () => {
    const { project } = await newProject(h.user);
    const run = await launch(h.user, project.id, tasksRequest("Own sessions", TASKS), autoPlanning);
    await expectCompleted(run.id, 150_000);

    const db = await getDb();
    const chunks = await db.select().from(implementerChunks).where(eq(implementerChunks.workflowRunId, run.id));
    const texts = chunks.flatMap((c) => (c.messages as unknown[]).map(textOf));
    // Each session's opening message, found by the task it says is its only one.
    const opening = (id: string) => {
      const found = texts.filter((t) => t.includes(`You implement only task ${id} of the plan`));
      expect(found, `the opening message of ${id}'s session`).toHaveLength(1);
      return found[0]!;
    };
    for (const id of ["T1", "T2", "T3"]) {
      const text = opening(id);
      // The request and the whole plan are there…
      expect(text).toContain("Own sessions");
      for (const title of ["Write alpha", "Write beta", "Write the summary"]) expect(text).toContain(title);
    }
    // …T1 and T2 depend on nothing: no dependency section.
    expect(opening("T1")).not.toContain("<dependencies-changed>");
    expect(opening("T2")).not.toContain("<dependencies-changed>");
    // T3 is told what T1's and T2's merges changed (their files), already merged into its starting point.
    const t3 = opening("T3");
    expect(t3).toContain("<dependencies-changed>");
    expect(t3).toMatch(/Task T1 \(merged\):[^]*alpha\.txt/);
    expect(t3).toMatch(/Task T2 \(merged\):[^]*beta\.txt/);
  });
});
