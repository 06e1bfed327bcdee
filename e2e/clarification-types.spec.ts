import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { authHeaders, createProject, signIn } from "./helpers";

const SHOTS = "e2e/.artifacts/screenshots";

async function startRun(request: APIRequestContext, projectId: string, text: string) {
  const res = await request.post("/api/runs", { headers: authHeaders, data: { projectId, request: text, config: { trustMode: { planning: "auto" } } } });
  expect(res.status()).toBe(201);
  return (await res.json()).run.id as string;
}

/** After the answer: the run completes and its branch diff shows the note the demo implementer wrote. */
async function expectCompletedWithNote(page: Page) {
  await expect(page.getByTestId("run-view")).toHaveAttribute("data-status", "completed", { timeout: 60_000 });
  await page.getByRole("tab", { name: "Diff" }).click();
  const diff = page.getByTestId("branch-diff");
  await expect(diff).toContainText("docs/requests/");
  return diff;
}

test("a multiple-choice question: check two boxes, send, the run completes with both answers in its note", async ({ page, request }) => {
  const project = await createProject(request, "multi choice");
  const runId = await startRun(request, project.id, "Split the app [ask-multi: Which parts? | api | web | docs]");
  await signIn(page);
  await page.goto(`/runs/${runId}`);

  const form = page.getByTestId("clarification-form");
  await expect(form).toBeVisible({ timeout: 60_000 });
  await expect(form).toHaveAttribute("data-response-type", "multiple_choice");
  await expect(form).toContainText("Which parts?");
  await expect(form.getByRole("checkbox")).toHaveCount(3);
  await form.getByLabel("api", { exact: true }).check();
  await form.getByLabel("docs", { exact: true }).check();
  await expect(form.getByLabel("web", { exact: true })).not.toBeChecked();
  await expect(page.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/clarification-multiple-choice.png`, fullPage: true });
  await form.getByTestId("answer").click();

  const diff = await expectCompletedWithNote(page);
  await expect(diff).toContainText("**Which parts?** — api, docs");
  await page.screenshot({ path: `${SHOTS}/clarification-multiple-choice-diff.png`, fullPage: true });
});

test("a file question: choose a file, send, the run completes with the file's name and first lines in its note", async ({ page, request }) => {
  const project = await createProject(request, "file question");
  const runId = await startRun(request, project.id, "Follow the spec [ask-file: Upload the spec]");
  await signIn(page);
  await page.goto(`/runs/${runId}`);

  const form = page.getByTestId("clarification-form");
  await expect(form).toBeVisible({ timeout: 60_000 });
  await expect(form).toHaveAttribute("data-response-type", "file");
  await expect(form).toContainText("Upload the spec");
  await form.locator('input[type="file"]').setInputFiles({
    name: "spec.md",
    mimeType: "text/markdown",
    buffer: Buffer.from("# Spec\nThe API returns JSON.\nErrors carry a code.\n"),
  });
  await expect(page.getByTestId("mermaid-diagram").locator("svg")).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/clarification-file.png`, fullPage: true });
  await form.getByTestId("answer").click();

  const diff = await expectCompletedWithNote(page);
  await expect(diff).toContainText("**Upload the spec** — file `spec.md`:");
  await expect(diff).toContainText("> The API returns JSON.");
  await expect(diff).toContainText("> Errors carry a code.");
  await page.screenshot({ path: `${SHOTS}/clarification-file-diff.png`, fullPage: true });
});
