// Drives the extension inside code-server (a real VS Code workbench) in Debian's Chromium: sets the token through the
// palette, checks the tree, the notification, the run panel, an approval from the tree and the branch diff editor, and
// saves screenshots. Run by code-server-check.sh, inside a network namespace with nothing but loopback.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const root = path.resolve(import.meta.dirname, "../../..");
const { chromium } = createRequire(path.join(root, "package.json"))("playwright");
const out = process.env.SHOTS ?? path.join(root, "e2e/.artifacts/vscode");
const workbench = process.env.WORKBENCH_URL ?? "http://127.0.0.1:8123/?folder=/tmp";
const { token } = JSON.parse(fs.readFileSync(process.env.DEMO_LOG, "utf8").split("\n").find((l) => l.startsWith("{")));
fs.mkdirSync(out, { recursive: true });

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium" });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const shot = (name) => page.screenshot({ path: path.join(out, `${name}.png`) });
try {
  await page.goto(workbench);
  await page.waitForSelector(".monaco-workbench", { timeout: 90_000 });
  await page.waitForTimeout(4000);
  const palette = async (text) => {
    await page.keyboard.press("F1");
    await page.waitForSelector(".quick-input-widget input", { state: "visible" });
    await page.keyboard.type(text);
    await page.waitForTimeout(800);
    await page.keyboard.press("Enter");
  };
  await palette("Gatehouse: Set API Token");
  await page.waitForTimeout(1000);
  await page.keyboard.type(token);
  await page.keyboard.press("Enter");
  await page.locator('.activitybar [aria-label^="Gatehouse"]').first().click();
  const view = page.locator(".pane-body").filter({ hasText: "Write the release note" }).first();
  await view.waitFor({ timeout: 30_000 });
  await page.waitForTimeout(3000);
  const tree = await view.innerText();
  check(/Write the release note\s*awaiting approval/.test(tree), "the tree shows the run waiting for approval");
  check(/Pick letters\s*awaiting clarification/.test(tree), "the tree shows the run waiting for an answer");
  check(/Add a greeting note\s*completed/.test(tree), "the tree shows the completed run");
  await shot("code-server-tree");

  // The run panel: the dashboard's approval card in a webview (nested iframes).
  await page.getByText("Write the release note").first().click();
  const webview = page.frameLocator("iframe.webview").frameLocator("iframe");
  await webview.getByTestId("approval-card").waitFor({ timeout: 30_000 });
  await webview.getByTestId("mermaid-diagram").locator("svg").waitFor({ timeout: 30_000 });
  check(true, "the run panel shows the approval card with the rendered Mermaid plan");
  await page.waitForTimeout(1000);
  await shot("code-server-panel");

  // A run that starts waiting after the tree loaded: a notification.
  const toast = page.locator(".notification-toast").filter({ hasText: "Document the API tokens" });
  await toast.waitFor({ timeout: 90_000 });
  check(/waits for your approval/.test(await toast.innerText()), "a notification says a new run waits for approval");
  await shot("code-server-notification");

  // Approve from the panel, then open the branch diff of the finished run in the diff editor.
  await webview.getByTestId("approve").click();
  await page.waitForFunction(() => /Write the release note\s*completed/.test(document.querySelector(".pane-body")?.textContent ?? ""), null, { timeout: 90_000 });
  check(true, "approving in the panel runs the plan to completion (the tree follows over SSE)");
  await webview.getByTestId("nothing-to-decide").filter({ hasText: "completed" }).waitFor({ timeout: 30_000 });
  check(true, "the open panel follows the run to completed");
  // The tree re-renders on every refresh (every 5 s here), which may close an open context menu: try again then.
  for (let attempt = 1; ; attempt++) {
    await view.getByText("Add a greeting note").first().click({ button: "right" });
    await page.getByRole("menuitem", { name: "Show Branch Diff" }).hover();
    await page.keyboard.press("Enter");
    const opened = await page.waitForSelector(".monaco-diff-editor", { timeout: 10_000 }).then(() => true, () => false);
    if (opened) break;
    if (attempt === 3) throw new Error("Show Branch Diff did not open the diff editor in three tries");
    await page.keyboard.press("Escape");
  }
  await page.waitForTimeout(1500);
  check(/add-a-greeting-note\.md/.test(await page.locator(".tabs-container").innerText()), "the branch diff opens in VS Code's diff editor");
  await shot("code-server-diff");

  // Palette commands: answer the multiple choice with a quick pick, reject the new plan with feedback.
  await palette("Gatehouse: Answer Question");
  await page.waitForTimeout(1000);
  await page.keyboard.press("Enter"); // the only run with an open question
  const option = (text) => page.locator(".quick-input-list .monaco-list-row").filter({ hasText: new RegExp(`^\\s*${text}\\s*$`) });
  await option("a").waitFor({ timeout: 30_000 });
  // The rows' checkboxes, clicked as DOM events: a hover tooltip of the list may cover the pointer's target.
  // (by position: a row's text is not stable while the list re-renders after a toggle)
  for (const index of [0, 2]) await page.locator(`.quick-input-list .monaco-list-row[data-index="${index}"]`).locator("input[type=checkbox], .monaco-checkbox, .quick-input-list-checkbox").first().dispatchEvent("click");
  await page.waitForFunction(() => /2 Selected/.test(document.querySelector(".quick-input-widget")?.textContent ?? ""), null, { timeout: 10_000 });
  await shot("code-server-answer");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /Pick letters\s*completed/.test(document.querySelector(".pane-body")?.textContent ?? ""), null, { timeout: 90_000 });
  check(true, "Answer Question (a multiple-choice quick pick) sends the answer and the run completes");

  await palette("Gatehouse: Reject Plan with Feedback");
  await page.waitForTimeout(1000);
  await page.keyboard.press("Enter"); // the only run waiting for approval
  await page.waitForTimeout(1000);
  await page.keyboard.type("Mention where tokens are created");
  await page.keyboard.press("Enter");
  const rejected = page.locator(".notification-toast").filter({ hasText: "rejected the plan" });
  await rejected.waitFor({ timeout: 30_000 });
  check(true, "Reject Plan with Feedback sends the feedback (a notification confirms)");
  await shot("code-server-reject");
} catch (error) {
  check(false, `driving the workbench: ${error.message.split("\n")[0]}`);
  await shot("code-server-failure").catch(() => undefined);
} finally {
  await browser.close();
}
process.exit(failures.length ? 1 : 0);
