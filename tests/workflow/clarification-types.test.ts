import { describe, expect, it } from "vitest";
import { and, eq } from "drizzle-orm";
import { getDb } from "@/lib/db";
import { clarificationRequests } from "@/lib/db/schema";
import { AppError } from "@/lib/errors";
import { answerClarification } from "@/lib/runs/gates/decide-clarification";
import { clarificationAnswered } from "@/inngest/events";
import { expectRunConsistent, git, launch, newProject, until, useWorkflowHarness, waitForStatus, waitForWorkflow } from "./harness";
import { announceDecision } from "@/inngest/announce";
import { decisionKey } from "@/lib/runs/gates/acks";

const h = useWorkflowHarness();

/** The run's open question, as stored (polled: the run's status flips as the question is written). */
async function pendingQuestion(runId: string) {
  const db = await getDb();
  return until(
    async () =>
      (
        await db
          .select()
          .from(clarificationRequests)
          .where(and(eq(clarificationRequests.workflowRunId, runId), eq(clarificationRequests.status, "pending")))
      )[0],
    `a pending question on ${runId}`,
  );
}

/** The note the demo implementer wrote, read from the run's branch. */
function noteOnBranch(repo: string, branch: string): string {
  const notes = git(repo, "ls-tree", "-r", "--name-only", branch)
    .split("\n")
    .filter((f) => f.startsWith("docs/requests/"));
  expect(notes).toHaveLength(1);
  return git(repo, "show", `${branch}:${notes[0]}`);
}

describe("clarifications of every response type, end to end through the workflow (demo model)", () => {
  it("[ask-multi:] asks a multiple choice; the answer [a, c] resumes the run and both land in the note", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Pick letters [ask-multi: Which letters? | a | b | c]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    expect(question).toMatchObject({ stage: "implementation", question: "Which letters?", responseType: "multiple_choice", options: ["a", "b", "c"] });

    // A single string is not an answer to a multiple choice.
    const refused = await answerClarification({ user: h.user, clarificationId: question.id, response: "a" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    await answerClarification({ user: h.user, clarificationId: question.id, response: ["a", "c"] });
    await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question.id }), key: decisionKey.clarification(question.id) });

    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    expect(noteOnBranch(repo, run.branch!)).toContain("- **Which letters?** — a, c\n");
    const events = await expectRunConsistent(run.id);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["CLARIFICATION_REQUESTED", "CLARIFICATION_ANSWERED", "RUN_COMPLETED"]));
  });

  it("[ask-file:] asks for a file; the uploaded file's name and first lines land in the note", async () => {
    const { project, repo } = await newProject(h.user);
    const run = await launch(h.user, project.id, "Follow the spec [ask-file: Upload the spec]", { trustMode: { planning: "auto" } });
    await waitForStatus(run.id, ["awaiting_clarification"]);
    const question = await pendingQuestion(run.id);
    expect(question).toMatchObject({ stage: "implementation", question: "Upload the spec", responseType: "file", options: null });

    const spec = "# Spec\nThe API returns JSON.\nErrors carry a code.\n";
    await answerClarification({
      user: h.user,
      clarificationId: question.id,
      response: { fileName: "spec.md", contentBase64: Buffer.from(spec).toString("base64"), contentType: "text/markdown" },
    });
    await announceDecision({ event: clarificationAnswered.create({ runId: run.id, clarificationId: question.id }), key: decisionKey.clarification(question.id) });

    const done = await waitForStatus(run.id, ["completed", "failed"]);
    expect(done.status).toBe("completed");
    expect(await waitForWorkflow(run.id)).toBe("completed");
    const note = noteOnBranch(repo, run.branch!);
    expect(note).toContain("- **Upload the spec** — file `spec.md`:\n\n  > # Spec\n  > The API returns JSON.\n  > Errors carry a code.\n");
    await expectRunConsistent(run.id);
  });
});
