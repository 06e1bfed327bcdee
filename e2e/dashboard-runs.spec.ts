import { expect, test, type Page } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";
import { E2E_REPO } from "./global-setup";

const SHOTS = "e2e/.artifacts/screenshots";

async function chooseOption(page: Page, label: string, option: string) {
  const combobox = page.getByRole("combobox", { name: label });
  // Radix's Select can drop a click that lands while its list is still opening (seen on a loaded machine: the list
  // stayed open on the old choice); open and choose again until the choice shows.
  await expect(async () => {
    if (!(await page.getByRole("listbox").isVisible())) await combobox.click();
    await page.getByRole("option", { name: option, exact: true }).click({ timeout: 2_000 });
    await expect(combobox).toContainText(option, { timeout: 2_000 });
  }).toPass({ timeout: 15_000 });
}

test("the New run form shows validation errors, then starts a run and opens its page", async ({ page, request }) => {
  const project = await createProject(request, "dash form project");
  await signIn(page);
  await page.goto(`/runs/new?project=${project.id}`);
  await expect(page.getByRole("heading", { name: "New run" })).toBeVisible();

  // Empty request and an out-of-range setting: errors name what to fix, nothing is created.
  await page.getByLabel("Max clarifications").fill("99");
  await page.getByTestId("start-run").click();
  await expect(page.getByTestId("error-request")).toHaveText("Describe what you want changed.");
  await expect(page.getByTestId("error-maxClarifications")).toContainText("at most 20");
  await expect(page.getByLabel("Request", { exact: true })).toBeFocused();
  await expect(page).toHaveURL(/\/runs\/new/);

  await page.getByLabel("Max clarifications").fill("2");
  await chooseOption(page, "Project", "dash form project");
  await page.getByLabel("Request", { exact: true }).fill("Dashboard form: write a greeting file");
  await expect(page.getByRole("combobox", { name: "Planner model" })).toContainText("demo (scripted)");
  await page.screenshot({ path: `${SHOTS}/new-run-form.png`, fullPage: true });
  await page.getByTestId("start-run").click();

  await expect(page).toHaveURL(/\/runs\/run_/);
  await expect(page.getByTestId("run-request")).toHaveText("Dashboard form: write a greeting file");
  await expect(page.getByTestId("timeline-item").first()).toBeVisible();
  await expect(page.getByTestId("timeline")).toHaveAttribute("data-connection", /live|ended/);

  const runId = page.url().split("/runs/")[1]!;
  const detail = await request.get(`/api/runs/${runId}`, { headers: authHeaders });
  expect((await detail.json()).run.config).toMatchObject({ maxClarifications: 2 });
});

test("the runs list updates without reload, filters by status and project, and searches", async ({ page, request }) => {
  const a = await createProject(request, "dash list A");
  const b = await createProject(request, "dash list B");
  const start = async (projectId: string, text: string) => {
    const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text } });
    expect(res.status()).toBe(201);
    return (await res.json()).run.id as string;
  };
  await start(a.id, "listtest alpha: add a changelog");
  await signIn(page);
  const rows = page.getByTestId("run-row");
  await expect(rows.filter({ hasText: "listtest alpha" })).toBeVisible();

  // Created through the API while the page is open: it appears without a reload.
  await start(b.id, "listtest beta: add a license");
  await expect(rows.filter({ hasText: "listtest beta" })).toBeVisible();

  // Search narrows to matching requests (and is kept in the URL).
  await page.getByTestId("runs-search").fill("listtest beta");
  await expect(page).toHaveURL(/q=listtest\+beta/);
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText("listtest beta");
  await page.getByTestId("runs-search").fill("listtest");
  await expect(rows.filter({ hasText: "listtest" })).toHaveCount(2);

  // Project filter.
  await chooseOption(page, "Project", "dash list A");
  await expect(page).toHaveURL(/project=prj_/);
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText("listtest alpha");
  await chooseOption(page, "Project", "All projects");
  await expect(rows.filter({ hasText: "listtest" })).toHaveCount(2);

  // Status filters: every row shown has one of the filter's statuses.
  for (const [filter, statuses] of [
    ["running", ["queued", "running"]],
    ["waiting", ["awaiting_approval", "awaiting_clarification", "awaiting_fix_decision", "paused"]],
    ["done", ["completed"]],
    ["failed", ["failed", "cancelled"]],
  ] as const) {
    await page.getByTestId(`filter-${filter}`).click();
    await expect(page).toHaveURL(new RegExp(`filter=${filter}`));
    await expect(page.getByTestId(`filter-${filter}`)).toHaveAttribute("aria-pressed", "true");
    await expect(page.getByTestId("runs-table").or(page.getByTestId("runs-empty"))).toBeVisible();
    for (const status of await page.getByTestId("run-status").evaluateAll((els) => els.map((e) => e.getAttribute("data-status")))) {
      expect(statuses as readonly string[]).toContain(status);
    }
  }
  // A run that is cancelled shows under "Failed" and not under "Running".
  const cancelled = await start(a.id, "listtest gamma: to be cancelled");
  expect((await request.post(`/api/runs/${cancelled}/cancel`, { headers: authHeaders })).status()).toBe(200);
  await page.getByTestId("filter-failed").click();
  await expect(rows.filter({ hasText: "listtest gamma" })).toBeVisible();
  await page.getByTestId("filter-running").click();
  await expect(rows.filter({ hasText: "listtest gamma" })).toHaveCount(0);

  await page.getByTestId("filter-all").click();
  await page.getByTestId("runs-search").fill("");
  await expect(rows.filter({ hasText: "listtest" })).toHaveCount(3);
  await page.screenshot({ path: `${SHOTS}/dashboard-runs-list.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  await expect(page.locator("html")).toHaveClass(/dark/);
  await page.screenshot({ path: `${SHOTS}/dashboard-runs-list-dark.png`, fullPage: true });
});

test("runs load page by page with Load more", async ({ page, request }) => {
  const project = await createProject(request, "dash paging");
  for (let i = 0; i < 7; i++) {
    const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId: project.id, request: `pagetest ${i}` } });
    expect(res.status()).toBe(201);
  }
  await signIn(page);
  await page.goto(`/?project=${project.id}&limit=5`);
  const rows = page.getByTestId("run-row");
  await expect(rows).toHaveCount(5);
  await page.getByTestId("load-more").click();
  await expect(rows).toHaveCount(7);
  await expect(page.getByTestId("load-more")).toHaveCount(0);
});

test("projects: create with validation, configure defaults (refused when invalid), and the New run form starts from them", async ({ page }) => {
  await signIn(page);
  await page.goto("/projects");
  const form = page.getByTestId("create-project");
  await form.getByTestId("create-project-submit").click();
  await expect(form.getByText("Give the project a name.")).toBeVisible();
  await form.getByLabel("Name").fill("dash projects page");
  await form.getByLabel("Path on the server").fill("/nonexistent/repo");
  await form.getByTestId("create-project-submit").click();
  await expect(form.getByRole("alert")).toContainText("must be an existing git repository");
  await form.getByLabel("Path on the server").fill(E2E_REPO);
  await form.getByTestId("create-project-submit").click();
  const card = page.getByTestId("project-card").filter({ hasText: "dash projects page" });
  await expect(card).toBeVisible();

  // Owners invite by email; the invitation waits for the person to accept, and can be withdrawn.
  await card.getByText("Members and invitations").click();
  const invitations = card.getByTestId("project-invitations");
  await invitations.getByLabel("Invite by email").fill("grace@example.com");
  await invitations.getByLabel("Role").selectOption("approver");
  await invitations.getByTestId("invite-submit").click();
  await expect(invitations.getByTestId("pending-invitation")).toContainText("grace@example.com · approver · pending");
  await invitations.getByTestId("pending-invitation").getByRole("button", { name: "Revoke" }).click();
  await expect(invitations.getByTestId("pending-invitation")).toHaveCount(0);

  await card.getByRole("button", { name: "Configure" }).click();
  const config = card.getByLabel(/Default run config/);
  await config.fill("{ not json");
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.getByText("This is not valid JSON.")).toBeVisible();
  await config.fill('{"maxClarifications": 99}');
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.getByRole("alert")).toContainText("maxClarifications");
  await config.fill('{"trustMode": {"planning": "auto"}, "maxClarifications": 4}');
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.getByRole("button", { name: "Configure" })).toBeVisible();
  // The defaults read as settings, one per line (#32.10), not as raw JSON.
  await expect(card.getByTestId("default-config")).toContainText(/maxClarifications\s*4/);
  await page.screenshot({ path: `${SHOTS}/projects.png`, fullPage: true });

  await card.getByRole("link", { name: "New run" }).click();
  await expect(page).toHaveURL(/\/runs\/new\?project=prj_/);
  await expect(page.getByLabel("Max clarifications")).toHaveValue("4");
  await expect(page.getByRole("radiogroup", { name: "Planning trust mode" }).getByLabel("auto")).toBeChecked();
});
