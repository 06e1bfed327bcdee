import { expect, test, type APIRequestContext } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

/*
 * Issue 32, "A newcomer's second hour": one spec per UI finding, grouped so a few runs serve many checks. The
 * all-pages console check (finding 2) and the missing run's single menu (14) are in console-clean.spec.ts.
 */

const SHOTS = "e2e/.artifacts/screenshots";

type Run = { id: string; status: string; pendingGate: { gateId: string } | null };

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as Run;
}

const getRun = async (request: APIRequestContext, id: string) => ((await (await request.get(`/api/runs/${id}`, { headers: authHeaders })).json()).run as Run);

async function waitFor(request: APIRequestContext, id: string, status: string) {
  await expect.poll(async () => (await getRun(request, id)).status, { timeout: 90_000 }).toBe(status);
  return getRun(request, id);
}

const LONG_LINE = `export const greeting = "${"word ".repeat(30).trim()}";`;
const REQUEST = ["Greeting module", "It greets in English.", "Keep it small.", "", "```file:src/greet.js", LONG_LINE, "```"].join("\n");

test("a finished local run: the request keeps its lines and file label, merge shows what lands and asks once, the commit is short", async ({ page, request }) => {
  const project = await createProject(request, "newcomer merge");
  const run = await startRun(request, project.id, REQUEST, { trustMode: { planning: "auto" }, git: { autoMerge: false } });
  await waitFor(request, run.id, "completed");
  await signIn(page);
  await page.goto(`/runs/${run.id}`);
  await expect(page.getByTestId("timeline")).toContainText("Run completed");

  // 11: the Request expander renders the markdown: its lines stay lines, and the fenced block keeps its file: label.
  await page.getByTestId("run-request-details").locator("summary").click();
  const body = page.getByTestId("run-request");
  await expect(body.getByTestId("code-file-label")).toHaveText("file: src/greet.js");
  expect(await body.locator("p").first().innerText()).toBe("Greeting module\nIt greets in English.\nKeep it small.");

  // 4: "Merge into main" first shows every file that lands — the .autonomous/ records too — and merges only when confirmed.
  await expect(page.getByTestId("next-step")).toHaveAttribute("data-kind", "merge_locally");
  await page.getByTestId("merge-run").click();
  const confirm = page.getByTestId("merge-confirm");
  await expect(confirm.getByTestId("merge-preview")).toBeVisible();
  await expect(confirm.getByTestId("merge-preview-changes")).toContainText("src/greet.js");
  await expect(confirm.getByTestId("merge-preview-records")).toContainText(".autonomous/");
  const preview = (await (await request.get(`/api/runs/${run.id}/merge`, { headers: authHeaders })).json()).preview as { changes: unknown[]; records: unknown[] };
  expect(preview.records.length).toBeGreaterThan(0);
  await expect(confirm.getByTestId("confirm-merge")).toHaveText(`Merge ${preview.changes.length + preview.records.length} files into main`);
  await page.screenshot({ path: `${SHOTS}/newcomer-merge-confirm.png`, fullPage: true });
  const types = async () => ((await (await request.get(`/api/runs/${run.id}/events`, { headers: authHeaders })).json()).events as Array<{ type: string }>).map((e) => e.type);
  expect(await types()).not.toContain("MERGE_DECIDED");
  await confirm.getByTestId("confirm-merge").click();
  await expect(page.getByTestId("next-step")).toHaveAttribute("data-kind", "merged", { timeout: 30_000 });

  // 10: the timeline names the merge's commit by its short id, not 40 characters.
  await page.reload();
  const merged = page.getByTestId("timeline-item").filter({ hasText: "Merged" });
  await expect(merged).toContainText(/commit [0-9a-f]{7}(?![0-9a-f])/);
  await expect(merged).not.toContainText(/[0-9a-f]{40}/);
});

test("an explore-N group is findable: the list says which approach, the run page links to its group; the compare diffs keep lines whole", async ({ page, request }) => {
  const project = await createProject(request, "newcomer group");
  const res = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: REQUEST, approaches: 2, config: { trustMode: { planning: "auto" }, git: { autoMerge: false } } },
  });
  expect(res.status()).toBe(201);
  const { groupId, runs } = (await res.json()) as { groupId: string; runs: Run[] };
  for (const r of runs) await waitFor(request, r.id, "completed");
  await signIn(page);

  // 5: the runs list shows each row's approach.
  await page.goto(`/?project=${project.id}`);
  await expect(page.getByTestId("run-approach")).toHaveCount(2);
  expect((await page.getByTestId("run-approach").allTextContents()).sort()).toEqual(["approach 1 of 2", "approach 2 of 2"]);
  await page.screenshot({ path: `${SHOTS}/newcomer-runs-approaches.png`, fullPage: true });

  // 5: the run page links to its group's comparison (/compare?group=, as the README says).
  await page.goto(`/runs/${runs[0]!.id}`);
  await expect(page.getByTestId("run-group-link")).toContainText("approach 1 of 2");
  await page.getByTestId("run-group-link").click();
  await expect(page).toHaveURL(new RegExp(`/compare\\?group=${groupId}$`));

  // 13: in a compare column the line-number gutters stay narrow and code is not broken mid-word.
  const column = page.getByTestId("compare-column").first();
  const diff = column.getByTestId("branch-diff");
  await expect(diff.locator(".diff-code").first()).toBeVisible({ timeout: 30_000 });
  await page.screenshot({ path: `${SHOTS}/newcomer-compare-diff.png`, fullPage: true });
  const widths = await column.evaluate((el) => {
    const table = el.querySelector<HTMLElement>("table.diff")!;
    const gutters = [...table.querySelectorAll<HTMLElement>("tr.diff-line:first-child td.diff-gutter")].reduce((n, td) => n + td.getBoundingClientRect().width, 0);
    return { column: el.getBoundingClientRect().width, gutters };
  });
  expect(widths.gutters / widths.column).toBeLessThan(0.2);
  const longLine = diff.locator(".diff-code", { hasText: "word word" }).first();
  const style = await longLine.evaluate((td) => ({ whiteSpace: getComputedStyle(td).whiteSpace, wordBreak: getComputedStyle(td).wordBreak }));
  expect(style).toEqual({ whiteSpace: "pre", wordBreak: "normal" });
  const lineHeight = await longLine.evaluate((td) => parseFloat(getComputedStyle(td).lineHeight));
  expect((await longLine.boundingBox())!.height).toBeLessThan(lineHeight * 1.5);
});

test("forms and settings: PR switch off for a local project, time limits on one line, the project card in words, a human path error, the token copy button", async ({ page, request, context }) => {
  const project = await createProject(request, "newcomer forms");
  await signIn(page);

  // 7: a local repository has no pull request to open: the switch is off and disabled.
  await page.goto(`/runs/new?project=${project.id}`);
  const prSwitch = page.locator("#git-createPR");
  await expect(prSwitch).toBeDisabled();
  await expect(prSwitch).toHaveAttribute("aria-checked", "false");
  await expect(page.getByTestId("create-pr-help")).toContainText("there is no pull request to open");

  // 15: the three time limits sit on one line, none pushed down by a wrapped label.
  const inputs = page.getByTestId("time-limits").locator("input");
  await expect(inputs).toHaveCount(3);
  const tops = await inputs.evaluateAll((els) => els.map((e) => Math.round(e.getBoundingClientRect().top)));
  expect(new Set(tops).size).toBe(1);
  await page.getByTestId("time-limits").screenshot({ path: `${SHOTS}/newcomer-time-limits.png` });

  // 10: the project card says its default run config in words, not `{}`; a bad path is refused in plain words.
  await page.goto("/projects");
  const card = page.getByTestId("project-card").filter({ hasText: "newcomer forms" });
  await expect(card.getByTestId("default-config")).toContainText("None set: runs start from the built-in defaults");
  await expect(card).not.toContainText("{}");
  const form = page.getByTestId("create-project");
  await form.getByLabel("Name").fill("not a repository");
  await form.getByLabel("Path on the server").fill("/definitely/not/a/repository");
  await form.getByTestId("create-project-submit").click();
  await expect(form.getByTestId("create-project-error")).toContainText("The path on the server must be an existing git repository");
  await expect(form.getByTestId("create-project-error")).not.toContainText("repository.path");

  // 15: a new API token has a copy button and a prefix that does not read as a GitHub token.
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.goto("/settings");
  await page.getByLabel("Name").fill("newcomer");
  await page.getByTestId("create-token").click();
  await expect(page.getByTestId("new-token-value")).toHaveText(/^gatehouse_api_/);
  await page.getByTestId("copy-token").click();
  await expect(page.getByTestId("copy-token")).toHaveText("Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(await page.getByTestId("new-token-value").innerText());
});

test("plan gate and inbox: task fields keep labels and a description, the inbox says what was decided, toasts sit bottom centre", async ({ page, request }) => {
  const project = await createProject(request, "newcomer inbox");
  const run = await startRun(request, project.id, "Inbox note: write a note", { trustMode: { planning: "manual" } });
  const atGate = await waitFor(request, run.id, "awaiting_approval");
  await signIn(page);

  // 12: an open row reads "Plan gate" (capitalised like "Question"), and its button says it only marks it done.
  await page.goto("/inbox");
  const row = page.getByTestId("inbox-item").filter({ hasText: "Inbox note" });
  await expect(row.first()).toBeVisible();
  await expect(row.first().locator("[data-slot=badge]").first()).toHaveText("Plan gate");
  await expect(row.first().getByTestId("inbox-mark-done")).toHaveText("Mark done");

  // 15: the plan editor's task fields keep their labels once filled, and a task has a description field.
  await page.goto(`/runs/${run.id}`);
  const card = page.getByTestId("approval-card");
  await card.getByTestId("edit-plan").click();
  const task = card.getByTestId("edit-task").first();
  await task.getByLabel(/Task T1 title/).fill("Write the note");
  await task.getByLabel(/Task T1 description/).fill("One sentence, plain words.");
  for (const label of ["Title", "Description (what to do, for the implementer)", "Files (the scope), comma-separated", "Depends on (task ids), comma-separated"]) {
    await expect(task.getByText(label, { exact: true })).toBeVisible();
  }
  await card.screenshot({ path: `${SHOTS}/newcomer-plan-editor.png` });

  // 15: toasts sit bottom centre (not bottom left, under Next's dev indicator).
  const rejected = await request.post(`/api/runs/${run.id}/reject`, { headers: authHeaders, data: { gateId: atGate.pendingGate!.gateId, feedback: "Mention the date." } });
  expect(rejected.status()).toBeLessThan(300);
  const second = await waitFor(request, run.id, "awaiting_approval");
  expect(second.pendingGate!.gateId).not.toBe(atGate.pendingGate!.gateId);
  await page.reload();
  await page.getByTestId("approve").click();
  const toaster = page.locator("[data-sonner-toaster]");
  await expect(toaster).toHaveAttribute("data-y-position", "bottom");
  await expect(toaster).toHaveAttribute("data-x-position", "center");

  // 12: the two decided plan-gate rows say what was decided.
  await page.goto("/inbox?filter=done");
  await expect(row).toHaveCount(2);
  await expect(row.getByTestId("inbox-item-decision")).toHaveText(["Approved", "Rejected: sent back to the planner"]);
  await page.screenshot({ path: `${SHOTS}/newcomer-inbox-done.png`, fullPage: true });
});
