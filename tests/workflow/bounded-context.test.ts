import { describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { estimateTokens } from "@/lib/ai/scripted-model";
import { getDb } from "@/lib/db";
import { implementerChunks } from "@/lib/db/schema";
import { expectRunConsistent, launch, newProject, waitForStatus, waitForWorkflow } from "./harness";
import { useScriptedWorkflow, type Reply } from "./model-server";

/**
 * Bounded context through the real workflow: a 200-turn implementer session with a model on an OpenAI-compatible
 * server (scripted) whose context window the run sets small. Each turn is its own durable step, the conversation is
 * stored whole outside the steps (implementer_chunks), and what each request carries is measured on the wire.
 */

const t = useScriptedWorkflow();
const SCRIPTED = { planner: "demo:default", implementer: "openai-compatible:scripted", validator: "demo:default" };
const TURNS = 200;
const WINDOW = 8_000;
const BUDGET = Math.floor(WINDOW * 0.7);

type Body = { messages?: Array<{ role: string; content?: unknown }>; tools?: unknown[] };

describe("bounded context", () => {
  it("a 200-turn session under a small context window is summarised; every request stays within the budget with the plan and todo list intact", { timeout: 600_000 }, async () => {
    const { project } = await newProject(t.h.user);
    const requests: Body[] = [];
    t.model.respond((raw): Reply => {
      const body = raw as Body;
      requests.push(body);
      const n = requests.length;
      const note = "docs/requests/many-turns.md";
      if (n === 1) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "in_progress" } }] };
      // Each turn rewrites the note (progress, so no loop), and its result and input grow the conversation.
      if (n < TURNS - 1) return { toolCalls: [{ name: "write_file", arguments: { path: note, content: `# Many turns\n\nrevision ${n}\n${"lorem ipsum ".repeat(60)}\n` } }] };
      if (n === TURNS - 1) return { toolCalls: [{ name: "update_todo", arguments: { id: "T1", status: "done" } }] };
      return { text: "Rewrote the note many times." };
    });
    const run = await launch(t.h.user, project.id, "Many turns", {
      trustMode: { planning: "auto", fixes: "manual" },
      modelRouting: SCRIPTED,
      limits: { maxIterations: TURNS },
      context: { window: WINDOW, keepToolResults: 4 },
    });
    expect((await waitForStatus(run.id, ["completed", "failed", "awaiting_fix_decision", "awaiting_approval"], 540_000)).status).toBe("completed");
    await waitForWorkflow(run.id);
    const events = await expectRunConsistent(run.id);

    expect(requests).toHaveLength(TURNS);
    const firstUser = (body: Body) => String(body.messages?.find((m) => m.role === "user")?.content ?? "");
    const plan = firstUser(requests[0]!);
    expect(plan).toContain("<plan>");
    const summarised = requests.findIndex((b) => firstUser(b).includes("<conversation-summary>"));
    expect(summarised).toBeGreaterThan(0);
    for (const [i, body] of requests.entries()) {
      // Measured on the wire: the messages (system prompt included) and the tool definitions of the request.
      const tokens = estimateTokens(JSON.stringify(body.messages ?? [])) + estimateTokens(JSON.stringify(body.tools ?? []));
      expect(tokens, `request ${i + 1}`).toBeLessThanOrEqual(BUDGET);
      if (i >= summarised) {
        // The plan verbatim, then the summary with the todo list as it stands.
        expect(firstUser(body).startsWith(plan), `request ${i + 1}`).toBe(true);
        expect(firstUser(body), `request ${i + 1}`).toMatch(/Todo list now:\n- T1 "[^"]+": (in_progress|done)/);
      }
    }
    expect(firstUser(requests[TURNS - 1]!)).toMatch(/- T1 "[^"]+": done/);
    // The conversation itself was never shortened: every tool result is stored whole outside the prompt and the steps.
    const db = await getDb();
    const chunks = await db.select({ messages: implementerChunks.messages }).from(implementerChunks).where(eq(implementerChunks.workflowRunId, run.id));
    const stored = chunks.flatMap((c) => c.messages as Array<{ role: string; content: unknown }>);
    expect(stored.filter((m) => m.role === "tool").length).toBeGreaterThanOrEqual(TURNS - 1);
    expect(stored.some((m) => JSON.stringify(m.content).includes("revision 2\\n"))).toBe(true);
    // Recorded once, with the budget it kept to.
    expect(events.filter((e) => e.type === "CONTEXT_SUMMARISED").map((e) => e.payload)).toMatchObject([{ budget: BUDGET, keptToolResults: 4 }]);
  });
});
