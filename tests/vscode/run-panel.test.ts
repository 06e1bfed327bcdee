import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { git, newProject } from "../workflow/harness";
import { startApiServer } from "../cli/server";
import { GatehouseApi } from "@/extensions/vscode/src/core/api";
import { bridgeFetch } from "@/extensions/vscode/src/core/bridge";
import type { Run } from "@/cli/types";

/*
 * The extension's run panel in Chromium: the webview bundle the extension ships (built by extensions/vscode/build.mjs),
 * in a static page that stands in for VS Code's webview (acquireVsCodeApi posts to the test, the test answers like the
 * extension host does, through bridgeFetch against the real route handlers). Screenshots go to e2e/.artifacts/vscode/.
 */

const EXT = path.resolve(import.meta.dirname, "../../extensions/vscode");
const SHOTS = path.resolve(import.meta.dirname, "../../e2e/.artifacts/vscode");

let server: Awaited<ReturnType<typeof startApiServer>>;
let api: GatehouseApi;
let project: { id: string; name: string };
let repo: string;
let browser: Browser;

beforeAll(async () => {
  const { build } = (await import(path.join(EXT, "build.mjs"))) as { build: (o: { only: string }) => Promise<void> };
  await build({ only: "webview" });
  server = await startApiServer();
  api = new GatehouseApi({ url: server.url, token: process.env.GATEHOUSE_ADMIN_TOKEN! });
  ({ project, repo } = await newProject(server.user));
  browser = await chromium.launch({ executablePath: execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" }).trim() });
  fs.mkdirSync(SHOTS, { recursive: true });
}, 180_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function start(request: string, config: unknown): Promise<Run> {
  return (await api.client.post<{ run: Run }>("/api/runs", { projectId: project.id, request, config })).run;
}

/** Follow the run's stream until it reaches `status` (or ends). */
async function reach(id: string, status: string): Promise<Run> {
  const controller = new AbortController();
  const check = async () => (await api.run({ id })).run;
  let run = await check();
  if (run.status === status) return run;
  await api
    .follow({
      id,
      after: run.lastSequence,
      signal: controller.signal,
      onEvent: async () => {
        run = await check();
        if (run.status === status) controller.abort();
      },
    })
    // The client's stream rejects with the AbortError of the abort above.
    .catch((error) => {
      if (!controller.signal.aborted) throw error;
    });
  return check();
}

/** The panel of one run, as the extension's webview shows it; `host` records what the page told the host besides fetches. */
async function openPanel(runId: string, section = "decide"): Promise<{ page: Page; host: { type: string }[] }> {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const host: { type: string }[] = [];
  await page.exposeFunction("__toHost", async (message: { type: string }) => {
    if (message.type !== "fetch") return void host.push(message);
    const response = await bridgeFetch({ api, message });
    await page.evaluate((r) => window.postMessage(r, "*"), response);
  });
  await page.addInitScript(() => {
    (window as unknown as { acquireVsCodeApi: () => unknown }).acquireVsCodeApi = () => ({
      postMessage: (m: unknown) => (window as unknown as { __toHost: (m: unknown) => void }).__toHost(m),
    });
  });
  await page.route("http://webview.test/**", async (route) => {
    const name = new URL(route.request().url()).pathname.slice(1);
    if (name === "index.html") {
      return route.fulfill({
        contentType: "text/html",
        body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="stylesheet" href="theme.css"><link rel="stylesheet" href="webview.css"></head>
<body class="bg-background text-foreground"><div id="root" data-run-id="${runId}" data-section="${section}"></div><script src="webview.js"></script></body></html>`,
      });
    }
    return route.fulfill({ path: path.join(EXT, "dist", path.basename(name)) });
  });
  await page.goto("http://webview.test/index.html");
  return { page, host };
}

describe("VS Code extension: the run panel (webview) in Chromium against the real API", () => {
  it("shows the plan gate with the dashboard's approval card and rendered Mermaid, approves from the panel, then shows the report", async () => {
    const run = await start("Write a note from the panel", { trustMode: { planning: "manual" } });
    await reach(run.id, "awaiting_approval");
    const { page, host } = await openPanel(run.id);
    await expect.poll(() => page.getByTestId("approval-card").isVisible()).toBe(true);
    // The plan's Mermaid is rendered by the dashboard's MermaidDiagram (an SVG), beside the decision.
    await expect.poll(() => page.getByTestId("approval-card").getByTestId("mermaid-diagram").locator("svg").count(), { timeout: 30_000 }).toBeGreaterThan(0);
    await page.screenshot({ path: path.join(SHOTS, "panel-approval.png"), fullPage: true });

    await page.getByTestId("approve").click();
    // The card's own mutation re-reads the run through the bridge: the card goes away once the gate is decided.
    await expect.poll(() => page.getByTestId("approval-card").count(), { timeout: 30_000 }).toBe(0);
    const done = await reach(run.id, "completed");
    expect(done.status).toBe("completed");
    expect(host.some((m) => m.type === "decided")).toBe(true);

    // The host's "refresh" (sent when the tree sees the run's stream move) re-reads the run: nothing is left to decide.
    await page.evaluate(() => window.postMessage({ type: "refresh" }, "*"));
    await expect.poll(() => page.getByTestId("nothing-to-decide").textContent(), { timeout: 30_000 }).toContain("completed");
    await page.getByRole("tab", { name: "Report" }).click();
    await expect.poll(() => page.getByTestId("report").textContent()).toMatch(/Validation attempt 1: passed/);
    await page.screenshot({ path: path.join(SHOTS, "panel-report.png"), fullPage: true });
    await page.getByRole("tab", { name: "Plan" }).click();
    await expect.poll(() => page.getByTestId("plan").getByTestId("mermaid-diagram").locator("svg").count(), { timeout: 30_000 }).toBeGreaterThan(0);
    await page.screenshot({ path: path.join(SHOTS, "panel-plan.png"), fullPage: true });

    await page.getByRole("button", { name: "Branch diff ↗" }).click();
    await expect.poll(() => host.map((m) => m.type)).toContain("open-diff");
    await page.close();
  });

  it("answers a multiple-choice question with the dashboard's typed form; the answer reaches the work", async () => {
    const run = await start("Pick letters [ask-multi: Which letters? | a | b | c]", { trustMode: { planning: "auto" } });
    await reach(run.id, "awaiting_clarification");
    const { page } = await openPanel(run.id);
    await expect.poll(() => page.getByTestId("clarification-form").getAttribute("data-response-type")).toBe("multiple_choice");
    await page.getByTestId("answer").click();
    await expect.poll(() => page.getByText("Choose at least one option.").isVisible()).toBe(true);
    await page.getByLabel("a", { exact: true }).click();
    await page.getByLabel("c", { exact: true }).click();
    await page.screenshot({ path: path.join(SHOTS, "panel-question.png"), fullPage: true });
    await page.getByTestId("answer").click();
    const done = await reach(run.id, "completed");
    expect(done.status).toBe("completed");
    const note = git(repo, "ls-tree", "-r", "--name-only", done.branch!).split("\n").find((f) => f.startsWith("docs/requests/"))!;
    expect(git(repo, "show", `${done.branch}:${note}`)).toContain("- **Which letters?** — a, c\n");
    await page.close();
  });

  it("edits the plan in the dashboard's plan editor (its Mermaid checked by the server through the bridge) and approves the edited plan", async () => {
    const run = await start("Write an edited note", { trustMode: { planning: "manual" } });
    await reach(run.id, "awaiting_approval");
    const { page } = await openPanel(run.id);
    const card = page.getByTestId("approval-card");
    await expect.poll(() => card.getByTestId("edit-plan").isEnabled(), { timeout: 30_000 }).toBe(true);
    await card.getByTestId("edit-plan").click();
    await card.getByLabel("Task T1 title").fill("Write the note (edited in VS Code)");
    await expect.poll(() => page.getByTestId("mermaid-validity").getAttribute("data-state"), { timeout: 30_000 }).toBe("valid");
    await page.screenshot({ path: path.join(SHOTS, "panel-edit.png"), fullPage: true });
    await card.getByTestId("approve-edited").click();
    const done = await reach(run.id, "completed");
    expect(done.planVersion).toBe(2);
    const edited = (await api.events({ id: run.id })).find((e) => e.type === "PLAN_EDITED");
    expect((edited?.payload.plan as { tasks: { title: string }[] }).tasks[0]!.title).toBe("Write the note (edited in VS Code)");
    await page.close();
  });

  it("makes a fix decision with the dashboard's fix card after a failed validation, with the report beside it", async () => {
    const run = await start("Write a note [fail-validation: 1]", { trustMode: { planning: "auto", fixes: "manual" } });
    await reach(run.id, "awaiting_fix_decision");
    const { page } = await openPanel(run.id);
    await expect.poll(() => page.getByTestId("fix-decision-card").isVisible(), { timeout: 30_000 }).toBe(true);
    await expect.poll(() => page.getByTestId("validation-report").textContent()).toMatch(/failed/i);
    await page.screenshot({ path: path.join(SHOTS, "panel-fix.png"), fullPage: true });
    await page.getByTestId("fix-accept").click();
    const done = await reach(run.id, "completed");
    expect(done.outcome).toBe("accepted_failed_validation");
    await page.close();
  });

  it("the bridge sends only API paths with the token, and refuses anything else with a 400 that says why", async () => {
    const ok = await bridgeFetch({ api, message: { type: "fetch", id: 1, url: "/api/projects" } });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).projects.map((p: { id: string }) => p.id)).toContain(project.id);
    for (const url of ["https://evil.example/api/projects", "/api/../health", "/api/auth/session", "//evil.example/api/x"]) {
      const refused = await bridgeFetch({ api, message: { type: "fetch", id: 2, url } });
      expect(refused, url).toMatchObject({ id: 2, status: 400 });
      expect(JSON.parse(refused.body).error.message).toMatch(/^The panel's request was refused: url must be a path under \/api\/ of the Gatehouse server\.$/);
    }
  });
});
