import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string };
}

const NOTE = ["Write a note", "", "```file:notes/a.txt", "a", "```"].join("\n");

test("plan card: ask back shows the planner's answer with a revised plan; the editor edits tasks and acceptance commands", async ({ page, request }) => {
  const project = await createProject(request, "plan gate ask back");
  const run = await startRun(request, project.id, NOTE, { trustMode: { planning: "manual" }, limits: { maxReplans: 0 } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await card.getByTestId("ask-back").click();
  // An empty question is caught before it is sent.
  await card.getByTestId("confirm-ask-back").click();
  await expect(card.getByText("Write the question for the planner.")).toBeVisible();
  await card.getByLabel("Your question to the planner").fill("Why a separate request note?");
  await card.getByTestId("confirm-ask-back").click();

  // The new plan version comes with the planner's answer on the card; nothing was rejected (maxReplans 0 still runs).
  const answer = page.getByTestId("planner-answer");
  await expect(answer).toBeVisible({ timeout: 60_000 });
  await expect(answer).toContainText("You asked: Why a separate request note?");
  await expect(answer).toContainText('you asked "Why a separate request note?"');
  await expect(page.getByTestId("approval-card")).toContainText("(v2)");

  // Edit the tasks' scope and an acceptance command, then approve the edited plan.
  const edited = page.getByTestId("approval-card");
  await edited.getByTestId("edit-plan").click();
  await expect(edited.getByTestId("plan-fields-editor")).toBeVisible();
  await expect(edited.getByTestId("edit-task")).toHaveCount(2);
  await edited.getByLabel("Task T1 title").fill("Write notes/a.txt (edited)");
  await edited.getByLabel("Criterion 1 command").fill("grep -qx a notes/a.txt");
  // A dependency on a task that does not exist is refused by the server, naming the field.
  await edited.getByLabel("Task T1 depends on").fill("T9");
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "valid");
  await edited.getByTestId("approve-edited").click();
  await expect(edited.getByText(/editedPlan\.tasks\.0\.dependsOn: "T9" is not a task of this plan/)).toBeVisible();
  await edited.getByLabel("Task T1 depends on").fill("");
  await edited.getByTestId("approve-edited").click();

  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
  const events = (await (await request.get(`/api/runs/${run.id}/events`, { headers: authHeaders })).json()).events as Array<{ type: string; payload: Record<string, unknown> }>;
  expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["PLAN_QUESTION_ASKED", "PLAN_QUESTION_ANSWERED", "PLAN_EDITED"]));
  const plan = events.find((e) => e.type === "PLAN_EDITED")!.payload.plan as { tasks: Array<{ title: string }>; acceptanceCriteria: Array<{ command?: string }> };
  expect(plan.tasks[0]!.title).toBe("Write notes/a.txt (edited)");
  expect(plan.acceptanceCriteria[0]!.command).toBe("grep -qx a notes/a.txt");
});

test("paused card: a plan paused as invalid Mermaid is fixed by hand in the editor and the run goes on", async ({ page, request }) => {
  const project = await createProject(request, "plan gate invalid mermaid");
  const run = await startRun(request, project.id, `${NOTE}\n[invalid-mermaid: 4]`, { trustMode: { planning: "auto" } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  const paused = page.getByTestId("paused-card");
  await expect(paused).toBeVisible({ timeout: 60_000 });
  await paused.getByTestId("fix-plan").click();
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "invalid");
  await expect(paused.getByTestId("resume-with-plan")).toBeDisabled();
  await page.getByLabel("Mermaid source").fill("flowchart TD\n  R[Write a note] --> T1[Write notes/a.txt]");
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "valid");
  await paused.getByTestId("resume-with-plan").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
});

test("escalated question: the gate asks in the question's typed form and the chosen option reaches the run", async ({ page, request }) => {
  const project = await createProject(request, "plan gate escalation");
  const run = await startRun(request, project.id, "Greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" }, maxClarifications: 0 });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  const gate = page.getByTestId("gate-card");
  await expect(gate).toBeVisible({ timeout: 60_000 });
  await expect(gate).toHaveAttribute("data-kind", "escalation");
  await expect(gate).toHaveAttribute("data-response-type", "single_choice");
  await gate.getByTestId("gate-approve").click();
  await expect(gate.getByText("Choose one option.")).toBeVisible();
  await gate.getByLabel("French").check();
  await gate.getByTestId("gate-approve").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 90_000 });
  const events = (await (await request.get(`/api/runs/${run.id}/events`, { headers: authHeaders })).json()).events as Array<{ type: string }>;
  expect(events.map((e) => e.type)).toContain("APPROVAL_GRANTED");
});
