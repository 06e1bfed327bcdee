import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";
import { E2E_REPOS_ROOT } from "./global-setup";

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string; title: string };
}

/** Console errors of the page from now on (hydration mismatches are reported there). */
function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return errors;
}

const REQUEST = ["## Tidy the README", "", "```file:notes/tidy.md", "# Heading inside a file", "```", "", "[fail-validation: 1]"].join("\n");

test("run page: short title, request as collapsible Markdown, the plan once beside its decision, accepted-after-failure outcome and the next step", async ({ page, request }) => {
  const project = await createProject(request, "run page");
  const run = await startRun(request, project.id, REQUEST, { trustMode: { planning: "manual", fixes: "manual" } });
  expect(run.title).toBe("Tidy the README");
  const errors = consoleErrors(page);
  await signIn(page);
  await page.goto(`/runs/${run.id}`);

  // 7: a short title; the whole request is rendered Markdown, collapsed until asked for.
  await expect(page.getByTestId("run-title")).toHaveText("Tidy the README");
  await expect(page.getByTestId("run-request")).toBeHidden();
  await page.getByTestId("run-request-details").locator("summary").click();
  const requestBody = page.getByTestId("run-request");
  await expect(requestBody).toBeVisible();
  await expect(requestBody.getByRole("heading", { name: "Tidy the README" })).toBeVisible();
  await expect(requestBody.locator("pre")).toContainText("# Heading inside a file");
  await expect(requestBody.getByRole("heading", { name: "Heading inside a file" })).toHaveCount(0);

  // 8: one diagram on the page, inside the approval card, with the decision beside it.
  const card = page.getByTestId("approval-card");
  await expect(card).toBeVisible({ timeout: 60_000 });
  await expect(card.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await expect(page.getByTestId("mermaid-diagram")).toHaveCount(1);
  await expect(card.getByTestId("approval-decision").getByTestId("approve")).toBeVisible();
  const planBox = await card.getByTestId("approval-plan").boundingBox();
  const decisionBox = await card.getByTestId("approval-decision").boundingBox();
  expect(decisionBox!.x).toBeGreaterThan(planBox!.x + planBox!.width - 1);
  await expect(page.getByTestId("plan-in-approval")).toBeAttached();
  await page.screenshot({ path: `${SHOTS}/run-page-approval.png`, fullPage: true });

  // 15: a Mermaid error names its line once, without the parser's own "Parse error on line N".
  await card.getByTestId("edit-plan").click();
  await page.getByLabel("Mermaid source").fill("flowchart TD\n  A --> B\n  B -->");
  await expect(page.getByTestId("mermaid-validity")).toHaveAttribute("data-state", "invalid");
  await expect(page.getByTestId("mermaid-validity")).toContainText("Invalid Mermaid on line 3");
  await expect(page.getByTestId("mermaid-validity")).not.toContainText("Parse error on line");
  await card.getByRole("button", { name: "Discard edits" }).click();
  await card.getByTestId("approve").click();

  // 10: accepted after failed validation is not the badge of a clean pass, on the page, in the API and in the list.
  const fix = page.getByTestId("fix-decision-card");
  await expect(fix).toBeVisible({ timeout: 60_000 });
  await fix.getByTestId("fix-accept").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  const badge = page.getByTestId("run-view").getByTestId("run-status").first();
  await expect(badge).toHaveAttribute("data-outcome", "accepted_failed_validation");
  await expect(badge).toHaveText("accepted · validation failed");
  const api = await (await request.get(`/api/runs/${run.id}`, { headers: authHeaders })).json();
  expect(api.run).toMatchObject({ status: "completed", outcome: "accepted_failed_validation", lastValidation: "failed" });

  // 11: a finished local run says why there is no pull request and how to merge.
  const next = page.getByTestId("next-step");
  await expect(next).toHaveAttribute("data-kind", "merge_locally");
  await expect(next).toContainText("PR not opened: local project");
  await expect(page.getByTestId("next-step-command")).toContainText(`git merge --squash autonomous/${run.id}`);

  // 15: report emoji drawn with the icon set; people by name, not by user id.
  await page.getByRole("tab", { name: "Validation" }).click();
  await expect(page.getByTestId("accepted-anyway")).toBeVisible();
  const report = page.getByTestId("validation-result").first();
  await expect(report.getByTestId("status-icon").first()).toBeVisible();
  await expect(report).not.toContainText("✅");
  await expect(page.getByTestId("timeline")).toContainText("by Owner");
  await expect(page.locator("body")).not.toContainText("usr_local_owner");
  await page.getByTestId("run-request-details").locator("summary").click();
  await page.screenshot({ path: `${SHOTS}/run-page.png`, fullPage: true });

  // 15: dark mode renders without a hydration error (the theme button's label).
  await page.emulateMedia({ colorScheme: "dark" });
  await page.reload();
  await expect(page.locator("html")).toHaveClass(/dark/);
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed");
  await expect(page.getByTestId("theme-toggle")).toHaveAttribute("aria-label", "Switch to light theme");
  await page.screenshot({ path: `${SHOTS}/run-page-dark.png`, fullPage: true });
  expect(errors.filter((e) => /hydrat|did not match/i.test(e))).toEqual([]);
  await page.emulateMedia({ colorScheme: "light" });

  // Merging accepted-but-failed work is a person's explicit decision (issue 16): the next step becomes "merged".
  await page.reload();
  // The timeline is drawn by the client from the event stream: once it shows the end, the page is hydrated.
  await expect(page.getByTestId("timeline")).toContainText("Run completed");
  // It first shows what will land (issue 32.4) and merges once confirmed.
  await page.getByTestId("merge-run").click();
  await page.getByTestId("merge-confirm").getByTestId("confirm-merge").click();
  await expect(page.getByTestId("next-step")).toHaveAttribute("data-kind", "merged", { timeout: 30_000 });
  await expect(page.getByTestId("merge-run")).toHaveCount(0);
  const merged = await (await request.get(`/api/runs/${run.id}/events`, { headers: authHeaders })).json();
  expect(merged.events.map((e: { type: string }) => e.type).slice(-3)).toEqual(["RUN_COMPLETED", "MERGE_DECIDED", "PR_MERGED"]);

  // 7 + 10: the list shows the title, not the raw request, and the outcome.
  await page.goto(`/?project=${project.id}`);
  const row = page.getByTestId("run-row").filter({ has: page.getByTestId("run-title").getByText("Tidy the README", { exact: true }) });
  await expect(row).toHaveCount(1);
  await expect(row.getByTestId("run-status")).toHaveAttribute("data-outcome", "accepted_failed_validation");
  await expect(page.getByTestId("runs-table")).not.toContainText("[fail-validation");
  await page.screenshot({ path: `${SHOTS}/runs-list.png`, fullPage: true });
});

test("first load renders from one snapshot: with no stream or event fetch at all, the timeline and the plan agree with the approval card", async ({ page, request }) => {
  const project = await createProject(request, "snapshot");
  const run = await startRun(request, project.id, `Snapshot\n\n${"```"}file:snap.md\nsnap\n${"```"}`, { trustMode: { planning: "manual" } });
  await expect
    .poll(async () => ((await (await request.get(`/api/runs/${run.id}`, { headers: authHeaders })).json()) as { run: { status: string } }).run.status, { timeout: 60_000 })
    .toBe("awaiting_approval");
  const errors = consoleErrors(page);
  await signIn(page);
  // Nothing after the first render may reach the page: what it shows is the server's snapshot.
  await page.route("**/api/runs/*/stream**", (route) => route.abort());
  await page.route("**/api/runs/*/events**", (route) => route.abort());
  await page.goto(`/runs/${run.id}`);
  await expect(page.getByTestId("approval-card")).toBeVisible();
  const timeline = page.getByTestId("timeline");
  await expect(timeline.getByText("No events yet.")).toHaveCount(0);
  await expect(timeline.locator('[data-testid="timeline-item"][data-type="PLAN_CREATED"]')).toHaveCount(1);
  await expect(timeline.locator('[data-testid="timeline-item"][data-type="APPROVAL_REQUESTED"]')).toHaveCount(1);
  await expect(page.getByTestId("plan-in-approval")).toBeAttached();
  await expect(page.getByText(/No plan yet/)).toHaveCount(0);
  expect(errors.filter((e) => /hydrat|did not match/i.test(e))).toEqual([]);
});

test("toasts: one inbox toast for runs that start waiting, none for the run on screen", async ({ page, request }) => {
  const project = await createProject(request, "toasts");
  await signIn(page);
  const onScreen = await startRun(request, project.id, "Toast on screen: write a note", { trustMode: { planning: "manual" } });
  await page.goto(`/runs/${onScreen.id}`);
  await expect(page.getByTestId("approval-card")).toBeVisible({ timeout: 60_000 });
  const others = [
    await startRun(request, project.id, "Toast elsewhere one: write a note", { trustMode: { planning: "manual" } }),
    await startRun(request, project.id, "Toast elsewhere two: write a note", { trustMode: { planning: "manual" } }),
  ];
  const status = async (id: string) => (await (await request.get(`/api/runs/${id}`, { headers: authHeaders })).json()).run.status as string;
  for (const run of others) await expect.poll(() => status(run.id), { timeout: 60_000 }).toBe("awaiting_approval");
  // Once the navigation counts every waiting run, the inbox has seen all three arrive.
  const waiting = await request.get("/api/inbox", { headers: authHeaders });
  const count = ((await waiting.json()) as { unread: number }).unread;
  await expect(page.getByTestId("inbox-count")).toHaveText(String(count), { timeout: 30_000 });
  const toast = page.getByTestId("inbox-toast");
  await expect(toast).toHaveCount(1);
  await expect(toast).toContainText(/Toast elsewhere|runs need you/);
  await expect(toast).not.toContainText("Toast on screen");
  await expect(page.getByTestId("approval-card")).toBeVisible();
});

test("the conflict card names whole files and the stored reason", async ({ page, request }) => {
  // A repository of its own whose checkout of main has an uncommitted change: the squash merge must stop there.
  // Outside the checkout: the server never binds anything inside its own checkout.
  fs.mkdirSync(E2E_REPOS_ROOT, { recursive: true });
  const repo = fs.mkdtempSync(path.join(E2E_REPOS_ROOT, "conflict-"));
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=E2E", "-c", "user.email=e2e@example.com", ...args], { cwd: repo });
  git("init", "-q", "-b", "main");
  fs.writeFileSync(path.join(repo, "readme.md"), "# lower-case readme\n");
  git("add", "readme.md");
  git("commit", "-q", "-m", "initial commit");
  fs.appendFileSync(path.join(repo, "readme.md"), "uncommitted line\n");
  const res = await request.post("/api/projects", { headers: authHeaders, data: { name: "conflict", repository: { type: "local", path: repo } } });
  expect(res.status()).toBe(201);
  const project = (await res.json()).project as { id: string };
  const run = await startRun(request, project.id, "Conflict: write a note", { trustMode: { planning: "auto" }, git: { autoMerge: true } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  const card = page.getByTestId("gate-card");
  await expect(card).toHaveAttribute("data-kind", "conflict", { timeout: 60_000 });
  await expect(card.getByTestId("gate-files").locator("li")).toHaveText(["readme.md"]);
  await expect(card.getByTestId("gate-reason")).toContainText("the checkout of main");
  await expect(card.getByTestId("gate-reason")).toContainText("has uncommitted changes");
});

test("cancel during implementation ends the run at once and no task is recorded after it", async ({ page, request }) => {
  const project = await createProject(request, "cancel impl");
  // Ninety tasks (two demo turns each) keep the implementation busy long after the first task starts.
  const files = Array.from({ length: 90 }, (_, i) => ["```file:many/f" + i + ".txt", `file ${i}`, "```"].join("\n")).join("\n\n");
  const run = await startRun(request, project.id, `Cancel while implementing\n\n${files}`, {
    trustMode: { planning: "auto" },
    limits: { maxIterations: 200 },
  });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  await expect(page.getByTestId("timeline-item").filter({ hasText: /Task 1 of \d+ started/ })).toBeVisible({ timeout: 60_000 });
  await page.getByTestId("cancel-run").click();
  const clicked = Date.now();
  await page.getByTestId("confirm-cancel").click();
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "cancelled");
  // A figure, not an assertion: how long the page took to show the cancellation.
  console.log(`cancel → page shows cancelled: ${Date.now() - clicked} ms`);
  const events = (await (await request.get(`/api/runs/${run.id}/events?after=0&limit=2000`, { headers: authHeaders })).json()).events as Array<{ sequence: number; type: string }>;
  const cancelledAt = events.find((e) => e.type === "RUN_CANCELLED")!.sequence;
  expect(events.filter((e) => e.sequence > cancelledAt).map((e) => e.type)).toEqual([]);
  expect(events.map((e) => e.type)).not.toContain("IMPLEMENTATION_SUCCEEDED");
  expect(events.filter((e) => e.type === "TASK_COMPLETED").length).toBeLessThan(90);
});

test("a server whose sandbox is weaker says so on the run page, above the run", async ({ page, request }) => {
  const project = await createProject(request, "sandbox warning");
  const run = await startRun(request, project.id, "Add a changelog", { trustMode: { planning: "manual", fixes: "manual" } });
  await signIn(page);
  // This machine isolates fully, so the server's real answer carries no warning: the page shows none.
  await page.goto(`/runs/${run.id}`);
  await expect(page.getByTestId("run-title")).toBeVisible();
  await expect(page.getByTestId("sandbox-warning")).toHaveCount(0);
  // The same detail as a server without a cgroup would answer it (the real response, with its sandbox field changed).
  const warning = "Sandbox isolation is weaker than full: no per-command cgroup (test).";
  await page.route(`**/api/runs/${run.id}`, async (route) => {
    const response = await route.fetch();
    const body = await response.json();
    expect(body.sandbox).toEqual({ isolated: true, warning: null });
    await route.fulfill({ response, json: { ...body, sandbox: { isolated: true, warning } } });
  });
  await page.reload();
  await expect(page.getByTestId("sandbox-warning")).toContainText("Weaker sandbox on this server");
  await expect(page.getByTestId("sandbox-warning")).toContainText(warning);
});

test("plan card: a task triage found already done shows as skipped, with its confidence and evidence", async ({ page, request }) => {
  const project = await createProject(request, "triage card");
  const text = [
    "Triage card",
    "```tasks.md",
    "- [ ] T1: Already there",
    "  Check: true",
    "- [ ] T2: Document it",
    "  Files: docs/requests/triage-card.md",
    "```",
  ].join("\n");
  const run = await startRun(request, project.id, text, { trustMode: { planning: "auto", fixes: "manual" } });
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  const triage = page.getByTestId("triage-T1");
  await expect(triage).toContainText("Already done — skipped · confidence 90%", { timeout: 60_000 });
  await expect(triage).toContainText("`true` passes");
  await expect(page.getByTestId("triage-T2")).toHaveCount(0);
});
