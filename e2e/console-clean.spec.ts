import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

/*
 * Issue 32, finding 2: no dashboard page logs a console error or a hydration warning — the runs list, a run at each kind
 * of gate, a completed run, compare, inbox, projects, settings and a 404. Runs against the production build (the default
 * e2e server) and against `next dev` (E2E_SERVER=dev, see playwright.config.ts), where React reports more.
 */

const SHOTS = "e2e/.artifacts/screenshots";
/** next dev compiles each route and function on first use: minutes on a busy machine. */
const DEV = process.env.E2E_SERVER === "dev";

type Run = { id: string; status: string; pendingGate?: { kind?: string } | null };

async function startRun(request: APIRequestContext, projectId: string, text: string, config: Record<string, unknown>) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config } });
  expect(res.status()).toBe(201);
  return (await res.json()).run as { id: string };
}

async function waitForStatus(request: APIRequestContext, id: string, status: string) {
  await expect
    .poll(async () => ((await (await request.get(`/api/runs/${id}`, { headers: authHeaders })).json()).run as Run).status, { timeout: DEV ? 300_000 : 90_000 })
    .toBe(status);
}

/** Console errors, warnings that mention hydration, and uncaught page errors, from now on. */
function watchConsole(page: Page) {
  const problems: string[] = [];
  page.on("console", (m) => {
    const text = m.text();
    // The 404 pages' own documents answer 404, which Chromium logs as a failed resource load: that one is the point.
    const notFoundPage = ["/no-such-page", "/runs/run_doesnotexist"].some((p) => page.url().endsWith(p));
    if (m.type() === "error" && /Failed to load resource: the server responded with a status of 404/.test(text) && notFoundPage) return;
    if (m.type() === "error" || /hydrat|did not match|script tag/i.test(text)) problems.push(`[${m.type()}] ${page.url()}: ${text}`);
  });
  page.on("pageerror", (e) => problems.push(`[pageerror] ${page.url()}: ${e.message}`));
  return problems;
}

/**
 * Opens `path`, waits for `ready` and for React to have hydrated the page, lets it settle past a clock tick, and takes a
 * screenshot. Hydrated: the theme button's label is set once mounted (the root 404 page has none). Waiting for it
 * matters under next dev, where a page's script may compile for minutes after its HTML shows: a screenshot taken
 * before hydration would touch the DOM React then compares.
 */
async function visit(page: Page, path: string, ready: (page: Page) => Promise<void>, shot: string) {
  await page.goto(path);
  await ready(page);
  if (await page.getByTestId("theme-toggle").count()) {
    await expect(page.getByTestId("theme-toggle")).toHaveAttribute("aria-label", /^Switch to (light|dark) theme$/, { timeout: DEV ? 300_000 : 30_000 });
  }
  // Past a second boundary: a "started … ago" rendered from the clock on both sides would now differ.
  await page.waitForTimeout(1_500);
  await page.screenshot({ path: `${SHOTS}/console-clean-${shot}.png`, fullPage: true, caret: "initial" });
}

test("every dashboard page renders without a console error or hydration warning", async ({ page, request }) => {
  // next dev compiles each page on its first visit (up to a minute each on a busy machine).
  test.setTimeout(DEV ? 1_500_000 : 300_000);
  const project = await createProject(request, "console clean");
  const note = (name: string) => ["Write a note", "", `\`\`\`file:notes/${name}.txt`, name, "```"].join("\n");
  const [planGate, question, fix, budget, escalation, paused, completed] = await Promise.all([
    startRun(request, project.id, "Plan gate: write a note", { trustMode: { planning: "manual" } }),
    startRun(request, project.id, "Question: a greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" } }),
    startRun(request, project.id, "Fix decision: write a note [fail-validation: 1]", { trustMode: { planning: "auto", fixes: "manual" } }),
    startRun(request, project.id, note("budget"), { trustMode: { planning: "auto" }, budgets: { implementation: { tokens: 1 } } }),
    startRun(request, project.id, "Escalation: a greeting\n[ask: Which language? | English | French]", { trustMode: { planning: "auto" }, maxClarifications: 0 }),
    startRun(request, project.id, `${note("paused")}\n[invalid-mermaid: 4]`, { trustMode: { planning: "auto" } }),
    startRun(request, project.id, note("done"), { trustMode: { planning: "auto" } }),
  ]);
  const group = await request.post("/api/runs", {
    headers: authHeaders,
    data: { projectId: project.id, request: "Group: write a note", approaches: 2, config: { trustMode: { planning: "manual" } } },
  });
  expect(group.status()).toBe(201);
  const { groupId } = (await group.json()) as { groupId: string };

  await waitForStatus(request, planGate.id, "awaiting_approval");
  await waitForStatus(request, question.id, "awaiting_clarification");
  await waitForStatus(request, fix.id, "awaiting_fix_decision");
  await waitForStatus(request, budget.id, "awaiting_approval");
  await waitForStatus(request, escalation.id, "awaiting_approval");
  await waitForStatus(request, paused.id, "paused");
  await waitForStatus(request, completed.id, "completed");

  const problems = watchConsole(page);
  await signIn(page);
  const timeout = DEV ? 120_000 : 30_000;
  const byTestId = (id: string) => async (p: Page) => {
    await expect(p.getByTestId(id).first()).toBeVisible({ timeout });
  };
  await visit(page, "/", byTestId("runs-table"), "runs");
  await visit(page, `/runs/${planGate.id}`, byTestId("approval-card"), "plan-gate");
  await visit(page, `/runs/${question.id}`, byTestId("clarification-form"), "question");
  await visit(page, `/runs/${fix.id}`, byTestId("fix-decision-card"), "fix-decision");
  await visit(page, `/runs/${budget.id}`, byTestId("budget-card"), "budget");
  await visit(page, `/runs/${escalation.id}`, byTestId("gate-card"), "escalation");
  await visit(page, `/runs/${paused.id}`, byTestId("paused-card"), "paused");
  await visit(page, `/runs/${completed.id}`, byTestId("next-step"), "completed");
  await visit(page, `/compare?group=${groupId}`, byTestId("compare-column"), "compare");
  await visit(page, "/inbox", byTestId("inbox-item"), "inbox");
  await visit(page, "/projects", byTestId("project-card"), "projects");
  await visit(page, "/settings", async (p) => expect(p.getByRole("heading", { name: "Settings" })).toBeVisible({ timeout }), "settings");
  await visit(page, "/runs/new", byTestId("start-run"), "new-run");
  await visit(page, "/no-such-page", byTestId("not-found"), "not-found");
  await visit(page, "/runs/run_doesnotexist", byTestId("not-found"), "run-not-found");
  // Finding 14: a missing run inside the dashboard shows the top menu once.
  await expect(page.getByRole("navigation", { name: "Main" })).toHaveCount(1);
  // A client-side navigation between pages too (the theme provider stays mounted; nothing is created twice).
  await page.getByRole("link", { name: "Back to runs" }).click();
  await expect(page.getByTestId("runs-table")).toBeVisible({ timeout });
  expect(problems).toEqual([]);
});
