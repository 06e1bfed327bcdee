import { expect, test, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

/**
 * Issue 31: a run whose tasks are independent (a pasted tasks.md, limits.maxConcurrentTasks 3) shows its parallel work —
 * the plan card's estimate counting the tasks side by side, a lane per task on the timeline, their bars overlapping,
 * and each task's cost on the plan and on the Model calls tab; and the New run form sets limits.maxConcurrentTasks.
 */

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string };
}

/** Three tasks, none depending on another: one round of three sessions (the demo writes each task's `Files:`). */
const REQUEST = [
  "Three independent notes",
  "",
  "```tasks.md",
  "# Parallel",
  "- [ ] T1: Write alpha",
  "  Files: alpha.txt",
  "- [ ] T2: Write beta",
  "  Files: beta.txt",
  "- [ ] T3: Write gamma",
  "  Files: gamma.txt",
  "```",
].join("\n");

const TASKS = ["T1", "T2", "T3"];

/** A bar's horizontal extent, in pixels. */
async function extent(bar: Locator): Promise<{ from: number; to: number }> {
  const box = await bar.boundingBox();
  expect(box).not.toBeNull();
  return { from: box!.x, to: box!.x + box!.width };
}

test("parallel tasks: the plan approved, a lane per task on the timeline with overlapping bars, and each task's cost", async ({ page, request }) => {
  const project = await createProject(request, "parallel tasks");
  const run = await startRun(request, project.id, REQUEST, { trustMode: { planning: "manual", fixes: "manual" }, limits: { maxConcurrentTasks: 3 } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  // The estimate on the plan card counts the three tasks side by side: one round, implementation's time a third.
  await expect(card.getByTestId("estimate")).toContainText("Tasks run side by side (up to 3 at once, in 1 round)");
  await card.getByTestId("approve").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 120_000 });

  // The timeline: one lane per task, each with one bar (one run), and the three bars overlap in time.
  const lanes = page.getByTestId("task-lanes");
  await expect(lanes).toBeVisible();
  await expect(lanes).toHaveAttribute("data-overlap", "true");
  await expect(lanes).toContainText("overlapping bars ran at the same time");
  await expect(lanes.locator('[data-testid^="task-lane-"]')).toHaveCount(TASKS.length);
  const bars = [];
  for (const id of TASKS) {
    const lane = lanes.getByTestId(`task-lane-${id}`);
    await expect(lane).toHaveCount(1);
    await expect(lane.locator("span[title]")).toHaveCount(1);
    await expect(lane.locator("span[title]")).toHaveAttribute("title", `${id} run 1: merged`);
    bars.push(await extent(lane.locator("span[title]")));
  }
  // Drawn so: every pair of bars shares a stretch of the time axis.
  for (const a of bars) for (const b of bars) expect(Math.min(a.to, b.to)).toBeGreaterThan(Math.max(a.from, b.from));
  await lanes.screenshot({ path: `${SHOTS}/parallel-task-lanes.png` });

  // The plan: each task done, on its own merged branch, with its own cost.
  await page.getByRole("tab", { name: /Plan/ }).click();
  for (const id of TASKS) {
    await expect(page.getByTestId(`task-status-${id}`)).toHaveText("done");
    await expect(page.getByTestId(`task-branch-${id}`)).toContainText("merged");
    await expect(page.getByTestId(`task-cost-${id}`)).toContainText(/\d+ calls?/);
  }

  // The Model calls tab: a "By parallel task" row per task, each with the calls of that task's own session.
  await page.getByRole("tab", { name: "Model calls" }).click();
  const byTask = page.getByTestId("cost-by-task");
  await expect(byTask).toBeVisible();
  await expect(byTask).toContainText("By parallel task");
  const rows = byTask.locator("tbody tr");
  await expect(rows).toHaveCount(TASKS.length);
  for (const [i, id] of TASKS.entries()) {
    const cells = rows.nth(i).locator("td");
    await expect(cells.nth(0)).toHaveText(id);
    expect(Number(await cells.nth(1).innerText())).toBeGreaterThan(0);
  }
  // The per-task rows add up to no more than the implementation stage's calls (the tasks' sessions are part of it).
  const stageRow = page.getByTestId("cost-by-stage").locator("tbody tr").filter({ hasText: "implementation" });
  const stageCalls = Number(await stageRow.locator("td").nth(1).innerText());
  let taskCalls = 0;
  for (let i = 0; i < TASKS.length; i++) taskCalls += Number(await rows.nth(i).locator("td").nth(1).innerText());
  expect(taskCalls).toBeGreaterThan(0);
  expect(taskCalls).toBeLessThanOrEqual(stageCalls);
  await page.screenshot({ path: `${SHOTS}/parallel-task-costs.png`, fullPage: true });
});

async function chooseOption(page: Page, label: string, option: string) {
  const combobox = page.getByRole("combobox", { name: label });
  // Radix's Select can drop a click that lands while its list is still opening: open and choose again until it shows.
  await expect(async () => {
    if (!(await page.getByRole("listbox").isVisible())) await combobox.click();
    await page.getByRole("option", { name: option, exact: true }).click({ timeout: 2_000 });
    await expect(combobox).toContainText(option, { timeout: 2_000 });
  }).toPass({ timeout: 15_000 });
}

test("the New run form shows \"Tasks at the same time\" (3 by default), and the run it starts carries the number set", async ({ page, request }) => {
  const project = await createProject(request, "parallel form");
  await signIn(page);
  await page.goto(`/runs/new?project=${project.id}`);
  // The project first: choosing one fills the form from its defaults.
  await chooseOption(page, "Project", "parallel form");
  const field = page.getByLabel("Tasks at the same time");
  await expect(field).toHaveValue("3");
  await field.fill("2");
  await page.getByLabel("Request", { exact: true }).fill("Two at a time");
  await page.getByTestId("start-run").click();
  await expect(page).toHaveURL(/\/runs\/run_/);
  const runId = /\/runs\/(run_[^/?#]+)/.exec(page.url())![1]!;
  const res = await request.get(`/api/runs/${runId}`, { headers: authHeaders });
  expect(res.status()).toBe(200);
  expect((await res.json()).run.config.limits.maxConcurrentTasks).toBe(2);
});
