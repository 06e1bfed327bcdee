import { expect, test } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

test("manual planning: plan renders as SVG, edit, approve, answer a clarification, run completes with diff and report", async ({ page, request }) => {
  const project = await createProject(request, "dash flow");
  const res = await request.post("/api/runs", {
    headers: authHeaders,
    data: {
      projectId: project.id,
      request: "Flow: write a greeting note [ask: Which greeting? | hello | hi]",
      config: { trustMode: { planning: "manual" } },
    },
  });
  expect(res.status()).toBe(201);
  const runId = (await res.json()).run.id as string;
  await signIn(page);
  await page.goto(`/runs/${runId}`);

  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await expect(card.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/plan-card.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  await expect(page.locator("html")).toHaveClass(/dark/);
  await expect(card.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/plan-card-dark.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: "light" });

  await card.getByTestId("edit-plan").click();
  const editor = page.getByLabel("Mermaid source");
  await editor.fill("flowchart TD\n  A[Start] --> B[[[");
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "invalid");
  await expect(card.getByTestId("approve-edited")).toBeDisabled();
  await editor.fill("flowchart TD\n  A[Read request] --> B[Write note]\n  B --> C[Done]");
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "valid");
  await page.screenshot({ path: `${SHOTS}/plan-editor.png`, fullPage: true });
  await card.getByTestId("approve-edited").click();

  const form = page.getByTestId("clarification-form");
  await expect(form).toBeVisible({ timeout: 60_000 });
  await expect(form).toContainText("Which greeting?");
  await page.screenshot({ path: `${SHOTS}/clarification-form.png`, fullPage: true });
  await form.getByLabel("hi", { exact: true }).check();
  await form.getByTestId("answer").click();

  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await page.getByRole("tab", { name: /Plan/ }).click();
  await expect(page.getByTestId("plan-version-count")).toHaveText("2 versions");
  await page.getByRole("tab", { name: "Validation" }).click();
  await expect(page.getByTestId("validation-result").first()).toHaveAttribute("data-passed", "true");
  await expect(page.getByTestId("validation-result").first()).toContainText("Acceptance criteria");
  await page.getByRole("tab", { name: "Diff" }).click();
  await expect(page.getByTestId("branch-diff")).toContainText("docs/requests/");
  await page.screenshot({ path: `${SHOTS}/finished-run.png`, fullPage: true });
});

async function startRun(request: import("@playwright/test").APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run.id as string;
}

test("reject with feedback: a new plan version appears, marked with the feedback, with a comparison to the previous one", async ({ page, request }) => {
  const project = await createProject(request, "dash reject");
  const runId = await startRun(request, project.id, "Reject flow: write a note", { trustMode: { planning: "manual" } });
  await signIn(page);
  await page.goto(`/runs/${runId}`);
  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await card.getByTestId("reject").click();
  await card.getByTestId("confirm-reject").click();
  await expect(card.getByText("Say what to change, so the planner can act on it.")).toBeVisible();
  await card.getByLabel("What should change?").fill("Also mention the date in the note.");
  await card.getByTestId("confirm-reject").click();

  await expect(page.getByTestId("timeline-item").filter({ hasText: "Rejected" })).toBeVisible();
  await expect(page.getByTestId("plan-version-count")).toHaveText("2 versions", { timeout: 60_000 });
  await expect(page.getByText("Re-planned after feedback")).toBeVisible();
  await expect(page.getByRole("heading", { name: "Changes" })).toBeVisible();
  await expect(page.getByRole("combobox", { name: "Compare v2 with" })).toContainText("v1");
  await expect(page.getByTestId("approval-card")).toBeVisible();
});

test("validation fails with manual fixes: the fix decision card shows the report, retry, and the run completes", async ({ page, request }) => {
  const project = await createProject(request, "dash fix");
  const runId = await startRun(request, project.id, "Fix flow: write a note [fail-validation: 1]", {
    trustMode: { planning: "auto", fixes: "manual" },
  });
  await signIn(page);
  await page.goto(`/runs/${runId}`);
  const card = page.getByTestId("fix-decision-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await expect(card.getByTestId("validation-report")).not.toBeEmpty();
  await page.screenshot({ path: `${SHOTS}/fix-decision.png`, fullPage: true });
  await card.getByTestId("fix-retry").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await page.getByRole("tab", { name: "Validation" }).click();
  await expect(page.getByTestId("validation-result")).toHaveCount(2);
  await expect(page.getByTestId("validation-result").first()).toHaveAttribute("data-passed", "true");
});

test("cancel a run that waits for approval", async ({ page, request }) => {
  const project = await createProject(request, "dash cancel");
  const runId = await startRun(request, project.id, "Cancel flow: write a note", { trustMode: { planning: "manual" } });
  await signIn(page);
  await page.goto(`/runs/${runId}`);
  await expect(page.getByTestId("approval-card")).toBeVisible({ timeout: 60_000 });
  await page.getByTestId("cancel-run").click();
  await page.getByTestId("confirm-cancel").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "cancelled");
  await expect(page.getByTestId("approval-card")).toHaveCount(0);
  await expect(page.getByTestId("timeline-item").filter({ hasText: "Run cancelled" })).toBeVisible();
});

test("two runs started together both progress in the list without a reload", async ({ page, request }) => {
  const project = await createProject(request, "dash parallel");
  await signIn(page);
  await page.goto(`/?project=${project.id}`);
  await expect(page.getByTestId("runs-empty")).toBeVisible();
  await Promise.all([
    startRun(request, project.id, "Parallel one: write a note", { trustMode: { planning: "auto" } }),
    startRun(request, project.id, "Parallel two: write a note", { trustMode: { planning: "auto" } }),
  ]);
  const rows = page.getByTestId("run-row");
  await expect(rows).toHaveCount(2);
  for (const name of ["Parallel one", "Parallel two"]) {
    await expect(rows.filter({ hasText: name }).getByTestId("run-status")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  }
});

test("explore 3 approaches from the New run form: the comparison view shows all three", async ({ page, request }) => {
  const project = await createProject(request, "dash explore");
  await signIn(page);
  await page.goto(`/runs/new?project=${project.id}`);
  await page.getByLabel("Request", { exact: true }).fill("Explore: write a note");
  await page.getByRole("radiogroup", { name: "Planning trust mode" }).getByLabel("auto").check();
  await page.getByLabel("Number of approaches").fill("3");
  await page.getByLabel("Approach 2 hint (optional)").fill("shorter");
  await page.getByTestId("start-run").click();
  await expect(page).toHaveURL(/\/compare\?group=grp_[a-z0-9]+$/);
  const columns = page.getByTestId("compare-column");
  await expect(columns).toHaveCount(3);
  await expect(columns.nth(1)).toContainText("Approach 2: shorter");
  for (let i = 0; i < 3; i++) {
    await expect(columns.nth(i).getByTestId("run-status")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
    await expect(columns.nth(i).getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  }
  await page.screenshot({ path: `${SHOTS}/compare-actions.png`, fullPage: true });
});

test("when the event stream cannot be opened, polling takes over and the page still follows the run to the end", async ({ page, request }) => {
  const project = await createProject(request, "dash polling");
  const runId = await startRun(request, project.id, "Polling flow: write a note", { trustMode: { planning: "manual" } });
  await signIn(page);
  await page.route("**/api/runs/*/stream**", (route) => route.abort());
  await page.goto(`/runs/${runId}`);
  await expect(page.getByTestId("timeline")).toHaveAttribute("data-connection", "polling");
  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await card.getByTestId("approve").click();
  await expect(page.getByTestId("timeline-item").filter({ hasText: "Run completed" })).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed");
});
