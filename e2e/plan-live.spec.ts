import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

/** Issue 18: the estimate on the plan card, the plan diagram coloured live by task status, the visual plan diff, the budget card. */

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string };
}

const REQUEST = ["Write a note", "", "```file:notes/a.txt", "a", "```", "", "[ask: Which tone? | plain | friendly]"].join("\n");

/** The demo's plan v1 with R removed, T2's label changed, and a node C (and its edge) added. */
const EDITED = ['flowchart TD', '  T1["Write notes/a.txt"]', '  T2["Write and review the request note"]', "  T1 --> T2", "  T2 --> C[Checked by a person]"].join("\n");

test("the estimate on the card, the plan diagram coloured as tasks go from pending to done, and two plan versions compared on the diagram", async ({ page, request }) => {
  const project = await createProject(request, "plan live diagram");
  const run = await startRun(request, project.id, REQUEST, { trustMode: { planning: "manual" } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  // The plan card carries the estimate: price-table based (a new project has no history), a range per stage.
  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  const estimate = card.getByTestId("estimate");
  await expect(estimate).toHaveAttribute("data-basis", "price-table");
  await expect(estimate.getByTestId("estimate-implementation")).toContainText(/\d.* – .*\d/);
  await expect(estimate.getByTestId("estimate-total")).toBeVisible();
  await expect(card.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/estimate-on-plan-card.png`, fullPage: true });

  // Approve an edited diagram: plan v2.
  await card.getByTestId("edit-plan").click();
  await page.getByLabel("Mermaid source").fill(EDITED);
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "valid");
  await card.getByTestId("approve-edited").click();

  // The implementer asks before its first task: every task is pending on the diagram, in the rendered SVG too.
  const form = page.getByTestId("clarification-form");
  await expect(form).toBeVisible({ timeout: 60_000 });
  await page.getByRole("tab", { name: /Plan/ }).click();
  const live = page.getByTestId("status-diagram");
  await expect(live).toHaveAttribute("data-statuses", "T1:pending T2:pending");
  await expect(live.locator("svg g.node.ghPending")).toHaveCount(2);
  await expect(live.locator("svg g.node.ghDone")).toHaveCount(0);
  await expect(page.getByTestId("status-legend")).toContainText("pending (2)");
  await page.screenshot({ path: `${SHOTS}/plan-diagram-pending.png`, fullPage: true });

  // Answered, the run goes on; the diagram follows the stream until both tasks are done.
  await form.getByLabel("plain", { exact: true }).check();
  await form.getByTestId("answer").click();
  await expect(live).toHaveAttribute("data-statuses", "T1:done T2:done", { timeout: 60_000 });
  await expect(live.locator("svg g.node.ghDone")).toHaveCount(2);
  await expect(live.locator("svg g.node.ghPending")).toHaveCount(0);
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await page.screenshot({ path: `${SHOTS}/plan-diagram-done.png`, fullPage: true });

  // The two versions on one diagram: R removed, C added, T2 changed, with a legend.
  const diff = page.getByTestId("plan-diagram-diff");
  await expect(diff).toHaveAttribute("data-added", "C");
  await expect(diff).toHaveAttribute("data-removed", "R");
  await expect(diff).toHaveAttribute("data-changed", "T2");
  await expect(diff.locator("svg g.node.ghAdded")).toHaveCount(1);
  await expect(diff.locator("svg g.node.ghRemoved")).toHaveCount(1);
  await expect(diff.locator("svg g.node.ghChanged")).toHaveCount(1);
  await expect(diff.getByTestId("plan-diagram-diff-legend")).toContainText("added in v2");
  await expect(page.getByTestId("plan-diff")).toBeVisible();
  await diff.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/plan-diagram-diff.png`, fullPage: true });

  // After the run: the estimate beside the actuals, every stage reached.
  const comparison = page.getByTestId("estimate-comparison").first();
  await expect(comparison).toBeVisible();
  for (const stage of ["implementation", "validation", "delivery"]) {
    await expect(comparison.getByTestId(`estimate-row-${stage}`).locator("[data-verdict]")).toHaveCount(3);
  }
  await comparison.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/estimate-and-actual.png`, fullPage: true });
});

test("budget card: an implementation budget crossed opens the card; raised, the run completes", async ({ page, request }) => {
  const project = await createProject(request, "budget card");
  const run = await startRun(request, project.id, ["Write a note", "", "```file:notes/b.txt", "b", "```"].join("\n"), {
    trustMode: { planning: "auto" },
    budgets: { implementation: { tokens: 1 } },
  });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  const card = page.getByTestId("budget-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await expect(card).toHaveAttribute("data-metric", "tokens");
  await expect(card).toContainText("The implementation budget is spent");
  await page.screenshot({ path: `${SHOTS}/budget-card.png`, fullPage: true });
  // A bad amount is refused in the card, before anything is sent.
  await card.getByTestId("budget-amount").fill("-3");
  await card.getByTestId("budget-raise").click();
  await expect(card).toContainText("above 0");
  await card.getByTestId("budget-amount").fill("10000000");
  await card.getByTestId("budget-raise").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const events = (await (await request.get(`/api/runs/${run.id}/events`, { headers: authHeaders })).json()).events as Array<{ type: string; payload: Record<string, unknown> }>;
  expect(events.filter((e) => e.type === "APPROVAL_GRANTED").map((e) => e.payload.notes)).toEqual(["budget raised"]);
});

test("budget card in minutes: a stage's working time crossed opens the card in minutes; raised by minutes, the run completes", async ({ page, request }) => {
  const project = await createProject(request, "budget card minutes");
  // 0.0001 minutes (6 ms) of implementation: the first turn (a worktree, a sandbox, a model turn) always takes longer.
  const run = await startRun(request, project.id, ["Write a note", "", "```file:notes/c.txt", "c", "```"].join("\n"), {
    trustMode: { planning: "auto" },
    budgets: { implementation: { minutes: 0.0001 } },
  });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  const card = page.getByTestId("budget-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await expect(card).toHaveAttribute("data-metric", "minutes");
  await expect(card).toContainText(/The implementation stage worked [\d.]+ (ms|seconds?), over its budget of 6 ms\./);
  await expect(card.getByText("Raise by (minutes)")).toBeVisible();
  await card.getByTestId("budget-amount").fill("30");
  await card.getByTestId("budget-raise").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const gates = (await (await request.get(`/api/runs/${run.id}`, { headers: authHeaders })).json()).gates as Array<{ kind: string; notes: string | null }>;
  expect(gates.filter((g) => g.kind === "budget").map((g) => g.notes)).toEqual(["raised by 30 minutes"]);
});
