import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string };
}

test("compare view: no 'no plan' while loading, approaches differ, cancel the others, pick one", async ({ page, request }) => {
  const project = await createProject(request, "compare");
  await signIn(page);
  await page.goto(`/runs/new?project=${project.id}`);
  await page.getByLabel("Request", { exact: true }).fill("Compare: write a note");
  await page.getByLabel("Number of approaches").fill("3");
  await page.getByTestId("start-run").click();
  await expect(page).toHaveURL(/\/compare\?group=grp_\w+$/);
  const columns = page.getByTestId("compare-column");
  await expect(columns).toHaveCount(3);
  for (let i = 0; i < 3; i++) await expect(columns.nth(i).getByTestId("run-status")).toHaveAttribute("data-status", "awaiting_approval", { timeout: 60_000 });

  // 9: the runs on screen raise no inbox toast, once the inbox has counted them.
  const waiting = await request.get("/api/inbox", { headers: authHeaders });
  await expect(page.getByTestId("inbox-count")).toHaveText(String(((await waiting.json()) as { unread: number }).unread), { timeout: 30_000 });
  await expect(page.getByTestId("inbox-toast")).toHaveCount(0);

  // The demo model takes a different route per approach: the plans say which one they are.
  // Each column's event log streams on its own: wait until all three plans are in before reading them.
  await expect(columns.getByTestId("compare-plan-summary")).toHaveCount(3);
  const summaries = await columns.getByTestId("compare-plan-summary").allTextContents();
  expect(new Set(summaries).size).toBe(3);
  expect(summaries[1]).toContain("approach 2");
  await page.screenshot({ path: `${SHOTS}/compare.png`, fullPage: true });

  // While the event logs load, a column says neither "No plan yet" nor "Not validated yet".
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  // Held until released (the streams and the polling fallback alike); after that every request goes through at once.
  for (const pattern of ["**/api/runs/*/events**", "**/api/runs/*/stream**"]) {
    await page.route(pattern, async (route) => {
      await held;
      await route.continue().catch(() => null);
    });
  }
  await page.reload();
  await expect(columns.first().getByTestId("compare-loading")).toBeVisible();
  await expect(page.getByText("No plan yet")).toHaveCount(0);
  await expect(page.getByText("Not validated yet")).toHaveCount(0);
  release();
  await expect(columns.first().getByTestId("compare-plan-summary")).toBeVisible();

  // Cancel the others from approach 1: approaches 2 and 3 end, 1 keeps waiting.
  await columns.nth(0).getByTestId("cancel-others").click();
  await expect(columns.nth(1).getByTestId("run-status")).toHaveAttribute("data-status", "cancelled");
  await expect(columns.nth(2).getByTestId("run-status")).toHaveAttribute("data-status", "cancelled");
  await expect(columns.nth(0).getByTestId("run-status")).toHaveAttribute("data-status", "awaiting_approval");
  await expect(columns.nth(0).getByTestId("cancel-others")).toBeDisabled();
  const firstId = await columns.nth(0).getAttribute("data-run-id");
  await columns.nth(0).getByTestId("pick-approach").click();
  await expect(page).toHaveURL(new RegExp(`/runs/${firstId}$`));
  await expect(page.getByTestId("approval-card")).toBeVisible();
});

test("unknown pages and runs are real 404s with navigation", async ({ page }) => {
  await signIn(page);
  const unknown = await page.goto("/no-such-page");
  expect(unknown?.status()).toBe(404);
  await expect(page.getByTestId("not-found")).toBeVisible();
  await expect(page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Runs" })).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/not-found.png`, fullPage: true });
  const badRun = await page.goto("/runs/run_doesnotexist");
  expect(badRun?.status()).toBe(404);
  await expect(page.getByTestId("not-found")).toBeVisible();
  await expect(page.getByText("Could not load this run")).toHaveCount(0);
  await page.getByRole("link", { name: "Back to runs" }).click();
  await expect(page).toHaveURL(/\/$/);
});

test("forms: a new validation error replaces the last server error; a local project says what 'Open a pull request' does", async ({ page, request }) => {
  await signIn(page);
  await page.goto("/projects");
  const form = page.getByTestId("create-project");
  await form.getByLabel("Name").fill("not a repository");
  await form.getByLabel("Path on the server").fill("/definitely/not/a/repository");
  await form.getByTestId("create-project-submit").click();
  await expect(form.getByTestId("create-project-error")).toBeVisible();
  await form.getByLabel("Name").fill("");
  await form.getByTestId("create-project-submit").click();
  await expect(form.getByText("Give the project a name.")).toBeVisible();
  await expect(form.getByTestId("create-project-error")).toHaveCount(0);

  const project = await createProject(request, "local pr hint");
  await page.goto(`/runs/new?project=${project.id}`);
  await expect(page.getByTestId("create-pr-help")).toContainText("there is no pull request to open");
});

test("while the planner waits for a [plan-ask] answer, the Plan tab says so", async ({ page, request }) => {
  const project = await createProject(request, "plan ask");
  const run = await startRun(request, project.id, "Plan ask: write a note [plan-ask: Which tone should the note have?]", { trustMode: { planning: "manual" } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  await expect(page.getByTestId("clarification-form")).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId("plan-empty")).toHaveText("No plan yet: the planner is waiting for your answer to its question above.");
});

test("compare a group by its id: /compare?group= shows the runs POST /api/runs started together; an unknown group says so", async ({ page, request }) => {
  const project = await createProject(request, "compare group");
  const res = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: "Group: write a note", approaches: 2, approachNotes: ["short", ""], config: { trustMode: { planning: "manual" } } },
  });
  expect(res.status()).toBe(201);
  const { groupId, runs } = (await res.json()) as { groupId: string; runs: Array<{ id: string }> };
  await signIn(page);
  // The comparison streams: no column's events are ever polled while its stream is open.
  const polled: string[] = [];
  page.on("request", (r) => {
    if (/\/api\/runs\/[^/]+\/events/.test(r.url())) polled.push(r.url());
  });
  await page.goto(`/compare?group=${groupId}`);
  const columns = page.getByTestId("compare-column");
  await expect(columns).toHaveCount(2);
  expect([await columns.nth(0).getAttribute("data-run-id"), await columns.nth(1).getAttribute("data-run-id")]).toEqual(runs.map((r) => r.id));
  // Both reach their plan gates on screen, followed by their streams; the group's runs raise no inbox toast.
  for (let i = 0; i < 2; i++) await expect(columns.nth(i).getByTestId("run-status")).toHaveAttribute("data-status", "awaiting_approval", { timeout: 60_000 });
  await expect(columns.getByTestId("compare-plan-summary")).toHaveCount(2);
  const waiting = await request.get("/api/inbox", { headers: authHeaders });
  await expect(page.getByTestId("inbox-count")).toHaveText(String(((await waiting.json()) as { unread: number }).unread), { timeout: 30_000 });
  await expect(page.getByTestId("inbox-toast")).toHaveCount(0);
  expect(polled).toEqual([]);
  await page.goto("/compare?group=grp_does_not_exist");
  await expect(page.getByTestId("compare-group-error")).toContainText("No such run group");
});
